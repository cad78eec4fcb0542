"""What the histories check reads, in one snapshot: booked deposits without exactly one ledger
transaction, and deposit ledger transactions that no history row names.

A deposit's ledger transaction is the one whose idempotency key is the deposit's key
(``deposits.model.deposit_key``: ``deposit:<chain>:<tx hash>:<position>``), or any other
non-reversal transaction of a deposit booking kind whose metadata names the deposit. A deposit is
booked when a history row names a ledger transaction, or its projection says so (a ledger
transaction id, or a booked state).
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ledger.repository import to_int
from reconcile.model import BookedDeposit, UnrecordedTransaction

#: Ledger transaction kinds that book a deposit (deposits.service, deposits.own).
BOOKING_KINDS = ("deposit", "deposit_unattributed", "treasury_funding")
#: Deposit states that only a booking reaches.
BOOKED_STATES = ("credited", "suspense", "capital")

_DEPOSIT_TRANSACTIONS = (
    "dtx AS (SELECT t.id, t.idempotency_key, t.kind, d.id AS deposit_id, "
    "  (SELECT coalesce(sum(p.amount), 0) FROM ledger_postings p "
    "   WHERE p.transaction_id = t.id AND p.amount > 0) AS debited "
    " FROM ledger_transactions t "
    " LEFT JOIN deposits d ON ('deposit:' || d.chain || ':' || d.tx_hash || ':' || d.position) "
    "   = t.idempotency_key "
    " WHERE t.idempotency_key LIKE 'deposit:%' AND t.reverses_transaction_id IS NULL "
    " UNION "
    " SELECT t.id, t.idempotency_key, t.kind, CAST(t.metadata ->> 'deposit_id' AS bigint), "
    "  (SELECT coalesce(sum(p.amount), 0) FROM ledger_postings p "
    "   WHERE p.transaction_id = t.id AND p.amount > 0) "
    " FROM ledger_transactions t "
    " WHERE t.kind = ANY(:kinds) AND t.metadata ? 'deposit_id' "
    "   AND t.reverses_transaction_id IS NULL AND t.idempotency_key NOT LIKE 'deposit:%')"
)


def booked_without_one_transaction(conn: Connection, limit: int) -> list[BookedDeposit]:
    """Booked deposits with no deposit ledger transaction, or more than one."""
    rows = conn.execute(sa.text(
        f"WITH {_DEPOSIT_TRANSACTIONS}, "
        "booked AS (SELECT d.id, d.chain, d.tx_hash, d.position, d.state, d.asset_code, "
        "  d.amount_minor, "
        "  coalesce(array_agg(e.id ORDER BY e.id) FILTER (WHERE e.id IS NOT NULL), '{}') AS ev, "
        "  coalesce(array_agg(e.ledger_transaction_id ORDER BY e.id) "
        "    FILTER (WHERE e.id IS NOT NULL), '{}') AS named "
        " FROM deposits d LEFT JOIN deposit_events e ON e.deposit_id = d.id "
        "   AND e.ledger_transaction_id IS NOT NULL "
        " WHERE d.ledger_transaction_id IS NOT NULL OR d.state = ANY(:states) OR e.id IS NOT NULL "
        " GROUP BY d.id) "
        "SELECT b.*, coalesce(array_agg(x.id ORDER BY x.id) FILTER (WHERE x.id IS NOT NULL), "
        "  '{}') AS txs, coalesce(sum(x.debited), 0) AS debited "
        "FROM booked b LEFT JOIN dtx x ON x.deposit_id = b.id "
        "GROUP BY b.id, b.chain, b.tx_hash, b.position, b.state, b.asset_code, b.amount_minor, "
        "  b.ev, b.named "
        "HAVING count(x.id) <> 1 ORDER BY b.id LIMIT :n"),
        {"kinds": list(BOOKING_KINDS), "states": list(BOOKED_STATES), "n": limit})
    return [BookedDeposit(r.id, r.chain, r.tx_hash, r.position, r.state, r.asset_code,
                          None if r.amount_minor is None else to_int(r.amount_minor),
                          tuple(r.ev), tuple(r.named), tuple(r.txs), to_int(r.debited))
            for r in rows]


def transactions_without_history(conn: Connection, limit: int) -> list[UnrecordedTransaction]:
    """Deposit ledger transactions that no deposit history row names."""
    rows = conn.execute(sa.text(
        f"WITH {_DEPOSIT_TRANSACTIONS} "
        "SELECT x.* FROM dtx x WHERE NOT EXISTS (SELECT 1 FROM deposit_events e "
        "  WHERE e.ledger_transaction_id = x.id) ORDER BY x.id LIMIT :n"),
        {"kinds": list(BOOKING_KINDS), "n": limit})
    return [UnrecordedTransaction(r.id, r.idempotency_key, r.kind, r.deposit_id,
                                  to_int(r.debited)) for r in rows]
