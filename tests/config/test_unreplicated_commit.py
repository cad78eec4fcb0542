"""A COMMIT whose wait for the synchronous standby was cancelled is answered with success and a
WARNING by PostgreSQL: the transaction committed on that server only, and a failover to the
standby loses it. The engine treats that answer as what it is, in doubt (``CommitInDoubt``),
never as an acknowledgement: for a unit of work's COMMIT and for an autocommit post.

A server of its own, whose every commit waits for a synchronous standby that never comes
(``synchronous_standby_names``), so that a cancel (``pg_cancel_backend``) meets a waiting
commit for certain.
"""

from __future__ import annotations

import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from config.database import embedded_url, make_engine, owner_engine
from config.errors import CommitInDoubt
from config.uow import UnitOfWork
from ledger.repository.posting import _alone


@pytest.fixture(scope="module")
def waiting_server() -> Iterator[str]:
    """A server whose commits wait for a synchronous standby named ``nobody``."""
    url = embedded_url(Path(tempfile.mkdtemp(prefix="custody-syncrep-")),
                       cleanup_mode="delete")
    owner = owner_engine(url)
    with owner.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.exec_driver_sql("CREATE TABLE t (x int)")
        conn.exec_driver_sql("ALTER SYSTEM SET synchronous_standby_names = 'nobody'")
        conn.exec_driver_sql("SELECT pg_reload_conf()")
    owner.dispose()
    yield url


@pytest.fixture
def engine(waiting_server: str) -> Iterator[Engine]:
    eng = make_engine(waiting_server, app_role=None, pool_size=2)
    yield eng
    eng.dispose()


def cancel_the_waiting_commit(url: str) -> threading.Thread:
    """Cancel the first backend found waiting for its synchronous standby (within 30 s)."""

    def run() -> None:
        probe = owner_engine(url)
        deadline = time.monotonic() + 30
        with probe.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            while time.monotonic() < deadline:
                pids = conn.execute(sa.text(
                    "SELECT pid FROM pg_stat_activity WHERE wait_event = 'SyncRep'")).scalars()
                waiting = list(pids)
                if waiting:
                    conn.execute(sa.text("SELECT pg_cancel_backend(:p)"), {"p": waiting[0]})
                    break
                time.sleep(0.05)
        probe.dispose()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def rows(url: str) -> list[int]:
    probe = owner_engine(url)
    with probe.connect() as conn:
        found = [int(x) for x in conn.execute(sa.text("SELECT x FROM t ORDER BY x")).scalars()]
    probe.dispose()
    return found


def test_a_unit_of_works_commit_is_in_doubt(engine: Engine, waiting_server: str) -> None:
    canceller = cancel_the_waiting_commit(waiting_server)
    with UnitOfWork(engine) as uow:
        uow.conn.execute(sa.text("INSERT INTO t VALUES (1)"))
        with pytest.raises(CommitInDoubt, match="synchronous standby did not confirm"):
            uow.commit()
    canceller.join()
    # Committed on this server: had the engine called it failed, a retry would post it twice;
    # had it called it done, a failover would lose it. In doubt, it is looked up by its key.
    assert 1 in rows(waiting_server)
    # The mark is cleared: the connection's next commit (not cancelled) is not in doubt.
    with UnitOfWork(engine) as uow:
        uow.conn.execute(sa.text("SET LOCAL synchronous_commit = local"))
        uow.conn.execute(sa.text("INSERT INTO t VALUES (2)"))
        uow.commit()


def test_an_autocommit_post_is_in_doubt(engine: Engine, waiting_server: str) -> None:
    canceller = cancel_the_waiting_commit(waiting_server)
    with pytest.raises(CommitInDoubt, match="the post"):
        _alone(engine, "INSERT INTO t VALUES (%s) RETURNING x", (3,))
    canceller.join()
    assert 3 in rows(waiting_server)
