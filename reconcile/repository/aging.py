"""What the aging check reads: withdrawals in a state since before a time, deposits held for
review since before a time (the time of the history row that put them there), open reserves
(``withdrawals.repository.open_reserves``)."""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ledger.repository import to_int
from reconcile.model import Waiting
from withdrawals.repository import ledger_reads


def open_reserves(conn: Connection, before: datetime, limit: int) -> list[Waiting]:
    """Withdrawal reserves recorded before ``before`` and not fully closed (amount: what is
    still open)."""
    return [Waiting(r.withdrawal_id, r.chain, r.asset_code, r.open_minor, r.state,
                    r.reserved_at, r.state_reason, r.reserve_posting_id)
            for r in ledger_reads.open_reserves(conn, before)[:limit]]


def withdrawals_in(conn: Connection, state: str, before: datetime, limit: int) -> list[Waiting]:
    """Withdrawals in ``state`` since before ``before``, oldest first."""
    rows = conn.execute(sa.text(
        "SELECT id, chain, asset_code, amount_minor, state, state_changed_at, state_reason "
        "FROM withdrawals WHERE state = :s AND state_changed_at < :t "
        "ORDER BY state_changed_at, id LIMIT :n"), {"s": state, "t": before, "n": limit})
    return [Waiting(r.id, r.chain, r.asset_code, to_int(r.amount_minor), r.state,
                    r.state_changed_at, r.state_reason) for r in rows]


def deposits_held_for_review(conn: Connection, before: datetime, limit: int) -> list[Waiting]:
    """Deposits held for review since before ``before`` (their last history row's time)."""
    rows = conn.execute(sa.text(
        "SELECT d.id, d.chain, d.asset_code, d.amount_minor, d.state, e.observed_at, "
        "  d.booking_reason FROM deposits d JOIN deposit_events e ON e.id = d.last_event_id "
        "WHERE d.state = 'held_for_review' AND e.observed_at < :t "
        "ORDER BY e.observed_at, d.id LIMIT :n"), {"t": before, "n": limit})
    return [Waiting(r.id, r.chain, r.asset_code,
                    None if r.amount_minor is None else to_int(r.amount_minor), r.state,
                    r.observed_at, r.booking_reason) for r in rows]
