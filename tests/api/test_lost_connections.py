"""The API survives the server ending every connection (what a failover does to the old
primary's sessions) without a restart: the pool drops the connections the server ended and
opens new ones."""

from __future__ import annotations

import time

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from tests.api.conftest import Api


def _end_every_session(owner: Engine) -> None:
    """End every other session of the database and wait until they are gone."""
    with owner.connect() as conn:
        ended = list(conn.execute(sa.text(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
            "AND backend_type = 'client backend' AND pid <> pg_backend_pid()")).scalars())
        assert ended
        conn.execute(sa.text("SELECT pg_terminate_backend(p) FROM unnest(:p) p"), {"p": ended})
        deadline = time.monotonic() + 30
        while True:
            # A new transaction each time: pg_stat_activity is read once per transaction.
            conn.rollback()
            if not conn.execute(sa.text("SELECT count(*) FROM pg_stat_activity "
                                        "WHERE pid = ANY(:p)"), {"p": ended}).scalar_one():
                break
            assert time.monotonic() < deadline, "sessions outlived pg_terminate_backend"
            time.sleep(0.02)


def test_requests_after_every_connection_ended(api: Api, owner: Engine) -> None:
    user = api.funded_user()
    path = f"/v1/users/{user}/balances"
    assert api.call("GET", path, "acme").status_code == 200
    _end_every_session(owner)
    # The pool drops the connections the server ended as it hands them out: no request meets
    # one.
    assert [api.call("GET", path, "acme").status_code for _ in range(3)] == [200] * 3
    _end_every_session(owner)
    api.withdraw(user)  # 201
