"""Treasury admin routes: declared fundings, two-admin decisions on unattributed transfers to
our own addresses, and the treasury report.

Declaring a funding and voting on a case take an ``Idempotency-Key`` (``api.idempotency``)
and are audited; support may read the fundings and the report.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import JSONResponse

from api import idempotency, own_addresses
from api.auth import AdminScope, StaffReader
from api.idempotency import IdempotencyKey
from api.problems import RequestInvalid
from api.routes.deps import AUTHED, MONEY, Uow, context, problems
from api.routes.paging import CursorParam, FromParam, ToParam, cursor_id, page, window
from api.schemas import (
    Amount,
    CaseDecision,
    CaseProposalCreate,
    Funding,
    FundingCreate,
    Fundings,
    Treasury,
    TreasuryAsset,
    amount,
)
from config.chains import ChainsConfig
from config.uow import run_in_transaction
from deposits import own
from deposits.errors import FundingInvalid
from deposits.treasury import AssetHoldings, treasury_report

#: Mounted under ``/v1/admin`` by ``api.routes.admin`` (its router includes this one).
router = APIRouter(tags=["admin"])
BigId = Annotated[int, Path(ge=1, le=2**63 - 1)]
ChainFilter = Annotated[str | None, Query(pattern=r"^[a-z][a-z0-9_-]{0,31}$")]


class FundingRequestInvalid(RequestInvalid):
    """A funding with an unknown chain or asset, a bad amount or address (422)."""

    code = "funding_invalid"


def funding_view(chains: ChainsConfig, f: own.FundingRecord) -> Funding:
    """A funding's response body."""
    return Funding(id=f.id, chain=f.chain, asset=f.asset_code,
                   amount=amount(f.amount_minor, chains.assets[f.asset_code].scale),
                   from_address=f.from_address, reason=f.reason, declared_by=f.declared_by,
                   declared_at=f.declared_at,
                   state="matched" if f.deposit_id is not None else "expected",
                   deposit_id=f.deposit_id, ledger_transaction_id=f.ledger_transaction_id,
                   matched_at=f.matched_at)


def decision_view(d: own.CaseOutcome) -> CaseDecision:
    """A case decision's response body."""
    return CaseDecision(case_id=d.case_id, state="resolved" if d.state == "resolved"
                        else "proposed", outcome=d.outcome, proposed_by=d.proposed_by,
                        reason=d.reason, approved_by=d.approved_by,
                        withdrawal_id=d.withdrawal_id,
                        ledger_transaction_id=d.ledger_transaction_id)


@router.post("/treasury/fundings", status_code=201, response_model=Funding,
             responses=problems(*MONEY), summary="Declare company capital expected on chain")
def declare_funding(
    request: Request,
    body: FundingCreate,
    principal: AdminScope,
    idempotency_key: IdempotencyKey = None,
) -> JSONResponse:
    """Once a final transfer of exactly ``amount`` of ``asset`` from ``from_address`` reaches
    one of our hot or cold addresses on ``chain``, it is booked ``DR treasury:{chain} /
    CR equity:owner`` (oldest unmatched funding first, each matched once). ``amount`` is an
    integer string of the asset's minor units, as every amount of this API."""
    ctx = context(request)
    ctx.chain(body.chain)
    req = own.FundingRequest(body.chain, body.asset, body.amount, body.from_address,
                             body.reason)
    try:
        own.validate_funding(ctx.chains, req)
    except FundingInvalid as exc:
        raise FundingRequestInvalid(exc.message) from None

    def work(key: str) -> tuple[int, Funding]:
        found, _ = run_in_transaction(ctx.engine, lambda uow: own.declare_funding(
            uow, ctx.chains, req, declared_by=principal.actor,
            idempotency_key=f"api:{principal.client_id}:{key}"))
        return 201, funding_view(ctx.chains, found)

    return idempotency.run(request, principal, idempotency_key, "treasury.funding", {}, body,
                           work, audited=True)


@router.get("/treasury/fundings", response_model=Fundings, responses=problems(*AUTHED),
            summary="Declared fundings, newest first")
def list_fundings(
    request: Request,
    principal: StaffReader,
    uow: Uow,
    chain: ChainFilter = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 200,
    cursor: CursorParam = None,
    since: FromParam = None,
    until: ToParam = None,
) -> Fundings:
    """Matched and expected fundings; ``from`` and ``to`` bound the time each was declared."""
    ctx = context(request)
    span = window(since, until)
    if chain is not None:
        ctx.chain(chain)
    rows = own.list_fundings(uow, chain=chain, limit=limit + 1, before_id=cursor_id(cursor),
                             since=span.since, until=span.until)
    items, more, after = page(rows, limit, lambda f: f.id)
    return Fundings(items=[funding_view(ctx.chains, f) for f in items], has_more=more,
                    next_cursor=after)


def holdings_view(h: AssetHoldings) -> TreasuryAsset:
    """One row of the treasury report."""
    s = h.scale

    def maybe(minor: int | None) -> Amount | None:
        return None if minor is None else amount(minor, s)

    return TreasuryAsset(
        chain=h.chain, asset=h.asset, native=h.native, block_number=h.block_number,
        treasury=amount(h.treasury_minor, s), gas_float=maybe(h.gas_float_minor),
        hot_onchain=maybe(h.hot_onchain_minor), hot_custody=maybe(h.hot_custody_minor),
        hot_treasury=maybe(h.hot_treasury_minor), onchain=maybe(h.onchain_minor),
        custody=amount(h.custody_minor, s), custody_plus_treasury=amount(h.ledger_minor, s),
        difference=maybe(h.difference_minor), addresses=h.addresses, exact=h.exact,
        unavailable=h.unavailable)


@router.get("/treasury", response_model=Treasury, responses=problems(*AUTHED),
            summary="Treasury, gas float and on-chain holdings at the finalized block")
def show_treasury(
    request: Request,
    principal: StaffReader,
    chain: ChainFilter = None,
) -> Treasury:
    """Per chain and asset: the ledger's treasury (the gas float for the native asset), the
    hot wallets' balance at the node's finalized block split into customer money (custody)
    and company money (treasury), and the holdings of all our addresses next to
    ``custody + treasury`` with the difference. Reads the node: no database transaction is
    open meanwhile. A chain whose node cannot be read keeps its ledger figures; its on-chain
    ones are null and ``unavailable`` says why."""
    ctx = context(request)
    names = [ctx.chain(chain).name] if chain else None
    rows = treasury_report(ctx.engine, ctx.chains, names)
    return Treasury(items=[holdings_view(h) for h in rows])


@router.post("/cases/{case_id}/proposals", status_code=201, response_model=CaseDecision,
             responses=problems(*MONEY), summary="Propose how to resolve an own-address case")
def propose_case(
    request: Request,
    case_id: BigId,
    body: CaseProposalCreate,
    principal: AdminScope,
    idempotency_key: IdempotencyKey = None,
) -> JSONResponse:
    """``capital`` (company money: suspense to treasury), ``return`` (to the settled
    ``withdrawal_id``) or ``refund`` (back to the transfer's sender as a withdrawal of the
    company); another admin approves."""
    ctx = context(request)

    def work(key: str) -> tuple[int, CaseDecision]:
        d = run_in_transaction(ctx.engine, lambda uow: own.propose_resolution(
            uow, case_id, outcome=body.outcome, by=principal.actor, reason=body.reason,
            withdrawal_id=body.withdrawal_id))
        return 201, decision_view(d)

    return idempotency.run(request, principal, idempotency_key, "case.proposal",
                           {"case_id": case_id}, body, work, audited=True)


@router.post("/cases/{case_id}/approvals", status_code=201, response_model=CaseDecision,
             responses=problems(*MONEY), summary="Approve a case's proposed resolution")
def approve_case(
    request: Request,
    case_id: BigId,
    principal: AdminScope,
    idempotency_key: IdempotencyKey = None,
) -> JSONResponse:
    """By another admin than the proposer (409 ``second_admin_required``); the resolution is
    carried out: the capital ledger transaction, the return linked to its withdrawal, or the
    refund: its withdrawal is checked first (409 ``refund_refused`` changes nothing), then
    ``DR suspense / CR user:company:refunds:wallet`` is posted and the withdrawal of the
    received amount minus the policy's ``fee_max`` to the sender is requested (its id is
    ``withdrawal_id``; the processor pays it like any withdrawal). Approving a refund again,
    with another key, completes a request that a crash interrupted and never pays twice."""
    ctx = context(request)

    def payouts() -> own_addresses.Payouts:
        return own_addresses.Payouts(ctx.chains, ctx.withdrawals_config())

    def work(key: str) -> tuple[int, CaseDecision]:
        d = own_addresses.approve_case(ctx.engine, case_id, by=principal.actor, now=ctx.clock(),
                                       payouts=payouts)
        return 201, decision_view(d)

    return idempotency.run(request, principal, idempotency_key, "case.approval",
                           {"case_id": case_id}, None, work, audited=True)
