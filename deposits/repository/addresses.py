"""Deposit addresses: one per user and chain family, allocated by derivation index."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from deposits.repository.common import _json


def lock_address_family(conn: Connection, family: str) -> None:
    """Serialize index allocation of one family until commit.

    Prevents two concurrent assignments from taking the same next index (one would then fail
    on the unique constraint and have to start again).
    """
    conn.execute(sa.text("SELECT pg_advisory_xact_lock(7312, hashtext(:f))"), {"f": family})


def address_of_user(conn: Connection, family: str, user_id: str) -> str | None:
    """The user's deposit address in ``family``, or None."""
    return conn.execute(
        sa.text("SELECT address FROM deposit_addresses WHERE family = :f AND user_id = :u"),
        {"f": family, "u": user_id},
    ).scalar()


def user_has_address(conn: Connection, user_id: str) -> bool:
    """Whether the user has a deposit address in any family."""
    return bool(conn.execute(
        sa.text("SELECT EXISTS (SELECT 1 FROM deposit_addresses WHERE user_id = :u)"),
        {"u": user_id}).scalar())


def next_address_index(conn: Connection, family: str) -> int:
    """The next free derivation index of ``family`` (call under ``lock_address_family``)."""
    value = conn.execute(
        sa.text("SELECT coalesce(max(derivation_index) + 1, 0) FROM deposit_addresses "
                "WHERE family = :f"), {"f": family},
    ).scalar()
    return int(value or 0)


def insert_addresses(conn: Connection, family: str, rows: Sequence[tuple[str, int, str]]) -> None:
    """Insert (address, derivation index, user id) rows of ``family``."""
    conn.execute(
        sa.text("INSERT INTO deposit_addresses (family, address, derivation_index, user_id) "
                "SELECT :f, x.address, x.idx, x.user_id FROM jsonb_to_recordset(CAST(:j AS jsonb))"
                " AS x(address text, idx int, user_id text)"),
        {"f": family, "j": _json([{"address": a.lower(), "idx": i, "user_id": u}
                                  for a, i, u in rows])},
    )


def users_of_addresses(conn: Connection, family: str, addresses: Iterable[str]) -> dict[str, str]:
    """Map those of ``addresses`` that are ours (lower-case) to their user ids."""
    wanted = sorted({a.lower() for a in addresses})
    if not wanted:
        return {}
    rows = conn.execute(
        sa.text("SELECT address, user_id FROM deposit_addresses "
                "WHERE family = :f AND address = ANY(:a)"), {"f": family, "a": wanted},
    ).all()
    return {r.address: r.user_id for r in rows}
