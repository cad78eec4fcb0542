"""Webhook delivery from the outbox: signed, retried with exponential backoff, logged, replayable.

Events reach ``outbox_events`` through triggers on the histories (migration 0005), in the same
database transaction as the change they describe. This module delivers them:

- ``deliver_due`` is one bounded step: it claims due deliveries (``FOR UPDATE SKIP LOCKED``,
  moving each a lease ahead, committed), POSTs them outside any database transaction, then
  records each outcome (delivery state plus a ``webhook_attempts`` row) in a new transaction.
  Two workers never send the same delivery at once; a worker killed mid-send leaves the
  delivery due again when its lease ends (at least once: receivers dedupe by event id).
- Signatures: ``Custody-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>." + body)>``
  with the endpoint's secret; ``verify_signature`` is what a receiver runs. For 24 hours after a
  rotation (``rotate_endpoint``) the header carries a second ``v1=`` made with the old secret
  (``t=...,v1=<new>,v1=<old>``): a receiver still on the old secret keeps verifying.
- Secrets at rest: an endpoint's secrets are stored sealed for that endpoint
  (``config.encryption``, under ``CUSTODY_SECRETS_KEY``): a dump of the database cannot sign.
  They are opened only here, to sign a delivery, and shown only in the answer that made them.
- Payloads: ``event_body`` renders an event in the version it was written in (``version`` 2:
  the API's shapes, ``api.schemas_events``; 1: the first flat shape, byte for byte as it was
  delivered then).
- Endpoints: several per client, each subscribed to all event types or to chosen ones
  (``event_types``), managed here (``create_endpoint``, ``rotate_endpoint``,
  ``disable_endpoint``) for the CLI and the admin API.
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

from api.problems import ApiError
from api.repository import clients as clients_repo
from api.repository import outbox as repo
from api.repository.outbox import AttemptLog, DueDelivery
from api.repository.outbox import EndpointRow as EndpointRow  # re-exported for the routes
from api.repository.outbox import StoredEvent as StoredEvent  # re-exported for the routes
from api.schemas_events import EVENT_TYPES
from config.encryption import keyring, purpose_of_endpoint
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


class WebhookEndpointDisabled(ApiError):
    """The webhook endpoint is disabled: it cannot be rotated (create a new one)."""

    code = "webhook_endpoint_disabled"
    status = 409


class ClientNotFound(ApiError):
    """No API client has that name."""

    code = "client_not_found"
    status = 404


class WebhookEndpointNotFound(ApiError):
    """No webhook endpoint has that id."""

    code = "webhook_endpoint_not_found"
    status = 404


class EventNotFound(ApiError):
    """No event has that id (or it is another client's)."""

    code = "event_not_found"
    status = 404


#: How long the secret before a rotation stays valid (deliveries are signed with both).
ROTATION_OVERLAP = timedelta(hours=24)


def check_event_types(types: Sequence[str] | None) -> list[str] | None:
    """The event types an endpoint subscribes to, deduplicated and sorted (None: all);
    WebhookEndpointInvalid for an unknown one."""
    if types is None:
        return None
    unknown = sorted(set(types) - set(EVENT_TYPES))
    if unknown:
        raise WebhookEndpointInvalid(
            f"unknown event types: {', '.join(unknown)[:300]} (known: docs/webhooks.md)")
    if not types:
        raise WebhookEndpointInvalid("subscribe to at least one event type (or to all)")
    return sorted(set(types))


# --- signing ---------------------------------------------------------------------------------


def sign(secret: str, timestamp: int, body: bytes) -> str:
    """The signature header value for ``body`` sent at ``timestamp`` (unix seconds)."""
    return f"t={timestamp},v1={_mac(secret, timestamp, body)}"


def _mac(secret: str, timestamp: int, body: bytes) -> str:
    return hmac.new(secret.encode(), f"{timestamp}.".encode() + body,
                    hashlib.sha256).hexdigest()


def signature_header(secrets_: Sequence[str], timestamp: int, body: bytes) -> str:
    """``t=<timestamp>`` and one ``v1=`` per secret (the current one first): two during the
    overlap after a rotation, one otherwise."""
    return ",".join([f"t={timestamp}", *(f"v1={_mac(s, timestamp, body)}" for s in secrets_)])


def verify_signature(secret: str, header: str, body: bytes, *, now: float | None = None,
                     tolerance_s: int = 300) -> bool:
    """What a receiver checks: a ``v1`` HMAC of ``"<t>." + body`` under ``secret`` (any of the
    header's ``v1`` values) and a timestamp within ``tolerance_s`` of ``now`` (replayed
    captures are refused)."""
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
    expected = _mac(secret, timestamp, body)
    return any(hmac.compare_digest(expected, given) for given in parts.get("v1", []))


def event_document(event_id: str, event_type: str, created_at: datetime,
                   payload: dict[str, Any], version: int = 1) -> dict[str, Any]:
    """The event as delivered and listed: ``id``, ``type``, ``created_at``, ``data`` and,
    from version 2 on, ``version`` (version 1 events render exactly as they were delivered)."""
    document: dict[str, Any] = {"id": event_id, "type": event_type,
                                "created_at": created_at.astimezone(UTC).isoformat(),
                                "data": payload}
    if version >= 2:
        document["version"] = version
    return document


def event_body(event_id: str, event_type: str, created_at: datetime,
               payload: dict[str, Any], version: int = 1) -> bytes:
    """The delivered JSON (deterministic: the same bytes on every attempt and replay)."""
    return json.dumps(event_document(event_id, event_type, created_at, payload, version),
                      sort_keys=True, separators=(",", ":")).encode()


# --- endpoints -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Endpoint:
    """A client's webhook endpoint."""

    id: int
    client_name: str
    url: str
    secret: str
    alerts: bool
    event_types: list[str] | None = None


def _check_endpoint(url: str, secret: str | None) -> str:
    if not url.startswith(("http://", "https://")) or any(c.isspace() for c in url):
        raise WebhookEndpointInvalid(f"not an http(s) URL: {url[:200]!r}")
    if len(url) > 2000:
        raise WebhookEndpointInvalid("the URL is longer than 2000 characters")
    secret = secret or new_secret()
    if not 32 <= len(secret) <= 200:
        raise WebhookEndpointInvalid("the signing secret must have 32 to 200 characters")
    return secret


def new_secret() -> str:
    """A new signing secret."""
    return "whsec_" + secrets.token_hex(32)


def set_endpoint(engine: Engine, client_name: str, url: str, *, alerts: bool = False,
                 secret: str | None = None,
                 event_types: Sequence[str] | None = None) -> Endpoint:
    """Set (or replace) the webhook URL of an existing client (its newest endpoint, or a first
    one), subscribed to ``event_types`` (None: all); a new secret is generated unless one is
    given. Returns the endpoint with its secret (show it to the client once)."""
    secret = _check_endpoint(url, secret)
    types = check_event_types(event_types)
    keys = keyring()
    with UnitOfWork(engine) as uow:
        client_id = clients_repo.client_id(uow.conn, client_name)
        if client_id is None:
            raise ClientNotFound(f"no API client named {client_name!r}")
        endpoint_id = repo.newest_endpoint_id(uow.conn, client_id)
        if endpoint_id is None:
            endpoint_id = repo.next_endpoint_id(uow.conn)
            repo.insert_endpoint(uow.conn, endpoint_id, client_id, url,
                                 keys.seal(secret, purpose_of_endpoint(endpoint_id)), alerts,
                                 types)
        else:
            repo.replace_endpoint(uow.conn, endpoint_id, url,
                                  keys.seal(secret, purpose_of_endpoint(endpoint_id)), alerts,
                                  types)
        uow.commit()
    return Endpoint(endpoint_id, client_name, url, secret, alerts, types)


def create_endpoint(uow: UnitOfWork, client_name: str, url: str, *, alerts: bool = False,
                    event_types: Sequence[str] | None = None) -> tuple[EndpointRow, str]:
    """A new endpoint of ``client_name`` (besides its others) and its secret; the caller
    commits."""
    secret = _check_endpoint(url, None)
    types = check_event_types(event_types)
    client_id = clients_repo.client_id(uow.conn, client_name)
    if client_id is None:
        raise ClientNotFound(f"no API client named {client_name!r}")
    endpoint_id = repo.next_endpoint_id(uow.conn)
    repo.insert_endpoint(uow.conn, endpoint_id, client_id, url,
                         keyring().seal(secret, purpose_of_endpoint(endpoint_id)), alerts, types)
    row = repo.get_endpoint(uow.conn, endpoint_id)
    assert row is not None
    return row, secret


def get_endpoint(uow: UnitOfWork, endpoint_id: int) -> EndpointRow:
    """One endpoint, or WebhookEndpointNotFound."""
    row = repo.get_endpoint(uow.conn, endpoint_id)
    if row is None:
        raise WebhookEndpointNotFound(f"no webhook endpoint {endpoint_id}")
    return row


def list_endpoints(uow: UnitOfWork, *, client_name: str | None = None,
                   after_id: int | None = None, limit: int = 100) -> list[EndpointRow]:
    """Endpoints by id (oldest first), after ``after_id``, of one client if given."""
    return repo.list_endpoints(uow.conn, client_name=client_name, after_id=after_id,
                               limit=limit)


def rotate_endpoint(uow: UnitOfWork, endpoint_id: int, now: datetime) -> tuple[EndpointRow, str]:
    """A new signing secret for the endpoint; the old one stays valid, and deliveries are
    signed with both, until ``now + ROTATION_OVERLAP``. The caller commits. Refused
    (WebhookEndpointInvalid) for a disabled endpoint."""
    # The endpoint's row lock: two rotations at once would both keep the same old secret.
    row = repo.get_endpoint(uow.conn, endpoint_id, lock=True)
    if row is None:
        raise WebhookEndpointNotFound(f"no webhook endpoint {endpoint_id}")
    if row.disabled_at is not None:
        raise WebhookEndpointDisabled(f"webhook endpoint {endpoint_id} is disabled")
    secret = new_secret()
    repo.rotate_secret(uow.conn, endpoint_id,
                       keyring().seal(secret, purpose_of_endpoint(endpoint_id)), now,
                       now + ROTATION_OVERLAP)
    rotated = repo.get_endpoint(uow.conn, endpoint_id)
    assert rotated is not None
    return rotated, secret


def disable_endpoint(uow: UnitOfWork, endpoint_id: int, now: datetime) -> EndpointRow:
    """Stop sending to the endpoint (its pending deliveries stay unsent; the log is kept).
    Disabling a disabled endpoint changes nothing. The caller commits."""
    if repo.get_endpoint(uow.conn, endpoint_id, lock=True) is None:
        raise WebhookEndpointNotFound(f"no webhook endpoint {endpoint_id}")
    repo.disable_endpoint(uow.conn, endpoint_id, now)
    row = repo.get_endpoint(uow.conn, endpoint_id)
    assert row is not None
    return row


# --- the events API --------------------------------------------------------------------------


def list_events(uow: UnitOfWork, *, client_id: int | None, types: Sequence[str],
                since: datetime | None, until: datetime | None, before_id: int | None,
                limit: int) -> list[StoredEvent]:
    """Events newest first, before ``before_id``; of one client when ``client_id`` is given
    (else every event), of ``types`` unless empty, created in [``since``, ``until``)."""
    return repo.list_events(uow.conn, client_id=client_id, types=types, since=since,
                            until=until, before_id=before_id, limit=limit)


def get_event(uow: UnitOfWork, event_id: str, *, client_id: int | None) -> StoredEvent:
    """One event; EventNotFound when unknown or, with ``client_id``, another client's."""
    found = repo.get_event(uow.conn, event_id)
    if found is None or (client_id is not None and found[1] != client_id):
        raise EventNotFound(f"no event {event_id}")
    return found[0]


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
    body = event_body(c.event_id, c.event_type, c.created_at, c.payload, c.version)
    signing = _signing_secrets(c)
    headers = {"Content-Type": "application/json", "User-Agent": USER_AGENT,
               SIGNATURE_HEADER: signature_header(signing, timestamp, body),
               EVENT_ID_HEADER: c.event_id, EVENT_TYPE_HEADER: c.event_type,
               TIMESTAMP_HEADER: str(timestamp), ATTEMPT_HEADER: str(c.attempt_no)}
    try:
        response = http.post(c.url, content=body, headers=headers)
    except httpx.HTTPError as exc:
        return None, f"{type(exc).__name__}: {exc}"[:500]
    if 200 <= response.status_code < 300:
        return response.status_code, None
    return response.status_code, f"HTTP {response.status_code}"


def _signing_secrets(c: DueDelivery) -> list[str]:
    """The delivery's signing secrets in clear (the current first), opened for its endpoint;
    SecretUnreadable (the job step stops, an operator sees it) without the key they need."""
    keys, purpose = keyring(), purpose_of_endpoint(c.endpoint_id)
    sealed = [c.secret_sealed] + ([] if c.previous_secret_sealed is None
                                  else [c.previous_secret_sealed])
    return [keys.open(s, purpose) for s in sealed]


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
