"""Destination allowlists (``withdrawal_allowlist``, ``withdrawal_allowlist_votes``) and the
reserve's destination and velocity reads (``withdrawal_reserve_limits``).

Rows are never deleted: a removal sets ``removed_at``/``removed_by``; a shortening moves
``active_at`` earlier once two different admins voted for that instant (the guard trigger,
``triggers/withdrawal_allowlist.sql``, refuses anything else).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from config.database import driver_rows


@dataclass(frozen=True)
class AllowlistEntry:
    """An allowlisted destination: for every user of ``client`` (``user_id`` None) or for one,
    on ``chain``; usable from ``active_at`` until ``removed_at``."""

    id: int
    client_id: int
    client: str
    user_id: str | None
    chain: str
    address: str
    label: str
    request_key: str
    added_by: str
    added_at: datetime
    delay_s: int
    active_at: datetime
    removed_at: datetime | None
    removed_by: str | None


@dataclass(frozen=True)
class VoteRecord:
    """An admin's vote to make an entry active at ``active_at``."""

    id: int
    admin: str
    active_at: datetime
    reason: str
    voted_at: datetime


_COLUMNS = ("SELECT a.id, a.client_id, c.name, a.user_id, a.chain, a.address, a.label, "
            "a.request_key, a.added_by, a.added_at, a.delay_s, a.active_at, a.removed_at, "
            "a.removed_by FROM withdrawal_allowlist a JOIN api_clients c ON c.id = a.client_id ")


def _entry(row: Any) -> AllowlistEntry:
    return AllowlistEntry(*row)


def insert_entry(conn: Connection, *, client_id: int, user_id: str | None, chain: str,
                 address: str, label: str, request_key: str, added_by: str, added_at: datetime,
                 delay_s: int) -> int | None:
    """Insert a listed entry, active ``delay_s`` after ``added_at``; its id, or None when the
    client's ``request_key`` was used before or the address is listed already (a live entry
    of the same client, user and chain): the caller tells which."""
    found = conn.execute(sa.text(
        "INSERT INTO withdrawal_allowlist (client_id, user_id, chain, address, label, "
        "request_key, added_by, added_at, delay_s, active_at) "
        "VALUES (:c, :u, :ch, :a, :l, :k, :b, :t, :d, :t + :d * interval '1 second') "
        "ON CONFLICT DO NOTHING RETURNING id"),
        {"c": client_id, "u": user_id, "ch": chain, "a": address, "l": label, "k": request_key,
         "b": added_by, "t": added_at, "d": delay_s}).scalar()
    return None if found is None else int(found)


def get_entry(conn: Connection, entry_id: int, *, lock: bool = False) -> AllowlistEntry | None:
    """The entry ``entry_id`` (``lock``: FOR UPDATE of the entry's row until commit)."""
    row = conn.execute(sa.text(_COLUMNS + "WHERE a.id = :i" + (" FOR UPDATE OF a" if lock
                                                                 else "")),
                       {"i": entry_id}).first()
    return None if row is None else _entry(row)


def entry_by_key(conn: Connection, client_id: int, request_key: str) -> AllowlistEntry | None:
    """The entry the client added with ``request_key``."""
    row = conn.execute(sa.text(_COLUMNS + "WHERE a.client_id = :c AND a.request_key = :k"),
                       {"c": client_id, "k": request_key}).first()
    return None if row is None else _entry(row)


def list_entries(conn: Connection, *, client_id: int | None, user_id: str | None = None,
                 chain: str | None = None, removed: bool = False, after_id: int = 0,
                 limit: int = 100) -> list[AllowlistEntry]:
    """Entries by id after ``after_id`` (of ``client_id``, ``user_id`` and ``chain`` when given;
    removed ones only with ``removed``)."""
    rows = conn.execute(sa.text(
        _COLUMNS + "WHERE (CAST(:c AS bigint) IS NULL OR a.client_id = CAST(:c AS bigint)) "
        "AND (CAST(:u AS text) IS NULL OR a.user_id = CAST(:u AS text)) "
        "AND (CAST(:ch AS text) IS NULL OR a.chain = CAST(:ch AS text)) "
        "AND (:r OR a.removed_at IS NULL) AND a.id > :after ORDER BY a.id LIMIT :l"),
        {"c": client_id, "u": user_id, "ch": chain, "r": removed, "after": after_id,
         "l": limit})
    return [_entry(r) for r in rows]


def remove_entry(conn: Connection, entry_id: int, by: str, at: datetime) -> bool:
    """Remove the entry (False: it was removed before; the first removal is kept)."""
    result = conn.execute(sa.text(
        "UPDATE withdrawal_allowlist SET removed_at = :t, removed_by = :b "
        "WHERE id = :i AND removed_at IS NULL"), {"t": at, "b": by, "i": entry_id})
    return bool(result.rowcount)


def insert_vote(conn: Connection, entry_id: int, admin: str, active_at: datetime, reason: str,
                at: datetime) -> bool:
    """Record an admin's vote for ``active_at``; False if that admin voted for it before."""
    found = conn.execute(sa.text(
        "INSERT INTO withdrawal_allowlist_votes (entry_id, admin, active_at, reason, voted_at) "
        "VALUES (:e, :a, :t, :r, :v) ON CONFLICT (entry_id, admin, active_at) DO NOTHING "
        "RETURNING id"),
        {"e": entry_id, "a": admin, "t": active_at, "r": reason, "v": at}).scalar()
    return found is not None


def list_votes(conn: Connection, entry_id: int) -> list[VoteRecord]:
    """The votes on an entry, oldest first."""
    rows = conn.execute(sa.text(
        "SELECT id, admin, active_at, reason, voted_at FROM withdrawal_allowlist_votes "
        "WHERE entry_id = :e ORDER BY id"), {"e": entry_id})
    return [VoteRecord(*r) for r in rows]


def set_active_at(conn: Connection, entry_id: int, active_at: datetime) -> None:
    """Move the entry's activation to ``active_at`` (the trigger checks the two votes)."""
    conn.execute(sa.text("UPDATE withdrawal_allowlist SET active_at = :t WHERE id = :i"),
                 {"t": active_at, "i": entry_id})


def announce_active(conn: Connection, now: datetime, since: datetime, limit: int) -> int:
    """Write the ``allowlist.address_active`` event (``evt_al_<id>_active``) of up to ``limit``
    live entries that became active in ``(since, now]`` and have none yet; how many."""
    return int(conn.execute(sa.text(
        "WITH due AS (SELECT a FROM withdrawal_allowlist a "
        " WHERE a.removed_at IS NULL AND a.active_at > :since AND a.active_at <= :now "
        " AND NOT EXISTS (SELECT 1 FROM outbox_events o "
        "                  WHERE o.event_id = 'evt_al_' || a.id || '_active') "
        " ORDER BY a.active_at, a.id LIMIT :l) "
        # count(*) of rows that each called the (volatile, void) writer: the call is kept.
        "SELECT count(*) FROM (SELECT outbox_allowlist_event_write(due.a, "
        "'allowlist.address_active', 'active') FROM due) written"),
        {"now": now, "since": since, "l": limit}).scalar_one())


def user_client(conn: Connection, user_id: str) -> int | None:
    """The id of the client that created ``user_id`` (None: no client did)."""
    found = conn.execute(sa.text("SELECT client_id FROM api_users WHERE id = :u"),
                         {"u": user_id}).scalar()
    return None if found is None else int(found)


@dataclass(frozen=True)
class WindowUse:
    """What a velocity window already holds: withdrawals requested in it that count."""

    per: str
    window_s: int
    count: int
    amount_minor: int


@dataclass(frozen=True)
class ReserveLimits:
    """What ``withdrawal_reserve_limits`` read in the reserve's transaction: the user's client
    (None: none), the destination's allowlist state (None: allowlisting off for the client;
    else ``active``, ``pending``, ``removed`` or ``not_listed``) with its instant (when it
    becomes active, or when it was removed), and the use of each velocity window asked for."""

    client: str | None
    allow_state: str | None
    allow_at: datetime | None
    windows: tuple[WindowUse, ...]


_LIMITS_SQL = "SELECT * FROM withdrawal_reserve_limits(%s, %s, %s, %s, %s, %s, %s)"


def reserve_limits(conn: Connection, user_id: str, asset_code: str, chain: str,
                   destination: str, now: datetime, allowlist_clients: Sequence[str],
                   windows: Sequence[tuple[str, int]]) -> ReserveLimits:
    """Read the destination's allowlist state (for a client in ``allowlist_clients``) and the
    use of each (per, window_s) of ``windows``, after ``open_reserve`` in its transaction: one
    statement. Client windows take the (client, asset) lock until commit; the live allowlist
    entries read are locked FOR SHARE (a removal waits for this reserve to commit)."""
    spec = json.dumps([{"per": per, "window_s": window_s} for per, window_s in windows])
    rows = driver_rows(conn, _LIMITS_SQL, (user_id, asset_code, chain, destination, now,
                                           list(allowlist_clients), spec))
    assert len(rows) == 1
    client, state, at, used = rows[0]
    return ReserveLimits(client, state, at, tuple(
        WindowUse(w["per"], int(w["window_s"]), int(w["count"]), int(w["amount_minor"]))
        for w in (used or [])))
