"""The HTTP application: ``create_app`` wires the routes, errors, auth and the lifespan.

- The context (engine, configurations, rate limits, clock) is built here and kept on
  ``app.state.ctx``; routes get it with ``api.routes.deps.context`` and open units of work with
  the ``get_uow`` dependency. Nothing depends on lifespan events having run, so the app also
  works under ``httpx.ASGITransport``.
- ``lifespans`` are async context managers entered in order at startup and left in reverse at
  shutdown: the place for the scheduler and the outbox (part B).
- Every response carries ``X-Request-ID`` (the caller's, when well-formed, else a new one); it
  is in every problem document and every audit row (written by the same middleware:
  ``api.audit``), and it is the correlation id of every log
  line the request writes (``config.logging``). The same middleware counts each request in
  ``api.metrics`` by route template and logs it (``custody.http``: writes and errors at INFO,
  successful reads at DEBUG).
- Routes are plain ``def`` functions: SQLAlchemy is synchronous, so they run in the threadpool.
  The hot reads (balances) are ``async`` routes that make exactly one threadpool call, doing
  authentication, the rate-limit hit and the read on one connection (``api.auth.read_as``).
  ``GET balances`` without a query string is answered even before FastAPI's router, by
  ``api.routes.users.BalancesFastPath`` (same read, same errors, no dependency machinery).
"""

from __future__ import annotations

import itertools
import logging
import re
import time
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from datetime import datetime

from fastapi import Depends, FastAPI
from sqlalchemy.engine import Engine
from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api import audit, contract, docs_pages, metrics, openapi, problems
from api.ratelimit import RateLimits
from api.routes import (
    admin,
    allowlist,
    deposits,
    events,
    reserves,
    system,
    users,
    webhooks,
    withdrawals,
)
from api.routes.deps import ApiContext, utc_now
from api.web import routes as web
from config.chains import ChainsConfig
from config.logging import correlation_id
from config.runtime import keep_startup_out_of_gc
from config.settings import Settings
from config.sweeps import SweepsConfig
from config.withdrawals import WithdrawalsConfig

Lifespan = Callable[[FastAPI], AbstractAsyncContextManager[None]]
_REQUEST_ID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
http_log = logging.getLogger("custody.http")
_FAST_BALANCES = re.compile(r"^/v1/users/[^/]+/balances$")
DESCRIPTION = """Custody engine API. Amounts are strings: minor units, with a decimal rendering
in responses. Errors are `application/problem+json` (RFC 9457) with a stable `code`.
Money-moving requests need an `Idempotency-Key` header. Authenticate with
`Authorization: Bearer <API key>`; scopes: client, support (read-only), admin, approver."""


class RequestIdMiddleware:
    """``X-Request-ID`` on every response: the caller's, when well-formed, else a new one; kept
    in ``request.state.request_id`` for the problem documents and the audit rows, and as the
    correlation id of every log line written while the request runs (``config.logging``: the
    ledger's ``posted`` lines included). As the request ends: its metrics (``api.metrics``, by
    route template) and one ``custody.http`` line (method, route, status, duration; INFO for
    writes and errors, DEBUG for successful reads). And the request's audit row, if it is one
    that is recorded (``api.audit.request_row``), appended before the response starts (a 500
    with no response: as the request leaves): exactly one per request.

    A plain ASGI middleware: Starlette's ``BaseHTTPMiddleware`` (``@app.middleware("http")``)
    runs the rest of the app in a task of its own and streams the response through a memory
    channel, which cost more CPU per request than the hot routes themselves.
    """

    def __init__(self, app: ASGIApp, ctx: ApiContext) -> None:
        self.app = app
        self.ctx = ctx
        # A new id is this process's random prefix and a counter: unique (not secret) and
        # cheaper than a uuid4 per request (a getrandom system call each).
        self._prefix = uuid.uuid4().hex[:16]
        self._counter = itertools.count(1)

    def new_id(self) -> str:
        """A request id never given out before (32 hex digits, as a uuid4's)."""
        return f"{self._prefix}{next(self._counter):016x}"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given = next((v for k, v in scope["headers"] if k == b"x-request-id"), b"").decode(
            "latin-1")
        request_id = given if _REQUEST_ID.match(given) else self.new_id()
        scope.setdefault("state", {})["request_id"] = request_id
        header = (b"x-request-id", request_id.encode())
        started = time.perf_counter()
        status = 500  # what the server answers when the app fails before starting a response
        responded = False

        async def send_with_id(message: Message) -> None:
            nonlocal status, responded
            if message["type"] == "http.response.start":
                status, responded = message["status"], True
                message["headers"] = [*message.get("headers", ()), header]
                row = audit.request_row(scope, status)
                if row is not None:
                    await run_in_threadpool(audit.record, self.ctx.engine, row)
            await send(message)

        token = correlation_id.set(request_id)
        try:
            await self.app(scope, receive, send_with_id)
        except Exception as exc:
            row = None if responded else audit.request_row(
                scope, 500, ("internal_error", type(exc).__name__))
            if row is not None:
                await run_in_threadpool(audit.record, self.ctx.engine, row)
            raise
        finally:
            seconds = time.perf_counter() - started
            route = route_template(scope)
            metrics.observe_request(route, scope["method"], status, seconds)
            # A successful read logs at DEBUG: at 1,000 balance reads/s an INFO line each would
            # cost a few percent of a core, and the metrics count them anyway. Writes and
            # errors log at INFO, with the request id that leads to their ledger lines.
            level = (logging.DEBUG if status < 400 and scope["method"] in ("GET", "HEAD")
                     else logging.INFO)
            if http_log.isEnabledFor(level):
                http_log.log(level, "%s %s %s", scope["method"], route, status, extra={
                    "method": scope["method"], "route": route, "status": status,
                    "duration_ms": round(seconds * 1000, 2)})
            correlation_id.reset(token)


def route_template(scope: Scope) -> str:
    """The template of the route that answered (``/v1/users/{user_id}/balances``), never the
    raw path: the metrics' label values stay bounded whatever paths clients ask for."""
    route = scope.get("route")
    path = getattr(route, "path", None)
    if isinstance(path, str):
        return path
    if _FAST_BALANCES.match(scope["path"]):
        # Answered by users.BalancesFastPath, before the router could set the route.
        return "/v1/users/{user_id}/balances"
    return metrics.UNMATCHED


def create_app(engine: Engine, chains: ChainsConfig, withdrawals_config: WithdrawalsConfig | None,
               *,
               rate_limits: RateLimits | None = None, clock: Callable[[], datetime] = utc_now,
               idempotency_stale_s: int = 300, lifespans: Sequence[Lifespan] = (),
               sweeps_config: SweepsConfig | None = None,
               read_engine: Engine | None = None) -> FastAPI:
    """The API app on ``engine`` (which runs as the application role); ``withdrawals_config``
    None: withdrawal requests are refused (``withdrawals_not_configured``); ``sweeps_config``
    None: sweeps, cold transfers and refills are refused (``sweeps_not_configured``);
    ``read_engine``: a read replica for statements, histories and reports (``ReadUow``)."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            stack.callback(app.state.ctx.close)
            for hook in lifespans:
                await stack.enter_async_context(hook(app))
            yield

    # /docs and /redoc are api.docs_pages': their assets come from the engine, not a CDN.
    app = FastAPI(title="custody", version="0.1.0", description=DESCRIPTION, lifespan=lifespan,
                  docs_url=None, redoc_url=None, generate_unique_id_function=openapi.operation_id,
                  dependencies=[Depends(contract.route_rules)],
                  max_body_size=contract.MAX_BODY_BYTES)
    docs_pages.install(app)
    openapi.install(app, chains, withdrawals_config)
    openapi.install_webhooks(app)
    app.state.ctx = ApiContext(engine=engine, chains=chains, withdrawals=withdrawals_config,
                               rate_limits=rate_limits or RateLimits(), clock=clock,
                               idempotency_stale_s=idempotency_stale_s,
                               sweeps=sweeps_config, read_engine=read_engine)
    problems.install(app)

    # Middleware added last runs first: the request id, the body limit, OPTIONS and Allow,
    # then the hot balances read.
    app.add_middleware(users.BalancesFastPath, ctx=app.state.ctx)
    app.add_middleware(contract.MethodsMiddleware, routes_of=app)
    app.add_middleware(contract.BodyLimit)
    app.add_middleware(RequestIdMiddleware, ctx=app.state.ctx)
    for module in (system, users, deposits, withdrawals, allowlist, reserves, events, admin,
                   webhooks):
        app.include_router(module.router)
    web.install(app)
    return app


def create_app_from_settings(settings: Settings | None = None,
                             config_path: str | None = None) -> FastAPI:
    """The app on the configured database and the configuration file (``CUSTODY_CONFIG``),
    logging as ``config.logging`` says (this is also each ``--workers`` process's start)."""
    from api.configuration import load_sweeps_if_present, load_withdrawals_if_present
    from config.chains import load_chains_config
    from config.database import STARTUP_WAIT_S, get_engine, get_read_engine
    from config.encryption import keyring
    from config.logging import ensure_logging, register_configured_secrets

    ensure_logging()

    # A deployment without its secrets key refuses to start (one line), rather than failing
    # at its first webhook delivery or console sign-in.
    keyring()
    chains = load_chains_config(config_path)
    wcfg = load_withdrawals_if_present(chains, config_path)
    scfg = load_sweeps_if_present(chains, wcfg, config_path)
    register_configured_secrets([chains, wcfg, scfg, settings])
    engine = get_engine(settings, wait_s=STARTUP_WAIT_S)
    reader = get_read_engine(settings)
    app = create_app(engine, chains, wcfg, sweeps_config=scfg,
                     read_engine=None if reader is engine else reader)
    keep_startup_out_of_gc()
    return app

