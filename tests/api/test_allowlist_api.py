"""Destination allowlists over HTTP (issue 19): the activation delay on the engine's clock,
immediate removal, the two-admin shortening, idempotency and audit, other clients kept out,
the webhook events, and velocity refusals as problems."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from api.app import create_app
from config.withdrawals import AllowlistConfig, VelocityLimit
from tests.api.conftest import DEST, Api, configs, serve_app
from tests.api.test_events import webhook_validator
from tests.withdrawals.conftest import open_book

T0 = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
DAY = timedelta(days=1)
OTHER = "0x15d34AAf54267DB7D7c367839AAf71A00a2C6A65"


class Clock:
    """The engine's clock of a test app: moved by hand, never by sleeping."""

    def __init__(self, now: datetime = T0) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def clock() -> Clock:
    """The clock the API runs on."""
    return Clock()


@pytest.fixture
def api(engine: Engine, clock: Clock) -> Iterator[Api]:
    """The API with allowlisting on for acme (24 h delay) and a velocity limit of 2 USDC
    withdrawals per globex user and hour."""
    open_book(engine)
    chains, wcfg = configs()
    wcfg = replace(wcfg, allowlist=AllowlistConfig(frozenset({"acme"}), 86_400),
                   velocity=(VelocityLimit("USDC", "user", 3600, count_max=2),))
    with serve_app(engine, create_app(engine, chains, wcfg, clock=clock)) as running:
        yield running


def add(api: Api, who: str = "acme", idem: str | None = None, **body: Any) -> httpx.Response:
    """POST /v1/allowlist as ``who`` (an admin: POST /v1/admin/allowlist)."""
    path = "/v1/admin/allowlist" if who in ("carol", "dave") else "/v1/allowlist"
    return api.call("POST", path, who, idem=idem or uuid.uuid4().hex,
                    json={"chain": "devnet", "address": DEST, "label": "cold store", **body})


def withdraw(api: Api, user: str, who: str = "acme", to: str = DEST) -> httpx.Response:
    """A USDC withdrawal request of 30."""
    return api.call("POST", f"/v1/users/{user}/withdrawals", who, idem=uuid.uuid4().hex,
                    json={"asset": "USDC", "chain": "devnet", "to": to, "amount": "30000000"})


def test_a_new_address_is_refused_during_its_delay_accepted_after_and_removed_at_once(
        api: Api, clock: Clock) -> None:
    user = api.funded_user("acme")
    refused = withdraw(api, user)
    assert refused.status_code == 409 and refused.json()["code"] == "destination_not_allowed"
    assert refused.json()["reason"] == "not_listed"
    assert refused.headers["content-type"] == "application/problem+json"

    r = add(api, idem="add-1")
    assert r.status_code == 201, r.text
    entry = r.json()
    assert entry["state"] == "pending" and entry["address"] == DEST.lower()
    assert datetime.fromisoformat(entry["active_at"]) == T0 + DAY
    assert entry["client"] == "acme" and entry["added_by"] == "acme" and entry["delay_s"] == 86_400
    again = add(api, idem="add-1")
    assert again.status_code == 201 and again.headers["idempotent-replayed"] == "true"
    assert again.json() == entry
    assert add(api).json()["code"] == "allowlist_entry_exists"

    clock.now = T0 + DAY - timedelta(seconds=1)
    refused = withdraw(api, user)
    assert refused.status_code == 409 and refused.json()["reason"] == "not_active"
    assert datetime.fromisoformat(refused.json()["at"]) == T0 + DAY
    assert "not active until" in refused.json()["detail"]

    clock.now = T0 + DAY
    assert withdraw(api, user).status_code == 201
    listed = api.call("GET", "/v1/allowlist", "acme").json()
    assert [e["state"] for e in listed["items"]] == ["active"]

    gone = api.call("DELETE", f"/v1/allowlist/{entry['id']}", "acme")
    assert gone.status_code == 200 and gone.json()["state"] == "removed"
    refused = withdraw(api, user)
    assert refused.status_code == 409 and refused.json()["reason"] == "removed"
    assert api.call("GET", "/v1/allowlist", "acme").json()["items"] == []
    assert len(api.call("GET", "/v1/allowlist?removed=true", "acme").json()["items"]) == 1

    with api.engine.connect() as conn:
        audited = conn.execute(sa.text(
            "SELECT actor, action, status FROM api_audit ORDER BY id")).all()
    assert [tuple(a) for a in audited] == [
        ("acme", "allowlist.add", 201), ("acme", "allowlist.add", 201),
        ("acme", "allowlist.add", 409), ("acme", "allowlist.remove", 200)]


def test_adding_needs_an_idempotency_key(api: Api) -> None:
    r = api.call("POST", "/v1/allowlist", "acme",
                 json={"chain": "devnet", "address": DEST, "label": "x"})
    assert r.status_code == 400 and r.json()["code"] == "idempotency_key_missing"
    bad = add(api, address="0x3C44CdDdB6a900fa2b585dd299e03d12FA4293bc")
    assert bad.status_code == 422 and bad.json()["code"] == "address_invalid"
    assert add(api, chain="nochain").json()["code"] == "chain_unknown"


def test_two_admins_shorten_one_address_and_nothing_else_does(api: Api, clock: Clock) -> None:
    user = api.funded_user("acme")
    entry = add(api).json()
    path = f"/v1/admin/allowlist/{entry['id']}/shorten"
    soon = (T0 + timedelta(hours=1)).isoformat()
    vote = {"active_at": soon, "reason": "confirmed by phone"}
    assert api.call("POST", path, "acme", idem="s0", json=vote).status_code == 403
    first = api.call("POST", path, "carol", idem="s1", json=vote)
    assert first.status_code == 201 and first.json()["applied"] is False
    twice = api.call("POST", path, "carol", idem="s2", json=vote)
    assert twice.status_code == 409 and twice.json()["code"] == "shortening_refused"
    clock.now = T0 + timedelta(hours=1)
    assert withdraw(api, user).json()["reason"] == "not_active"
    second = api.call("POST", path, "dave", idem="s3", json=vote)
    assert second.status_code == 201, second.text
    done = second.json()
    assert done["applied"] is True and done["entry"]["state"] == "active"
    assert [v["admin"] for v in done["votes"]] == ["carol", "dave"]
    assert withdraw(api, user).status_code == 201
    with api.engine.connect() as conn:
        actions = conn.execute(sa.text(
            "SELECT actor, status FROM api_audit WHERE action = 'allowlist.shorten' "
            "ORDER BY id")).all()
    # acme's refusal (403, by scope) never reached the route; it is recorded all the same.
    assert [tuple(a) for a in actions] == [("acme", 403), ("carol", 201), ("carol", 409),
                                           ("dave", 201)]


def test_other_clients_never_see_nor_remove_an_entry(api: Api) -> None:
    entry = add(api).json()
    add(api, address=OTHER)
    assert api.call("GET", f"/v1/allowlist/{entry['id']}", "globex").status_code == 404
    r = api.call("DELETE", f"/v1/allowlist/{entry['id']}", "globex")
    assert r.status_code == 404 and r.json()["code"] == "allowlist_entry_not_found"
    assert api.call("GET", "/v1/allowlist", "globex").json()["items"] == []
    assert api.call("GET", "/v1/allowlist?client=acme", "globex").status_code == 403
    # globex adds to its own allowlist only (a body naming a client is refused).
    assert add(api, "globex", client="acme").status_code == 422
    assert add(api, "globex").json()["client"] == "globex"
    # Support reads, admins name the client (and may add and remove for it).
    page = api.call("GET", "/v1/allowlist?client=acme&limit=1", "sam").json()
    assert len(page["items"]) == 1 and page["has_more"] is True
    rest = api.call("GET", f"/v1/allowlist?client=acme&cursor={page['next_cursor']}",
                    "sam").json()
    assert [e["address"] for e in page["items"] + rest["items"]] == [DEST.lower(),
                                                                      OTHER.lower()]
    assert rest["has_more"] is False and rest["next_cursor"] is None
    assert add(api, "carol", address=OTHER).json()["code"] == "request_invalid"
    assert add(api, "carol", client="nobody").json()["code"] == "client_not_found"
    by_admin = add(api, "carol", address="0x" + "ab" * 20, client="acme")
    assert by_admin.status_code == 201 and by_admin.json()["added_by"] == "carol"
    assert api.call("DELETE", f"/v1/allowlist/{entry['id']}", "carol").status_code == 200
    # A user of another client cannot be named.
    other_user = api.new_user("globex")
    assert add(api, address="0x" + "cd" * 20, user_id=other_user).json()["code"] == (
        "user_not_found")
    mine = api.new_user("acme")
    assert add(api, address="0x" + "cd" * 20, user_id=mine).json()["user_id"] == mine


def test_events_tell_the_client_in_the_documented_shape(api: Api) -> None:
    entry = add(api).json()
    api.call("DELETE", f"/v1/allowlist/{entry['id']}", "acme")
    listed = api.call("GET", "/v1/events?type=allowlist.address_added,allowlist.address_removed",
                      "acme").json()["items"]
    assert sorted(e["type"] for e in listed) == ["allowlist.address_added",
                                                 "allowlist.address_removed"]
    for event in listed:
        errors = [e.message for e in webhook_validator(api, event["type"]).iter_errors(event)]
        assert errors == [], errors
        assert event["data"]["entry"]["id"] == str(entry["id"])
    assert api.call("GET", "/v1/events?type=allowlist.address_added", "globex").json()[
        "items"] == []


def test_a_velocity_limit_is_a_problem(api: Api) -> None:
    user = api.funded_user("globex")
    assert withdraw(api, user, "globex").status_code == 201
    assert withdraw(api, user, "globex").status_code == 201
    r = withdraw(api, user, "globex")
    assert r.status_code == 409 and r.json()["code"] == "velocity_limit_exceeded"
    assert "limit of 2" in r.json()["detail"]
