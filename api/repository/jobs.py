"""The scheduler's advisory locks and its run log (``job_runs``).

Each job's lock is ``pg_try_advisory_xact_lock(namespace, hashtext(job))``, taken in a
transaction that the caller keeps open on a connection of its own across the step's own
transactions and ends (commit or rollback) to release it. Not a session-level lock: behind
PgBouncer in transaction mode, a session lock would stay on whichever server connection took it
(held by nobody, released by nobody), while an open transaction keeps its server connection to
itself until it ends, and a killed process's transaction is rolled back with its connection.
The open transaction has written nothing and holds no snapshot between statements (read
committed), so it holds back neither vacuum nor other writers.
"""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from config.database import KEEP_LOCK_IDLE


def try_lock(conn: Connection, namespace: int, job: str) -> bool:
    """Take the job's advisory lock in ``conn``'s transaction (held until it ends) unless
    another transaction holds it."""
    return bool(conn.execute(sa.text(
        "SELECT pg_try_advisory_xact_lock(:ns, hashtext(:job))" + KEEP_LOCK_IDLE),
        {"ns": namespace, "job": job}).scalar())


def insert_run(conn: Connection, *, job: str, worker: str, started_at: datetime,
               finished_at: datetime, outcome: str, detail: str | None) -> None:
    """Log one run of a job."""
    conn.execute(sa.text(
        "INSERT INTO job_runs (job, worker, started_at, finished_at, outcome, "
        "detail) VALUES (:j, :w, :s, :f, :o, :d)"),
        {"j": job, "w": worker, "s": started_at, "f": finished_at, "o": outcome, "d": detail})


def last_runs(conn: Connection) -> list[tuple[str, datetime, str, str | None]]:
    """(job, finished at, outcome, detail) of the newest run of every job in the log."""
    rows = conn.execute(sa.text(
        "SELECT DISTINCT ON (job) job, finished_at, outcome, detail FROM job_runs "
        "ORDER BY job, started_at DESC")).all()
    return [(r.job, r.finished_at, r.outcome, r.detail) for r in rows]


def last_successes(conn: Connection) -> list[tuple[str, datetime]]:
    """(job, finished at) of the newest successful run of every job in the log: for each job
    (the newest run per job, through the (job, started_at) index), a backward index scan to
    its newest ``ok`` run."""
    rows = conn.execute(sa.text(
        "SELECT j.job, s.finished_at FROM (SELECT DISTINCT job FROM job_runs) j "
        "CROSS JOIN LATERAL (SELECT finished_at FROM job_runs r WHERE r.job = j.job "
        "  AND r.outcome = 'ok' ORDER BY r.started_at DESC LIMIT 1) s ORDER BY j.job")).all()
    return [(r.job, r.finished_at) for r in rows]


def delete_runs_before(conn: Connection, before: datetime) -> None:
    """Drop the log's runs that started before ``before``, except each job's newest successful
    run (what ``custody_job_last_success_timestamp_seconds`` reports: a job failing for days
    still says when it last worked)."""
    conn.execute(sa.text(
        "DELETE FROM job_runs WHERE started_at < :t AND id NOT IN ("
        "  SELECT s.id FROM (SELECT DISTINCT job FROM job_runs) j "
        "  CROSS JOIN LATERAL (SELECT r.id FROM job_runs r WHERE r.job = j.job "
        "    AND r.outcome = 'ok' ORDER BY r.started_at DESC LIMIT 1) s)"), {"t": before})
