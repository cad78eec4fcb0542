"""Liveness and Prometheus metrics: what is at risk right now (DESIGN.md section 7).

Metrics are computed on each scrape from the current state with bounded reads; part B adds
the outbox and job gauges through ``register_metric``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from datetime import datetime

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, PlainTextResponse

from api import jobs, outbox
from api.auth import StaffReader
from api.routes.deps import AUTHED, ApiContext, Uow, context, problems
from api.routes.views import scale_of
from api.schemas import Health
from config.database import is_reachable
from config.uow import UnitOfWork
from deposits import service as deposits
from ledger.model import format_amount
from withdrawals import service as withdrawals

router = APIRouter(tags=["system"])
#: Bounds of each metric's read, so that a scrape stays cheap whatever the backlog.
UNKNOWN_SCAN_MAX = 1_000
WAITING_SCAN_MAX = 10_000
Sample = tuple[dict[str, str], str]
#: Extra metric families: (name, help, function of (context, unit of work) -> samples).
EXTRA_METRICS: list[tuple[str, str, Callable[[ApiContext, UnitOfWork], list[Sample]]]] = []


def register_metric(name: str, help_text: str,
                    collect: Callable[[ApiContext, UnitOfWork], list[Sample]]) -> None:
    """Add a gauge family to ``/metrics`` (part B: outbox, jobs)."""
    EXTRA_METRICS.append((name, help_text, collect))


@router.get("/healthz", response_model=Health, summary="Liveness and database reachability",
            responses={503: {"model": Health, "description": "Database unreachable"}})
def healthz(request: Request) -> JSONResponse:
    """200 when the database answers, 503 otherwise. No authentication."""
    if not is_reachable(context(request).engine):
        return JSONResponse({"status": "database_unavailable"}, status_code=503)
    return JSONResponse({"status": "ok"})


def _family(name: str, help_text: str, samples: Iterable[Sample]) -> list[str]:
    lines = [f"# HELP {name} {help_text}", f"# TYPE {name} gauge"]
    for labels, value in samples:
        text = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
        lines.append(f"{name}{{{text}}} {value}" if text else f"{name} {value}")
    return lines


def _unknown_withdrawals(ctx: ApiContext, uow: UnitOfWork, now: datetime) -> list[list[Sample]]:
    count: dict[tuple[str, str], int] = defaultdict(int)
    total: dict[tuple[str, str], int] = defaultdict(int)
    oldest: dict[tuple[str, str], float] = defaultdict(float)
    for chain in sorted(ctx.chains.chains):
        for w in withdrawals.unknown_outcomes(uow, chain, limit=UNKNOWN_SCAN_MAX):
            key = (chain, w.asset_code)
            count[key] += 1
            total[key] += w.amount_minor
            since = w.unknown_since or w.state_changed_at
            oldest[key] = max(oldest[key], (now - since).total_seconds())
    keys = sorted(count)
    labels = [{"chain": c, "asset": a} for c, a in keys]
    return [
        [(lab, str(count[k])) for lab, k in zip(labels, keys, strict=True)],
        [(lab, format_amount(total[k], scale_of(ctx.chains, k[1])))
         for lab, k in zip(labels, keys, strict=True)],
        [(lab, f"{oldest[k]:.0f}") for lab, k in zip(labels, keys, strict=True)],
    ]


def _waiting_deposits(ctx: ApiContext, uow: UnitOfWork, now: datetime) -> list[list[Sample]]:
    counts, ages = [], []
    for chain in sorted(ctx.chains.chains):
        rows = deposits.waiting_for_finality(uow, chain, limit=WAITING_SCAN_MAX)
        age = max(((now - d.first_seen_at).total_seconds() for d in rows), default=0.0)
        counts.append(({"chain": chain}, str(len(rows))))
        ages.append(({"chain": chain}, f"{age:.0f}"))
    return [counts, ages]


@router.get("/metrics", response_class=PlainTextResponse, summary="Prometheus metrics",
            responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}}},
                       **problems(*AUTHED)})
def metrics(
    request: Request,
    principal: StaffReader,
    uow: Uow,
) -> PlainTextResponse:
    """Open reconciliation cases; unknown withdrawals (count, amount, oldest age) per chain
    and asset; deposits waiting on finality per chain (capped at ``WAITING_SCAN_MAX``); the
    outbox (pending deliveries, age of the oldest, given up); each job's newest run (age,
    ok); the ledger drift found by the newest reconciliation."""
    ctx = context(request)
    now = ctx.clock()
    cases = deposits.open_cases(uow)
    unknown = _unknown_withdrawals(ctx, uow, now)
    waiting = _waiting_deposits(ctx, uow, now)
    lines = _family("custody_reconciliation_cases_open", "Reconciliation cases not resolved.",
                    [({}, str(len(cases)))])
    lines += _family("custody_withdrawals_unknown", "Withdrawals whose outcome is unknown "
                     "(unknown or awaiting a write-off).", unknown[0])
    lines += _family("custody_withdrawals_unknown_amount", "Their amount, in asset units.",
                     unknown[1])
    lines += _family("custody_withdrawals_unknown_age_seconds", "Age of the oldest one.",
                     unknown[2])
    lines += _family("custody_deposits_waiting_finality", "Deposits included or reorged out, "
                     "not final yet.", waiting[0])
    lines += _family("custody_deposits_waiting_finality_age_seconds", "Age of the oldest one.",
                     waiting[1])
    pending, oldest, failed = outbox.undelivered(uow, now)
    lines += _family("custody_outbox_undelivered", "Webhook deliveries still pending.",
                     [({}, str(pending))])
    lines += _family("custody_outbox_oldest_undelivered_age_seconds", "Age of the oldest event "
                     "with a pending delivery (0: none).", [({}, f"{oldest or 0:.0f}")])
    lines += _family("custody_outbox_failed", "Webhook deliveries that gave up (retries "
                     "exhausted): they need a replay.", [({}, str(failed))])
    runs = jobs.last_runs(uow)
    lines += _family("custody_job_last_run_age_seconds", "Seconds since the newest run of each "
                     "job ended (run log kept a day).",
                     [({"job": r.job}, f"{max(0.0, (now - r.finished_at).total_seconds()):.0f}")
                      for r in runs])
    lines += _family("custody_job_last_run_ok", "1 when the newest run of the job ended well.",
                     [({"job": r.job}, "1" if r.ok else "0") for r in runs])
    drift = jobs.drift_findings(runs)
    lines += _family("custody_ledger_drift_findings", "Findings of the newest reconciliation "
                     "(stored vs replayed balances, trial balance, custody vs liabilities; "
                     "absent until it has run).", [] if drift is None else [({}, str(drift))])
    for name, help_text, collect in EXTRA_METRICS:
        lines += _family(name, help_text, collect(ctx, uow))
    return PlainTextResponse("\n".join(lines) + "\n",
                             media_type="text/plain; version=0.0.4; charset=utf-8")
