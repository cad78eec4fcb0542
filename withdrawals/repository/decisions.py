"""Policy decisions on a withdrawal: approvals and write-off votes, one per person and kind."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.engine import Connection


@dataclass(frozen=True)
class DecisionRecord:
    """An approval or a write-off vote."""

    id: int
    kind: str
    decision: str
    actor: str
    reason: str | None
    decided_at: datetime


def insert_decision(conn: Connection, withdrawal_id: int, kind: str, decision: str, actor: str,
                    reason: str | None, at: datetime) -> bool:
    """Record a vote; False if this person already voted on this kind (UNIQUE)."""
    new_id = conn.execute(
        sa.text(
            "INSERT INTO withdrawal_decisions (withdrawal_id, kind, decision, actor, reason, "
            "decided_at) VALUES (:w, :k, :d, :a, :r, :t) "
            "ON CONFLICT (withdrawal_id, kind, actor) DO NOTHING RETURNING id"
        ),
        {"w": withdrawal_id, "k": kind, "d": decision, "a": actor, "r": reason, "t": at},
    ).scalar()
    return new_id is not None


def list_decisions(conn: Connection, withdrawal_id: int,
                   kind: str | None = None) -> list[DecisionRecord]:
    """Votes on a withdrawal, oldest first."""
    rows = conn.execute(
        sa.text("SELECT * FROM withdrawal_decisions WHERE withdrawal_id = :w "
                "AND (CAST(:k AS text) IS NULL OR kind = :k) ORDER BY id"),
        {"w": withdrawal_id, "k": kind},
    )
    return [DecisionRecord(r.id, r.kind, r.decision, r.actor, r.reason, r.decided_at)
            for r in rows]
