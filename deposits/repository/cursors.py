"""Watcher cursors: the per-chain lock of a watcher step and the recent (height, hash) pairs
it has seen."""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from config.database import KEEP_LOCK_IDLE, DriverResult, driver_send
from deposits.repository.common import _json


def lock_chain(conn: Connection, chain: str) -> bool:
    """Try to take the lock that lets one watcher step run for ``chain``, in ``conn``'s
    transaction: held until that transaction ends (see ``api.repository.jobs`` for why not a
    session-level lock)."""
    return bool(conn.execute(sa.text(
        "SELECT pg_try_advisory_xact_lock(7311, hashtext(:c))" + KEEP_LOCK_IDLE),
        {"c": chain}).scalar())


def get_cursor(conn: Connection, chain: str, *, for_update: bool = False) -> list[tuple[int, str]]:
    """The watcher's recent (height, hash) pairs of ``chain``, ascending (empty: none yet)."""
    lock = " FOR UPDATE" if for_update else ""
    raw = conn.execute(sa.text(f"SELECT recent FROM watcher_cursors WHERE chain = :c{lock}"),
                       {"c": chain}).scalar()
    return [(int(h), str(x)) for h, x in (raw or [])]


def save_cursor(conn: Connection, chain: str, recent: Sequence[tuple[int, str]]) -> None:
    """Store the cursor of ``chain``."""
    conn.execute(
        sa.text("INSERT INTO watcher_cursors (chain, recent) VALUES (:c, CAST(:r AS jsonb)) "
                "ON CONFLICT (chain) DO UPDATE SET recent = EXCLUDED.recent, updated_at = now()"),
        {"c": chain, "r": _json([[h, x] for h, x in recent])},
    )


def swap_cursor(conn: Connection, chain: str, old: Sequence[tuple[int, str]],
                new: Sequence[tuple[int, str]]) -> DriverResult:
    """Store ``new`` as the cursor of ``chain`` if it still is ``old`` (empty: there is none
    yet); if another step moved it since ``old`` was read, the statement fails with
    ``CURSOR_MOVED`` (``watcher_cursor_swap``). Sent with ``driver_send`` (it may be queued in
    a pipeline)."""
    return driver_send(conn, "SELECT watcher_cursor_swap(%(c)s, CAST(%(o)s AS jsonb), "
                             "CAST(%(r)s AS jsonb))",
                       {"c": chain, "o": _json([[h, x] for h, x in old]),
                        "r": _json([[h, x] for h, x in new])})


#: The SQLSTATE of ``swap_cursor`` when the cursor moved (no_data_found).
CURSOR_MOVED = "P0002"
