"""The API key lifecycle (issue 19): expiry on the engine's clock, listing, revocation seen
by every process at its next request, rotation, last use recorded at most once a minute,
constant-time comparison and the failed-authentication limit per source address."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from api.app import create_app
from api.ratelimit import RateLimit, RateLimits
from tests.api.conftest import Api, configs, serve, serve_app

T0 = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)


class Clock:
    """The engine's clock of a test app: moved by hand, never by sleeping."""

    def __init__(self, now: datetime = T0) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def create(api: Api, body: dict[str, Any], idem: str | None = None) -> httpx.Response:
    return api.call("POST", "/v1/admin/api-keys", "carol", idem=idem or uuid.uuid4().hex,
                    json=body)


def test_admin_creates_lists_and_revokes_a_key(api: Api) -> None:
    r = create(api, {"client": "newco", "scope": "client"}, idem="k1")
    assert r.status_code == 201, r.text
    made = r.json()
    key = made["key"]
    assert key.startswith(f"cust_{made['prefix']}_") and made["state"] == "active"
    assert made["client"] == "newco" and made["expires_at"] is None
    assert api.http.post("/v1/users", headers=bearer(key), json={}).status_code == 201

    # A replay answers the same key without its secret: it is stored nowhere.
    again = create(api, {"client": "newco", "scope": "client"}, idem="k1")
    assert again.status_code == 201 and again.headers["idempotent-replayed"] == "true"
    assert again.json()["key"] is None and again.json()["id"] == made["id"]
    with api.engine.connect() as conn:
        stored = conn.execute(sa.text("SELECT response_body FROM api_idempotency")).scalars()
        assert all(key.split("_", 2)[2] not in body for body in stored)

    listed = api.call("GET", "/v1/admin/api-keys?client=newco", "sam")
    assert listed.status_code == 200
    assert [k["prefix"] for k in listed.json()["items"]] == [made["prefix"]]
    assert key.split("_", 2)[2] not in listed.text and "sha256" not in listed.text
    assert listed.json()["items"][0]["last_used_at"] is not None  # used above

    r = api.call("POST", f"/v1/admin/api-keys/{made['id']}/revoke", "carol")
    assert r.status_code == 200 and r.json()["state"] == "revoked"
    assert r.json()["revoked_by"] == "carol"
    refused = api.http.post("/v1/users", headers=bearer(key), json={})
    assert refused.status_code == 401 and refused.json()["code"] == "unauthenticated"
    assert "revoked" in refused.json()["detail"]
    # Revoking again keeps the first revocation; an unknown id is 404.
    assert api.call("POST", f"/v1/admin/api-keys/{made['id']}/revoke",
                    "dave").json()["revoked_by"] == "carol"
    missing = api.call("POST", "/v1/admin/api-keys/999999/revoke", "carol")
    assert missing.status_code == 404 and missing.json()["code"] == "api_key_not_found"

    with api.engine.connect() as conn:
        audited = conn.execute(sa.text(
            "SELECT actor, action, status FROM api_audit ORDER BY id")).all()
    assert [tuple(a) for a in audited] == [
        ("carol", "api_key.create", 201), ("carol", "api_key.create", 201),
        ("carol", "api_key.revoke", 200), ("dave", "api_key.revoke", 200),
        ("carol", "api_key.revoke", 404)]


def test_bad_create_requests_are_refused(api: Api) -> None:
    for body in ({"client": "newco", "scope": "client", "expires_in": "0d"},
                 {"client": "newco", "scope": "client", "expires_in": "1y"},
                 {"client": "newco", "scope": "client", "expires_at": "2030-01-01T00:00:00Z"},
                 {"client": "new co", "scope": "client"},
                 {"client": "newco", "scope": "root"}):
        r = create(api, body)
        assert r.status_code == 422 and r.json()["code"] == "request_invalid", (body, r.text)
    no_idem = api.call("POST", "/v1/admin/api-keys", "carol",
                       json={"client": "newco", "scope": "client"})
    assert no_idem.status_code == 400 and no_idem.json()["code"] == "idempotency_key_missing"
    with api.engine.connect() as conn:
        assert conn.execute(sa.text(
            "SELECT count(*) FROM api_keys k JOIN api_clients c ON c.id = k.client_id "
            "WHERE c.name = 'newco'")).scalar_one() == 0


def test_a_key_expires_on_the_engines_clock(engine: Engine) -> None:
    clock = Clock()
    with serve(engine, clock=clock) as api:
        made = create(api, {"client": "newco", "scope": "support", "expires_in": "1h"}).json()
        assert made["expires_at"] == "2026-12-03T13:00:00Z"
        assert api.http.get("/metrics", headers=bearer(made["key"])).status_code == 200
        clock.now = T0 + timedelta(minutes=59)
        assert api.http.get("/metrics", headers=bearer(made["key"])).status_code == 200
        clock.now = T0 + timedelta(hours=1)
        r = api.http.get("/metrics", headers=bearer(made["key"]))
        assert r.status_code == 401 and "expired" in r.json()["detail"]
        listed = api.call("GET", "/v1/admin/api-keys?client=newco", "carol").json()["items"]
        assert [k["state"] for k in listed] == ["expired"]


def test_a_revoked_key_is_refused_by_another_api_process_at_once(engine: Engine) -> None:
    chains, wcfg = configs()
    with serve(engine) as first, \
            serve_app(engine, create_app(engine, chains, wcfg)) as second:
        key = create(first, {"client": "newco", "scope": "support"}).json()
        for app in (first, second):
            assert app.http.get("/metrics", headers=bearer(key["key"])).status_code == 200
        assert first.call("POST", f"/v1/admin/api-keys/{key['id']}/revoke",
                          "carol").status_code == 200
        r = second.http.get("/metrics", headers=bearer(key["key"]))
        assert r.status_code == 401 and "revoked" in r.json()["detail"]


def test_rotation_new_key_works_alongside_the_old_then_the_old_is_revoked(api: Api) -> None:
    user = api.new_user("acme")
    old = api.keys["acme"]
    new = create(api, {"client": "acme", "scope": "client"}).json()
    for key in (old, new["key"]):  # both work in between, for the same client's users
        r = api.http.get(f"/v1/users/{user}/balances", headers=bearer(key))
        assert r.status_code == 200, r.text
    old_id = next(k["id"] for k in api.call("GET", "/v1/admin/api-keys?client=acme",
                                            "carol").json()["items"]
                  if k["prefix"] == old.split("_")[1])
    assert api.call("POST", f"/v1/admin/api-keys/{old_id}/revoke", "carol").status_code == 200
    assert api.http.get(f"/v1/users/{user}/balances", headers=bearer(old)).status_code == 401
    assert api.http.get(f"/v1/users/{user}/balances",
                        headers=bearer(new["key"])).status_code == 200


def test_last_use_is_written_at_most_once_a_minute(engine: Engine) -> None:
    clock = Clock()
    with serve(engine, clock=clock) as api:
        user = api.new_user("acme")
        prefix = api.keys["acme"].split("_")[1]

        def last_used() -> datetime:
            with engine.connect() as conn:
                found: datetime = conn.execute(sa.text(
                    "SELECT last_used_at FROM api_keys WHERE prefix = :p"),
                    {"p": prefix}).scalar_one()
            return found

        assert last_used() == T0
        clock.now = T0 + timedelta(seconds=59)
        for _ in range(3):  # the hot read (BalancesFastPath): no key write within the minute
            assert api.call("GET", f"/v1/users/{user}/balances", "acme").status_code == 200
        assert last_used() == T0
        clock.now = T0 + timedelta(seconds=61)
        assert api.call("GET", f"/v1/users/{user}/balances", "acme").status_code == 200
        assert last_used() == T0 + timedelta(seconds=61)


def test_digests_are_compared_in_constant_time_known_prefix_or_not(
        api: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    import hmac

    calls: list[tuple[str, str]] = []
    real = hmac.compare_digest

    def counting(a: str, b: str) -> bool:
        calls.append((a, b))
        return real(a, b)

    monkeypatch.setattr(hmac, "compare_digest", counting)  # api.auth calls hmac.compare_digest
    good = api.keys["sam"]
    wrong_secret = good[:-4] + ("AAAA" if not good.endswith("AAAA") else "BBBB")
    unknown_prefix = "cust_" + "0" * 12 + "_" + good.split("_", 2)[2]
    assert api.http.get("/metrics", headers=bearer(good)).status_code == 200
    assert api.http.get("/metrics", headers=bearer(wrong_secret)).status_code == 401
    assert api.http.get("/metrics", headers=bearer(unknown_prefix)).status_code == 401
    # One comparison each, of two 64-character digests: the unknown prefix is compared too.
    assert len(calls) == 3 and all(len(a) == len(b) == 64 for a, b in calls)
    bodies = [api.http.get("/metrics", headers=bearer(k)).json()["detail"]
              for k in (wrong_secret, unknown_prefix)]
    assert bodies == ["unknown API key", "unknown API key"]  # the same answer


def test_failed_authentications_are_limited_per_source_address(engine: Engine) -> None:
    limits = RateLimits(auth_failures=RateLimit(5, 60))
    with serve(engine, rate_limits=limits) as api:
        good = api.keys["sam"]
        bad = good[:-4] + ("AAAA" if not good.endswith("AAAA") else "BBBB")
        user = api.new_user("acme")
        statuses = [api.http.get("/metrics", headers=bearer(bad)).status_code
                    for _ in range(6)]
        assert statuses == [401] * 5 + [429]
        refused = api.http.get("/metrics", headers=bearer(good))  # this address is blocked
        assert refused.status_code == 429 and refused.json()["code"] == "rate_limited"
        assert 1 <= int(refused.headers["retry-after"]) <= 60
        # The hot read (BalancesFastPath) too; blocked requests are not counted again.
        hot = api.call("GET", f"/v1/users/{user}/balances", "acme")
        assert hot.status_code == 429 and "failed authentications" in hot.json()["detail"]
        # Another address is not blocked: its good key works, its bad one is its own count.
        other = httpx.Client(base_url=str(api.http.base_url), timeout=30,
                             transport=httpx.HTTPTransport(local_address="127.0.0.2"))
        with other:
            assert other.get("/metrics", headers=bearer(good)).status_code == 200
            assert other.get("/metrics", headers=bearer(bad)).status_code == 401
        with engine.connect() as conn:
            counts = {str(r[0]): int(r[1]) for r in conn.execute(sa.text(
                "SELECT source, sum(failures) FROM api_auth_failures GROUP BY source"))}
        assert counts == {"127.0.0.1": 5, "127.0.0.2": 1}


def test_the_database_keeps_a_revocation_and_a_keys_identity(api: Api) -> None:
    prefix = api.keys["sam"].split("_")[1]
    with api.engine.begin() as conn:  # the application role
        conn.execute(sa.text("UPDATE api_keys SET revoked_at = now(), revoked_by = 'carol' "
                             "WHERE prefix = :p"), {"p": prefix})
    for change in ("revoked_at = NULL", "revoked_by = 'mallory'", "scope = 'admin'",
                   "secret_sha256 = repeat('0', 64)"):
        with pytest.raises(sa.exc.DBAPIError, match="revocation is final"), \
                api.engine.begin() as conn:
            conn.execute(sa.text(f"UPDATE api_keys SET {change} WHERE prefix = :p"),
                         {"p": prefix})
    with pytest.raises(sa.exc.DBAPIError), api.engine.begin() as conn:
        conn.execute(sa.text("DELETE FROM api_keys WHERE prefix = :p"), {"p": prefix})
    assert api.call("GET", "/metrics", "sam").status_code == 401


def test_the_key_list_pages_as_every_list(api: Api) -> None:
    every = api.call("GET", "/v1/admin/api-keys", "sam").json()
    assert (every["has_more"], every["next_cursor"]) == (False, None)
    assert len(every["items"]) >= 3  # one key per principal of the test app
    seen: list[str] = []
    cursor: str | None = None
    while True:
        query = "?limit=2" + (f"&cursor={cursor}" if cursor else "")
        page = api.call("GET", f"/v1/admin/api-keys{query}", "sam").json()
        seen += [k["id"] for k in page["items"]]
        assert page["has_more"] is (page["next_cursor"] is not None)
        if not page["has_more"]:
            break
        cursor = page["next_cursor"]
    assert seen == [k["id"] for k in every["items"]]
