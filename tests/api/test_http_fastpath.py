"""``GET balances`` is answered before FastAPI's router (``BalancesFastPath``) when it has no
query string; it answers exactly as the route does, which serves everything else."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from sqlalchemy.engine import Engine

from api.app import create_app
from api.routes import users
from api.routes.users import BalancesFastPath
from tests.api.conftest import Api, Server, configs, seed_deposit, serve

NOW = datetime(2026, 11, 30, 1, 2, 3, 456789, tzinfo=UTC)


@pytest.fixture
def fixed(engine: Engine) -> Iterator[Api]:
    """The API with its clock stopped at NOW (so that two answers can be compared whole)."""
    with serve(engine, clock=lambda: NOW) as running:
        yield running


def answer(api: Api, path: str, headers: dict[str, str]) -> tuple[Any, ...]:
    r = api.http.get(path, headers=headers)
    body = r.json()
    if "request_id" in body:  # each request has its own
        assert body.pop("request_id") == r.headers["x-request-id"]
    return (r.status_code, r.headers["content-type"], r.headers.get("www-authenticate"),
            r.headers.get("retry-after"), body)


class PassOn:
    """``BalancesFastPath`` taken out: every request goes on to the route."""

    def __init__(self, app: Any, ctx: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await self.app(scope, receive, send)


@pytest.fixture
def route_only(fixed: Api, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """A second server on the same database and clock, built without the fast path (a query
    string no longer reaches the route unchanged: undeclared parameters are refused)."""
    monkeypatch.setattr(users, "BalancesFastPath", PassOn)
    server = Server(create_app(fixed.engine, *configs(), clock=lambda: NOW))
    try:
        with httpx.Client(base_url=server.url, timeout=30) as http:
            yield http
    finally:
        server.stop()


def test_fast_path_answers_as_the_route(fixed: Api, route_only: Any) -> None:
    api = fixed
    user = api.funded_user()
    seed_deposit(api, user)  # a pending incoming amount too
    other = api.funded_user("globex")
    cases = [(who, api.headers(who)) for who in ("acme", "sam", "carol", "alice", "globex")]
    cases += [("none", {}), ("bad key", {"Authorization": "Bearer cust_nope"}),
              ("basic", {"Authorization": "Basic " + api.keys["acme"]}),
              ("lowercase scheme", {"Authorization": "bearer " + api.keys["acme"]})]
    statuses = set()
    for target in (user, other, "usr_nobody"):
        for who, headers in cases:
            path = f"/v1/users/{target}/balances"
            fast = answer(api, path, headers)
            routed = answer(Api(api.engine, api.app, route_only), path, headers)
            assert fast == routed, (who, target)
            statuses.add(fast[0])
    assert statuses == {200, 401, 403, 404}
    (b,) = api.call("GET", f"/v1/users/{user}/balances", "acme").json()["balances"]
    assert (b["posted"]["minor"], b["pending_incoming"]["minor"], b["as_of"]) == (
        "150000000", "5000000", "2026-11-30T01:02:03.456789Z")


def run_asgi(app: Any, method: str, path: str, query: bytes = b"", root_path: str = "",
             headers: list[tuple[bytes, bytes]] | None = None) -> tuple[int, bytes]:
    """One request through the ASGI callable ``app``: (status, body)."""
    scope = {"type": "http", "method": method, "path": path, "raw_path": path.encode(),
             "query_string": query, "root_path": root_path, "headers": headers or [],
             "http_version": "1.1", "scheme": "http", "client": ("127.0.0.1", 1),
             "server": ("127.0.0.1", 80), "asgi": {"version": "3.0"}}
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    # In a thread of its own: an earlier test of this worker (Playwright's sync API) may have
    # left an event loop running in this one.
    with ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, app(scope, receive, send)).result()
    return sent[0]["status"], b"".join(m.get("body", b"") for m in sent[1:])


def test_fast_path_takes_only_plain_get_balances(api: Api) -> None:
    user = api.funded_user()
    passed_on: list[str] = []

    async def inner(scope: Any, receive: Any, send: Any) -> None:
        passed_on.append(f"{scope['method']} {scope['path']}")
        await send({"type": "http.response.start", "status": 299, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    fast = BalancesFastPath(inner, api.app.state.ctx)
    auth = [(b"authorization", f"Bearer {api.keys['acme']}".encode())]
    status, body = run_asgi(fast, "GET", f"/v1/users/{user}/balances", headers=auth)
    assert status == 200 and f'"user_id":"{user}"'.encode() in body and passed_on == []
    assert run_asgi(fast, "GET", f"/v1/users/{user}/balances")[0] == 401  # answered here too
    assert passed_on == []
    others = [("HEAD", f"/v1/users/{user}/balances", b"", ""),
              ("POST", f"/v1/users/{user}/balances", b"", ""),
              ("GET", f"/v1/users/{user}/balances", b"as_of=2020-01-01", ""),
              ("GET", f"/v1/users/{user}/balances/", b"", ""),
              ("GET", "/v1/users/a b/balances", b"", ""),  # fails the id's pattern: 422 there
              # A newline (%0A, decoded) before the end: Python's ``$`` would take it.
              ("GET", f"/v1/users/{user}\n/balances", b"", ""),
              ("GET", f"/v1/users/{user}/balances\n", b"", ""),
              ("GET", f"/v1/users/{'x' * 101}/balances", b"", ""),
              ("GET", f"/v1/users/{user}/balances", b"", "/prefix"),
              ("GET", f"/v1/users/{user}/deposits", b"", "")]
    for method, path, query, root in others:
        assert run_asgi(fast, method, path, query, root, auth) == (299, b"")
    assert passed_on == [f"{m} {p}" for m, p, _, _ in others]
