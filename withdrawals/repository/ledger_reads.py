"""What withdrawals read from the ledger's tables: the user's accounts in an asset, the
reserve postings not fully closed yet (open items), the ledger transactions of a withdrawal."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ledger.model import Account, AccountType, Asset
from ledger.repository import to_int


def find_accounts(conn: Connection, asset_code: str,
                  codes: Sequence[str]) -> tuple[Asset | None, dict[str, Account]]:
    """The ledger asset ``asset_code`` (None if missing) and those of ``codes`` that exist in
    it, in one statement. Accounts are immutable once opened, so what this returns stays true."""
    rows = conn.execute(
        sa.text(
            "SELECT s.id AS asset_id, s.scale, a.id, a.code, a.type, "
            "a.debits_must_not_exceed_credits AS dnec, a.credits_must_not_exceed_debits AS cned "
            "FROM assets s LEFT JOIN accounts a ON a.asset_id = s.id "
            "AND a.code = ANY(CAST(:codes AS text[])) WHERE s.code = :asset"
        ),
        {"asset": asset_code, "codes": list(codes)},
    ).all()
    if not rows:
        return None, {}
    asset = Asset(id=rows[0].asset_id, code=asset_code, scale=rows[0].scale)
    return asset, {r.code: Account(id=r.id, code=r.code, asset=asset, type=AccountType(r.type),
                                   debits_must_not_exceed_credits=r.dnec,
                                   credits_must_not_exceed_debits=r.cned)
                   for r in rows if r.id is not None}


@dataclass(frozen=True)
class OpenItemRow:
    """A reserve posting not fully closed yet."""

    withdrawal_id: int
    user_id: str
    chain: str
    asset_code: str
    state: str
    state_reason: str | None
    reserve_posting_id: int
    reserved_minor: int
    open_minor: int
    requested_at: datetime
    reserved_at: datetime


def open_reserves(conn: Connection, reserved_before: datetime) -> list[OpenItemRow]:
    """Reserves recorded before ``reserved_before`` whose closings do not cover them yet."""
    rows = conn.execute(
        sa.text(
            "SELECT w.id, w.user_id, w.chain, w.asset_code, w.state, w.state_reason, "
            " w.reserve_posting_id, w.requested_at, x.recorded_at AS reserved_at, "
            " -p.amount AS reserved, -p.amount - coalesce(c.closed, 0) AS open "
            "FROM withdrawals w "
            "JOIN ledger_postings p ON p.id = w.reserve_posting_id "
            "JOIN ledger_transactions x ON x.id = p.transaction_id "
            "LEFT JOIN LATERAL (SELECT sum(q.amount) AS closed FROM ledger_postings q "
            "  WHERE q.closes_posting_id = p.id) c ON true "
            "WHERE x.recorded_at < :before AND -p.amount - coalesce(c.closed, 0) > 0 "
            "ORDER BY x.recorded_at, w.id"
        ),
        {"before": reserved_before},
    )
    return [OpenItemRow(r.id, r.user_id, r.chain, r.asset_code, r.state, r.state_reason,
                        r.reserve_posting_id, to_int(r.reserved), to_int(r.open),
                        r.requested_at, r.reserved_at) for r in rows]


def ledger_transaction_ids(conn: Connection, withdrawal_id: int) -> list[int]:
    """Ledger transactions referencing ``withdrawal:{id}`` (reserve, settle, gas, return...)."""
    rows = conn.execute(
        sa.text("SELECT id FROM ledger_transactions WHERE reference = :r ORDER BY id"),
        {"r": f"withdrawal:{withdrawal_id}"},
    )
    return [r.id for r in rows]
