"""Scheduler steps of the deposit side: the watch loop over bounded watcher steps.

``run_watch`` is what ``custody watch`` runs; a scheduler can call ``Watcher.step`` itself.
Transient node and database errors end the step (nothing half-written: each phase commits on
its own) and the loop tries again after a backoff; so does a connection the database lost
(a failover, a restart: the next step takes a new connection from the pool, to whichever
server is primary then, and redoes what had not committed; every write of a step is keyed, so
one whose COMMIT went unanswered is found, not repeated). Any other error stops the loop
loudly.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime

from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import Engine

from config.chains import ChainsConfig
from config.errors import CustodyError
from config.runtime import settle_batch_process
from config.uow import is_connection_lost
from deposits.watcher import StepReport, Watcher

log = logging.getLogger("custody.deposits.jobs")


def run_watch(
    engine: Engine,
    config: ChainsConfig,
    chains: Sequence[str] | None = None,
    *,
    steps_max: int | None = None,
    poll_interval_s: float | None = None,
    backoff_max_s: float = 30.0,
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    on_step: Callable[[StepReport], None] | None = None,
) -> int:
    """Run watcher steps for ``chains`` (all configured ones by default).

    ``steps_max`` bounds the number of rounds (None: until interrupted). A chain that is not
    caught up is stepped again at once; a caught-up one waits its poll interval. Returns the
    number of rounds run.
    """
    names = list(chains or config.chains)
    watchers = [Watcher(engine, config, name) for name in names]
    # A long-running batch process: config.runtime.settle_batch_process.
    settle_batch_process()
    failures = dict.fromkeys(names, 0)
    try:
        return _rounds(watchers, failures, steps_max, poll_interval_s, backoff_max_s, clock,
                       on_step)
    finally:
        for watcher in watchers:
            watcher.close()


def _rounds(watchers: Sequence[Watcher], failures: dict[str, int], steps_max: int | None,
            poll_interval_s: float | None, backoff_max_s: float,
            clock: Callable[[], datetime], on_step: Callable[[StepReport], None] | None) -> int:
    rounds = 0
    while steps_max is None or rounds < steps_max:
        rounds += 1
        behind = False
        for watcher in watchers:
            name = watcher.chain.name
            try:
                report = watcher.step(now=clock())
            except (CustodyError, sa_exc.DBAPIError) as exc:
                if isinstance(exc, CustodyError):
                    if not exc.retryable:
                        raise
                    why = f"{exc.code}: {exc.message}"
                elif is_connection_lost(exc):
                    why = f"database_unavailable: connection lost ({type(exc.orig).__name__})"
                else:
                    raise
                failures[name] += 1
                delay = min(backoff_max_s, 0.5 * 2 ** min(failures[name], 6))
                log.warning("%s: step failed (%s); retrying in %.1f s", name, why, delay)
                time.sleep(delay)
                continue
            failures[name] = 0
            behind = behind or not report.caught_up
            if on_step is not None:
                on_step(report)
        if not behind and (steps_max is None or rounds < steps_max):
            interval = poll_interval_s if poll_interval_s is not None else min(
                w.chain.poll_interval_s for w in watchers)
            time.sleep(interval)
    return rounds
