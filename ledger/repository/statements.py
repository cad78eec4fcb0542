"""Statements: postings of accounts page by page, and the sums before the first one."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ledger.repository.common import to_int


@dataclass(frozen=True)
class StatementRow:
    """One posting on a statement, with its transaction's descriptive fields."""

    posting_id: int
    transaction_id: int
    account_id: int
    amount_minor: int
    kind: str
    reference: str | None
    reason: str | None
    effective_at: datetime
    recorded_at: datetime


def sums_through(conn: Connection, account_ids: Sequence[int], posting_id: int) -> dict[int, int]:
    """Raw balance per account from its postings with id <= ``posting_id``."""
    rows = conn.execute(
        sa.text(
            "SELECT account_id, sum(amount) AS total FROM ledger_postings"
            " WHERE account_id = ANY(:ids) AND id <= :through GROUP BY account_id"
        ),
        {"ids": list(account_ids), "through": posting_id},
    )
    found = {r.account_id: to_int(r.total) for r in rows}
    return {a: found.get(a, 0) for a in account_ids}


def last_posting_before(conn: Connection, account_ids: Sequence[int], recorded_before: datetime
                        ) -> int:
    """The id of the last posting of ``account_ids`` whose transaction was recorded before
    ``recorded_before`` (0: none)."""
    found = conn.execute(
        sa.text(
            "SELECT max(p.id) FROM ledger_postings p"
            " JOIN ledger_transactions x ON x.id = p.transaction_id"
            " WHERE p.account_id = ANY(:ids) AND x.recorded_at < :t"
        ),
        {"ids": list(account_ids), "t": recorded_before},
    ).scalar_one()
    return int(found or 0)


def postings_after(
    conn: Connection, account_ids: Sequence[int], after_posting_id: int, limit: int
) -> list[StatementRow]:
    """The next ``limit`` postings of ``account_ids`` after ``after_posting_id``, by id."""
    rows = conn.execute(
        sa.text(
            "SELECT p.id, p.transaction_id, p.account_id, p.amount, x.kind, x.reference,"
            " x.reason, x.effective_at, x.recorded_at"
            " FROM ledger_postings p JOIN ledger_transactions x ON x.id = p.transaction_id"
            " WHERE p.account_id = ANY(:ids) AND p.id > :after ORDER BY p.id LIMIT :limit"
        ),
        {"ids": list(account_ids), "after": after_posting_id, "limit": limit},
    )
    return [
        StatementRow(r.id, r.transaction_id, r.account_id, to_int(r.amount), r.kind,
                     r.reference, r.reason, r.effective_at, r.recorded_at)
        for r in rows
    ]
