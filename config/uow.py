"""The unit of work: one database transaction, committed only when asked.

Services receive a unit of work; routes, jobs and CLI commands open it. Leaving the block without
``commit()`` rolls back. ``run_in_transaction`` retries a whole unit of work on serialization
failures and deadlocks, a bounded number of times.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from types import TracebackType
from typing import TypeVar

from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import Connection, Engine

T = TypeVar("T")

#: SQLSTATEs after which the whole transaction may be retried unchanged.
RETRYABLE_SQLSTATES = frozenset({"40001", "40P01"})


class UnitOfWork:
    """One database transaction on one connection."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._conn: Connection | None = None
        self._committed = False

    @property
    def conn(self) -> Connection:
        """The connection of this unit of work."""
        assert self._conn is not None, "unit of work used outside its `with` block"
        return self._conn

    def __enter__(self) -> UnitOfWork:
        self._conn = self._engine.connect()
        self._conn.begin()
        return self

    def commit(self) -> None:
        """Commit the transaction; the unit of work is finished afterwards."""
        self.conn.commit()
        self._committed = True

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        conn, self._conn = self._conn, None
        if conn is None:
            return
        try:
            if not self._committed:
                conn.rollback()
        finally:
            conn.close()


def sqlstate(error: BaseException) -> str | None:
    """The SQLSTATE of a database error, if it carries one."""
    orig = getattr(error, "orig", None)
    return getattr(orig, "sqlstate", None)


def is_retryable(error: BaseException) -> bool:
    """Whether ``error`` is a serialization failure or a deadlock."""
    return isinstance(error, sa_exc.DBAPIError) and sqlstate(error) in RETRYABLE_SQLSTATES


def run_in_transaction(
    engine: Engine,
    work: Callable[[UnitOfWork], T],
    *,
    attempts_max: int = 8,
    backoff_s: float = 0.005,
) -> T:
    """Run ``work`` in a new unit of work and commit; retry it whole on 40001/40P01.

    ``work`` must be safe to run again from the start (it is, when it only reads and calls the
    ledger's ``post`` with the same idempotency key).
    """
    for attempt in range(1, attempts_max + 1):
        try:
            with UnitOfWork(engine) as uow:
                result = work(uow)
                uow.commit()
                return result
        except sa_exc.DBAPIError as exc:
            if not is_retryable(exc) or attempt == attempts_max:
                raise
            retry_pause(attempt, backoff_s)
    raise AssertionError("unreachable")


def retry_pause(attempt: int, backoff_s: float = 0.005) -> None:
    """Sleep before retry ``attempt``: linear, jittered, so contenders do not collide again in
    lockstep."""
    time.sleep(backoff_s * attempt * (0.5 + random.random()))
