"""Balances: the stored projection (``account_balances``) and bitemporal sums of postings."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from config.database import driver_rows
from ledger import tables as t
from ledger.model import Account, AccountType, Asset
from ledger.repository.accounts import ACCOUNT_COLUMNS
from ledger.repository.common import to_int


def stored_balances(conn: Connection, account_ids: Sequence[int]) -> dict[int, tuple[int, int]]:
    """(raw balance, version) of the stored projection, per account id."""
    rows = conn.execute(
        sa.select(
            t.account_balances.c.account_id,
            t.account_balances.c.balance,
            t.account_balances.c.version,
        ).where(t.account_balances.c.account_id.in_(list(account_ids)))
    )
    return {r.account_id: (to_int(r.balance), r.version) for r in rows}


def stored_balances_by_code(
    conn: Connection, codes: Sequence[str]
) -> list[tuple[Account, int, int]]:
    """(account, raw balance, version) of the accounts whose code is one of ``codes``, in any
    asset, ordered by asset and code: ``find_accounts`` and ``stored_balances`` in one statement
    (the hot read of a user's balances).

    ``IN (%(c0)s, %(c1)s)`` rather than ``= ANY(%(codes)s)``: with one parameter per code, the
    generic plan of the prepared statement knows it looks up two codes and uses the index, so
    the statement is planned once per connection instead of at every call.

    It runs on ``conn``'s psycopg connection directly (same connection, same transaction), as a
    statement prepared at its first call: SQLAlchemy's execution layer cost more client CPU than
    the statement itself (about 150 of 200 µs; bench/RESULTS.md, "HTTP API"). Errors are
    re-raised as SQLAlchemy's ``DBAPIError`` subclasses, as from any other repository function.
    """
    if not codes:
        return []
    params = {f"c{i}": code for i, code in enumerate(codes)}
    sql = _STORED_BALANCES_SQL.format(codes=", ".join(f"%({name})s" for name in params))
    rows = driver_rows(conn, sql, params, prepare=True)
    return [(Account(id=r[0], code=r[1], asset=Asset(id=r[5], code=r[6], scale=r[7]),
                     type=AccountType(r[2]), debits_must_not_exceed_credits=r[3],
                     credits_must_not_exceed_debits=r[4]), to_int(r[8]), int(r[9]))
            for r in rows]


#: ``stored_balances_by_code``'s statement (psycopg placeholders; ``{codes}``: one per code).
_STORED_BALANCES_SQL = (
    f"SELECT {ACCOUNT_COLUMNS}, coalesce(b.balance, 0) AS balance, "
    "coalesce(b.version, 0) AS version "
    "FROM accounts a JOIN assets s ON s.id = a.asset_id "
    "LEFT JOIN account_balances b ON b.account_id = a.id "
    "WHERE a.code IN ({codes}) ORDER BY s.code, a.code"
)


def balances_at(
    conn: Connection,
    account_ids: Sequence[int],
    as_of: datetime | None,
    known_at: datetime | None,
) -> dict[int, tuple[int, int]]:
    """(raw balance, transactions counted) per account from the postings, bitemporally.

    ``as_of`` bounds the effective time (inclusive), ``known_at`` the recorded time (inclusive);
    None means no bound.
    """
    rows = conn.execute(
        sa.text(
            "SELECT p.account_id, sum(p.amount) AS total, count(DISTINCT p.transaction_id) AS n "
            "FROM ledger_postings p JOIN ledger_transactions x ON x.id = p.transaction_id "
            "WHERE p.account_id = ANY(:ids) "
            "AND (CAST(:as_of AS timestamptz) IS NULL OR x.effective_at <= :as_of) "
            "AND (CAST(:known AS timestamptz) IS NULL OR x.recorded_at <= :known) "
            "GROUP BY p.account_id"
        ),
        {"ids": list(account_ids), "as_of": as_of, "known": known_at},
    )
    found = {r.account_id: (to_int(r.total), int(r.n)) for r in rows}
    return {a: found.get(a, (0, 0)) for a in account_ids}
