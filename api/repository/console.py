"""The SQL of the staff console (``api.web``): its sessions, the secret their cookies are signed
with, and the users a search finds by id or by a client's reference."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from api.repository.clients import UserRecord

# --- the signing secret ---------------------------------------------------------------------


def signing_secret(conn: Connection, candidate_sealed: str, now: datetime) -> str:
    """The console's signing secret, sealed: the stored one, else ``candidate_sealed``, stored
    (the first process to ask wins; every other process reads the same row)."""
    conn.execute(sa.text("INSERT INTO console_secrets (id, secret_sealed, created_at) "
                         "VALUES (1, :s, :n) ON CONFLICT (id) DO NOTHING"),
                 {"s": candidate_sealed, "n": now})
    sealed: str = conn.execute(sa.text(
        "SELECT secret_sealed FROM console_secrets WHERE id = 1")).scalar_one()
    return sealed


def sealed_signing_secret(conn: Connection) -> str | None:
    """The console's signing secret as stored (sealed), locked FOR UPDATE; None: not made
    yet."""
    sealed: str | None = conn.execute(sa.text(
        "SELECT secret_sealed FROM console_secrets WHERE id = 1 FOR UPDATE")).scalar()
    return sealed


def signing_secret_stored(conn: Connection) -> str | None:
    """The console's signing secret as stored (sealed), unlocked; None: not made yet."""
    sealed: str | None = conn.execute(sa.text(
        "SELECT secret_sealed FROM console_secrets WHERE id = 1")).scalar()
    return sealed


def rewrap_signing_secret(conn: Connection, sealed: str) -> None:
    """Store the console's signing secret re-wrapped under a new secrets key (same value)."""
    conn.execute(sa.text("UPDATE console_secrets SET secret_sealed = :s WHERE id = 1"),
                 {"s": sealed})


# --- sessions -------------------------------------------------------------------------------


@dataclass(frozen=True)
class SessionRow:
    """A live session with its key and client (ended, expired or revoked ones are not read)."""

    id: int
    csrf_token: str
    expires_at: datetime
    key_id: int
    key_prefix: str
    scope: str
    client_id: int
    client_name: str


def insert_session(conn: Connection, token_digest: str, key_id: int, csrf_token: str,
                   created_at: datetime, expires_at: datetime) -> int:
    """A new session; its id."""
    session_id: int = conn.execute(sa.text(
        "INSERT INTO console_sessions (token_digest, key_id, csrf_token, created_at, expires_at)"
        " VALUES (:d, :k, :c, :n, :e) RETURNING id"),
        {"d": token_digest, "k": key_id, "c": csrf_token, "n": created_at, "e": expires_at}
    ).scalar_one()
    return session_id


def live_session(conn: Connection, token_digest: str, now: datetime) -> SessionRow | None:
    """The session of ``token_digest`` if it has not ended or expired at ``now`` and its key is
    neither revoked nor expired at ``now``; else None."""
    row = conn.execute(sa.text(
        "SELECT s.id, s.csrf_token, s.expires_at, k.id, k.prefix, k.scope, c.id, c.name "
        "FROM console_sessions s JOIN api_keys k ON k.id = s.key_id "
        "JOIN api_clients c ON c.id = k.client_id "
        "WHERE s.token_digest = :d AND s.ended_at IS NULL AND s.expires_at > :n "
        "AND k.revoked_at IS NULL AND (k.expires_at IS NULL OR k.expires_at > :n)"),
        {"d": token_digest, "n": now}).first()
    return None if row is None else SessionRow(*row)


def end_session(conn: Connection, session_id: int, now: datetime) -> bool:
    """End a session (sign-out); False if it had ended already."""
    result = conn.execute(sa.text(
        "UPDATE console_sessions SET ended_at = greatest(:n, created_at) "
        "WHERE id = :i AND ended_at IS NULL"), {"i": session_id, "n": now})
    return bool(result.rowcount)


# --- search ---------------------------------------------------------------------------------


def users_by_id_or_reference(conn: Connection, text: str, limit: int) -> list[UserRecord]:
    """Users whose id is ``text`` or whose client's reference for them is ``text`` (any
    client: references are unique per client only), at most ``limit``, by id."""
    rows = conn.execute(sa.text(
        "SELECT id, client_id, reference, created_at FROM api_users "
        "WHERE id = :t OR reference = :t ORDER BY id LIMIT :l"), {"t": text, "l": limit})
    return [UserRecord(*r) for r in rows]


def user_record(conn: Connection, user_id: str) -> UserRecord | None:
    """The API's record of a user (None: the ledger may still know the id)."""
    row = conn.execute(sa.text("SELECT id, client_id, reference, created_at FROM api_users "
                               "WHERE id = :i"), {"i": user_id}).first()
    return None if row is None else UserRecord(*row)


def client_name(conn: Connection, client_id: int) -> str | None:
    """A client's name."""
    name: str | None = conn.execute(sa.text("SELECT name FROM api_clients WHERE id = :i"),
                                    {"i": client_id}).scalar_one_or_none()
    return name
