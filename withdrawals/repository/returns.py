"""Returned payouts: incoming transfers linked to the withdrawal they pay back."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ledger.repository import to_int


def insert_return(conn: Connection, *, withdrawal_id: int, chain: str, tx_hash: str,
                  position: str, amount_minor: int, arrived_at: datetime, booked_to: str,
                  ledger_transaction_id: int | None, linked_by: str, reason: str) -> int | None:
    """Record a returned payout; None if that incoming transfer is linked already."""
    return conn.execute(
        sa.text(
            "INSERT INTO withdrawal_returns (withdrawal_id, chain, tx_hash, position, amount_minor,"
            " arrived_at, booked_to, ledger_transaction_id, linked_by, reason) VALUES "
            "(:w, :c, :h, :p, :m, :at, :b, :l, :by, :r) "
            "ON CONFLICT (chain, tx_hash, position) DO NOTHING RETURNING id"
        ),
        {"w": withdrawal_id, "c": chain, "h": tx_hash, "p": position, "m": str(amount_minor),
         "at": arrived_at, "b": booked_to, "l": ledger_transaction_id, "by": linked_by,
         "r": reason},
    ).scalar()


@dataclass(frozen=True)
class ReturnRecord:
    """A returned payout linked to its withdrawal."""

    id: int
    withdrawal_id: int
    chain: str
    tx_hash: str
    position: str
    amount_minor: int
    arrived_at: datetime
    booked_to: str
    ledger_transaction_id: int | None
    linked_by: str


def list_returns(conn: Connection, withdrawal_id: int) -> list[ReturnRecord]:
    """Returns linked to a withdrawal."""
    rows = conn.execute(
        sa.text("SELECT * FROM withdrawal_returns WHERE withdrawal_id = :w ORDER BY id"),
        {"w": withdrawal_id},
    )
    return [ReturnRecord(r.id, r.withdrawal_id, r.chain, r.tx_hash, r.position,
                         to_int(r.amount_minor), r.arrived_at, r.booked_to,
                         r.ledger_transaction_id, r.linked_by) for r in rows]


def find_return(conn: Connection, chain: str, tx_hash: str, position: str) -> ReturnRecord | None:
    """The link of an incoming transfer, if any."""
    r = conn.execute(
        sa.text("SELECT * FROM withdrawal_returns WHERE chain = :c AND tx_hash = :h "
                "AND position = :p"),
        {"c": chain, "h": tx_hash, "p": position},
    ).first()
    if r is None:
        return None
    return ReturnRecord(r.id, r.withdrawal_id, r.chain, r.tx_hash, r.position,
                        to_int(r.amount_minor), r.arrived_at, r.booked_to,
                        r.ledger_transaction_id, r.linked_by)
