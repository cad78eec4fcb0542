"""Rate limits per API key: 429 with Retry-After, counted in PostgreSQL across processes."""

from __future__ import annotations

from sqlalchemy.engine import Engine

from api.app import create_app
from api.ratelimit import RateLimit, RateLimits
from tests.api.conftest import Server, configs, serve

LIMITS = RateLimits({"client": RateLimit(3, 60), "support": RateLimit(100, 60),
                     "admin": RateLimit(100, 60), "approver": RateLimit(100, 60)})


def test_over_the_limit_is_429_with_retry_after(engine: Engine) -> None:
    with serve(engine, LIMITS) as api:
        user = api.new_user()
        statuses = [api.call("GET", f"/v1/users/{user}/balances", "acme").status_code
                    for _ in range(3)]
        assert statuses == [200, 200, 429]  # new_user was the first request of the window
        limited = api.call("GET", f"/v1/users/{user}/balances", "acme")
        assert limited.status_code == 429 and limited.json()["code"] == "rate_limited"
        assert 1 <= int(limited.headers["retry-after"]) <= 60
        # Per key: another client and another scope are not affected.
        assert api.call("POST", "/v1/users", "globex", json={}).status_code == 201
        assert api.call("GET", f"/v1/users/{user}/balances", "sam").status_code == 200


def test_the_limit_holds_across_processes(engine: Engine) -> None:
    with serve(engine, LIMITS) as api:
        chains, wcfg = configs()
        # A second app instance (its own server, pool and memory) on the same database.
        other = Server(create_app(engine, chains, wcfg, rate_limits=LIMITS))
        try:
            import httpx

            with httpx.Client(base_url=other.url) as second:
                headers = api.headers("acme")
                assert api.http.post("/v1/users", json={}, headers=headers).status_code == 201
                assert second.post("/v1/users", json={}, headers=headers).status_code == 201
                assert api.http.post("/v1/users", json={}, headers=headers).status_code == 201
                assert second.post("/v1/users", json={}, headers=headers).status_code == 429
        finally:
            other.stop()
