"""Closed periods, proposals to close one and their approvals (two people)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ledger import tables as t


@dataclass(frozen=True)
class PeriodRecord:
    """A closed period: everything effective before ``ends_at`` is closed as of ``closed_at``."""

    id: int
    ends_at: datetime
    closed_at: datetime
    closed_by: str
    reason: str | None


def insert_period(
    conn: Connection, ends_at: datetime, closed_by: str, reason: str | None
) -> PeriodRecord:
    """Close the ledger through ``ends_at`` (the trigger waits for postings in flight)."""
    row = conn.execute(
        sa.insert(t.ledger_periods)
        .values(ends_at=ends_at, closed_by=closed_by, reason=reason)
        .returning(*t.ledger_periods.c)
    ).one()
    return PeriodRecord(row.id, row.ends_at, row.closed_at, row.closed_by, row.reason)


@dataclass(frozen=True)
class PeriodProposalRecord:
    """A proposed period close; ``period_id`` and ``approved_by`` once approved (closed)."""

    id: int
    ends_at: datetime
    reason: str | None
    proposed_by: str
    proposed_at: datetime
    approved_by: str | None
    approved_at: datetime | None
    period_id: int | None


def insert_period_proposal(
    conn: Connection, ends_at: datetime, proposed_by: str, reason: str | None
) -> PeriodProposalRecord:
    """Record a proposal to close the ledger through ``ends_at``."""
    row = conn.execute(sa.text(
        "INSERT INTO ledger_period_proposals (ends_at, reason, proposed_by) "
        "VALUES (:e, :r, :b) RETURNING id, ends_at, reason, proposed_by, proposed_at"),
        {"e": ends_at, "r": reason, "b": proposed_by}).one()
    return PeriodProposalRecord(row.id, row.ends_at, row.reason, row.proposed_by,
                                row.proposed_at, None, None, None)


def get_period_proposal(
    conn: Connection, proposal_id: int, *, lock: bool = False
) -> PeriodProposalRecord | None:
    """A proposal with its approval, if any; ``lock``: first take the proposal's advisory lock
    (namespace 7304, until the end of the transaction), so that concurrent approvals of it are
    judged one after the other (the tables are append-only: no row lock to take)."""
    if lock:
        conn.execute(sa.text("SELECT pg_advisory_xact_lock(7304, :id)"), {"id": proposal_id})
    row = conn.execute(sa.text(
        "SELECT p.id, p.ends_at, p.reason, p.proposed_by, p.proposed_at, a.approved_by, "
        "a.approved_at, a.period_id FROM ledger_period_proposals p "
        "LEFT JOIN ledger_period_approvals a ON a.proposal_id = p.id WHERE p.id = :id"),
        {"id": proposal_id}).first()
    if row is None:
        return None
    return PeriodProposalRecord(row.id, row.ends_at, row.reason, row.proposed_by,
                                row.proposed_at, row.approved_by, row.approved_at, row.period_id)


def insert_period_approval(
    conn: Connection, proposal_id: int, period_id: int, approved_by: str
) -> None:
    """Record the approval that closed ``period_id`` (the trigger checks the two people)."""
    conn.execute(sa.text(
        "INSERT INTO ledger_period_approvals (proposal_id, period_id, approved_by) "
        "VALUES (:p, :i, :b)"), {"p": proposal_id, "i": period_id, "b": approved_by})


def database_now(conn: Connection) -> datetime:
    """The database's clock (what the period close trigger compares with)."""
    return conn.execute(sa.text("SELECT clock_timestamp()")).scalar_one()  # type: ignore[no-any-return]


def latest_period(conn: Connection) -> PeriodRecord | None:
    """The newest closed period."""
    row = conn.execute(
        sa.select(t.ledger_periods).order_by(t.ledger_periods.c.ends_at.desc()).limit(1)
    ).first()
    return (
        PeriodRecord(row.id, row.ends_at, row.closed_at, row.closed_by, row.reason) if row else None
    )
