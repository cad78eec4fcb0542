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

The SQL is in ``api.repository.outbox``.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
from sqlalchemy.engine import Connection, Engine

from api.repository import clients as clients_repo
from api.repository import outbox as repo
from api.repository.outbox import AttemptLog, DueDelivery
from config.errors import CustodyError
from config.uow import UnitOfWork

SIGNATURE_HEADER = "Custody-Signature"
EVENT_ID_HEADER = "Custody-Event-Id"
EVENT_TYPE_HEADER = "Custody-Event-Type"
TIMESTAMP_HEADER = "Custody-Timestamp"
ATTEMPT_HEADER = "Custody-Delivery-Attempt"
USER_AGENT = "custody-webhooks/1"
alert_log = logging.getLogger("custody.alerts")


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
        client_id = clients_repo.client_id(uow.conn, client_name)
        if client_id is None:
            raise ClientNotFound(f"no API client named {client_name!r}")
        endpoint_id = repo.upsert_endpoint(uow.conn, client_id, url, secret, alerts)
        uow.commit()
    return Endpoint(endpoint_id, client_name, url, secret, alerts)


# --- delivery --------------------------------------------------------------------------------


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


def _claim(engine: Engine, now: datetime, batch_max: int, lease_s: float) -> list[DueDelivery]:
    # SKIP LOCKED + moving next_attempt_at a lease ahead, committed before any request: two
    # workers never send the same delivery at once, and a crashed worker's claim expires.
    with UnitOfWork(engine) as uow:
        claimed = repo.claim_due(uow.conn, now, batch_max, now + timedelta(seconds=lease_s))
        uow.commit()
    return claimed


def _send(http: httpx.Client, c: DueDelivery, clock: Callable[[], float]) -> tuple[int | None,
                                                                                     str | None]:
    timestamp = int(clock())
    body = event_body(c.event_id, c.event_type, c.created_at, c.payload)
    headers = {"Content-Type": "application/json", "User-Agent": USER_AGENT,
               SIGNATURE_HEADER: sign(c.secret, timestamp, body),
               EVENT_ID_HEADER: c.event_id, EVENT_TYPE_HEADER: c.event_type,
               TIMESTAMP_HEADER: str(timestamp), ATTEMPT_HEADER: str(c.attempt_no)}
    try:
        response = http.post(c.url, content=body, headers=headers)
    except httpx.HTTPError as exc:
        return None, f"{type(exc).__name__}: {exc}"[:500]
    if 200 <= response.status_code < 300:
        return response.status_code, None
    return response.status_code, f"HTTP {response.status_code}"


def _record(engine: Engine, c: DueDelivery, status: int | None, error: str | None,
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
        repo.record_attempt(uow.conn, delivery_id=c.delivery_id, attempt_no=c.attempt_no,
                            outcome=outcome, state=state, status=status, error=error,
                            duration_ms=duration_ms, due=due, now=now)
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
    with UnitOfWork(engine) as uow:
        queued = repo.queue_replay(uow.conn, event_ids=event_ids, client_name=client_name,
                                   since=since, until=until, failed_only=failed_only,
                                   actor=actor, limit=limit, now=now)
        uow.commit()
    return queued


def delivery_log(conn: Connection, *, event_id: str | None = None, limit: int = 100) -> list[
        AttemptLog]:
    """The newest delivery attempts (of one event if given), newest first."""
    return repo.delivery_log(conn, event_id=event_id, limit=limit)


def undelivered(uow: UnitOfWork, now: datetime) -> tuple[int, float | None, int]:
    """Deliveries still pending, the age in seconds of the oldest event among them, and
    deliveries that gave up (failed: retries exhausted, waiting for a replay). Operations
    metrics; the pending ones are read through the partial index on due deliveries."""
    pending, oldest, failed = repo.undelivered(uow.conn)
    age = None if oldest is None else max(0.0, (now - oldest).total_seconds())
    return pending, age, failed


#: Alerts logged at ERROR (money or the ledger at stake, or a chain refused); the others WARNING.
ERROR_ALERTS = frozenset({"ledger_drift", "config_mismatch", "withdrawal_held",
                          "signer_unavailable"})


class AlertWithoutNext(AssertionError):
    """An alert must say what to do next (``payload["next"]``): a programmer error."""


def raise_alert(conn: Connection, kind: str, key: str, payload: dict[str, Any]) -> bool:
    """Write an ``alert.<kind>`` event concerning no client (delivered to alert endpoints),
    once per ``key``: the same finding seen again is the same event. Returns whether new.

    ``payload["next"]`` names what an operator does about it (AlertWithoutNext otherwise). A
    new alert is also one structured line on ``custody.alerts`` (ERROR for ``ERROR_ALERTS``,
    else WARNING) with ``alert``, ``kind``, ``next``, the event id and the payload; it commits
    with ``conn``'s transaction, or not at all."""
    next_step = payload.get("next")
    if not isinstance(next_step, str) or not next_step.strip():
        raise AlertWithoutNext(f"alert {kind!r} does not say what to do next (payload['next'])")
    digest = hashlib.sha256(f"{kind}:{key}".encode()).hexdigest()[:32]
    event_id = f"evt_alert_{digest}"
    new = repo.insert_alert(conn, event_id, kind, json.dumps(payload, sort_keys=True,
                                                             default=str))
    if new:
        alert_log.log(logging.ERROR if kind in ERROR_ALERTS else logging.WARNING,
                      "alert %s: %s", kind, next_step, extra={
                          "alert": True, "kind": kind, "next": next_step, "event_id": event_id,
                          "payload": {k: v for k, v in payload.items() if k != "next"}})
    return new
