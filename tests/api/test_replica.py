"""Reads that may be a little behind go to a read replica; reads that approve spending never
do. A real streaming replica of the test server, its replay paused (``pg_wal_replay_pause``)
to make the lag deterministic: the statement the API serves is the replica's, stale, while the
withdrawal reserve reads the primary and refuses money the stale figures still show."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy.engine import Engine

from api.app import create_app
from config.database import make_engine
from devtools.replica import Replica, primary_lsn
from tests.api.conftest import DEST, Api, configs, serve_app
from tests.withdrawals.conftest import open_book


@pytest.fixture
def lagging(engine: Engine, database_url: str, server_url: str,
            replica: Replica) -> Iterator[tuple[Api, Replica]]:
    """The API with the replica as its read engine."""
    open_book(engine)
    chains, wcfg = configs()
    reader = make_engine(replica.database_url(database_url), pool_size=2)
    try:
        with serve_app(engine, create_app(engine, chains, wcfg, read_engine=reader)) as api:
            yield api, replica
    finally:
        replica.resume()
        reader.dispose()


def _available(api: Api, user: str) -> str:
    r = api.call("GET", f"/v1/users/{user}/statement", "acme", params={"asset": "USDC"})
    assert r.status_code == 200, r.text
    return str(r.json()["closing"]["available"])


def _withdraw(api: Api, user: str, amount: str, key: str) -> tuple[int, str | None]:
    r = api.call("POST", f"/v1/users/{user}/withdrawals", "acme", idem=key, json={
        "asset": "USDC", "chain": "devnet", "to": DEST, "amount": amount})
    return r.status_code, r.json().get("code")


def test_statement_reads_the_lagging_replica_the_reserve_reads_the_primary(
        lagging: tuple[Api, Replica], server_url: str) -> None:
    api, replica = lagging
    user = api.funded_user(amount_minor=150_000_000)
    replica.wait_for(primary_lsn(server_url))
    funded = _available(api, user)
    replica.pause()
    assert _withdraw(api, user, "100000000", "w1") == (201, None)  # 100 + 2 max fee reserved
    # The replica has not replayed the reserve: its statement still shows all 150.
    assert _available(api, user) == funded
    # The primary approves spending: the 48 left cannot pay another 100.
    assert _withdraw(api, user, "100000000", "w2") == (409, "insufficient_funds")
    replica.resume()
    replica.wait_for(primary_lsn(server_url))
    assert _available(api, user) != funded
