"""The audit trail (``api_audit``, append-only in the database): one insert per recorded
action, and the newest-first keyset read of ``custody audit`` and ``GET /v1/admin/audit``."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

#: The outcomes a row can be read by, as conditions on its HTTP status.
OUTCOME_SQL = {"ok": "a.status < 400", "refused": "a.status BETWEEN 400 AND 499",
               "failed": "a.status >= 500"}


@dataclass(frozen=True)
class AuditRow:
    """A row to append: who (actor, and the key's client, prefix and scope; None on the
    command line), what, to what, which request, through which channel, the status answered,
    and for a refusal its code and detail."""

    actor: str
    client_id: int | None
    key_prefix: str | None
    scope: str | None
    action: str
    target: str
    request_id: str
    status: int
    channel: str
    details_json: str = "{}"
    error_code: str | None = None
    error_detail: str | None = None


@dataclass(frozen=True)
class AuditRecord:
    """A stored row, as read."""

    id: int
    at: datetime
    actor: str
    client_name: str | None
    key_prefix: str | None
    scope: str | None
    channel: str
    action: str
    target: str
    request_id: str
    status: int
    error_code: str | None
    error_detail: str | None
    details: dict[str, Any]


def insert(conn: Connection, row: AuditRow) -> int:
    """Append ``row``; its id."""
    return int(conn.execute(
        sa.text("INSERT INTO api_audit (actor, client_id, key_prefix, scope, action, target, "
                "request_id, status, details, channel, error_code, error_detail) "
                "VALUES (:actor, :client_id, :key_prefix, :scope, :action, :target, "
                ":request_id, :status, CAST(:details_json AS jsonb), :channel, :error_code, "
                ":error_detail) RETURNING id"),
        {"actor": row.actor, "client_id": row.client_id, "key_prefix": row.key_prefix,
         "scope": row.scope, "action": row.action, "target": row.target,
         "request_id": row.request_id, "status": row.status, "details_json": row.details_json,
         "channel": row.channel, "error_code": row.error_code,
         "error_detail": row.error_detail}).scalar_one())


def list_rows(conn: Connection, *, actor: str | None = None, since: datetime | None = None,
              action: str | None = None, outcome: str | None = None,
              before_id: int | None = None, limit: int = 100) -> list[AuditRecord]:
    """Rows newest first (by id), those before ``before_id`` (a cursor) only, matching every
    filter given: ``actor`` and ``action`` exactly, written at or after ``since``, ``outcome``
    one of ``OUTCOME_SQL``."""
    where = ["TRUE"]
    if actor is not None:
        where.append("a.actor = :actor")
    if since is not None:
        where.append("a.at >= :since")
    if action is not None:
        where.append("a.action = :action")
    if outcome is not None:
        where.append(OUTCOME_SQL[outcome])
    if before_id is not None:
        where.append("a.id < :before")
    rows = conn.execute(sa.text(
        "SELECT a.id, a.at, a.actor, c.name, a.key_prefix, a.scope, a.channel, a.action, "
        "a.target, a.request_id, a.status, a.error_code, a.error_detail, a.details "
        "FROM api_audit a LEFT JOIN api_clients c ON c.id = a.client_id "
        f"WHERE {' AND '.join(where)} ORDER BY a.id DESC LIMIT :limit"),
        {"actor": actor, "since": since, "action": action, "before": before_id,
         "limit": limit})
    return [AuditRecord(*r) for r in rows]
