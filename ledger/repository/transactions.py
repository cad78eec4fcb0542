"""Stored ledger transactions and their postings, read back."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ledger import tables as t
from ledger.repository.common import to_int


@dataclass(frozen=True)
class PostingRecord:
    """A stored posting."""

    id: int
    transaction_id: int
    line_no: int
    account_id: int
    amount_minor: int
    closes_posting_id: int | None
    reverses_posting_id: int | None


@dataclass(frozen=True)
class TransactionRecord:
    """A stored ledger transaction with its postings."""

    id: int
    idempotency_key: str
    kind: str
    reference: str | None
    effective_at: datetime
    recorded_at: datetime
    reason: str | None
    source: str
    reverses_transaction_id: int | None
    out_of_period: bool
    metadata: dict[str, Any]
    postings: tuple[PostingRecord, ...]


def get_transaction(conn: Connection, transaction_id: int) -> TransactionRecord | None:
    """A transaction with its postings, or None."""
    row = conn.execute(
        sa.select(t.ledger_transactions).where(t.ledger_transactions.c.id == transaction_id)
    ).first()
    if row is None:
        return None
    postings = conn.execute(
        sa.select(t.ledger_postings)
        .where(t.ledger_postings.c.transaction_id == transaction_id)
        .order_by(t.ledger_postings.c.line_no)
    ).all()
    return TransactionRecord(
        id=row.id,
        idempotency_key=row.idempotency_key,
        kind=row.kind,
        reference=row.reference,
        effective_at=row.effective_at,
        recorded_at=row.recorded_at,
        reason=row.reason,
        source=row.source,
        reverses_transaction_id=row.reverses_transaction_id,
        out_of_period=row.out_of_period,
        metadata=dict(row.metadata),
        postings=tuple(
            PostingRecord(
                id=p.id,
                transaction_id=p.transaction_id,
                line_no=p.line_no,
                account_id=p.account_id,
                amount_minor=to_int(p.amount),
                closes_posting_id=p.closes_posting_id,
                reverses_posting_id=p.reverses_posting_id,
            )
            for p in postings
        ),
    )


def get_transaction_id_by_key(conn: Connection, key: str) -> int | None:
    """The transaction posted under idempotency ``key``, if any."""
    return conn.execute(
        sa.select(t.ledger_transactions.c.id).where(t.ledger_transactions.c.idempotency_key == key)
    ).scalar()
