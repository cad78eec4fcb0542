"""Durable cases (a credited deposit whose block stopped being canonical) and their
resolutions."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from deposits.repository.common import _json


def insert_case(conn: Connection, deposit_id: int, kind: str, ledger_transaction_id: int | None,
                expected: Mapping[str, Any], observed: Mapping[str, Any]) -> int:
    """Open a case (idempotent per kind and deposit); return its id."""
    conn.execute(
        sa.text("INSERT INTO deposit_cases (kind, deposit_id, ledger_transaction_id, expected, "
                "observed) VALUES (:k, :d, :l, CAST(:e AS jsonb), CAST(:o AS jsonb)) "
                "ON CONFLICT (kind, deposit_id) DO NOTHING"),
        {"k": kind, "d": deposit_id, "l": ledger_transaction_id, "e": _json(expected),
         "o": _json(observed)},
    )
    return int(conn.execute(sa.text("SELECT id FROM deposit_cases WHERE kind = :k AND "
                                    "deposit_id = :d"), {"k": kind, "d": deposit_id}).scalar_one())


@dataclass(frozen=True)
class CaseRecord:
    """A durable case and its resolution, if any."""

    id: int
    kind: str
    deposit_id: int
    ledger_transaction_id: int | None
    expected: dict[str, Any]
    observed: dict[str, Any]
    opened_at: datetime
    resolved_by: str | None
    reversal_transaction_id: int | None
    #: ``capital``, ``return`` or ``refund`` for an unattributed own-address transfer, else
    #: None.
    outcome: str | None = None
    #: The second admin who approved the resolution (None: one person resolved it).
    approved_by: str | None = None
    #: The ledger transaction that carried out a ``capital`` or ``refund`` resolution.
    resolution_transaction_id: int | None = None
    #: The withdrawal a ``return`` resolution linked the transfer to, or the withdrawal that
    #: pays a ``refund`` back to the sender (None until it is requested).
    withdrawal_id: int | None = None


def lock_case(conn: Connection, case_id: int) -> None:
    """Serialize resolutions of one case until commit.

    Two admins resolving the same case at once would otherwise both pass the "not resolved
    yet" check; the second then waits here and re-reads the resolution.
    """
    conn.execute(sa.text("SELECT pg_advisory_xact_lock(7313, CAST(:c AS int))"), {"c": case_id})


def get_cases(conn: Connection, *, case_id: int | None = None,
              deposit_id: int | None = None) -> list[CaseRecord]:
    """Cases, optionally of one id or one deposit, with their resolutions."""
    rows = conn.execute(
        sa.text("SELECT c.id, c.kind, c.deposit_id, c.ledger_transaction_id, c.expected, "
                "c.observed, c.opened_at, r.resolved_by, r.reversal_transaction_id, r.outcome, "
                "r.approved_by, r.ledger_transaction_id AS resolution_transaction_id, "
                "COALESCE(r.withdrawal_id, f.withdrawal_id) AS withdrawal_id "
                "FROM deposit_cases c LEFT JOIN deposit_case_resolutions r ON r.case_id = c.id "
                "LEFT JOIN deposit_case_refunds f ON f.case_id = c.id "
                "WHERE (CAST(:i AS bigint) IS NULL OR c.id = :i) "
                "AND (CAST(:d AS bigint) IS NULL OR c.deposit_id = :d) ORDER BY c.id"),
        {"i": case_id, "d": deposit_id},
    ).all()
    return [CaseRecord(**{**dict(r._mapping), "expected": dict(r.expected),
                          "observed": dict(r.observed)}) for r in rows]


def insert_case_resolution(conn: Connection, case_id: int, reversal_transaction_id: int | None,
                           resolved_by: str, reason: str, *, outcome: str | None = None,
                           approved_by: str | None = None,
                           ledger_transaction_id: int | None = None,
                           withdrawal_id: int | None = None) -> None:
    """Record how a case was resolved (``outcome`` and the rest: own-address cases)."""
    conn.execute(
        sa.text("INSERT INTO deposit_case_resolutions (case_id, reversal_transaction_id, "
                "resolved_by, reason, outcome, approved_by, ledger_transaction_id, "
                "withdrawal_id) VALUES (:c, :t, :b, :r, :o, :a, :l, :w)"),
        {"c": case_id, "t": reversal_transaction_id, "b": resolved_by, "r": reason,
         "o": outcome, "a": approved_by, "l": ledger_transaction_id, "w": withdrawal_id},
    )


def insert_case_refund(conn: Connection, case_id: int, withdrawal_id: int) -> None:
    """Record the withdrawal that pays a refund-resolved case (idempotent: a replayed request
    names the same withdrawal and writes nothing)."""
    conn.execute(
        sa.text("INSERT INTO deposit_case_refunds (case_id, withdrawal_id) VALUES (:c, :w) "
                "ON CONFLICT (case_id) DO NOTHING"),
        {"c": case_id, "w": withdrawal_id},
    )
