"""Ledger accounts that deposits book to, opened many at a time in one statement."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.engine import Connection


@dataclass(frozen=True)
class AccountRow:
    """A ledger account as opened by :func:`open_accounts`."""

    id: int
    code: str
    asset_id: int
    type: str
    debits_must_not_exceed_credits: bool
    credits_must_not_exceed_debits: bool


def open_accounts(conn: Connection,
                  specs: Sequence[tuple[str, int, str, bool, bool]]) -> dict[tuple[str, int],
                                                                          AccountRow]:
    """Open many ledger accounts in one statement; return all of them by (code, asset id).

    ``specs``: (code, asset id, type, debits_must_not_exceed_credits,
    credits_must_not_exceed_debits). Existing accounts are left alone (the caller compares
    their type and flags); the ledger's trigger on ``accounts`` creates each balance row.
    Rows are inserted in (code, asset id) order so that two concurrent openers wait for each
    other instead of deadlocking on the unique index.
    """
    wanted = sorted(set(specs))
    if not wanted:
        return {}
    params = {"c": [s[0] for s in wanted], "a": [s[1] for s in wanted],
              "t": [s[2] for s in wanted], "d": [s[3] for s in wanted],
              "k": [s[4] for s in wanted]}
    conn.execute(
        sa.text("INSERT INTO accounts (code, asset_id, type, debits_must_not_exceed_credits, "
                "credits_must_not_exceed_debits) "
                "SELECT x.c, x.a, x.t, x.d, x.k FROM unnest(CAST(:c AS text[]), "
                " CAST(:a AS int[]), CAST(:t AS text[]), CAST(:d AS boolean[]), "
                " CAST(:k AS boolean[])) WITH ORDINALITY AS x(c, a, t, d, k, n) ORDER BY x.n "
                "ON CONFLICT (code, asset_id) DO NOTHING"), params,
    )
    rows = conn.execute(
        sa.text("SELECT a.id, a.code, a.asset_id, a.type, a.debits_must_not_exceed_credits, "
                "a.credits_must_not_exceed_debits FROM accounts a "
                "JOIN unnest(CAST(:c AS text[]), CAST(:a AS int[])) AS x(c, a) "
                " ON a.code = x.c AND a.asset_id = x.a"), params,
    ).all()
    return {(r.code, r.asset_id): AccountRow(**dict(r._mapping)) for r in rows}
