"""The unit of work and its bounded retry, against real PostgreSQL errors."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from config.uow import UnitOfWork, run_in_transaction

RAISE = "DO $$ BEGIN RAISE EXCEPTION 'simulated' USING ERRCODE = '{code}'; END $$"


def test_uncommitted_work_rolls_back(engine: Engine) -> None:
    with UnitOfWork(engine) as uow:
        uow.conn.execute(sa.text("INSERT INTO assets (code, scale) VALUES ('XYZ', 2)"))
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM assets")).scalar() == 0


@pytest.mark.parametrize("code", ["40001", "40P01"])
def test_serialization_failures_and_deadlocks_are_retried(engine: Engine, code: str) -> None:
    calls: list[int] = []

    def work(uow: UnitOfWork) -> int:
        calls.append(1)
        uow.conn.execute(
            sa.text("INSERT INTO assets (code, scale) VALUES (:c, 2)"), {"c": f"A{len(calls)}"}
        )
        if len(calls) < 3:
            uow.conn.execute(sa.text(RAISE.format(code=code)))
        return len(calls)

    assert run_in_transaction(engine, work, attempts_max=5) == 3
    with engine.connect() as conn:
        # Only the attempt that committed left a row.
        assert conn.execute(sa.text("SELECT array_agg(code) FROM assets")).scalar() == ["A3"]


def test_retries_are_bounded(engine: Engine) -> None:
    calls: list[int] = []

    def work(uow: UnitOfWork) -> None:
        calls.append(1)
        uow.conn.execute(sa.text(RAISE.format(code="40001")))

    with pytest.raises(sa.exc.DBAPIError):
        run_in_transaction(engine, work, attempts_max=4)
    assert len(calls) == 4


def test_other_errors_are_not_retried(engine: Engine) -> None:
    calls: list[int] = []

    def work(uow: UnitOfWork) -> None:
        calls.append(1)
        uow.conn.execute(sa.text(RAISE.format(code="23514")))

    with pytest.raises(sa.exc.DBAPIError):
        run_in_transaction(engine, work, attempts_max=4)
    assert len(calls) == 1
