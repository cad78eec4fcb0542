"""The unit of work: one database transaction, committed only when asked.

Services receive a unit of work; routes, jobs and CLI commands open it. Leaving the block without
``commit()`` rolls back. ``run_in_transaction`` retries a whole unit of work on serialization
failures and deadlocks, a bounded number of times.

A lost connection (a failover, a restarted server or pooler) is one of two things:

- before COMMIT was sent: the server rolls the transaction back, so the whole unit of work is
  safe to run again; ``run_in_transaction`` does, on a new connection (after a failover, to the
  new primary), for up to ``reconnect_s`` seconds;
- after COMMIT was sent and before its answer: the outcome is unknown
  (:class:`~config.errors.CommitInDoubt`). It is resolved by ``in_doubt``, a unit of work that
  looks the operation up by its key and, only when it is not there, does it; without one the
  error goes up (a job's next step re-reads its state by key; an API client retries with the
  same Idempotency-Key).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from types import TracebackType
from typing import TypeVar

from sqlalchemy import exc as sa_exc
from sqlalchemy import text as sa_text
from sqlalchemy.engine import Connection, Engine

from config.errors import CommitInDoubt

#: Set in a pooled connection's ``info`` when the server said a COMMIT returned before its
#: synchronous standby confirmed it (``config.database.make_engine`` listens for the notice).
UNREPLICATED = "custody_unreplicated_commit"
#: The start of that notice: PostgreSQL answers a COMMIT whose wait for the synchronous
#: standby was cancelled (``pg_cancel_backend``, a client's cancel request) with success and
#: this WARNING; the transaction committed on this server only, and a failover to the standby
#: loses it.
SYNC_REP_CANCELLED = "canceling wait for synchronous replication"


def replication_barrier(uow: UnitOfWork) -> None:
    """Make this transaction's COMMIT wait until the synchronous standby holds everything
    committed before it: a transaction that only reads writes no commit record and waits for
    nothing, so one statement takes a transaction id. For a reader about to trust what it found
    on the primary (a replayed request answered as done, a step about to broadcast what an
    earlier step recorded): a commit of an earlier session that was in doubt, there on the
    primary only, is then on the standby too, or this commit is in doubt in turn. Without
    synchronous replication it costs one transaction id and waits for nothing."""
    uow.conn.execute(sa_text("SELECT pg_current_xact_id()"))


def unreplicated_commit_in_doubt(info: dict[str, object], what: str) -> None:
    """Raise :class:`CommitInDoubt` if the server said the commit just made on the connection
    of ``info`` was not confirmed by its synchronous standby (and clear the mark): an answer
    that is not an acknowledgement, so it is not passed on as one."""
    if info.pop(UNREPLICATED, False):
        raise CommitInDoubt(
            f"{what}: the server committed it but its synchronous standby did not confirm it "
            "(the wait was cancelled), so a failover could lose it")

T = TypeVar("T")

#: SQLSTATEs after which the whole transaction may be retried unchanged.
RETRYABLE_SQLSTATES = frozenset({"40001", "40P01"})
#: SQLSTATEs of a connection the server ended: connection exceptions (08) and an administrator
#: or crash shutdown (57P01-57P03), as a failover ends the old primary's sessions.
LOST_SQLSTATES = ("08", "57P01", "57P02", "57P03")
#: How long ``run_in_transaction`` keeps trying to reach a primary after a lost connection by
#: default (a Patroni failover takes about ttl + loop_wait, 30 s by default: jobs retry on their
#: next step, API requests answer 503 sooner than that).
RECONNECT_S = 10.0


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
        """Commit the transaction; the unit of work is finished afterwards (committing it
        again does nothing). :class:`CommitInDoubt` when the connection is lost before
        COMMIT's answer."""
        if self._committed:
            return
        info = self.conn.connection.info
        info.pop(UNREPLICATED, None)
        try:
            self.conn.commit()
        except sa_exc.DBAPIError as exc:
            if is_connection_lost(exc):
                raise CommitInDoubt(
                    f"the connection was lost after COMMIT was sent ({exc.orig}): the "
                    "transaction may or may not have committed") from exc
            raise
        self._committed = True
        unreplicated_commit_in_doubt(info, "COMMIT")

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


def is_connection_lost(error: BaseException) -> bool:
    """Whether ``error`` says the connection is gone or could not be made: the server ended it
    (08xxx, 57P01-57P03), the socket broke (SQLAlchemy invalidated the connection), or no
    server could be reached (libpq's errors carry no SQLSTATE)."""
    if not isinstance(error, sa_exc.DBAPIError):
        return False
    if error.connection_invalidated:
        return True
    state = sqlstate(error)
    if state is None:
        return isinstance(error, sa_exc.OperationalError)
    return state.startswith(LOST_SQLSTATES)


def run_in_transaction(
    engine: Engine,
    work: Callable[[UnitOfWork], T],
    *,
    attempts_max: int = 8,
    backoff_s: float = 0.005,
    reconnect_s: float = RECONNECT_S,
    in_doubt: Callable[[UnitOfWork], T] | None = None,
) -> T:
    """Run ``work`` in a new unit of work and commit; retry it whole on 40001/40P01, and on a
    connection lost before COMMIT was sent for up to ``reconnect_s`` seconds.

    ``work`` must be safe to run again from the start (it is, when it only reads and calls the
    ledger's ``post`` with the same idempotency key). ``in_doubt``: how to resolve a commit
    whose answer was lost, a unit of work that finds the operation by its key (and does it
    when it is not there); a keyed ``work`` that starts with that lookup may be passed itself.
    Without it, :class:`CommitInDoubt` is raised.
    """
    deadline = time.monotonic() + reconnect_s
    attempt = 0
    while True:
        attempt += 1
        try:
            with UnitOfWork(engine) as uow:
                result = work(uow)
                uow.commit()
                return result
        except CommitInDoubt:
            if in_doubt is None or attempt >= attempts_max:
                raise
            # A new unit of work, on a new connection: the lookup by key decides.
            work = in_doubt
        except sa_exc.DBAPIError as exc:
            if is_connection_lost(exc) and time.monotonic() < deadline:
                # Nothing was committed (COMMIT was never sent): the server rolled it back.
                retry_pause(min(attempt, 20), 0.05)
                continue
            if not is_retryable(exc) or attempt >= attempts_max:
                raise
            retry_pause(attempt, backoff_s)


def retry_pause(attempt: int, backoff_s: float = 0.005) -> None:
    """Sleep before retry ``attempt``: linear, jittered, so contenders do not collide again in
    lockstep."""
    time.sleep(backoff_s * attempt * (0.5 + random.random()))
