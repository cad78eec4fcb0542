"""HTTP rules the OpenAPI document promises for every route, kept in one place.

- ``BodyLimit``: a request body that announces a length over ``MAX_BODY_BYTES`` is refused
  with 413 (``payload_too_large``) before anything reads it; one streamed in chunks is cut
  off at the same size by FastAPI's own limit (``max_body_size``, set by ``api.app``), whose
  413 ``api.problems`` answers with the same code.
- ``MethodsMiddleware``: ``OPTIONS`` on a path of the API answers 204 with an ``Allow``
  header listing every method the path serves; a 405 carries the same complete ``Allow``
  (Starlette's names only the first route of the path).
- ``route_rules``: an app-wide dependency that refuses query parameters the route does not
  declare (422 ``request_invalid``), as unknown body fields are refused: a misspelt filter
  must not silently list everything; and a missing ``Idempotency-Key`` first, before a
  route could refuse for another reason.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from fastapi import Request
from fastapi.dependencies.models import Dependant
from starlette.types import ASGIApp, Receive, Scope, Send

from api.problems import PROBLEM_JSON, ApiError, IdempotencyKeyMissing, RequestInvalid

#: The largest request body the API reads (the largest legitimate one is a few kilobytes).
MAX_BODY_BYTES = 256 * 1024
_CONSOLE = "/console"
IDEMPOTENCY_HEADER = "Idempotency-Key"
_METHODS = frozenset({"get", "put", "post", "delete", "patch"})


class PayloadTooLarge(ApiError):
    """The request body is larger than the API accepts."""

    code = "payload_too_large"
    status = 413


def _problem_bytes(scope: Scope, status: int, code: str, detail: str) -> bytes:
    request_id = scope.get("state", {}).get("request_id", "")
    return json.dumps({"type": f"urn:custody:problem:{code}",
                       "title": code.replace("_", " ").capitalize(), "status": status,
                       "detail": detail, "code": code, "request_id": request_id}).encode()


def _too_large_detail() -> str:
    return f"the request body is larger than {MAX_BODY_BYTES} bytes"


class BodyLimit:
    """Refuse request bodies over ``limit`` bytes with a 413 problem."""

    def __init__(self, app: ASGIApp, limit: int = MAX_BODY_BYTES) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = next((v for k, v in scope["headers"] if k == b"content-length"), None)
        if length is not None and (not length.isdigit() or int(length) > self.limit):
            if not length.isdigit():
                body = _problem_bytes(scope, 400, "http_error", "Content-Length is not a number")
                status = 400
            else:
                body = _problem_bytes(scope, 413, PayloadTooLarge.code, _too_large_detail())
                status = 413
            await send({"type": "http.response.start", "status": status, "headers": [
                (b"content-type", PROBLEM_JSON.encode()),
                (b"content-length", str(len(body)).encode()), (b"connection", b"close")]})
            await send({"type": "http.response.body", "body": body})
            return
        await self.app(scope, receive, send)


class DocumentedMethods:
    """The methods the OpenAPI document lists for a request path (built once, lazily)."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self._by_depth: dict[int, list[tuple[re.Pattern[str], list[str]]]] | None = None

    def _build(self) -> dict[int, list[tuple[re.Pattern[str], list[str]]]]:
        by_depth: dict[int, list[tuple[re.Pattern[str], list[str]]]] = {}
        paths = self.app.openapi().get("paths", {})
        # A literal segment wins over a parameter: /sweeps/run before /sweeps/{sweep_id}.
        for template in sorted(paths, key=lambda t: t.count("{")):
            pattern = re.sub(r"\\{[^}]+\\}", "[^/]+", re.escape(template))
            methods = sorted(m.upper() for m in paths[template] if m in _METHODS)
            by_depth.setdefault(template.count("/"), []).append(
                (re.compile(f"^{pattern}$"), methods))
        return by_depth

    def __call__(self, path: str) -> list[str] | None:
        """The documented methods of ``path``, upper case and sorted; None: not documented."""
        if self._by_depth is None:
            self._by_depth = self._build()
        for pattern, methods in self._by_depth.get(path.count("/"), ()):
            if pattern.match(path):
                return methods
        return None


class MethodsMiddleware:
    """Methods as documented: ``OPTIONS`` answers 204 with ``Allow``; a method the document
    does not list for a documented path answers 405 with ``Allow`` before any route runs
    (``GET /v1/admin/sweeps/run`` would otherwise reach ``GET /v1/admin/sweeps/{sweep_id}``
    and fail as a malformed id)."""

    def __init__(self, app: ASGIApp, routes_of: Any) -> None:
        self.app = app
        self.methods_of = DocumentedMethods(routes_of)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"].startswith(_CONSOLE):
            await self.app(scope, receive, send)
            return
        methods = self.methods_of(scope["path"])
        if methods is None or scope["method"] in methods:
            await self.app(scope, receive, send)
            return
        allow = ", ".join([*methods, "OPTIONS"]).encode()
        if scope["method"] == "OPTIONS":
            await send({"type": "http.response.start", "status": 204,
                        "headers": [(b"allow", allow), (b"content-length", b"0")]})
            await send({"type": "http.response.body", "body": b""})
            return
        body = _problem_bytes(scope, 405, "method_not_allowed",
                              f"{scope['method']} is not served here; allowed: "
                              f"{allow.decode()}")
        await send({"type": "http.response.start", "status": 405, "headers": [
            (b"allow", allow), (b"content-type", PROBLEM_JSON.encode()),
            (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})


@dataclass(frozen=True)
class _Declared:
    query: frozenset[str]
    idempotent: bool


_DECLARED: dict[int, _Declared] = {}


def _declared(dependant: Dependant) -> _Declared:
    query: set[str] = set()
    headers: set[str] = set()
    todo = [dependant]
    while todo:
        d = todo.pop()
        query.update(p.alias for p in d.query_params)
        headers.update(p.alias.lower() for p in d.header_params)
        todo.extend(d.dependencies)
    return _Declared(frozenset(query), IDEMPOTENCY_HEADER.lower() in headers)


def route_rules(request: Request) -> None:
    """Refuse, before the route runs (documented routes only): query parameters the route
    does not declare (422 ``request_invalid``), and a money-moving request of an
    authenticated caller without ``Idempotency-Key`` (400 ``idempotency_key_missing``),
    whatever the deployment's configuration would have said about it."""
    route = request.scope.get("route")
    if route is None or not getattr(route, "include_in_schema", False):
        return
    declared = _DECLARED.get(id(route))
    if declared is None:
        declared = _DECLARED[id(route)] = _declared(route.dependant)
    if request.query_params:
        unknown = sorted({k for k in request.query_params if k not in declared.query})
        if unknown:
            shown = ", ".join(repr(k) for k in unknown[:5])
            raise RequestInvalid(f"unknown query parameter {shown}; this operation takes "
                                 f"{', '.join(sorted(declared.query)) or 'none'}")
    if (declared.idempotent and IDEMPOTENCY_HEADER not in request.headers
            and "authorization" in request.headers):
        raise IdempotencyKeyMissing(
            f"{request.method} {route.path} moves money: send an {IDEMPOTENCY_HEADER} header")
