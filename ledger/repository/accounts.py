"""Assets and accounts: open them (idempotent inserts) and look them up."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ledger import tables as t
from ledger.model import Account, AccountType, Asset


def _asset(row: Any) -> Asset:
    return Asset(id=row.id, code=row.code, scale=row.scale)


def get_asset(conn: Connection, code: str) -> Asset | None:
    """The asset with ``code``."""
    row = conn.execute(sa.select(t.assets).where(t.assets.c.code == code)).first()
    return _asset(row) if row else None


def insert_asset(conn: Connection, code: str, scale: int) -> None:
    """Insert an asset unless it exists."""
    conn.execute(
        sa.text("INSERT INTO assets (code, scale) VALUES (:c, :s) ON CONFLICT (code) DO NOTHING"),
        {"c": code, "s": scale},
    )


#: The columns ``_account`` reads, over ``accounts a JOIN assets s``.
ACCOUNT_COLUMNS = (
    "a.id, a.code, a.type, a.debits_must_not_exceed_credits, a.credits_must_not_exceed_debits, "
    "s.id AS asset_id, s.code AS asset_code, s.scale"
)


def _account(row: Any) -> Account:
    return Account(
        id=row.id,
        code=row.code,
        asset=Asset(id=row.asset_id, code=row.asset_code, scale=row.scale),
        type=AccountType(row.type),
        debits_must_not_exceed_credits=row.debits_must_not_exceed_credits,
        credits_must_not_exceed_debits=row.credits_must_not_exceed_debits,
    )


def get_account(conn: Connection, code: str, asset_code: str) -> Account | None:
    """The account ``code`` in ``asset_code``."""
    row = conn.execute(
        sa.text(
            f"SELECT {ACCOUNT_COLUMNS} FROM accounts a JOIN assets s ON s.id = a.asset_id "
            "WHERE a.code = :code AND s.code = :asset"
        ),
        {"code": code, "asset": asset_code},
    ).first()
    return _account(row) if row else None


def get_accounts_by_id(conn: Connection, ids: Sequence[int]) -> dict[int, Account]:
    """Accounts by id."""
    rows = conn.execute(
        sa.text(
            f"SELECT {ACCOUNT_COLUMNS} FROM accounts a JOIN assets s ON s.id = a.asset_id "
            "WHERE a.id = ANY(:ids)"
        ),
        {"ids": list(ids)},
    )
    return {r.id: _account(r) for r in rows}


def find_accounts(conn: Connection, codes: Sequence[str]) -> list[Account]:
    """Accounts whose code is one of ``codes``, in any asset, ordered by asset and code."""
    rows = conn.execute(
        sa.text(
            f"SELECT {ACCOUNT_COLUMNS} FROM accounts a JOIN assets s ON s.id = a.asset_id "
            "WHERE a.code = ANY(:codes) ORDER BY s.code, a.code"
        ),
        {"codes": list(codes)},
    )
    return [_account(r) for r in rows]


def insert_account(
    conn: Connection, code: str, asset_id: int, type_: str, dnec: bool, cned: bool
) -> None:
    """Insert an account (its balance row is created by a trigger) unless it exists."""
    conn.execute(
        sa.text(
            "INSERT INTO accounts (code, asset_id, type, debits_must_not_exceed_credits, "
            "credits_must_not_exceed_debits) VALUES (:c, :a, :t, :d, :k) "
            "ON CONFLICT (code, asset_id) DO NOTHING"
        ),
        {"c": code, "a": asset_id, "t": type_, "d": dnec, "k": cned},
    )
