"""Admin actions: reversals, period close, write-off votes, returned payouts; the cases
routes (``api.routes.cases``: every case of the engine, resolved by an admin), the treasury
routes (``api.routes.treasury``: fundings, own-address case votes, the treasury
report) and the holdings report (``api.routes.holdings``) are mounted under the same prefix.

Every action is audited (``api_audit``, read at ``GET /v1/admin/audit``: ``api.routes.audit``)
and money-moving ones take an ``Idempotency-Key``.
Support may read (ledger transactions, open cases); only admin changes anything.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

from fastapi import APIRouter, Depends, Path, Request
from fastapi.responses import JSONResponse

from api import idempotency, own_addresses
from api.auth import AdminScope, Principal, StaffReader, require
from api.idempotency import IdempotencyKey
from api.routes import cases, holdings, treasury
from api.routes.deps import AUTHED, MONEY, ApiContext, Uow, context, problems
from api.routes.views import withdrawal_view
from api.schemas import (
    LedgerTransaction,
    Period,
    PeriodClose,
    PeriodProposal,
    ReturnLink,
    Reversal,
    ReversalCreate,
    Withdrawal,
    WriteOffVote,
    ledger_transaction,
    parse_instant,
    parse_minor,
)
from config.uow import run_in_transaction
from ledger import service as ledger
from withdrawals import service as withdrawals

router = APIRouter(prefix="/v1/admin", tags=["admin"])
BigId = Annotated[int, Path(ge=1, le=2**63 - 1)]
#: The second person of a period close: another admin, or an approver.
AdminOrApprover = Annotated[Principal, Depends(require("admin", "approver"))]


@router.get("/ledger/transactions/{transaction_id}", response_model=LedgerTransaction,
            responses=problems(*AUTHED), summary="A ledger transaction with its postings")
def get_transaction(
    transaction_id: BigId,
    principal: StaffReader,
    uow: Uow,
) -> LedgerTransaction:
    """The transaction as stored (postings signed, debit positive)."""
    return ledger_transaction(ledger.get_transaction(uow, transaction_id))


@router.post("/ledger/transactions/{transaction_id}/reversals", status_code=201,
             response_model=Reversal, responses=problems(*MONEY),
             summary="Reverse a ledger transaction in full")
def reverse(
    request: Request,
    transaction_id: BigId,
    body: ReversalCreate,
    principal: AdminScope,
    idempotency_key: IdempotencyKey = None,
) -> JSONResponse:
    """A new transaction mirroring the original (sides flipped, its effective time), with
    the reason and the admin as source; never more than the original."""
    ctx = context(request)

    def work(key: str) -> tuple[int, Reversal]:
        posted = run_in_transaction(ctx.engine, lambda uow: ledger.reverse(
            uow, transaction_id, idempotency_key=f"api:{principal.client_id}:reversal:{key}",
            reason=body.reason, source=f"api:{principal.actor}",
            out_of_period=body.out_of_period))
        return 201, Reversal(transaction_id=posted.transaction_id,
                             reverses_transaction_id=transaction_id, replayed=posted.replayed)

    return idempotency.run(request, principal, idempotency_key, "ledger.reversal",
                           {"transaction_id": transaction_id}, body, work, audited=True)


@router.post("/periods", status_code=202, response_model=PeriodProposal,
             responses=problems(*MONEY), summary="Propose closing the ledger through a time")
def propose_period_close(
    request: Request,
    body: PeriodClose,
    principal: AdminScope,
    idempotency_key: IdempotencyKey = None,
) -> JSONResponse:
    """Closing a period takes two people: this records the proposal (refused at once if it
    could never be approved: not after the last close, or in the future). Another admin or an
    approver approves it with ``POST /v1/admin/periods/proposals/{proposal_id}/approvals``;
    from then on, entries effective before ``ends_at`` are only accepted as out-of-period
    adjustments, and figures as known at the close never change."""
    ctx = context(request)
    ends_at = parse_instant(body.ends_at, what="ends_at")
    assert ends_at is not None

    def work(key: str) -> tuple[int, PeriodProposal]:
        p = run_in_transaction(ctx.engine, lambda uow: ledger.propose_period_close(
            uow, ends_at, proposed_by=principal.actor, reason=body.reason))
        return 202, PeriodProposal(id=p.id, ends_at=p.ends_at, reason=p.reason,
                                   proposed_by=p.proposed_by, proposed_at=p.proposed_at,
                                   state="awaiting_approval", period_id=None)

    return idempotency.run(request, principal, idempotency_key, "ledger.period_close", {},
                           body, work, audited=True)


@router.post("/periods/proposals/{proposal_id}/approvals", status_code=201,
             response_model=Period, responses=problems(*MONEY),
             summary="Approve a proposed period close: the period closes")
def approve_period_close(
    request: Request,
    proposal_id: Annotated[int, Path(ge=1, le=2**31 - 1)],
    principal: AdminOrApprover,
    idempotency_key: IdempotencyKey = None,
) -> JSONResponse:
    """By someone else than the proposer (409 ``second_approver_required``, also when it was
    approved already); refused (409) if another close has overtaken it meanwhile."""
    ctx = context(request)

    def work(key: str) -> tuple[int, Period]:
        p = run_in_transaction(ctx.engine, lambda uow: ledger.approve_period_close(
            uow, proposal_id, approved_by=principal.actor))
        return 201, Period(id=p.id, ends_at=p.ends_at, closed_at=p.closed_at,
                           closed_by=p.closed_by, reason=p.reason)

    return idempotency.run(request, principal, idempotency_key, "ledger.period_close_approval",
                           {"proposal_id": proposal_id}, None, work, audited=True)


@router.post("/withdrawals/{withdrawal_id}/write-off-votes", status_code=201,
             response_model=Withdrawal, responses=problems(*MONEY),
             summary="Vote on an undetermined withdrawal (two admins decide)")
def vote_write_off(
    request: Request,
    withdrawal_id: BigId,
    body: WriteOffVote,
    principal: AdminScope,
    idempotency_key: IdempotencyKey = None,
) -> JSONResponse:
    """``sent`` settles, ``not_sent`` releases, once two different admins agree."""
    return idempotency.run(request, principal, idempotency_key, "withdrawal.write_off_vote",
                           {"withdrawal_id": withdrawal_id}, body,
                           write_off_work(context(request), withdrawal_id, principal, body),
                           audited=True)


def write_off_work(ctx: ApiContext, withdrawal_id: int, principal: Principal,
                   body: WriteOffVote) -> Callable[[str], tuple[int, Withdrawal]]:
    """The write-off vote's work for ``idempotency.run`` (this route's and the console's)."""
    actor = withdrawals.Actor(principal.actor, frozenset({withdrawals.ADMIN}))

    def work(key: str) -> tuple[int, Withdrawal]:
        w = withdrawals.vote_write_off(ctx.engine, withdrawal_id, actor, body.decision,
                                       reason=body.reason, now=ctx.clock())
        return 201, withdrawal_view(ctx.chains, w)

    return work


@router.post("/withdrawals/{withdrawal_id}/returns", status_code=201,
             response_model=Withdrawal, responses=problems(*MONEY),
             summary="Link a returned payout to its withdrawal")
def link_return(
    request: Request,
    withdrawal_id: BigId,
    body: ReturnLink,
    principal: AdminScope,
    idempotency_key: IdempotencyKey = None,
) -> JSONResponse:
    """The incoming transfer (a final deposit) is credited to the user with what came back;
    a transfer to a hot or cold address that opened an ``unattributed_own_address`` case
    resolves that case as a return."""
    ctx = context(request)
    ctx.chain(body.chain)
    amount_minor = parse_minor(body.amount)

    def work(key: str) -> tuple[int, Withdrawal]:
        w = own_addresses.link_return(
            ctx.engine, withdrawal_id, chain=body.chain, tx_hash=body.tx_hash.lower(),
            position=body.position, amount_minor=amount_minor, actor=principal.actor,
            reason=body.reason, now=ctx.clock())
        return 201, withdrawal_view(ctx.chains, w)

    return idempotency.run(request, principal, idempotency_key, "withdrawal.return_link",
                           {"withdrawal_id": withdrawal_id}, body, work, audited=True)


# The cases, treasury and holdings routes share this router's prefix, tags and app
# registration.
router.include_router(cases.router)
router.include_router(treasury.router)
router.include_router(holdings.router)

# The API key routes (``api.routes.api_keys``): list, create, revoke.
from api.routes import api_keys as api_key_routes  # noqa: E402

router.include_router(api_key_routes.router)

# The sweep, cold-transfer and refill routes (``api.routes.sweeps``) too.
from api.routes import sweeps as sweep_routes  # noqa: E402

router.include_router(sweep_routes.router)

# The audit trail (``api.routes.audit``): admin reads it.
from api.routes import audit as audit_routes  # noqa: E402

router.include_router(audit_routes.router)
