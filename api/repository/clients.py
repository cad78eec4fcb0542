"""API clients, their keys, their users and the audit trail (``api_clients``, ``api_keys``,
``api_users``, ``api_audit``), and the authentication statement of every request."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from api.repository.ratelimit import HIT_SQL, LEFT_SQL
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
               scope: str) -> None:
    """Store a key: its public prefix and the SHA-256 of its secret (never the secret)."""
    conn.execute(
        sa.text("INSERT INTO api_keys (client_id, prefix, secret_sha256, scope) "
                "VALUES (:c, :p, :h, :s)"),
        {"c": client, "p": prefix, "h": secret_sha256, "s": scope})


#: One statement per request: the key (by prefix and digest, not revoked) with its client, the
#: rate-limit hit of the key's current window (see ``api.repository.ratelimit``), and, given
#: ``%(u)s``, whether the key's client owns that user. The digest is compared in SQL: it is the
#: SHA-256 of a 256-bit random secret, so how much of it matched tells nothing about the secret.
#: A wrong or revoked key matches no row and counts nothing.
#: The counter is not money: ``synchronous_commit`` is turned off for this transaction only, so
#: its commit does not wait for the WAL flush (after a database crash a few counts of the last
#: fraction of a second may be lost, letting a client exceed its limit by that much once). A
#: unit of work that also writes money must not share this transaction: it runs alone in
#: autocommit mode (``ApiContext.autocommit``), so the row lock on the counter is held for the
#: statement only.
_AUTHORIZE = (
    "WITH k AS ("
    " SELECT k.id, k.prefix, k.scope, c.id AS client_id, c.name,"
    "  CAST(CAST(%(w)s AS jsonb) ->> k.scope AS int) AS window_s"
    " FROM api_keys k JOIN api_clients c ON c.id = k.client_id"
    " WHERE k.prefix = %(p)s AND k.secret_sha256 = %(h)s AND k.revoked_at IS NULL), "
    f"{HIT_SQL.format(key='k.id', window='k.window_s', source='k')} "
    "SELECT k.id, k.prefix, k.scope, k.client_id, k.name, hit.requests, "
    f" {LEFT_SQL.format(window='k.window_s')} AS left_s, "
    " CAST(%(u)s AS text) IS NOT NULL AND EXISTS (SELECT 1 FROM api_users u"
    "  WHERE u.id = CAST(%(u)s AS text) AND u.client_id = k.client_id) AS owns_user, "
    " set_config('synchronous_commit', 'off', true) AS sync "
    "FROM k CROSS JOIN hit")


def authorize_row(conn: Connection, prefix: str, secret_sha256: str, user_id: str | None,
                  windows_json: str) -> tuple[Any, ...] | None:
    """(key id, prefix, scope, client id, client name, requests in the window, seconds left in
    it, whether the client owns ``user_id``, -) of the key, counted; None for an unknown or
    revoked key.

    Run on ``conn``'s psycopg connection directly as a statement prepared at its first call:
    SQLAlchemy's execution layer cost more client CPU than the statement (bench/RESULTS.md,
    "HTTP API"). Errors are re-raised as SQLAlchemy's ``DBAPIError`` subclasses, as from
    ``conn.execute``. ``windows_json``: the window length of each scope (``RateLimits``).
    """
    rows = driver_rows(conn, _AUTHORIZE, {"p": prefix, "h": secret_sha256, "u": user_id,
                                          "w": windows_json}, prepare=True)
    row: tuple[Any, ...] | None = rows[0] if rows else None
    return row


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


# --- audit --------------------------------------------------------------------------------------


def insert_audit(conn: Connection, *, actor: str, client: int, key_prefix: str, scope: str,
                 action: str, target: str, request_id: str, status: int,
                 details_json: str) -> None:
    """Append a row to the audit trail (append-only in the database)."""
    conn.execute(
        sa.text("INSERT INTO api_audit (actor, client_id, key_prefix, scope, action, target, "
                "request_id, status, details) VALUES (:a, :c, :k, :s, :act, :t, :r, :st, "
                "CAST(:d AS jsonb))"),
        {"a": actor, "c": client, "k": key_prefix, "s": scope, "act": action, "t": target,
         "r": request_id, "st": status, "d": details_json})
