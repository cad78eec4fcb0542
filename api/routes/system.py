"""Liveness, readiness and Prometheus metrics (DESIGN.md section 7, "Operations").

- ``/healthz``: the process is alive and serving. Touches nothing else (no database): a
  liveness probe that failed with the database would restart every API process in an outage
  they cannot fix.
- ``/readyz``: whether this process can do its work: the database answers and is migrated to
  this code's schema (revision and SQL definitions), each configured chain's node answers on
  the configured chain id, and the scheduler runs when this process runs one (``custody api``
  runs none: "not run here"). 200 with each part's status; 503, a problem document listing
  each failing part. The nodes' and the schema's answers are kept a few seconds, so a probe
  storm does not hammer them.
- ``/metrics``: ``api.metrics`` (staff keys).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from api import metrics as m
from api.auth import StaffReader
from api.problems import PROBLEM_JSON
from api.routes.deps import AUTHED, ApiContext, Uow, context, problems
from api.schemas import Health, Problem
from config.database import is_reachable
from config.errors import CustodyError
from config.uow import UnitOfWork

router = APIRouter(tags=["system"])
#: The schema check (a connection of the login role, alembic's head) is made at most this often.
SCHEMA_CACHE_S = 5.0
Sample = tuple[dict[str, str], str]
#: Extra gauge families: (name, help, function of (context, unit of work) -> samples).
EXTRA_METRICS: list[tuple[str, str, Callable[[ApiContext, UnitOfWork], list[Sample]]]] = []


def register_metric(name: str, help_text: str,
                    collect: Callable[[ApiContext, UnitOfWork], list[Sample]]) -> None:
    """Add a gauge family to ``/metrics`` (samples: labels and value as text)."""
    EXTRA_METRICS.append((name, help_text, collect))


@router.get("/healthz", response_model=Health, summary="Liveness: the process is serving")
def healthz() -> JSONResponse:
    """200 while the process serves requests. No authentication, no database."""
    return JSONResponse({"status": "ok"})


class _SchemaCheck:
    """``config.database.check_schema`` of an engine's database, kept ``SCHEMA_CACHE_S``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._at = -SCHEMA_CACHE_S
        self._error: str | None = None

    def error(self, ctx: ApiContext) -> str | None:
        from config.database import check_schema
        from config.settings import get_settings

        with self._lock:
            if time.monotonic() - self._at >= SCHEMA_CACHE_S:
                try:
                    check_schema(ctx.engine.url.render_as_string(hide_password=False),
                                 get_settings().app_role)
                    self._error = None
                except CustodyError as exc:
                    self._error = exc.message
                self._at = time.monotonic()
            return self._error


def _state(request: Request, name: str, make: Callable[[], Any]) -> Any:
    """A per-app object kept on ``app.state`` (created on first use)."""
    found = getattr(request.app.state, name, None)
    if found is None:
        found = make()
        setattr(request.app.state, name, found)
    return found


def probes(request: Request) -> m.NodeProbes:
    """The app's node probes (shared by ``/readyz`` and ``/metrics``)."""
    ctx = context(request)
    return _state(request, "node_probes", lambda: m.NodeProbes(ctx.chains))  # type: ignore[no-any-return]


def _readiness(request: Request) -> dict[str, dict[str, Any]]:
    ctx = context(request)
    checks: dict[str, dict[str, Any]] = {}
    if not is_reachable(ctx.engine):
        checks["database"] = {"status": "failing", "detail": "the database does not answer"}
    else:
        checks["database"] = {"status": "ok"}
        schema: _SchemaCheck = _state(request, "schema_check", _SchemaCheck)
        error = schema.error(ctx)
        checks["migrations"] = ({"status": "ok"} if error is None
                                else {"status": "failing", "detail": error})
    for s in probes(request).statuses():
        part: dict[str, Any] = {"status": "ok" if s.up else "failing",
                                "chain_id": s.chain_id, "head_block": s.head_block}
        if s.error is not None:
            part["detail"] = s.error
        checks[f"chain:{s.chain}"] = part
    scheduler = getattr(request.app.state, "scheduler", None)
    if scheduler is None:
        checks["scheduler"] = {"status": "not run here"}
    else:
        checks["scheduler"] = ({"status": "ok", "jobs": len(scheduler.jobs)} if scheduler.running
                               else {"status": "failing", "detail": "the scheduler is stopped"})
    return checks


class ReadinessPart(BaseModel):
    """One part of the readiness: ``ok``, ``failing`` (with a ``detail``) or ``not run here``;
    a chain's part says what its node answered."""

    status: str
    detail: str | None = None
    chain_id: int | None = None
    head_block: int | None = None
    jobs: int | None = None


class Readiness(BaseModel):
    """Ready: every part's status."""

    status: str
    checks: dict[str, ReadinessPart]


class NotReady(Problem):
    """Not ready: a problem document naming each failing part, with every part's status."""

    failing: list[str]
    checks: dict[str, ReadinessPart]


@router.get("/readyz", summary="Readiness: database, migrations, nodes, scheduler",
            response_model=Readiness, responses={503: {
                "model": NotReady, "description": "A part is failing",
                "content": {PROBLEM_JSON: {"schema": {
                    "$ref": "#/components/schemas/NotReady"}}}}})
def readyz(request: Request) -> JSONResponse:
    """200 with each part's status when all are ready, 503 with a problem document naming each
    failing part otherwise. No authentication."""
    checks = _readiness(request)
    failing = [name for name, part in checks.items() if part["status"] == "failing"]
    if not failing:
        return JSONResponse({"status": "ready", "checks": checks})
    return JSONResponse({
        "type": "urn:custody:problem:not_ready", "title": "Not ready", "status": 503,
        "detail": "not ready: " + "; ".join(
            f"{name}: {checks[name].get('detail', 'failing')}" for name in failing),
        "code": "not_ready", "request_id": getattr(request.state, "request_id", None) or "",
        "failing": failing, "checks": checks}, status_code=503, media_type=PROBLEM_JSON)


@router.get("/metrics", response_class=Response, summary="Prometheus metrics",
            responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}}},
                       **problems(*AUTHED)})
def metrics(request: Request, principal: StaffReader, uow: Uow) -> Response:
    """The state of what is at risk (unknown withdrawals, overdue reserves, deposits waiting on
    finality, the nodes and the watcher's lag, the outbox, the jobs, open cases, drift) and the
    HTTP requests (see ``api.metrics``), in Prometheus' text format."""
    ctx = context(request)
    now = ctx.clock()
    body = m.render(ctx.chains, ctx.withdrawals, uow, now, probes(request))
    for name, help_text, collect in EXTRA_METRICS:
        body += _family_text(name, help_text, collect(ctx, uow))
    return Response(body, media_type=m.CONTENT_TYPE)


def _family_text(name: str, help_text: str, samples: list[Sample]) -> bytes:
    if not samples:
        return b""
    lines = [f"# HELP {name} {help_text}", f"# TYPE {name} gauge"]
    for labels, value in samples:
        text = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
        lines.append(f"{name}{{{text}}} {value}" if text else f"{name} {value}")
    return ("\n".join(lines) + "\n").encode()
