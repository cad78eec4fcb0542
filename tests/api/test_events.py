"""The events API, webhook payloads against the OpenAPI ``webhooks`` section, subscriptions,
secret rotation with the engine's clock, and the admin API of webhook endpoints (issue 17)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import jsonschema_rs
import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from api import outbox
from api.schemas_events import (
    ALERT_EVENTS,
    DEPOSIT_EVENTS,
    EVENT_TYPES,
    WITHDRAWAL_EVENTS,
    AlertType,
    DepositType,
    WithdrawalType,
)
from devtools.e2e import Received, WebhookReceiver
from tests.api.conftest import Api, seed_deposit, serve


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    """A real HTTP receiver on a free local port."""
    r = WebhookReceiver().start()
    yield r
    r.stop()


class Clock:
    """The engine's clock, moved by the test."""

    def __init__(self) -> None:
        self.now = datetime.now(UTC)

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def clock() -> Clock:
    """The clock the API runs on."""
    return Clock()


@pytest.fixture
def capi(engine: Engine, clock: Clock) -> Iterator[Api]:
    """The API on the test clock."""
    with serve(engine, clock=clock) as running:
        yield running


def idem() -> str:
    """A fresh Idempotency-Key."""
    return uuid.uuid4().hex


def make_endpoint(api: Api, url: str, *, client: str = "acme", events: list[str] | None = None,
                  alerts: bool = False) -> dict[str, Any]:
    """An endpoint made through the admin API (201 expected)."""
    r = api.call("POST", "/v1/admin/webhook-endpoints", "carol", idem=idem(),
                 json={"client": client, "url": url, "events": events, "alerts": alerts})
    assert r.status_code == 201, r.text
    return dict(r.json())


def listed(api: Api, who: str, **params: Any) -> dict[str, Any]:
    r = api.call("GET", "/v1/events", who, params=params)
    assert r.status_code == 200, r.text
    return dict(r.json())


# --- the payloads and the documented schemas ---------------------------------------------------


def webhook_validator(api: Api, event_type: str) -> Any:
    """A JSON Schema validator of the documented body of ``event_type``."""
    doc = api.http.get("/openapi.json").json()
    schema = doc["webhooks"][event_type]["post"]["requestBody"]["content"]["application/json"][
        "schema"]
    return jsonschema_rs.validator_for({**schema, "components": doc["components"]},
                                       validate_formats=True)


def big_numbers(node: Any) -> list[Any]:
    """JSON numbers that a JavaScript client could not hold exactly."""
    if isinstance(node, dict):
        return [n for v in node.values() for n in big_numbers(v)]
    if isinstance(node, list):
        return [n for v in node for n in big_numbers(v)]
    return [node] if isinstance(node, int | float) and not isinstance(node, bool) and abs(
        node) > 2**53 else []


class TestPayloads:
    def test_delivered_events_match_the_documented_schemas(
            self, api: Api, receiver: WebhookReceiver) -> None:
        made = make_endpoint(api, receiver.url, alerts=True)
        receiver.secret = made["secret"]
        user = api.funded_user()
        w = api.withdraw(user)
        # 2^127 - 1 minor units (USDC, scale 6) do not fit a float: the payload says every
        # digit, as strings.
        seed_deposit(api, user, 2**127 - 1)
        with api.engine.begin() as conn:
            conn.execute(sa.text(
                "INSERT INTO deposit_cases (kind, deposit_id, expected, observed) "
                "SELECT 'deep_reorg', id, '{\"block\": 100}', '{}' FROM deposits"))
            outbox.raise_alert(conn, "withdrawal_overdue", "w1", {
                "withdrawal_id": str(w["id"]), "next": "look at it"})
        assert outbox.deliver_due(api.engine).delivered == 4
        got = {r.event_type: r for r in receiver.accepted().values()}
        assert set(got) == {"withdrawal.reserved", "deposit.seen", "alert.deep_reorg",
                            "alert.withdrawal_overdue"}
        for event_type, r in got.items():
            doc = r.document
            errors = [e.message for e in webhook_validator(api, event_type).iter_errors(doc)]
            assert errors == [], (event_type, errors)
            assert doc["version"] == 2 and big_numbers(doc) == []
        deposit = got["deposit.seen"].document["data"]["deposit"]
        assert deposit["amount"] == {"minor": str(2**127 - 1),
                                     "decimal": "170141183460469231731687303715884.105727"}
        assert deposit["user_id"] == user and deposit["from_address"].startswith("0x")
        withdrawal = got["withdrawal.reserved"].document["data"]["withdrawal"]
        assert withdrawal["id"] == str(w["id"]) and withdrawal["fee_max"] == w["fee_max"]
        assert withdrawal["amount"] == w["amount"] and withdrawal["to"] == w["to"].lower()
        case = got["alert.deep_reorg"].document["data"]
        assert case["amount"]["minor"] == str(2**127 - 1)

    def test_amounts_render_as_the_api_renders_them(self, engine: Engine) -> None:
        from ledger.model import amount_json

        cases = [(2**127 - 1, 18), (1, 18), (30_000_000, 6), (5, 0), (-1_500_000, 6),
                 (0, 6), (123456, 6), (100, 2), (7, 1)]
        with engine.connect() as conn:
            for minor, scale in cases:
                got = conn.execute(sa.text("SELECT outbox_amount(:m, :s)"),
                                   {"m": minor, "s": scale}).scalar()
                assert got == amount_json(minor, scale), (minor, scale)
            assert conn.execute(sa.text("SELECT outbox_amount(NULL, 6)")).scalar() is None

    def test_a_version_1_event_renders_as_it_was_delivered(self, api: Api) -> None:
        user = api.new_user()
        flat = {"deposit_id": "7", "user_id": user, "amount_minor": "5000000", "amount": "5"}
        at = datetime(2026, 11, 1, 12, tzinfo=UTC)
        with api.engine.begin() as conn:
            conn.execute(sa.text(
                "INSERT INTO outbox_events (event_id, type, client_id, user_id, subject, "
                "payload, created_at, version) SELECT 'evt_dep_old', 'deposit.seen', "
                "client_id, id, 'deposit:7', CAST(:p AS jsonb), :at, 1 FROM api_users "
                "WHERE id = :u"), {"p": json.dumps(flat), "at": at, "u": user})
        r = api.call("GET", "/v1/events/evt_dep_old", "acme")
        assert r.status_code == 200, r.text
        # What version 1 delivered: no version field, the flat payload.
        assert r.json() == {"id": "evt_dep_old", "type": "deposit.seen",
                            "created_at": "2026-11-01T12:00:00+00:00", "data": flat,
                            "version": None}
        assert json.loads(outbox.event_body("evt_dep_old", "deposit.seen", at, flat, 1)) == {
            "id": "evt_dep_old", "type": "deposit.seen", "created_at": at.isoformat(),
            "data": flat}

    def test_the_catalogue_is_the_one_the_code_writes(self) -> None:
        from typing import get_args

        assert set(DEPOSIT_EVENTS) == set(get_args(DepositType))
        assert set(WITHDRAWAL_EVENTS) == set(get_args(WithdrawalType))
        assert set(ALERT_EVENTS) - set(get_args(AlertType)) == {
            "alert.deep_reorg", "alert.unattributed_own_address"}
        from withdrawals.model import State
        written = {f"withdrawal.{s}" for s in State if s in {
            "pending_approval", "reserved", "broadcast", "settled", "released", "unknown",
            "reverted", "canceled", "rejected", "written_off"}}
        assert written == set(WITHDRAWAL_EVENTS)

    def test_every_alert_kind_raised_in_the_code_is_documented(self) -> None:
        import re
        from pathlib import Path

        root = Path(__file__).resolve().parents[2]
        kinds = set()
        for path in (root / "api").rglob("*.py"):
            kinds |= set(re.findall(r'raise_alert\(\s*uow\.conn,\s*"([a-z_]+)"',
                                    path.read_text()))
        assert kinds and {f"alert.{k}" for k in kinds} <= set(ALERT_EVENTS)


# --- GET /v1/events ---------------------------------------------------------------------------


class TestEventsApi:
    def test_a_client_lists_its_own_events_newest_first_with_a_cursor(self, api: Api) -> None:
        user = api.funded_user()
        api.withdraw(user)
        seed_deposit(api, user)
        seed_deposit(api, user)
        other = api.funded_user("globex")
        api.withdraw(other, who="globex")
        first = listed(api, "acme", limit=2)
        assert [e["type"] for e in first["items"]] == ["deposit.seen", "deposit.seen"]
        assert first["has_more"] is True and first["next_cursor"]
        second = listed(api, "acme", limit=2, cursor=first["next_cursor"])
        assert [e["type"] for e in second["items"]] == ["withdrawal.reserved"]
        assert second == {**second, "has_more": False, "next_cursor": None}
        mine = first["items"] + second["items"]
        assert all(e["data"].get("deposit", e["data"].get("withdrawal"))["user_id"] == user
                   for e in mine)
        created = [e["created_at"] for e in mine]
        assert created == sorted(created, reverse=True)
        # globex's event is invisible to acme, in the list and by id
        theirs = listed(api, "globex")["items"]
        assert [e["type"] for e in theirs] == ["withdrawal.reserved"]
        r = api.call("GET", f"/v1/events/{theirs[0]['id']}", "acme")
        assert (r.status_code, r.json()["code"]) == (404, "event_not_found")
        assert api.call("GET", "/v1/events/evt_nothing", "acme").json()["code"] == \
            "event_not_found"
        # staff see every client's events
        assert len(listed(api, "sam")["items"]) == 4
        assert api.call("GET", f"/v1/events/{theirs[0]['id']}", "carol").status_code == 200
        assert api.call("GET", "/v1/events", "alice").status_code == 403  # approver

    def test_an_event_is_the_delivered_body(self, api: Api,
                                            receiver: WebhookReceiver) -> None:
        receiver.secret = make_endpoint(api, receiver.url)["secret"]
        api.withdraw(api.funded_user())
        outbox.deliver_due(api.engine)
        [got] = receiver.requests
        r = api.call("GET", f"/v1/events/{got.event_id}", "acme")
        assert r.json() == got.document
        assert listed(api, "acme")["items"] == [got.document]

    def test_type_filter_repeatable_or_comma_separated_and_validated(self, api: Api) -> None:
        user = api.funded_user()
        api.withdraw(user)
        seed_deposit(api, user)
        assert [e["type"] for e in listed(api, "acme", type="deposit.seen")["items"]] == [
            "deposit.seen"]
        both = listed(api, "acme", type=["deposit.seen", "withdrawal.reserved"])["items"]
        comma = listed(api, "acme", type="deposit.seen,withdrawal.reserved")["items"]
        assert both == comma and len(both) == 2
        assert listed(api, "acme", type="deposit.credited")["items"] == []
        for bad in ("deposit.nope", "deposit.seen,", "DEPOSIT.SEEN"):
            r = api.call("GET", "/v1/events", "acme", params={"type": bad})
            assert (r.status_code, r.json()["code"]) == (422, "request_invalid"), bad

    def test_time_range_from_inclusive_to_exclusive(self, api: Api) -> None:
        user = api.funded_user()
        api.withdraw(user)
        seed_deposit(api, user)
        items = listed(api, "acme")["items"]
        newest, oldest = items[0]["created_at"], items[1]["created_at"]
        assert [e["created_at"] for e in listed(api, "acme", **{"from": newest})["items"]] == [
            newest]
        assert [e["created_at"] for e in listed(api, "acme", to=newest)["items"]] == [oldest]
        assert listed(api, "acme", **{"from": oldest, "to": oldest})["items"] == []
        assert len(listed(api, "acme", **{"from": oldest})["items"]) == 2
        r = api.call("GET", "/v1/events", "acme", params={"from": "yesterday"})
        assert (r.status_code, r.json()["code"]) == (422, "request_invalid")


# --- subscriptions, rotation ------------------------------------------------------------------


def verifies(r: Received, secret: str) -> bool:
    """Whether ``r`` verifies under ``secret`` (signature timestamps are the wall clock's: the
    engine's clock, driven by the test, decides what is due and which secrets sign)."""
    return outbox.verify_signature(secret, r.signature, r.body)


class TestDelivery:
    def test_an_endpoint_gets_only_the_types_it_subscribed_to(
            self, api: Api, receiver: WebhookReceiver) -> None:
        everything = WebhookReceiver().start()
        try:
            receiver.secret = make_endpoint(api, receiver.url,
                                            events=["withdrawal.reserved"])["secret"]
            everything.secret = make_endpoint(api, everything.url)["secret"]
            user = api.funded_user()
            seed_deposit(api, user)
            api.withdraw(user)
            assert outbox.deliver_due(api.engine).delivered == 3
            assert receiver.types() == ["withdrawal.reserved"]
            assert sorted(everything.types()) == ["deposit.seen", "withdrawal.reserved"]
            # a replay respects the subscription too
            assert outbox.replay(api.engine, client_name="acme") == 3
            outbox.deliver_due(api.engine)
            assert [r.event_type for r in receiver.requests] == ["withdrawal.reserved"] * 2
        finally:
            everything.stop()

    def test_rotation_signs_with_both_secrets_for_24_hours_then_the_new_one(
            self, capi: Api, clock: Clock, receiver: WebhookReceiver) -> None:
        made = make_endpoint(capi, receiver.url)
        old = receiver.secret = made["secret"]
        r = capi.call("POST", f"/v1/admin/webhook-endpoints/{made['id']}/rotate", "carol",
                      idem=idem())
        assert r.status_code == 200, r.text
        rotated = r.json()
        new = receiver.secret = rotated["secret"]
        assert new != old and new.startswith("whsec_")
        assert datetime.fromisoformat(rotated["previous_secret_expires_at"]) == \
            clock.now + timedelta(hours=24)
        user = capi.funded_user()
        capi.withdraw(user)
        at = clock.now + timedelta(hours=23, minutes=59)
        assert outbox.deliver_due(capi.engine, now=at).delivered == 1
        during = receiver.requests[0]
        assert during.signature.count("v1=") == 2
        assert verifies(during, new) and verifies(during, old)
        capi.withdraw(user)
        later = clock.now + timedelta(hours=24, seconds=1)
        assert outbox.deliver_due(capi.engine, now=later).delivered == 1
        after = receiver.requests[1]
        assert after.signature.count("v1=") == 1
        assert verifies(after, new) and not verifies(after, old)

    def test_a_disabled_endpoint_gets_nothing_more(self, api: Api,
                                                   receiver: WebhookReceiver) -> None:
        made = make_endpoint(api, receiver.url)
        user = api.funded_user()
        api.withdraw(user)  # pending for the endpoint
        r = api.call("POST", f"/v1/admin/webhook-endpoints/{made['id']}/disable", "carol",
                     idem=idem())
        assert (r.status_code, r.json()["state"]) == (200, "disabled")
        api.withdraw(user)
        assert outbox.deliver_due(api.engine).attempted == 0
        assert receiver.requests == []
        # what will never be sent is not undelivered work (the metrics' oldest undelivered)
        from config.uow import UnitOfWork

        with UnitOfWork(api.engine) as uow:
            assert outbox.undelivered(uow, datetime.now(UTC)) == (0, None, 0)
        # still readable through the events API
        assert len(listed(api, "acme")["items"]) == 2


# --- the admin API ----------------------------------------------------------------------------


class TestAdminApi:
    def test_create_list_get_secret_shown_once(self, api: Api) -> None:
        body = {"client": "acme", "url": "https://example.com/hooks",
                "events": ["deposit.credited", "withdrawal.settled"]}
        missing = api.call("POST", "/v1/admin/webhook-endpoints", "carol", json=body)
        assert (missing.status_code, missing.json()["code"]) == (400, "idempotency_key_missing")
        key = idem()
        r = api.call("POST", "/v1/admin/webhook-endpoints", "carol", idem=key, json=body)
        assert r.status_code == 201, r.text
        made = r.json()
        assert made["secret"].startswith("whsec_") and made["state"] == "enabled"
        assert made["events"] == ["deposit.credited", "withdrawal.settled"]
        again = api.call("POST", "/v1/admin/webhook-endpoints", "carol", idem=key, json=body)
        assert again.json() == made and again.headers["Idempotent-Replayed"] == "true"
        one = api.call("GET", f"/v1/admin/webhook-endpoints/{made['id']}", "sam").json()
        assert "secret" not in one and one["url"] == body["url"]
        page = api.call("GET", "/v1/admin/webhook-endpoints", "sam", params={"limit": 1}).json()
        assert page["items"] == [one] and page["has_more"] is False
        assert page["next_cursor"] is None
        make_endpoint(api, "https://example.com/other", client="globex")
        first = api.call("GET", "/v1/admin/webhook-endpoints", "sam",
                         params={"limit": 1}).json()
        assert first["has_more"] is True
        rest = api.call("GET", "/v1/admin/webhook-endpoints", "sam",
                        params={"cursor": first["next_cursor"]}).json()
        assert [e["client"] for e in first["items"] + rest["items"]] == ["acme", "globex"]
        only = api.call("GET", "/v1/admin/webhook-endpoints", "sam",
                        params={"client": "globex"}).json()["items"]
        assert [e["client"] for e in only] == ["globex"]
        with api.engine.connect() as conn:
            audited = conn.execute(sa.text(
                "SELECT count(*) FROM api_audit WHERE action = 'webhook_endpoint.create'"
            )).scalar()
        assert audited == 3  # two creations and the replay

    @pytest.mark.parametrize(("method", "path"), [
        ("POST", "/v1/admin/webhook-endpoints"),
        ("GET", "/v1/admin/webhook-endpoints"),
        ("GET", "/v1/admin/webhook-endpoints/1"),
        ("POST", "/v1/admin/webhook-endpoints/1/rotate"),
        ("POST", "/v1/admin/webhook-endpoints/1/disable"),
    ])
    def test_a_client_key_gets_403(self, api: Api, method: str, path: str) -> None:
        body = {"client": "acme", "url": "https://example.com/x"} if method == "POST" else None
        r = api.call(method, path, "acme", idem=idem() if method == "POST" else None, json=body)
        assert (r.status_code, r.json()["code"]) == (403, "forbidden")
        if method == "POST":
            support = api.call(method, path, "sam", idem=idem(), json=body)
            assert support.status_code == 403

    def test_refusals(self, api: Api) -> None:
        r = api.call("POST", "/v1/admin/webhook-endpoints", "carol", idem=idem(),
                     json={"client": "acme", "url": "https://example.com/x",
                           "events": ["deposit.credited", "deposit.nope"]})
        assert (r.status_code, r.json()["code"]) == (422, "request_invalid")
        assert [e["loc"] for e in r.json()["errors"]] == [["body", "events", 1]]
        r = api.call("POST", "/v1/admin/webhook-endpoints", "carol", idem=idem(),
                     json={"client": "nobody", "url": "https://example.com/x"})
        assert (r.status_code, r.json()["code"]) == (404, "client_not_found")
        for path in ("/v1/admin/webhook-endpoints/999", ):
            r = api.call("GET", path, "carol")
            assert (r.status_code, r.json()["code"]) == (404, "webhook_endpoint_not_found")
        r = api.call("POST", "/v1/admin/webhook-endpoints/999/rotate", "carol", idem=idem())
        assert (r.status_code, r.json()["code"]) == (404, "webhook_endpoint_not_found")
        made = make_endpoint(api, "https://example.com/x")
        api.call("POST", f"/v1/admin/webhook-endpoints/{made['id']}/disable", "carol",
                 idem=idem())
        r = api.call("POST", f"/v1/admin/webhook-endpoints/{made['id']}/rotate", "carol",
                     idem=idem())
        # A state the endpoint is in, not a malformed request: 409.
        assert (r.status_code, r.json()["code"]) == (409, "webhook_endpoint_disabled")
        r = api.call("POST", "/v1/admin/webhook-endpoints", "carol", idem=idem(),
                     json={"client": "acme", "url": "https://example.com/y", "alerts": 0})
        assert (r.status_code, r.json()["code"]) == (422, "request_invalid")  # not a boolean


def test_every_event_type_is_in_the_webhooks_section(api: Api) -> None:
    doc = api.http.get("/openapi.json").json()
    assert doc["openapi"].startswith("3.1")
    assert set(doc["webhooks"]) == set(EVENT_TYPES)
    for event_type, item in doc["webhooks"].items():
        names = {p["name"] for p in item["post"]["parameters"]}
        assert {"Custody-Signature", "Custody-Event-Id"} <= names, event_type


# --- the CLI ------------------------------------------------------------------------------------


def test_cli_endpoints_events_rotate_disable(api: Api, database_url: str) -> None:
    from tests.api.test_cli import custody

    made = custody(database_url, "webhooks", "endpoint", "acme", "https://example.com/a",
                   "--events", "deposit.credited,withdrawal.settled", "--events",
                   "deposit.seen")
    assert made.returncode == 0, made.stderr
    secret = made.stdout.strip()
    assert secret.startswith("whsec_") and "deposit.credited" in made.stderr
    listed_ = custody(database_url, "webhooks", "endpoints", "--json")
    assert listed_.returncode == 0, listed_.stderr
    [row] = json.loads(listed_.stdout)
    assert row["events"] == ["deposit.credited", "deposit.seen", "withdrawal.settled"]
    assert secret not in listed_.stdout and "secret" not in row
    table = custody(database_url, "webhooks", "endpoints")
    assert table.returncode == 0 and "https://example.com/a" in table.stdout
    rotated = custody(database_url, "webhooks", "rotate", row["id"])
    assert rotated.returncode == 0, rotated.stderr
    assert rotated.stdout.strip().startswith("whsec_") and rotated.stdout.strip() != secret
    assert "valid until" in rotated.stderr
    disabled = custody(database_url, "webhooks", "disable", row["id"])
    assert disabled.returncode == 0 and "disabled" in disabled.stdout
    [after] = json.loads(custody(database_url, "webhooks", "endpoints", "--json").stdout)
    assert after["state"] == "disabled" and after["previous_secret_expires_at"]
    # the old command without --events still subscribes to everything (and re-enables)
    again = custody(database_url, "webhooks", "endpoint", "acme", "https://example.com/b")
    assert again.returncode == 0, again.stderr
    [now] = json.loads(custody(database_url, "webhooks", "endpoints", "--json").stdout)
    assert (now["id"], now["events"], now["state"]) == (row["id"], None, "enabled")
    for args, code in ((("rotate", "999"), "webhook_endpoint_not_found"),
                       (("endpoint", "acme", "https://example.com/a", "--events", "nope"),
                        "webhook_endpoint_invalid")):
        bad = custody(database_url, "webhooks", *args)
        assert bad.returncode == 2, bad
        lines = (bad.stdout + bad.stderr).strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"error [{code}]"), lines


def test_the_documented_verifier_accepts_both_signatures_of_a_rotation() -> None:
    import re
    import time
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "webhooks.md").read_text()
    [code] = re.findall(r"```python\n(.*?)```", doc, re.S)
    namespace: dict[str, Any] = {}
    exec(code, namespace)  # noqa: S102 - the documentation's own example
    verify = namespace["verify"]
    body = outbox.event_body("evt_dep_1", "deposit.seen", datetime.now(UTC), {"a": "1"}, 2)
    old, new = "whsec_" + "1" * 64, "whsec_" + "2" * 64
    header = outbox.signature_header([new, old], int(time.time()), body)
    assert verify(new, header, body) and verify(old, header, body)
    assert not verify("whsec_" + "3" * 64, header, body)
    assert not verify(new, header, body + b" ")
    stale = outbox.signature_header([new], int(time.time()) - 3600, body)
    assert not verify(new, stale, body)
