"""What the gas float check and the holds read and write: the maximum gas still committed on a
chain, the withdrawals waiting for the gas float, and the durable cases a hold opens
(``withdrawal_cases``, resolved by a row in ``withdrawal_case_resolutions``; both append-only).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ledger.repository import to_int
from withdrawals.model import Event, State

#: The reason a withdrawal waiting for the gas float carries (``withdrawals.state_reason``).
GAS_FLOAT_LOW = str(Event.GAS_FLOAT_LOW)


def in_flight_max_gas(conn: Connection, chain: str, states: Sequence[State], *,
                      gas_limit_native: int, gas_limit_token: int,
                      fresh_max_fee_per_gas: int) -> int:
    """The maximum gas (wei) that withdrawals of ``chain`` in ``states``, and written-off ones
    whose nonce is still open, may still cost the treasury: each one's latest attempt's
    ``gas_limit * max_fee_per_gas``. One without an attempt yet (a nonce taken, not signed)
    counts the gas limit it will use at the fresh fee cap."""
    value = conn.execute(sa.text(
        "SELECT coalesce(sum(coalesce(a.gas_limit * a.max_fee_per_gas, "
        "  CASE WHEN w.token IS NULL THEN CAST(:gn AS numeric) ELSE CAST(:gt AS numeric) END "
        "  * CAST(:fee AS numeric))), 0) "
        "FROM withdrawals w "
        "LEFT JOIN LATERAL (SELECT x.gas_limit, x.max_fee_per_gas FROM outgoing_attempts x "
        "  WHERE x.withdrawal_id = w.id ORDER BY x.attempt_no DESC LIMIT 1) a ON true "
        "WHERE w.chain = :c AND (w.state = ANY(:s) OR (w.state = 'written_off' "
        "  AND w.nonce IS NOT NULL AND w.nonce_closed_at IS NULL))"),
        {"c": chain, "s": [str(s) for s in states], "gn": gas_limit_native,
         "gt": gas_limit_token, "fee": str(fresh_max_fee_per_gas)},
    ).scalar_one()
    return to_int(value)


def tokens_of(conn: Connection, withdrawal_ids: Sequence[int]) -> dict[int, str | None]:
    """The token of each withdrawal (None: the chain's native coin)."""
    rows = conn.execute(sa.text("SELECT id, token FROM withdrawals WHERE id = ANY(:ids)"),
                        {"ids": list(withdrawal_ids)})
    return {r.id: r.token for r in rows}


def ids_signing_since(conn: Connection, chain: str, before: datetime, limit: int) -> list[int]:
    """Withdrawals of ``chain`` in ``signing`` (a nonce taken, no attempt recorded) since before
    ``before``, oldest first: the signer has not answered for them."""
    rows = conn.execute(sa.text(
        "SELECT id FROM withdrawals WHERE chain = :c AND state = 'signing' "
        "AND state_changed_at < :t ORDER BY id LIMIT :n"), {"c": chain, "t": before, "n": limit})
    return [r.id for r in rows]


def ids_waiting_for_gas(conn: Connection, chain: str, limit: int) -> list[int]:
    """Reserved withdrawals of ``chain`` waiting for the gas float, oldest first."""
    rows = conn.execute(sa.text(
        "SELECT id FROM withdrawals WHERE chain = :c AND state = 'reserved' "
        "AND state_reason = :r ORDER BY id LIMIT :n"),
        {"c": chain, "r": GAS_FLOAT_LOW, "n": limit})
    return [r.id for r in rows]


@dataclass(frozen=True)
class CaseRecord:
    """A withdrawal case and, once resolved, its resolution."""

    id: int
    withdrawal_id: int
    kind: str
    reason: str
    evidence: dict[str, Any]
    opened_by: str
    opened_at: datetime
    resolved_by: str | None
    resolution_reason: str | None
    resolved_at: datetime | None

    @property
    def open(self) -> bool:
        """Whether no resolution names the case yet."""
        return self.resolved_at is None


_CASES = (
    "SELECT c.*, r.resolved_by, r.reason AS resolution_reason, r.resolved_at "
    "FROM withdrawal_cases c LEFT JOIN withdrawal_case_resolutions r ON r.case_id = c.id "
)


def _case(r: Any) -> CaseRecord:
    return CaseRecord(r.id, r.withdrawal_id, r.kind, r.reason, dict(r.evidence), r.opened_by,
                      r.opened_at, r.resolved_by, r.resolution_reason, r.resolved_at)


def insert_case(conn: Connection, *, withdrawal_id: int, kind: str, reason: str,
                evidence: dict[str, Any], opened_by: str, at: datetime) -> int:
    """Open a case about a withdrawal (its row locked by the caller)."""
    return int(conn.execute(sa.text(
        "INSERT INTO withdrawal_cases (withdrawal_id, kind, reason, evidence, opened_by, "
        "opened_at) VALUES (:w, :k, :r, CAST(:e AS jsonb), :b, :at) RETURNING id"),
        {"w": withdrawal_id, "k": kind, "r": reason,
         "e": json.dumps(evidence, default=str), "b": opened_by, "at": at},
    ).scalar_one())


def list_cases(conn: Connection, withdrawal_id: int) -> list[CaseRecord]:
    """The cases of a withdrawal, oldest first, with their resolutions."""
    rows = conn.execute(sa.text(_CASES + "WHERE c.withdrawal_id = :w ORDER BY c.id"),
                        {"w": withdrawal_id})
    return [_case(r) for r in rows]


def open_cases(conn: Connection, chain: str, limit: int) -> list[CaseRecord]:
    """Unresolved cases about withdrawals of ``chain``, oldest first."""
    rows = conn.execute(sa.text(
        _CASES + "JOIN withdrawals w ON w.id = c.withdrawal_id "
        "WHERE w.chain = :c AND r.case_id IS NULL ORDER BY c.id LIMIT :n"),
        {"c": chain, "n": limit})
    return [_case(r) for r in rows]


def resolve_case(conn: Connection, case_id: int, *, resolved_by: str, reason: str,
                 at: datetime) -> None:
    """Resolve a case (its withdrawal's row locked by the caller: one resolution per case, and
    the primary key refuses a second)."""
    conn.execute(sa.text(
        "INSERT INTO withdrawal_case_resolutions (case_id, resolved_by, reason, resolved_at) "
        "VALUES (:c, :b, :r, :at)"),
        {"c": case_id, "b": resolved_by, "r": reason, "at": at})
