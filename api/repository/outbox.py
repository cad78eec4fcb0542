"""The outbox and its webhook deliveries (``outbox_events``, ``webhook_endpoints``,
``webhook_deliveries``, ``webhook_attempts``).

Events are written by triggers on the histories (migration 0005) and, for alerts, by
``insert_alert``; the delivery rules (claims, retries, signatures) are in ``api.outbox``. Every
payload is read through the SQL function ``outbox_payload``: a deposit event stores none and
is rendered from its history row (revision 0034).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection


def newest_endpoint_id(conn: Connection, client: int) -> int | None:
    """The id of the client's newest endpoint, its row locked FOR UPDATE (None: it has none)."""
    # The row lock: two `custody webhooks endpoint` runs at once would both replace it.
    found = conn.execute(sa.text(
        "SELECT id FROM webhook_endpoints WHERE id = (SELECT max(id) FROM webhook_endpoints "
        "WHERE client_id = :c) FOR UPDATE"), {"c": client}).scalar()
    return None if found is None else int(found)


def replace_endpoint(conn: Connection, endpoint_id: int, url: str, secret_sealed: str,
                     alerts: bool, event_types: Sequence[str] | None) -> None:
    """Replace (and re-enable) an endpoint: new URL, secret (sealed) and subscriptions; no
    previous secret. What ``custody webhooks endpoint`` does to a client's newest one."""
    conn.execute(sa.text(
        "UPDATE webhook_endpoints SET url = :u, secret_sealed = :s, alerts = :a, "
        "event_types = :t, updated_at = now(), disabled_at = NULL, "
        "previous_secret_sealed = NULL, previous_secret_expires_at = NULL WHERE id = :id"),
        {"id": endpoint_id, "u": url, "s": secret_sealed, "a": alerts,
         "t": None if event_types is None else list(event_types)})


def next_endpoint_id(conn: Connection) -> int:
    """An id for a new endpoint (taken before the insert: its secret is sealed for it)."""
    return int(conn.execute(sa.text("SELECT nextval('webhook_endpoints_id_seq')")).scalar_one())


def insert_endpoint(conn: Connection, endpoint_id: int, client: int, url: str,
                    secret_sealed: str, alerts: bool, event_types: Sequence[str] | None) -> None:
    """A new endpoint ``endpoint_id`` (from ``next_endpoint_id``) of the client."""
    conn.execute(sa.text(
        "INSERT INTO webhook_endpoints (id, client_id, url, secret_sealed, alerts, event_types) "
        "VALUES (:id, :c, :u, :s, :a, :t)"),
        {"id": endpoint_id, "c": client, "u": url, "s": secret_sealed, "a": alerts,
         "t": None if event_types is None else list(event_types)})


@dataclass(frozen=True)
class EndpointRow:
    """A stored endpoint, without its secrets."""

    id: int
    client_name: str
    url: str
    alerts: bool
    event_types: list[str] | None
    created_at: datetime
    updated_at: datetime
    disabled_at: datetime | None
    rotated_at: datetime | None
    previous_secret_expires_at: datetime | None


_ENDPOINT_COLUMNS = ("e.id, c.name, e.url, e.alerts, e.event_types, e.created_at, e.updated_at, "
                     "e.disabled_at, e.rotated_at, e.previous_secret_expires_at")


def list_endpoints(conn: Connection, *, client_name: str | None, after_id: int | None,
                   limit: int) -> list[EndpointRow]:
    """Endpoints by id (oldest first), after ``after_id``, of one client if given."""
    rows = conn.execute(sa.text(
        f"SELECT {_ENDPOINT_COLUMNS} FROM webhook_endpoints e "
        "JOIN api_clients c ON c.id = e.client_id "
        "WHERE (CAST(:client AS text) IS NULL OR c.name = :client) "
        "AND e.id > coalesce(CAST(:after AS bigint), 0) ORDER BY e.id LIMIT :n"),
        {"client": client_name, "after": after_id, "n": limit}).all()
    return [EndpointRow(*r) for r in rows]


def get_endpoint(conn: Connection, endpoint_id: int, *, lock: bool = False) -> EndpointRow | None:
    """One endpoint (its row locked FOR UPDATE with ``lock``)."""
    row = conn.execute(sa.text(
        f"SELECT {_ENDPOINT_COLUMNS} FROM webhook_endpoints e "
        "JOIN api_clients c ON c.id = e.client_id WHERE e.id = :id"
        + (" FOR UPDATE OF e" if lock else "")), {"id": endpoint_id}).first()
    return None if row is None else EndpointRow(*row)


def rotate_secret(conn: Connection, endpoint_id: int, secret_sealed: str, now: datetime,
                  overlap_until: datetime) -> None:
    """The new secret (sealed); the current one stays valid (signing too) until
    ``overlap_until``. A rotation during an overlap drops the oldest secret (two at most). Both
    are sealed for the endpoint (not for a column), so the current one moves as it is."""
    conn.execute(sa.text(
        "UPDATE webhook_endpoints SET previous_secret_sealed = secret_sealed, "
        "previous_secret_expires_at = :until, secret_sealed = :s, rotated_at = :now, "
        "updated_at = :now WHERE id = :id"),
        {"id": endpoint_id, "s": secret_sealed, "now": now, "until": overlap_until})


def disable_endpoint(conn: Connection, endpoint_id: int, now: datetime) -> None:
    """Stop deliveries to the endpoint (kept for the log); its pending deliveries are not sent."""
    conn.execute(sa.text(
        "UPDATE webhook_endpoints SET disabled_at = coalesce(disabled_at, :now), "
        "updated_at = :now WHERE id = :id"), {"id": endpoint_id, "now": now})


@dataclass(frozen=True)
class DueDelivery:
    """A delivery claimed for one attempt, with its endpoint and event."""

    delivery_id: int
    attempt_no: int
    endpoint_id: int
    url: str
    #: The endpoint's signing secret, sealed (``config.encryption``).
    secret_sealed: str
    event_id: str
    event_type: str
    created_at: datetime
    payload: dict[str, Any]
    version: int = 1
    #: The secret before a rotation (sealed), while it is still valid (then both sign).
    previous_secret_sealed: str | None = None


def claim_due(conn: Connection, now: datetime, batch_max: int,
              lease_until: datetime) -> list[DueDelivery]:
    """Up to ``batch_max`` deliveries due at ``now`` (to enabled endpoints), each counted as
    one more attempt and moved to ``lease_until``. SKIP LOCKED: two workers never claim the
    same delivery; once committed, a crashed worker's claim expires at the end of its
    lease."""
    rows = conn.execute(sa.text(
        "WITH due AS (SELECT id FROM webhook_deliveries WHERE state = 'pending' "
        "  AND next_attempt_at <= :now AND endpoint_id IN (SELECT id FROM webhook_endpoints "
        "  WHERE disabled_at IS NULL) ORDER BY next_attempt_at, id LIMIT :n "
        "  FOR UPDATE SKIP LOCKED), "
        "c AS (UPDATE webhook_deliveries d SET attempts = d.attempts + 1, "
        "  next_attempt_at = :lease, first_attempt_at = coalesce(d.first_attempt_at, :now) "
        "  FROM due WHERE d.id = due.id RETURNING d.id, d.attempts, d.event_id, "
        "  d.endpoint_id) "
        "SELECT c.id, c.attempts, e.id AS endpoint_id, e.url, e.secret_sealed, o.event_id, "
        "  o.type, o.created_at, outbox_payload(o) AS payload, o.version, "
        "  CASE WHEN e.previous_secret_expires_at > :now "
        "  THEN e.previous_secret_sealed END AS previous_secret_sealed "
        "  FROM c JOIN webhook_endpoints e ON e.id = c.endpoint_id "
        "  JOIN outbox_events o ON o.id = c.event_id ORDER BY o.id"),
        {"now": now, "n": batch_max, "lease": lease_until}).all()
    return [DueDelivery(r.id, r.attempts, r.endpoint_id, r.url, r.secret_sealed, r.event_id,
                        r.type, r.created_at, r.payload, r.version, r.previous_secret_sealed)
            for r in rows]


def record_attempt(conn: Connection, *, delivery_id: int, attempt_no: int, outcome: str,
                   state: str, status: int | None, error: str | None, duration_ms: int,
                   due: datetime | None, now: datetime) -> None:
    """The outcome of one attempt: the delivery's new state (unless a newer attempt claimed it
    meanwhile) and a row in the attempt log."""
    conn.execute(sa.text(
        "UPDATE webhook_deliveries SET state = :state, last_status = :status, "
        "last_error = :error, next_attempt_at = coalesce(:due, next_attempt_at), "
        "delivered_at = CASE WHEN :state = 'delivered' THEN CAST(:now AS timestamptz) END "
        "WHERE id = :id AND attempts = :attempt"),
        {"state": state, "status": status, "error": error, "due": due, "now": now,
         "id": delivery_id, "attempt": attempt_no})
    conn.execute(sa.text(
        "INSERT INTO webhook_attempts (delivery_id, attempt_no, outcome, status_code, "
        "error, duration_ms, next_attempt_at) VALUES (:d, :n, :o, :s, :e, :ms, :due)"),
        {"d": delivery_id, "n": attempt_no, "o": outcome, "s": status, "e": error,
         "ms": duration_ms, "due": due})


def queue_replay(conn: Connection, *, event_ids: Sequence[str], client_name: str | None,
                 since: datetime | None, until: datetime | None, failed_only: bool,
                 actor: str, limit: int, now: datetime) -> int:
    """Make the selected events due again at ``now`` for every enabled endpoint they concern
    (attempt count reset, a ``replayed`` row in the log), creating deliveries that did not exist.
    Empty selectors select everything. Returns the deliveries queued."""
    where = ["TRUE"]
    params: dict[str, Any] = {"now": now, "limit": limit, "actor": actor}
    if event_ids:
        where.append("o.event_id = ANY(:ids)")
        params["ids"] = list(event_ids)
    if client_name is not None:
        where.append("c.name = :client")
        params["client"] = client_name
    if since is not None:
        where.append("o.created_at >= :since")
        params["since"] = since
    if until is not None:
        where.append("o.created_at < :until")
        params["until"] = until
    if failed_only:
        where.append("d.state = 'failed'")
    rows = conn.execute(sa.text(
        "WITH targets AS (SELECT o.id AS event_id, e.id AS endpoint_id "
        "  FROM outbox_events o JOIN webhook_endpoints e ON e.disabled_at IS NULL AND "
        "    (e.client_id = o.client_id OR (o.type LIKE 'alert.%' AND e.alerts)) AND "
        "    (e.event_types IS NULL OR o.type = ANY (e.event_types)) "
        "  JOIN api_clients c ON c.id = e.client_id "
        "  LEFT JOIN webhook_deliveries d ON d.event_id = o.id AND d.endpoint_id = e.id "
        f"  WHERE {' AND '.join(where)} ORDER BY o.id LIMIT :limit), "
        "up AS (INSERT INTO webhook_deliveries (event_id, endpoint_id, next_attempt_at) "
        "  SELECT event_id, endpoint_id, :now FROM targets "
        "  ON CONFLICT (event_id, endpoint_id) DO UPDATE SET state = 'pending', attempts = 0, "
        "  next_attempt_at = EXCLUDED.next_attempt_at, delivered_at = NULL "
        "  RETURNING id) "
        "INSERT INTO webhook_attempts (delivery_id, attempt_no, outcome, actor) "
        "SELECT id, 0, 'replayed', :actor FROM up RETURNING delivery_id"), params).all()
    return len(rows)


@dataclass(frozen=True)
class AttemptLog:
    """One row of the delivery log."""

    event_id: str
    event_type: str
    client_name: str
    attempt_no: int
    outcome: str
    status_code: int | None
    error: str | None
    at: datetime


def delivery_log(conn: Connection, *, event_id: str | None, limit: int) -> list[AttemptLog]:
    """The newest delivery attempts (of one event if given), newest first."""
    rows = conn.execute(sa.text(
        "SELECT o.event_id, o.type, c.name, a.attempt_no, a.outcome, a.status_code, a.error, "
        "a.at FROM webhook_attempts a JOIN webhook_deliveries d ON d.id = a.delivery_id "
        "JOIN outbox_events o ON o.id = d.event_id JOIN webhook_endpoints e "
        "ON e.id = d.endpoint_id JOIN api_clients c ON c.id = e.client_id "
        "WHERE CAST(:event AS text) IS NULL OR o.event_id = :event ORDER BY a.id DESC LIMIT :n"),
        {"event": event_id, "n": limit}).all()
    return [AttemptLog(*r) for r in rows]


def undelivered(conn: Connection) -> tuple[int, datetime | None, int]:
    """Deliveries still pending, the creation time of the oldest event among them, and
    deliveries that gave up (failed), to enabled endpoints. The pending ones are read through
    the partial index on due deliveries."""
    # Deliveries to a disabled endpoint are never sent: they are not "undelivered" work.
    row = conn.execute(sa.text(
        "SELECT count(*), min(o.created_at), "
        "(SELECT count(*) FROM webhook_deliveries f JOIN webhook_endpoints fe "
        "  ON fe.id = f.endpoint_id AND fe.disabled_at IS NULL WHERE f.state = 'failed') "
        "FROM webhook_deliveries d JOIN outbox_events o ON o.id = d.event_id "
        "JOIN webhook_endpoints e ON e.id = d.endpoint_id AND e.disabled_at IS NULL "
        "WHERE d.state = 'pending'")).one()
    return int(row[0]), row[1], int(row[2])


def insert_alert(conn: Connection, event_id: str, kind: str, payload_json: str) -> bool:
    """Write the ``alert.<kind>`` event ``event_id`` concerning no client unless it exists;
    whether it is new."""
    inserted = conn.execute(sa.text(
        "INSERT INTO outbox_events (event_id, type, subject, payload) "
        "VALUES (:id, :type, :subject, CAST(:payload AS jsonb)) "
        "ON CONFLICT (event_id) DO NOTHING RETURNING id"),
        {"id": event_id, "type": f"alert.{kind}", "subject": f"alert:{kind}",
         "payload": payload_json}).first()
    return inserted is not None


@dataclass(frozen=True)
class StoredEvent:
    """An outbox event as stored (rendered by ``api.outbox.event_document``)."""

    id: int
    event_id: str
    type: str
    created_at: datetime
    payload: dict[str, Any]
    version: int


#: A deposit event's payload is rendered from its history row (``outbox_payload``: revision 0034).
_EVENT_COLUMNS = "o.id, o.event_id, o.type, o.created_at, outbox_payload(o) AS payload, o.version"


def list_events(conn: Connection, *, client_id: int | None, types: Sequence[str],
                since: datetime | None, until: datetime | None, before_id: int | None,
                limit: int) -> list[StoredEvent]:
    """Events newest first (by outbox id), before ``before_id``; of one client when
    ``client_id`` is given (else all), of ``types`` when not empty, written at or after
    ``since`` and before ``until``."""
    where = ["TRUE"]
    params: dict[str, Any] = {"n": limit}
    if client_id is not None:
        where.append("o.client_id = :client")
        params["client"] = client_id
    if types:
        where.append("o.type = ANY (:types)")
        params["types"] = list(types)
    if since is not None:
        where.append("o.created_at >= :since")
        params["since"] = since
    if until is not None:
        where.append("o.created_at < :until")
        params["until"] = until
    if before_id is not None:
        where.append("o.id < :before")
        params["before"] = before_id
    rows = conn.execute(sa.text(
        f"SELECT {_EVENT_COLUMNS} FROM outbox_events o WHERE {' AND '.join(where)} "
        "ORDER BY o.id DESC LIMIT :n"), params).all()
    return [StoredEvent(*r) for r in rows]


def get_event(conn: Connection, event_id: str) -> tuple[StoredEvent, int | None] | None:
    """One event by its event id, with the client it belongs to."""
    row = conn.execute(sa.text(
        f"SELECT {_EVENT_COLUMNS}, o.client_id FROM outbox_events o WHERE o.event_id = :id"),
        {"id": event_id}).first()
    if row is None:
        return None
    return StoredEvent(*row[:6]), row[6]


# --- the secrets key's rotation ---------------------------------------------------------------


def endpoints_sealed_elsewhere(conn: Connection, key_id: str, after_id: int,
                               limit: int) -> list[tuple[int, str, str | None]]:
    """(id, sealed secret, sealed previous secret) of up to ``limit`` endpoints after
    ``after_id`` with a secret not sealed under the key ``key_id``, by id."""
    prefix = f"cs1.{key_id}.%"
    rows = conn.execute(sa.text(
        "SELECT id, secret_sealed, previous_secret_sealed FROM webhook_endpoints "
        "WHERE id > :after AND (secret_sealed NOT LIKE :p OR previous_secret_sealed NOT LIKE :p)"
        " ORDER BY id LIMIT :n"), {"after": after_id, "p": prefix, "n": limit}).all()
    return [(int(r[0]), r[1], r[2]) for r in rows]


def rewrap_endpoint(conn: Connection, endpoint_id: int, was: tuple[str, str | None],
                    now: tuple[str, str | None]) -> bool:
    """Store the re-wrapped secrets ``now`` of an endpoint whose secrets are still ``was``
    (False: a rotation of the endpoint's secret changed them meanwhile; nothing written)."""
    result = conn.execute(sa.text(
        "UPDATE webhook_endpoints SET secret_sealed = :s, previous_secret_sealed = :p "
        "WHERE id = :id AND secret_sealed = :ws "
        "AND previous_secret_sealed IS NOT DISTINCT FROM CAST(:wp AS text)"),
        {"id": endpoint_id, "s": now[0], "p": now[1], "ws": was[0], "wp": was[1]})
    return bool(result.rowcount)
