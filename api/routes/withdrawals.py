"""Withdrawals: request (with reserve), read with the timeline, cancel, approve or reject.

Money-moving requests take an ``Idempotency-Key``; the withdrawal service's own request key is
that same key, so even a retry that runs twice (a stale claim taken over) reserves once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

from fastapi import APIRouter, Path, Request
from fastapi.responses import JSONResponse

from api import auth, idempotency
from api.auth import USER_ID_PATTERN, AnyScope, ApproverScope, ClientOrAdmin, ClientScope, Principal
from api.idempotency import IdempotencyKey
from api.problems import FundsShort, RequestInvalid, plain_decimal
from api.routes.deps import AUTHED, MONEY, ApiContext, context, problems
from api.routes.views import timeline_view, withdrawal_view
from api.schemas import (
    CHAIN_PATTERN,
    TX_HASH_PATTERN,
    ApprovalCreate,
    CancelRequest,
    Withdrawal,
    WithdrawalCreate,
    WithdrawalTimeline,
    parse_minor,
)
from config.uow import UnitOfWork
from config.withdrawals import WithdrawalsConfig
from ledger import chart
from ledger import service as ledger
from ledger.errors import InsufficientFunds
from withdrawals import service
from withdrawals.errors import WithdrawalNotFound
from withdrawals.service import WithdrawalRecord

router = APIRouter(prefix="/v1", tags=["withdrawals"])
WithdrawalId = Annotated[int, Path(ge=1, le=2**63 - 1, description="Withdrawal id.")]


def _visible(ctx: ApiContext, principal: Principal, withdrawal_id: int) -> WithdrawalRecord:
    """The withdrawal, if the principal may see it (another client's: 404 as if absent)."""
    w = service.get_withdrawal(ctx.engine, withdrawal_id)
    with UnitOfWork(ctx.engine) as uow:
        if not auth.visible_users(uow, principal, [w.user_id]):
            raise WithdrawalNotFound(f"no withdrawal {withdrawal_id}")
    return w


@router.post("/users/{user_id}/withdrawals", status_code=201, response_model=Withdrawal,
             responses=problems(*MONEY), summary="Request a withdrawal (reserves the funds)")
def create_withdrawal(
    request: Request,
    user_id: Annotated[str, Path(pattern=USER_ID_PATTERN)],
    body: WithdrawalCreate,
    principal: ClientScope,
    idempotency_key: IdempotencyKey = None,
) -> JSONResponse:
    """Validate, then reserve amount + the most the fee can be, atomically with the balance
    check. Amounts above the configured thresholds wait for approvers. Refused in the same
    transaction, writing nothing: 409 ``daily_limit_exceeded``, ``velocity_limit_exceeded``
    (``[[withdrawals.velocity]]``) and, for a client with allowlisting on,
    ``destination_not_allowed`` (``reason``: ``not_listed``, ``not_active`` until ``at``, or
    ``removed``; see ``/v1/allowlist``)."""
    ctx = context(request)
    # Refused before anything is written (no idempotency record either).
    wcfg = ctx.withdrawals_config()
    ctx.chain(body.chain)
    with UnitOfWork(ctx.engine) as uow:
        auth.check_user(uow, principal, user_id)
    amount_minor = parse_minor(body.amount)

    def work(key: str) -> tuple[int, Withdrawal]:
        req = service.WithdrawalRequest(
            user_id=user_id, chain=body.chain, asset=body.asset, destination=body.to,
            amount_minor=amount_minor, request_key=key, requested_by=principal.actor)
        try:
            done = service.request_withdrawal(ctx.engine, wcfg, ctx, req, now=ctx.clock())
        except InsufficientFunds:
            raise funds_short(ctx, wcfg, user_id, body.chain, body.asset,
                              amount_minor) from None
        return (200 if done.replayed else 201), withdrawal_view(ctx.chains, done.withdrawal)

    return idempotency.run(request, principal, idempotency_key, "withdrawal.create",
                           {"user_id": user_id}, body, work)


def funds_short(ctx: ApiContext, wcfg: WithdrawalsConfig, user_id: str, chain: str, asset: str,
                amount_minor: int) -> FundsShort:
    """The refusal of a withdrawal the wallet cannot cover, in the user's terms: the reserve
    needs the amount plus the most the fee can be, against the wallet's available balance (as
    read now, just after the refusal)."""
    policy = wcfg.policy(chain, asset)
    fee_max = policy.fee_max_minor if policy is not None else 0
    with UnitOfWork(ctx.engine) as uow:
        scale = ledger.get_asset(uow, asset).scale
        found = [b for b in ledger.user_balances(uow, user_id) if b.asset.code == asset]
    available = found[0].available_minor if found else 0
    needed = amount_minor + fee_max
    what = (f"this withdrawal ({plain_decimal(amount_minor, scale)} {asset} plus a fee of up "
            f"to {plain_decimal(fee_max, scale)} {asset})")
    return FundsShort(account=chart.user_wallet(user_id).code, asset=asset, scale=scale,
                      available_minor=min(available, needed), needed_minor=needed, what=what)


@router.get("/withdrawals/{withdrawal_id}", response_model=WithdrawalTimeline,
            responses=problems(*AUTHED), summary="A withdrawal with its timeline")
def get_withdrawal(
    request: Request,
    withdrawal_id: WithdrawalId,
    principal: AnyScope,
) -> WithdrawalTimeline:
    """State changes, broadcast attempts, votes, returns and ledger transactions."""
    ctx = context(request)
    _visible(ctx, principal, withdrawal_id)
    return timeline_view(ctx.chains, service.timeline(ctx.engine, withdrawal_id))


@router.get("/withdrawals/by-tx/{chain}/{tx_hash}", response_model=WithdrawalTimeline,
            responses=problems(*AUTHED),
            summary="The withdrawal that sent a transaction, with its timeline")
def withdrawal_by_tx(
    request: Request,
    chain: Annotated[str, Path(pattern=CHAIN_PATTERN, description="Chain name.")],
    tx_hash: Annotated[str, Path(pattern=TX_HASH_PATTERN, description=(
        "Transaction hash of any signed attempt (a fee bump's too), any case."))],
    principal: AnyScope,
) -> WithdrawalTimeline:
    """Look a withdrawal up by the hash of a transaction it signed or broadcast (the hash a
    user or a block explorer shows): the same answer as ``GET /v1/withdrawals/{id}``.
    422 ``chain_unknown`` for a chain not configured; 404 ``withdrawal_not_found`` when no
    withdrawal of that chain sent it, or it is another client's."""
    ctx = context(request)
    ctx.chain(chain)
    with UnitOfWork(ctx.engine) as uow:
        found = service.withdrawal_of_tx_hash(uow, tx_hash)
    absent = WithdrawalNotFound(f"no withdrawal sent transaction {tx_hash.lower()} on {chain}")
    if found is None:
        raise absent
    try:
        w = _visible(ctx, principal, found)
    except WithdrawalNotFound:
        raise absent from None  # another client's: as if absent, without its id
    if w.chain != chain:
        raise absent
    return timeline_view(ctx.chains, service.timeline(ctx.engine, w.id))


@router.post("/withdrawals/{withdrawal_id}/cancel", response_model=Withdrawal,
             responses=problems(*MONEY), summary="Cancel a withdrawal not signed yet")
def cancel_withdrawal(
    request: Request,
    withdrawal_id: WithdrawalId,
    principal: ClientOrAdmin,
    idempotency_key: IdempotencyKey = None,
    body: CancelRequest | None = None,
) -> JSONResponse:
    """Release the reserve; refused (409) once the withdrawal is signed."""
    ctx = context(request)
    _visible(ctx, principal, withdrawal_id)
    reason = (body.reason if body else None) or f"canceled by {principal.actor}"

    def work(key: str) -> tuple[int, Withdrawal]:
        w = service.cancel(ctx.engine, withdrawal_id, principal.actor, now=ctx.clock(),
                           reason=reason)
        return 200, withdrawal_view(ctx.chains, w)

    return idempotency.run(request, principal, idempotency_key, "withdrawal.cancel",
                           {"withdrawal_id": withdrawal_id}, body, work,
                           audited=principal.scope == "admin")


@router.post("/withdrawals/{withdrawal_id}/approvals", status_code=201,
             response_model=Withdrawal, responses=problems(*MONEY),
             summary="Approve (or reject) a withdrawal waiting for approval")
def decide_withdrawal(
    request: Request,
    withdrawal_id: WithdrawalId,
    body: ApprovalCreate,
    principal: ApproverScope,
    idempotency_key: IdempotencyKey = None,
) -> JSONResponse:
    """One vote per approver, never on one's own request; a rejection needs a reason and
    releases the reserve."""
    if body.decision == "reject" and not body.reason:
        raise RequestInvalid("a rejection needs a reason")
    return idempotency.run(request, principal, idempotency_key, "withdrawal.approval",
                           {"withdrawal_id": withdrawal_id}, body,
                           approval_work(context(request), withdrawal_id, principal, body),
                           audited=True)


def approval_work(ctx: ApiContext, withdrawal_id: int, principal: Principal,
                  body: ApprovalCreate) -> Callable[[str], tuple[int, Withdrawal]]:
    """The approval's work for ``idempotency.run`` (this route's and the console's form)."""
    actor = service.Actor(principal.actor, frozenset({service.APPROVER}))

    def work(key: str) -> tuple[int, Withdrawal]:
        if body.decision == "approve":
            w = service.approve(ctx.engine, withdrawal_id, actor, now=ctx.clock(),
                                reason=body.reason)
        else:
            assert body.reason is not None
            w = service.reject(ctx.engine, withdrawal_id, actor, now=ctx.clock(),
                               reason=body.reason)
        return 201, withdrawal_view(ctx.chains, w)

    return work
