"""The HTTP application: ``create_app`` wires the routes, errors, auth and the lifespan.

- The context (engine, configurations, rate limits, clock) is built here and kept on
  ``app.state.ctx``; routes get it with ``api.routes.deps.context`` and open units of work with
  the ``get_uow`` dependency. Nothing depends on lifespan events having run, so the app also
  works under ``httpx.ASGITransport``.
- ``lifespans`` are async context managers entered in order at startup and left in reverse at
  shutdown: the place for the scheduler and the outbox (part B).
- Every response carries ``X-Request-ID`` (the caller's, when well-formed, else a new one); it
  is in every problem document and every audit row.
- Routes are plain ``def`` functions: SQLAlchemy is synchronous, so they run in the threadpool.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from datetime import datetime

from fastapi import FastAPI, Request, Response
from sqlalchemy.engine import Engine

from api import problems
from api.ratelimit import RateLimits
from api.routes import admin, deposits, system, users, withdrawals
from api.routes.deps import ApiContext, utc_now
from config.chains import ChainsConfig
from config.settings import Settings
from config.withdrawals import WithdrawalsConfig

Lifespan = Callable[[FastAPI], AbstractAsyncContextManager[None]]
_REQUEST_ID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
DESCRIPTION = """Custody engine API. Amounts are strings: minor units, with a decimal rendering
in responses. Errors are `application/problem+json` (RFC 9457) with a stable `code`.
Money-moving requests need an `Idempotency-Key` header. Authenticate with
`Authorization: Bearer <API key>`; scopes: client, support (read-only), admin, approver."""


def create_app(engine: Engine, chains: ChainsConfig, withdrawals_config: WithdrawalsConfig, *,
               rate_limits: RateLimits | None = None, clock: Callable[[], datetime] = utc_now,
               idempotency_stale_s: int = 300, lifespans: Sequence[Lifespan] = ()) -> FastAPI:
    """The API app on ``engine`` (which runs as the application role)."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            for hook in lifespans:
                await stack.enter_async_context(hook(app))
            yield

    app = FastAPI(title="custody", version="0.1.0", description=DESCRIPTION, lifespan=lifespan)
    app.state.ctx = ApiContext(engine=engine, chains=chains, withdrawals=withdrawals_config,
                               rate_limits=rate_limits or RateLimits(), clock=clock,
                               idempotency_stale_s=idempotency_stale_s)
    problems.install(app)

    @app.middleware("http")
    async def request_id(request: Request,
                         call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        given = request.headers.get("x-request-id", "")
        request.state.request_id = given if _REQUEST_ID.match(given) else uuid.uuid4().hex
        response = await call_next(request)
        response.headers["X-Request-ID"] = request.state.request_id
        return response

    for module in (system, users, deposits, withdrawals, admin):
        app.include_router(module.router)
    return app


def create_app_from_settings(settings: Settings | None = None,
                             config_path: str | None = None) -> FastAPI:
    """The app on the configured database and the configuration file (``CUSTODY_CONFIG``)."""
    from config.chains import load_chains_config
    from config.database import get_engine
    from config.withdrawals import load_withdrawals_config

    chains = load_chains_config(config_path)
    return create_app(get_engine(settings), chains, load_withdrawals_config(chains, config_path))
