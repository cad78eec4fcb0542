"""Sweeps, cold transfers and refill requests: the admin routes of the movements between our
own addresses (``sweeps.service``), mounted under ``/v1/admin`` by ``api.routes.admin``.

Support and admin read; only admin writes. Every write takes an ``Idempotency-Key``
(``api.idempotency``: a replay gets the first answer) and is audited; a proposal and a refill
request also carry the key into the service (``api:<client>:<key>``), so that even a retry that
runs twice (a stale claim taken over) proposes once. Input is validated before anything is
written. Without a ``[sweeps]`` section every write answers 409 ``sweeps_not_configured``; the
reads still show what the database holds.
"""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import JSONResponse

from api import idempotency
from api.auth import AdminScope, Principal, StaffReader
from api.idempotency import IdempotencyKey
from api.routes.deps import AUTHED, MONEY, ApiContext, context, problems
from api.routes.paging import CursorParam, FromParam, ToParam, cursor_id, page, window
from api.schemas import ApprovalCreate, parse_minor
from api.schemas_sweeps import (
    ColdTransfer,
    ColdTransferCreate,
    ColdTransfers,
    ColdTransferTimeline,
    Refill,
    RefillCreate,
    Refills,
    SweepRunCreate,
    Sweeps,
    SweepStep,
    SweepTimeline,
    cold_timeline_view,
    cold_view,
    refill_view,
    step_view,
    sweep_timeline_view,
    sweep_view,
)
from sweeps import runner, service
from sweeps.model import Kind, State

router = APIRouter(tags=["sweeps"])
BigId = Annotated[int, Path(ge=1, le=2**63 - 1)]
ChainFilter = Annotated[str | None, Query(pattern=r"^[a-z][a-z0-9_-]{0,31}$")]
StateFilter = Annotated[State | None, Query(description="Only movements in this state.")]
Limit = Annotated[int, Query(ge=1, le=1000)]


def _actor(principal: Principal) -> service.Actor:
    """An admin-scoped key's client is an admin (the identity of every two-person decision)."""
    return service.Actor(principal.actor, admin=principal.scope == "admin")


def _known(ctx: ApiContext, chain: str | None) -> None:
    """A chain filter names a configured chain (422 ``chain_unknown``), never matches nothing."""
    if chain is not None:
        ctx.chain(chain)


# --- sweeps -----------------------------------------------------------------------------------


@router.get("/sweeps", response_model=Sweeps, responses=problems(*AUTHED),
            summary="Sweeps, newest first")
def list_sweeps(request: Request, principal: StaffReader, chain: ChainFilter = None,
                state: StateFilter = None, limit: Limit = 200, cursor: CursorParam = None,
                since: FromParam = None, until: ToParam = None) -> Sweeps:
    """Sweeps of deposit addresses to the hot wallet. ``needs_signer``: proposed only (an xpub
    address source holds no key): the engine never signs it. ``from`` and ``to`` bound the
    time each was planned."""
    ctx = context(request)
    _known(ctx, chain)
    span = window(since, until)
    found = service.list_movements(ctx.engine, Kind.SWEEP, chain=chain,
                                   states=None if state is None else [state], limit=limit + 1,
                                   before_id=cursor_id(cursor), since=span.since,
                                   until=span.until)
    items, more, after = page(found, limit, lambda m: m.id)
    return Sweeps(items=[sweep_view(ctx.chains, m) for m in items], has_more=more,
                  next_cursor=after)


@router.get("/sweeps/{sweep_id}", response_model=SweepTimeline, responses=problems(*AUTHED),
            summary="A sweep with its timeline")
def get_sweep(request: Request, sweep_id: BigId, principal: StaffReader) -> SweepTimeline:
    """Its history, its signed attempts, and its gas top-ups with theirs."""
    ctx = context(request)
    return sweep_timeline_view(ctx.chains, service.timeline(ctx.engine, Kind.SWEEP, sweep_id))


@router.post("/sweeps/run", response_model=SweepStep, responses=problems(*MONEY),
             summary="Run one sweeper step of a chain now")
def run_sweeper(request: Request, body: SweepRunCreate, principal: AdminScope,
                idempotency_key: IdempotencyKey = None) -> JSONResponse:
    """What the scheduler's ``sweeps.run:<chain>`` job does, once: plan due sweeps, then take
    every top-up, sweep and approved cold transfer one phase further. The chain's
    configuration is checked against its node first, as before any job of the chain. Answers
    with the step's counts and the dust it left; a replay with the same key answers with the
    first step's report and steps nothing."""
    ctx = context(request)
    ctx.chain(body.chain)
    sweeper = ctx.sweeper(body.chain, ctx.clock())

    def work(key: str) -> tuple[int, SweepStep]:
        report = runner.step(ctx.engine, sweeper, now=ctx.clock())
        return 200, step_view(sweeper.chain.name, report)

    return idempotency.run(request, principal, idempotency_key, "sweeps.run", {}, body, work,
                           audited=True)


# --- cold transfers ---------------------------------------------------------------------------


@router.post("/cold-transfers", status_code=201, response_model=ColdTransfer,
             responses=problems(*MONEY), summary="Propose a transfer from the hot wallet to cold")
def propose_cold_transfer(request: Request, body: ColdTransferCreate, principal: AdminScope,
                          idempotency_key: IdempotencyKey = None) -> JSONResponse:
    """``amount`` (an integer string of the asset's minor units) goes from the chain's hot
    wallet to the asset's configured cold address once approved: by one admin, or by two
    different admins above ``cold_dual_approval_above``, never by the proposer. 409
    ``cold_transfer_open`` while another of the chain and asset is in flight."""
    ctx = context(request)
    ctx.chain(body.chain)
    cfg, wcfg = ctx.sweeps_config(), ctx.withdrawals_config()
    plan = service.plan_cold_transfer(ctx.chains, wcfg, cfg, service.ColdProposal(
        body.chain, body.asset, parse_minor(body.amount), body.reason))

    def work(key: str) -> tuple[int, ColdTransfer]:
        done = service.propose_cold_transfer(
            ctx.engine, plan, actor=_actor(principal),
            request_key=f"api:{principal.client_id}:{key}", now=ctx.clock())
        return 201, cold_view(ctx.chains, done.movement, [])

    return idempotency.run(request, principal, idempotency_key, "cold_transfer.propose", {},
                           body, work, audited=True)


@router.post("/cold-transfers/{cold_transfer_id}/approvals", status_code=201,
             response_model=ColdTransfer, responses=problems(*MONEY),
             summary="Approve or reject a proposed cold transfer")
def decide_cold_transfer(request: Request, cold_transfer_id: BigId, body: ApprovalCreate,
                         principal: AdminScope,
                         idempotency_key: IdempotencyKey = None) -> JSONResponse:
    """One decision per admin, never the proposer's (409 ``cold_decision_refused``); a
    rejection needs a reason and ends the transfer. Enough approvals make it ``approved``:
    the sweeper signs and sends it on its next step."""
    ctx = context(request)
    ctx.sweeps_config()

    def work(key: str) -> tuple[int, ColdTransfer]:
        m = service.decide_cold_transfer(ctx.engine, cold_transfer_id, actor=_actor(principal),
                                         decision=body.decision, reason=body.reason,
                                         now=ctx.clock())
        tl = service.timeline(ctx.engine, Kind.COLD_TRANSFER, m.id)
        return 201, cold_view(ctx.chains, m, tl.decisions)

    return idempotency.run(request, principal, idempotency_key, "cold_transfer.decision",
                           {"cold_transfer_id": cold_transfer_id}, body, work, audited=True)


@router.get("/cold-transfers", response_model=ColdTransfers, responses=problems(*AUTHED),
            summary="Cold transfers, newest first")
def list_cold_transfers(request: Request, principal: StaffReader, chain: ChainFilter = None,
                        state: StateFilter = None, limit: Limit = 200,
                        cursor: CursorParam = None, since: FromParam = None,
                        until: ToParam = None) -> ColdTransfers:
    """Proposed, approved, in flight and done, with the admins' decisions; ``from`` and ``to``
    bound the time each was proposed."""
    ctx = context(request)
    _known(ctx, chain)
    span = window(since, until)
    found = service.list_cold_transfers(ctx.engine, chain=chain,
                                        states=None if state is None else [state],
                                        limit=limit + 1, before_id=cursor_id(cursor),
                                        since=span.since, until=span.until)
    items, more, after = page(found, limit, lambda md: md[0].id)
    return ColdTransfers(items=[cold_view(ctx.chains, m, d) for m, d in items], has_more=more,
                         next_cursor=after)


@router.get("/cold-transfers/{cold_transfer_id}", response_model=ColdTransferTimeline,
            responses=problems(*AUTHED), summary="A cold transfer with its timeline")
def get_cold_transfer(request: Request, cold_transfer_id: BigId,
                      principal: StaffReader) -> ColdTransferTimeline:
    """Its decisions, history and signed attempts."""
    ctx = context(request)
    return cold_timeline_view(ctx.chains, service.timeline(ctx.engine, Kind.COLD_TRANSFER,
                                                           cold_transfer_id))


# --- refills ----------------------------------------------------------------------------------


@router.post("/refills", status_code=201, response_model=Refill, responses=problems(*MONEY),
             summary="Request a refill of the hot wallet from cold")
def request_refill(request: Request, body: RefillCreate, principal: AdminScope,
                   idempotency_key: IdempotencyKey = None) -> JSONResponse:
    """Cold addresses are watch-only: the transfer is signed outside the engine. Once final,
    a transfer of exactly ``amount`` from ``source`` to the hot wallet is matched to the
    oldest open request like it and booked as an internal movement (custody unchanged)."""
    ctx = context(request)
    ctx.chain(body.chain)
    cfg, wcfg = ctx.sweeps_config(), ctx.withdrawals_config()
    plan = service.plan_refill(ctx.chains, wcfg, cfg, service.RefillAsk(
        body.chain, body.asset, parse_minor(body.amount), body.source, body.reason))

    def work(key: str) -> tuple[int, Refill]:
        found, _ = service.request_refill(ctx.engine, plan, actor=_actor(principal),
                                          request_key=f"api:{principal.client_id}:{key}",
                                          now=ctx.clock())
        return 201, refill_view(ctx.chains, found)

    return idempotency.run(request, principal, idempotency_key, "refill.request", {}, body,
                           work, audited=True)


@router.get("/refills", response_model=Refills, responses=problems(*AUTHED),
            summary="Refill requests, newest first")
def list_refills(request: Request, principal: StaffReader, chain: ChainFilter = None,
                 state: Annotated[Literal["open", "matched", "canceled"] | None,
                                  Query()] = None,
                 limit: Limit = 200, cursor: CursorParam = None, since: FromParam = None,
                 until: ToParam = None) -> Refills:
    """Open and matched requests (a matched one names the transfer that fulfilled it);
    ``from`` and ``to`` bound the time each was requested."""
    ctx = context(request)
    _known(ctx, chain)
    span = window(since, until)
    found = service.list_refills(ctx.engine, chain=chain, state=state, limit=limit + 1,
                                 before_id=cursor_id(cursor), since=span.since,
                                 until=span.until)
    items, more, after = page(found, limit, lambda r: r.id)
    return Refills(items=[refill_view(ctx.chains, r) for r in items], has_more=more,
                   next_cursor=after)
