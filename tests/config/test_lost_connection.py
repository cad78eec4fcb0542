"""A connection lost mid-transaction, cut for real by a proxy on the wire (``cut_proxy``).

Lost before COMMIT: the whole unit of work runs again on a new connection. Lost after COMMIT was
sent and before its answer: the outcome is unknown, and it is resolved by looking the operation
up by its key, whichever way it went (the server committed it, or never saw the COMMIT).
"""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from config.errors import CommitInDoubt
from config.uow import UnitOfWork, run_in_transaction
from tests.support.pg_proxy import PgCutProxy


def _insert(uow: UnitOfWork) -> str:
    uow.conn.execute(sa.text("INSERT INTO assets (code, scale) VALUES ('XYZ', 2)"))
    return "inserted"


def _by_key(uow: UnitOfWork) -> str:
    """The in-doubt resolution: find the asset by its code; insert it only if it is not there."""
    found = uow.conn.execute(sa.text("SELECT 1 FROM assets WHERE code = 'XYZ'")).first()
    return "found" if found else _insert(uow)


def _count(engine: Engine) -> int:
    with engine.connect() as conn:
        return int(conn.execute(sa.text("SELECT count(*) FROM assets WHERE code = 'XYZ'"))
                   .scalar_one())


class TestCommitInDoubt:
    def test_commit_whose_answer_is_lost_is_found_by_its_key(
            self, cut_engine: Engine, cut_proxy: PgCutProxy, engine: Engine) -> None:
        cut = cut_proxy.arm("COMMIT", "after_answer")
        assert run_in_transaction(cut_engine, _insert, in_doubt=_by_key) == "found"
        assert cut.fired == 1
        assert _count(engine) == 1

    def test_commit_the_server_never_got_is_done_by_the_resolution(
            self, cut_engine: Engine, cut_proxy: PgCutProxy, engine: Engine) -> None:
        cut = cut_proxy.arm("COMMIT", "before")
        assert run_in_transaction(cut_engine, _insert, in_doubt=_by_key) == "inserted"
        assert cut.fired == 1
        assert _count(engine) == 1

    def test_without_a_resolution_the_doubt_is_raised_and_nothing_assumed(
            self, cut_engine: Engine, cut_proxy: PgCutProxy, engine: Engine) -> None:
        cut_proxy.arm("COMMIT", "after_answer")
        with pytest.raises(CommitInDoubt):
            run_in_transaction(cut_engine, _insert)
        # It did commit: a caller that took the error for "not done" and did it again
        # without the key would have made two.
        assert _count(engine) == 1


class TestLostBeforeCommit:
    def test_the_whole_unit_of_work_runs_again_on_a_new_connection(
            self, cut_engine: Engine, cut_proxy: PgCutProxy, engine: Engine) -> None:
        calls: list[int] = []

        def work(uow: UnitOfWork) -> int:
            calls.append(1)
            return len(calls) if _insert(uow) else 0

        cut = cut_proxy.arm("INSERT INTO assets", "before")
        assert run_in_transaction(cut_engine, work) == 2
        assert cut.fired == 1
        assert _count(engine) == 1

    def test_the_pool_recovers_without_a_restart(
            self, cut_engine: Engine, cut_proxy: PgCutProxy) -> None:
        with UnitOfWork(cut_engine) as uow:
            uow.conn.execute(sa.text("SELECT 1"))
        cut_proxy.arm("SELECT 2", "before")
        with pytest.raises(sa.exc.OperationalError), UnitOfWork(cut_engine) as uow:
            uow.conn.execute(sa.text("SELECT 2"))
        with UnitOfWork(cut_engine) as uow:
            assert uow.conn.execute(sa.text("SELECT 3")).scalar() == 3
