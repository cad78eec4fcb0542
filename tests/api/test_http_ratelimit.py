"""Rate limits per API key: 429 with Retry-After, counted in PostgreSQL across processes."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
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


def test_the_one_statement_read_path_counts_refused_requests_too(engine: Engine) -> None:
    # Balances authenticate, count and read on one connection (api.auth.read_as): a request
    # refused after authentication (another client's user: 404; bad input: 422) still counts.
    with serve(engine, LIMITS) as api:
        own = api.new_user("acme")  # 1
        other = api.new_user("globex")
        assert api.call("GET", f"/v1/users/{other}/balances", "acme").status_code == 404  # 2
        assert api.call("GET", f"/v1/users/{own}/balances?as_of=x", "acme").status_code == 422
        limited = api.call("GET", f"/v1/users/{own}/balances", "acme")  # 4 > 3
        assert limited.status_code == 429 and 1 <= int(limited.headers["retry-after"]) <= 60
        # A wrong secret for a real prefix is refused before counting: globex is not affected.
        forged = api.keys["globex"][:-4] + "AAAA"
        for _ in range(4):
            r = api.http.get(f"/v1/users/{other}/balances",
                             headers={"Authorization": f"Bearer {forged}"})
            assert r.status_code == 401
        assert api.call("GET", f"/v1/users/{other}/balances", "globex").status_code == 200


def test_revocation_takes_effect_on_the_next_read(engine: Engine) -> None:
    # Keys are not cached: every request looks its key up in the same statement that counts it.
    with serve(engine, LIMITS) as api:
        user = api.new_user("acme")
        assert api.call("GET", f"/v1/users/{user}/balances", "sam").status_code == 200
        with engine.begin() as conn:
            conn.execute(sa.text("UPDATE api_keys SET revoked_at = now() WHERE prefix = :p"),
                         {"p": api.keys["sam"].split("_")[1]})
        r = api.call("GET", f"/v1/users/{user}/balances", "sam")
        assert r.status_code == 401 and r.json()["code"] == "unauthenticated"


def test_the_counter_commit_mode_does_not_leak_into_other_transactions(engine: Engine) -> None:
    # The counter commits with synchronous_commit off for its own statement only; every pooled
    # connection, as the money paths get it, is back to durable commits.
    with serve(engine, LIMITS) as api:
        user = api.new_user("acme")
        assert api.call("GET", f"/v1/users/{user}/balances", "sam").status_code == 200
        assert api.call("GET", "/metrics", "sam").status_code == 200
        conns = [engine.connect() for _ in range(engine.pool.size())]  # type: ignore[attr-defined]
        try:
            modes = {c.execute(sa.text("SHOW synchronous_commit")).scalar() for c in conns}
        finally:
            for c in conns:
                c.close()
        assert modes == {"on"}


def test_counters_of_different_sessions_are_summed(engine: Engine) -> None:
    # Each database session counts in a row of its own (no queue on one row per key); the limit
    # is on their sum. Two connections held at once are two sessions.
    from types import SimpleNamespace

    from fastapi.security import HTTPAuthorizationCredentials

    from api.auth import SCOPES, authorize
    from api.problems import RateLimited
    from api.routes.deps import utc_now

    with serve(engine, LIMITS) as api:
        key = api.headers("acme")["Authorization"].split(" ", 1)[1]
        ctx = SimpleNamespace(rate_limits=LIMITS, clock=utc_now)
        creds = HTTPAuthorizationCredentials(scheme="Bearer", credentials=key)
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as a, \
                engine.connect().execution_options(isolation_level="AUTOCOMMIT") as b:
            for conn in (a, b, a):  # 3 allowed in the window, counted in two rows
                authorize(conn, ctx, creds, frozenset(SCOPES))  # type: ignore[arg-type]
            with pytest.raises(RateLimited):
                authorize(b, ctx, creds, frozenset(SCOPES))  # type: ignore[arg-type]
            slots = a.execute(sa.text(
                "SELECT count(*), sum(requests) FROM api_rate_windows")).one()
        assert tuple(slots) == (2, 4)  # the refused request is counted too
