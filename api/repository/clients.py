"""API clients, their keys and their users (``api_clients``, ``api_keys``, ``api_users``), and
the authentication statement of every request."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from api.repository.ratelimit import FAILURE_WINDOW_SQL, HIT_SQL, LEFT_SQL
from config.database import driver_rows

# --- clients and keys -------------------------------------------------------------------------


def client_id(conn: Connection, name: str) -> int | None:
    """The id of the client named ``name``."""
    found = conn.execute(sa.text("SELECT id FROM api_clients WHERE name = :n"),
                         {"n": name}).scalar()
    return None if found is None else int(found)


def ensure_client(conn: Connection, name: str) -> int:
    """The id of the client named ``name``, created if new."""
    conn.execute(sa.text("INSERT INTO api_clients (name) VALUES (:n) "
                         "ON CONFLICT (name) DO NOTHING"), {"n": name})
    found = client_id(conn, name)
    assert found is not None
    return found


def insert_key(conn: Connection, client: int, prefix: str, secret_sha256: str,
               scope: str, expires_at: datetime | None = None) -> int:
    """Store a key: its public prefix and the SHA-256 of its secret (never the secret); its id."""
    return int(conn.execute(
        sa.text("INSERT INTO api_keys (client_id, prefix, secret_sha256, scope, expires_at) "
                "VALUES (:c, :p, :h, :s, :e) RETURNING id"),
        {"c": client, "p": prefix, "h": secret_sha256, "s": scope, "e": expires_at}).scalar_one())


@dataclass(frozen=True)
class KeyRecord:
    """A key as listed (never its secret or digest)."""

    id: int
    prefix: str
    scope: str
    client_name: str
    created_at: datetime
    last_used_at: datetime | None
    expires_at: datetime | None
    revoked_at: datetime | None
    revoked_by: str | None


_KEY_COLUMNS = ("SELECT k.id, k.prefix, k.scope, c.name, k.created_at, k.last_used_at, "
                "k.expires_at, k.revoked_at, k.revoked_by "
                "FROM api_keys k JOIN api_clients c ON c.id = k.client_id ")


def list_keys(conn: Connection, client_name: str | None = None, *, after_id: int = 0,
              limit: int = 1000) -> list[KeyRecord]:
    """Keys by id (of ``client_name`` only, if given), after ``after_id``."""
    rows = conn.execute(sa.text(
        _KEY_COLUMNS + "WHERE (CAST(:n AS text) IS NULL OR c.name = CAST(:n AS text)) "
        "AND k.id > :a ORDER BY k.id LIMIT :l"), {"n": client_name, "a": after_id, "l": limit})
    return [KeyRecord(*r) for r in rows]


def key_by_id(conn: Connection, key_id: int) -> KeyRecord | None:
    """The key ``key_id``."""
    row = conn.execute(sa.text(_KEY_COLUMNS + "WHERE k.id = :i"), {"i": key_id}).first()
    return None if row is None else KeyRecord(*row)


def key_by_prefix(conn: Connection, prefix: str) -> KeyRecord | None:
    """The key whose public prefix is ``prefix``."""
    row = conn.execute(sa.text(_KEY_COLUMNS + "WHERE k.prefix = :p"), {"p": prefix}).first()
    return None if row is None else KeyRecord(*row)


def revoke_key(conn: Connection, key_id: int, by: str, now: datetime) -> bool:
    """Revoke the key (False: it was revoked already; the first revocation is kept)."""
    result = conn.execute(sa.text(
        "UPDATE api_keys SET revoked_at = :n, revoked_by = :b "
        "WHERE id = :i AND revoked_at IS NULL"), {"n": now, "b": by, "i": key_id})
    return bool(result.rowcount)


#: One statement per request: the key of the prefix (whatever its secret, revocation and
#: expiry) with its client, the rate-limit hit of the key's current window (see
#: ``api.repository.ratelimit``), counted only for a live key with the right digest, and, given
#: ``%(u)s``, whether the key's client owns that user; plus the failed authentications of the
#: caller's address in its current window. Always one row: NULL key columns when no key has
#: the prefix. ``api.auth.authorize`` decides, comparing the digest itself in constant time
#: (the SQL equality only gates the counting: a wrong secret must not spend the key's limit).
#: ``last_used_at`` is written at most once a minute per key (``used``): the hot read does not
#: write a key row per request. ``%(n)s`` is the engine's clock (expiry, last use).
#: The counter is not money: ``synchronous_commit`` is turned off for this transaction only, so
#: its commit does not wait for the WAL flush (after a database crash a few counts of the last
#: fraction of a second may be lost, letting a client exceed its limit by that much once). A
#: unit of work that also writes money must not share this transaction: it runs alone in
#: autocommit mode (``ApiContext.autocommit``), so the row lock on the counter is held for the
#: statement only.
_AUTHORIZE = (
    "WITH k AS ("
    " SELECT k.id, k.prefix, k.scope, c.id AS client_id, c.name, k.secret_sha256,"
    "  k.revoked_at IS NOT NULL AS revoked,"
    "  k.expires_at IS NOT NULL AND k.expires_at <= CAST(%(n)s AS timestamptz) AS expired,"
    "  CAST(CAST(%(w)s AS jsonb) ->> k.scope AS int) AS window_s"
    " FROM api_keys k JOIN api_clients c ON c.id = k.client_id"
    " WHERE k.prefix = %(p)s), "
    "live AS (SELECT * FROM k WHERE k.secret_sha256 = %(h)s AND NOT k.revoked"
    " AND NOT k.expired), "
    "used AS (UPDATE api_keys u SET last_used_at = CAST(%(n)s AS timestamptz) FROM live"
    " WHERE u.id = live.id AND (u.last_used_at IS NULL"
    "  OR u.last_used_at < CAST(%(n)s AS timestamptz) - interval '60 seconds')), "
    f"{HIT_SQL.format(key='live.id', window='live.window_s', source='live')} "
    "SELECT k.id, k.prefix, k.scope, k.client_id, k.name, hit.requests, "
    f" {LEFT_SQL.format(window='k.window_s')} AS left_s, "
    " CAST(%(u)s AS text) IS NOT NULL AND EXISTS (SELECT 1 FROM api_users u"
    "  WHERE u.id = CAST(%(u)s AS text) AND u.client_id = k.client_id) AS owns_user, "
    " set_config('synchronous_commit', 'off', true) AS sync, "
    " k.secret_sha256, k.revoked, k.expired, "
    " (SELECT f.failures FROM api_auth_failures f WHERE f.source = CAST(%(s)s AS text)"
    f"  AND f.window_start = {FAILURE_WINDOW_SQL}) AS failures, "
    f" extract(epoch FROM {FAILURE_WINDOW_SQL} + make_interval(secs => CAST(%(fw)s AS int))"
    "  - clock_timestamp()) AS failures_left_s "
    "FROM (SELECT 1) one LEFT JOIN k ON true LEFT JOIN hit ON true")


def authorize_row(conn: Connection, prefix: str, secret_sha256: str, user_id: str | None,
                  windows_json: str, *, now: datetime, source: str | None,
                  failure_window_s: int) -> tuple[Any, ...]:
    """(key id, prefix, scope, client id, client name, requests in the window, seconds left in
    it, whether the client owns ``user_id``, -, stored digest, revoked, expired, failures of
    ``source`` in its window, seconds left in that window); the key's columns are NULL when
    no key has ``prefix``, and the request is counted only for a live key whose digest matches.

    Run on ``conn``'s psycopg connection directly as a statement prepared at its first call:
    SQLAlchemy's execution layer cost more client CPU than the statement (bench/RESULTS.md,
    "HTTP API"). Errors are re-raised as SQLAlchemy's ``DBAPIError`` subclasses, as from
    ``conn.execute``. ``windows_json``: the window length of each scope (``RateLimits``).
    """
    rows = driver_rows(conn, _AUTHORIZE, {"p": prefix, "h": secret_sha256, "u": user_id,
                                          "w": windows_json, "n": now, "s": source,
                                          "fw": failure_window_s}, prepare=True)
    row: tuple[Any, ...] = rows[0]
    return row


def count_failure(conn: Connection, source: str, window_s: int) -> tuple[int, float]:
    """Count a failed authentication from ``source``: (failures in its window now, seconds
    left in the window)."""
    window = FAILURE_WINDOW_SQL.replace("%(fw)s", ":w")
    row = conn.execute(sa.text(
        "INSERT INTO api_auth_failures AS f (source, window_start, failures) "
        f"VALUES (:s, {window}, 1) ON CONFLICT (source, window_start) "
        "DO UPDATE SET failures = f.failures + 1 "
        "RETURNING f.failures, extract(epoch FROM f.window_start "
        "+ make_interval(secs => CAST(:w AS int)) - clock_timestamp())"),
        {"s": source, "w": window_s}).one()
    return int(row[0]), float(row[1])


# --- users --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class UserRecord:
    """A user created through the API."""

    id: str
    client_id: int
    reference: str | None
    created_at: datetime


def insert_user(conn: Connection, user_id: str, client: int,
                reference: str | None) -> UserRecord | None:
    """Insert a user; None when the client already has one with ``reference``."""
    row = conn.execute(
        sa.text("INSERT INTO api_users (id, client_id, reference) VALUES (:i, :c, :r) "
                "ON CONFLICT (client_id, reference) DO NOTHING "
                "RETURNING id, client_id, reference, created_at"),
        {"i": user_id, "c": client, "r": reference}).first()
    return None if row is None else UserRecord(*row)


def user_by_reference(conn: Connection, client: int, reference: str | None) -> UserRecord:
    """The client's user with ``reference`` (it must exist)."""
    row = conn.execute(
        sa.text("SELECT id, client_id, reference, created_at FROM api_users "
                "WHERE client_id = :c AND reference = :r"),
        {"c": client, "r": reference}).one()
    return UserRecord(*row)


def users_of_client(conn: Connection, client: int, user_ids: Sequence[str]) -> set[str]:
    """Those of ``user_ids`` that belong to ``client``."""
    rows = conn.execute(sa.text("SELECT id FROM api_users WHERE client_id = :c AND id = ANY(:u)"),
                        {"c": client, "u": list(user_ids)})
    return {r.id for r in rows}
