"""``Idempotency-Key`` records (``api_idempotency``), one per (client, operation, key).

The rules (claim before running, store only successful responses, take over stale claims)
are in ``api.idempotency``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.engine import Connection


@dataclass(frozen=True)
class IdempotencyRecord:
    """A record found under a key: its request's fingerprint, its state and, once completed,
    the stored response; ``stale``: not touched for longer than the caller's ``stale_s``."""

    fingerprint: str
    state: str
    response_status: int | None
    response_body: str | None
    stale: bool
    #: The request first sent with the key (None: stored before they were recorded).
    method: str | None = None
    path: str | None = None
    created_at: datetime | None = None


def insert_claim(conn: Connection, client: int, operation: str, key: str, fp: str, *,
                 method: str | None = None, path: str | None = None) -> bool:
    """Claim the key (``in_progress``) for the request ``method`` ``path``; False when a record
    exists.

    A concurrent claim of the same key waits here on the unique index until the first one
    commits, then finds its row: exactly one request runs.
    """
    inserted = conn.execute(sa.text(
        "INSERT INTO api_idempotency (client_id, operation, key, fingerprint, state, method, "
        "path) VALUES (:c, :o, :k, :f, 'in_progress', :m, :p) ON CONFLICT DO NOTHING "
        "RETURNING 1"),
        {"c": client, "o": operation, "k": key, "f": fp, "m": method, "p": path}).first()
    return inserted is not None


def lock_record(conn: Connection, client: int, operation: str, key: str, *,
                stale_s: int) -> IdempotencyRecord | None:
    """The record under the key, locked (FOR UPDATE) until the end of the transaction."""
    row = conn.execute(sa.text(
        "SELECT fingerprint, state, response_status, response_body, method, path, created_at, "
        "updated_at < now() - make_interval(secs => :stale) AS stale "
        "FROM api_idempotency WHERE client_id = :c AND operation = :o AND key = :k "
        "FOR UPDATE"), {"c": client, "o": operation, "k": key, "stale": stale_s}).first()
    if row is None:
        return None
    status = None if row.response_status is None else int(row.response_status)
    return IdempotencyRecord(row.fingerprint, row.state, status, row.response_body,
                             bool(row.stale), row.method, row.path, row.created_at)


def touch(conn: Connection, client: int, operation: str, key: str) -> None:
    """Mark the record as just claimed again (a takeover of a stale claim)."""
    conn.execute(sa.text(
        "UPDATE api_idempotency SET updated_at = now() WHERE client_id = :c "
        "AND operation = :o AND key = :k"), {"c": client, "o": operation, "k": key})


def complete(conn: Connection, client: int, operation: str, key: str, status: int,
             body: str) -> None:
    """Store the response of the claimed (``in_progress``) request."""
    conn.execute(sa.text(
        "UPDATE api_idempotency SET state = 'completed', response_status = :s, "
        "response_body = :b, updated_at = now() "
        "WHERE client_id = :c AND operation = :o AND key = :k AND state = 'in_progress'"),
        {"c": client, "o": operation, "k": key, "s": status, "b": body})


def release(conn: Connection, client: int, operation: str, key: str) -> None:
    """Drop the claim (``in_progress``) of the key."""
    conn.execute(sa.text(
        "DELETE FROM api_idempotency WHERE client_id = :c AND operation = :o AND key = :k "
        "AND state = 'in_progress'"), {"c": client, "o": operation, "k": key})


def delete_older_than(conn: Connection, retention_s: int) -> int:
    """Delete records created more than ``retention_s`` ago; how many."""
    result = conn.execute(sa.text(
        "DELETE FROM api_idempotency WHERE created_at < now() - make_interval(secs => :s)"),
        {"s": retention_s})
    return int(result.rowcount)


def sealed_answers_elsewhere(conn: Connection, key_id: str,
                             limit: int) -> list[tuple[int, str, str, str]]:
    """(client, operation, key, sealed body) of up to ``limit`` stored answers sealed under
    another key than ``key_id`` (the answers that carry a secret)."""
    rows = conn.execute(sa.text(
        "SELECT client_id, operation, key, response_body FROM api_idempotency "
        "WHERE response_body LIKE 'cs1.%' AND response_body NOT LIKE :p "
        "ORDER BY client_id, operation, key LIMIT :n"),
        {"p": f"cs1.{key_id}.%", "n": limit}).all()
    return [(int(r[0]), r[1], r[2], r[3]) for r in rows]


def rewrap_answer(conn: Connection, client: int, operation: str, key: str, was: str,
                  sealed: str) -> bool:
    """Store a stored answer re-wrapped under a new secrets key, if it is still ``was``."""
    result = conn.execute(sa.text(
        "UPDATE api_idempotency SET response_body = :s WHERE client_id = :c AND operation = :o "
        "AND key = :k AND response_body = :w"),
        {"s": sealed, "c": client, "o": operation, "k": key, "w": was})
    return bool(result.rowcount)
