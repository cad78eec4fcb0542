"""Webhook delivery from the outbox: signed, retried with exponential backoff, logged, replayable.

Events reach ``outbox_events`` through triggers on the histories (migration 0005), in the same
database transaction as the change they describe. This module delivers them:

- ``deliver_due`` is one bounded step: it claims due deliveries (``FOR UPDATE SKIP LOCKED``,
  moving each a lease ahead, committed), POSTs them outside any database transaction, then
  records each outcome (delivery state plus a ``webhook_attempts`` row) in a new transaction.
  Two workers never send the same delivery at once; a worker killed mid-send leaves the
  delivery due again when its lease ends (at least once: receivers dedupe by event id).
- Signatures: ``Custody-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>." + body)>``
  with the client's secret; ``verify_signature`` is what a receiver runs.
- Retries: ``RETRY_DELAYS_S`` (30 s doubling to a 6 h cap) spans more than 3 days; after the
  last one the delivery is ``failed`` and only ``replay`` sends it again.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from config.errors import CustodyError
from config.uow import UnitOfWork

SIGNATURE_HEADER = "Custody-Signature"
EVENT_ID_HEADER = "Custody-Event-Id"
EVENT_TYPE_HEADER = "Custody-Event-Type"
TIMESTAMP_HEADER = "Custody-Timestamp"
ATTEMPT_HEADER = "Custody-Delivery-Attempt"
USER_AGENT = "custody-webhooks/1"


def retry_delays(base_s: int = 30, cap_s: int = 6 * 3600, horizon_s: int = 3 * 86_400) -> tuple[
        int, ...]:
    """Delays before each retry: ``base_s`` doubling up to ``cap_s``, until their sum first
    reaches ``horizon_s`` (so the last retry happens at least ``horizon_s`` after the first
    attempt)."""
    delays: list[int] = []
    delay = base_s
    while sum(delays) < horizon_s:
        delays.append(delay)
        delay = min(cap_s, delay * 2)
    return tuple(delays)


#: 30 s, 1 min, 2 min, ... 4.3 h, then every 6 h: 21 retries over about 3.3 days.
RETRY_DELAYS_S = retry_delays()


def next_delay_s(attempts_done: int, delays: Sequence[int] = RETRY_DELAYS_S) -> int | None:
    """Seconds to wait after attempt number ``attempts_done`` failed; None: give up."""
    if attempts_done < 1 or attempts_done > len(delays):
        return None
    return delays[attempts_done - 1]


class WebhookEndpointInvalid(CustodyError):
    """The webhook endpoint cannot be configured as asked."""

    code = "webhook_endpoint_invalid"


class ClientNotFound(CustodyError):
    """No API client has that name."""

    code = "client_not_found"


# --- signing ---------------------------------------------------------------------------------


def sign(secret: str, timestamp: int, body: bytes) -> str:
    """The signature header value for ``body`` sent at ``timestamp`` (unix seconds)."""
    mac = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    return f"t={timestamp},v1={mac.hexdigest()}"


def verify_signature(secret: str, header: str, body: bytes, *, now: float | None = None,
                     tolerance_s: int = 300) -> bool:
    """What a receiver checks: a ``v1`` HMAC of ``"<t>." + body`` under ``secret`` and a
    timestamp within ``tolerance_s`` of ``now`` (replayed captures are refused)."""
    parts: dict[str, list[str]] = {}
    for item in header.split(","):
        key, _, value = item.strip().partition("=")
        parts.setdefault(key, []).append(value)
    try:
        timestamp = int(parts["t"][0])
    except (KeyError, ValueError):
        return False
    if abs((time.time() if now is None else now) - timestamp) > tolerance_s:
        return False
    expected = sign(secret, timestamp, body).split("v1=", 1)[1]
    return any(hmac.compare_digest(expected, given) for given in parts.get("v1", []))


def event_body(event_id: str, event_type: str, created_at: datetime,
               payload: dict[str, Any]) -> bytes:
    """The delivered JSON (deterministic: the same bytes on every attempt and replay)."""
    document = {"id": event_id, "type": event_type,
                "created_at": created_at.astimezone(UTC).isoformat(), "data": payload}
    return json.dumps(document, sort_keys=True, separators=(",", ":")).encode()


# --- endpoints -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Endpoint:
    """A client's webhook endpoint."""

    id: int
    client_name: str
    url: str
    secret: str
    alerts: bool


def set_endpoint(engine: Engine, client_name: str, url: str, *, alerts: bool = False,
                 secret: str | None = None) -> Endpoint:
    """Set (or replace) the webhook URL of an existing client; a new secret is generated
    unless one is given. Returns the endpoint with its secret (show it to the client once)."""
    if not url.startswith(("http://", "https://")) or any(c.isspace() for c in url):
        raise WebhookEndpointInvalid(f"not an http(s) URL: {url!r}")
    secret = secret or "whsec_" + secrets.token_hex(32)
    if len(secret) < 32:
        raise WebhookEndpointInvalid("the signing secret must have at least 32 characters")
    with UnitOfWork(engine) as uow:
        client_id = uow.conn.execute(sa.text("SELECT id FROM api_clients WHERE name = :n"),
                                     {"n": client_name}).scalar()
        if client_id is None:
            raise ClientNotFound(f"no API client named {client_name!r}")
        endpoint_id = uow.conn.execute(sa.text(
            "INSERT INTO webhook_endpoints (client_id, url, secret, alerts) "
            "VALUES (:c, :u, :s, :a) ON CONFLICT (client_id) DO UPDATE SET url = EXCLUDED.url, "
            "secret = EXCLUDED.secret, alerts = EXCLUDED.alerts, updated_at = now(), "
            "disabled_at = NULL RETURNING id"),
            {"c": client_id, "u": url, "s": secret, "a": alerts}).scalar_one()
        uow.commit()
    return Endpoint(int(endpoint_id), client_name, url, secret, alerts)


# --- delivery --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Claimed:
    """A delivery claimed for one attempt."""

    delivery_id: int
    attempt_no: int
    url: str
    secret: str
    event_id: str
    event_type: str
    body: bytes


@dataclass
class DeliveryReport:
    """What one ``deliver_due`` step did."""

    delivered: int = 0
    retried: int = 0
    failed: int = 0

    @property
    def attempted(self) -> int:
        """Attempts made."""
        return self.delivered + self.retried + self.failed


def _claim(engine: Engine, now: datetime, batch_max: int, lease_s: float) -> list[Claimed]:
    # SKIP LOCKED + moving next_attempt_at a lease ahead, committed before any request: two
    # workers never send the same delivery at once, and a crashed worker's claim expires.
    with UnitOfWork(engine) as uow:
        rows = uow.conn.execute(sa.text(
            "WITH due AS (SELECT id FROM webhook_deliveries WHERE state = 'pending' "
            "  AND next_attempt_at <= :now ORDER BY next_attempt_at, id LIMIT :n "
            "  FOR UPDATE SKIP LOCKED), "
            "c AS (UPDATE webhook_deliveries d SET attempts = d.attempts + 1, "
            "  next_attempt_at = :lease, first_attempt_at = coalesce(d.first_attempt_at, :now) "
            "  FROM due WHERE d.id = due.id RETURNING d.id, d.attempts, d.event_id, "
            "  d.endpoint_id) "
            "SELECT c.id, c.attempts, e.url, e.secret, o.event_id, o.type, o.created_at, "
            "  o.payload FROM c JOIN webhook_endpoints e ON e.id = c.endpoint_id "
            "  JOIN outbox_events o ON o.id = c.event_id ORDER BY o.id"),
            {"now": now, "n": batch_max, "lease": now + timedelta(seconds=lease_s)}).all()
        uow.commit()
    return [Claimed(r.id, r.attempts, r.url, r.secret, r.event_id, r.type,
                    event_body(r.event_id, r.type, r.created_at, r.payload)) for r in rows]


def _send(http: httpx.Client, c: Claimed, clock: Callable[[], float]) -> tuple[int | None,
                                                                                 str | None]:
    timestamp = int(clock())
    headers = {"Content-Type": "application/json", "User-Agent": USER_AGENT,
               SIGNATURE_HEADER: sign(c.secret, timestamp, c.body),
               EVENT_ID_HEADER: c.event_id, EVENT_TYPE_HEADER: c.event_type,
               TIMESTAMP_HEADER: str(timestamp), ATTEMPT_HEADER: str(c.attempt_no)}
    try:
        response = http.post(c.url, content=c.body, headers=headers)
    except httpx.HTTPError as exc:
        return None, f"{type(exc).__name__}: {exc}"[:500]
    if 200 <= response.status_code < 300:
        return response.status_code, None
    return response.status_code, f"HTTP {response.status_code}"


def _record(engine: Engine, c: Claimed, status: int | None, error: str | None,
            duration_ms: int, now: datetime, delays: Sequence[int],
            report: DeliveryReport) -> None:
    if error is None:
        outcome, state, due = "delivered", "delivered", None
        report.delivered += 1
    else:
        delay = next_delay_s(c.attempt_no, delays)
        if delay is None:
            outcome, state, due = "failed", "failed", None
            report.failed += 1
        else:
            outcome, state, due = "retry", "pending", now + timedelta(seconds=delay)
            report.retried += 1
    with UnitOfWork(engine) as uow:
        uow.conn.execute(sa.text(
            "UPDATE webhook_deliveries SET state = :state, last_status = :status, "
            "last_error = :error, next_attempt_at = coalesce(:due, next_attempt_at), "
            "delivered_at = CASE WHEN :state = 'delivered' THEN CAST(:now AS timestamptz) END "
            "WHERE id = :id AND attempts = :attempt"),
            {"state": state, "status": status, "error": error, "due": due, "now": now,
             "id": c.delivery_id, "attempt": c.attempt_no})
        uow.conn.execute(sa.text(
            "INSERT INTO webhook_attempts (delivery_id, attempt_no, outcome, status_code, "
            "error, duration_ms, next_attempt_at) VALUES (:d, :n, :o, :s, :e, :ms, :due)"),
            {"d": c.delivery_id, "n": c.attempt_no, "o": outcome, "s": status, "e": error,
             "ms": duration_ms, "due": due})
        uow.commit()


def deliver_due(engine: Engine, *, now: datetime | None = None, batch_max: int = 50,
                timeout_s: float = 10.0, delays: Sequence[int] = RETRY_DELAYS_S,
                http: httpx.Client | None = None,
                clock: Callable[[], float] = time.time) -> DeliveryReport:
    """One bounded delivery step: up to ``batch_max`` due deliveries, each POST bounded by
    ``timeout_s``. ``now`` (default: the wall clock) decides what is due and when retries are
    scheduled; ``clock`` gives the signature timestamps."""
    now = now or datetime.now(UTC)
    report = DeliveryReport()
    claimed = _claim(engine, now, batch_max, lease_s=timeout_s * 3 + 30)
    if not claimed:
        return report
    own = http is None
    client = http or httpx.Client(timeout=timeout_s, follow_redirects=False)
    try:
        for c in claimed:
            started = time.monotonic()
            status, error = _send(client, c, clock)
            duration_ms = int((time.monotonic() - started) * 1000)
            _record(engine, c, status, error, duration_ms, now, delays, report)
    finally:
        if own:
            client.close()
    return report


# --- replay and the log ----------------------------------------------------------------------


def replay(engine: Engine, *, event_ids: Sequence[str] = (), client_name: str | None = None,
           since: datetime | None = None, until: datetime | None = None,
           failed_only: bool = False, actor: str = "cli", limit: int = 10_000,
           now: datetime | None = None) -> int:
    """Make the selected events due again now (attempt count reset, a ``replayed`` row in the
    log), creating deliveries for endpoints that did not exist when they were written.
    Select by ``event_ids``, or by client and/or time range. Returns the deliveries queued."""
    if not event_ids and client_name is None and since is None and not failed_only:
        raise WebhookEndpointInvalid("say which events to replay (ids, client, since or failed)")
    now = now or datetime.now(UTC)
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
    with UnitOfWork(engine) as uow:
        rows = uow.conn.execute(sa.text(
            "WITH targets AS (SELECT o.id AS event_id, e.id AS endpoint_id "
            "  FROM outbox_events o JOIN webhook_endpoints e ON e.disabled_at IS NULL AND "
            "    (e.client_id = o.client_id OR (o.type LIKE 'alert.%' AND e.alerts)) "
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
        uow.commit()
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


def delivery_log(conn: Connection, *, event_id: str | None = None, limit: int = 100) -> list[
        AttemptLog]:
    """The newest delivery attempts (of one event if given), newest first."""
    rows = conn.execute(sa.text(
        "SELECT o.event_id, o.type, c.name, a.attempt_no, a.outcome, a.status_code, a.error, "
        "a.at FROM webhook_attempts a JOIN webhook_deliveries d ON d.id = a.delivery_id "
        "JOIN outbox_events o ON o.id = d.event_id JOIN webhook_endpoints e "
        "ON e.id = d.endpoint_id JOIN api_clients c ON c.id = e.client_id "
        "WHERE CAST(:event AS text) IS NULL OR o.event_id = :event ORDER BY a.id DESC LIMIT :n"),
        {"event": event_id, "n": limit}).all()
    return [AttemptLog(*r) for r in rows]


def undelivered(conn: Connection, now: datetime) -> tuple[int, float | None, int]:
    """Deliveries still pending, the age in seconds of the oldest event among them, and
    deliveries that gave up (failed: retries exhausted, waiting for a replay). Operations
    metrics; the pending ones are read through the partial index on due deliveries."""
    row = conn.execute(sa.text(
        "SELECT count(*), min(o.created_at), "
        "(SELECT count(*) FROM webhook_deliveries f WHERE f.state = 'failed') "
        "FROM webhook_deliveries d JOIN outbox_events o "
        "ON o.id = d.event_id WHERE d.state = 'pending'")).one()
    age = None if row[1] is None else max(0.0, (now - row[1]).total_seconds())
    return int(row[0]), age, int(row[2])


def raise_alert(conn: Connection, kind: str, key: str, payload: dict[str, Any]) -> bool:
    """Write an ``alert.<kind>`` event concerning no client (delivered to alert endpoints),
    once per ``key``: the same finding seen again is the same event. Returns whether new."""
    digest = hashlib.sha256(f"{kind}:{key}".encode()).hexdigest()[:32]
    inserted = conn.execute(sa.text(
        "INSERT INTO outbox_events (event_id, type, subject, payload) "
        "VALUES (:id, :type, :subject, CAST(:payload AS jsonb)) "
        "ON CONFLICT (event_id) DO NOTHING RETURNING id"),
        {"id": f"evt_alert_{digest}", "type": f"alert.{kind}", "subject": f"alert:{kind}",
         "payload": json.dumps(payload, sort_keys=True, default=str)}).first()
    return inserted is not None
