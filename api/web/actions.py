"""The console's actions: approve or reject a withdrawal (approver), vote on a write-off
(admin), resolve a case (admin).

Each action is two steps: a confirmation page (GET) that shows what will happen and holds the
form, then the form's POST. The confirmation page puts the session's CSRF token and a fresh
idempotency key in the form, so a form sent twice (a double click, a reload) runs once.

Every POST checks, in this order: the CSRF token (403 ``csrf_refused``), the scope (403
``forbidden``: support is read-only, an admin does not approve, an approver does not vote on
write-offs), then runs exactly what the API route runs (``api.idempotency.run`` with the
route's operation, target, body and work, audited), so the engine's rules (no self-approval,
one vote per person, two different admins) and the audit trail are the API's. A refusal is
the engine's error, shown as the error page; nothing changes.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass, field
from typing import Annotated
from urllib.parse import urlencode

from fastapi import APIRouter, Form, Path, Query, Request
from fastapi.responses import RedirectResponse, Response

from api import idempotency
from api.problems import Forbidden, RequestInvalid
from api.routes.admin import write_off_work
from api.routes.cases import resolve_work
from api.routes.deps import Uow, context
from api.routes.views import scale_of
from api.routes.withdrawals import approval_work
from api.schemas import ApprovalCreate, WriteOffVote
from api.schemas_cases import CaseItem, CaseResolve, case_item
from api.web import templating
from api.web.session import Session, StaffSession, check_csrf
from reconcile import service as cases
from withdrawals import service as withdrawals
from withdrawals.model import State

router = APIRouter(prefix="/console", include_in_schema=False)
BigId = Annotated[int, Path(ge=1, le=2**63 - 1)]
_KEY = re.compile(idempotency.KEY_PATTERN)
_TEXT_MAX = 500
#: A form field's text: bounded here, checked (and refused with a page) by the handlers.
FormText = Annotated[str, Form(max_length=2000)]


@dataclass(frozen=True)
class Field:
    """An input of a confirmation form: a text area, a text box or a choice of values."""

    name: str
    label: str
    kind: str = "textarea"
    required: bool = False
    choices: list[tuple[str, str]] = field(default_factory=list)


def _require(staff: Session, scope: str, what: str) -> None:
    """Refuse (403) a person whose scope is not ``scope``."""
    if not staff.may(scope):
        raise Forbidden(f"only an {scope} may {what}; you signed in with a "
                        f"{staff.principal.scope} key")


def _key(value: str) -> str:
    if not _KEY.fullmatch(value):
        raise RequestInvalid("the form has no valid idempotency key: open the confirmation "
                             "page again")
    return value


def _text(value: str, what: str, *, required: bool) -> str | None:
    text = value.strip()
    if required and not text:
        raise RequestInvalid(f"{what} is needed")
    if len(text) > _TEXT_MAX:
        raise RequestInvalid(f"{what} is longer than {_TEXT_MAX} characters")
    return text or None


def _confirm(request: Request, staff: Session, *, title: str, effect: str,
             facts: list[tuple[str, str]], action: str, button: str, back: str,
             hidden: dict[str, str] | None = None, fields: list[Field] | None = None,
             refusal: str | None = None) -> Response:
    """The confirmation page: what will happen, and the form (none when ``refusal`` says why
    the action cannot be taken now)."""
    return templating.page(
        request, "confirm.html", title=title, effect=effect, facts=facts, action=action,
        button=button, back=back, hidden=hidden or {}, fields=fields or [], refusal=refusal,
        csrf=staff.csrf_token, idempotency_key=secrets.token_hex(16))


def _withdrawal_facts(request: Request, withdrawal_id: int) -> tuple[
        withdrawals.WithdrawalRecord, list[tuple[str, str]]]:
    ctx = context(request)
    t = withdrawals.timeline(ctx.engine, withdrawal_id)  # WithdrawalNotFound: 404 page
    w, scale = t.withdrawal, scale_of(ctx.chains, t.withdrawal.asset_code)
    votes = ", ".join(f"{d.actor}: {d.decision}" for d in t.decisions) or "none yet"
    return w, [
        ("Withdrawal", str(w.id)), ("User", w.user_id), ("Chain", w.chain),
        ("Amount", f"{templating.decimal(w.amount_minor, scale)} {w.asset_code}"),
        ("Fee (at most)", f"{templating.decimal(w.fee_max_minor, scale)} {w.asset_code}"),
        ("To", w.destination), ("Requested by", w.requested_by),
        ("Requested", templating.when(w.requested_at)), ("State", str(w.state)),
        ("Approvals needed", str(w.approvals_required)), ("Votes so far", votes)]


@router.get("/withdrawals/{withdrawal_id}/approve")
def approve_page(request: Request, staff: StaffSession, withdrawal_id: BigId) -> Response:
    """Confirm an approval (approvers only)."""
    return _decision_page(request, staff, withdrawal_id, "approve")


@router.get("/withdrawals/{withdrawal_id}/reject")
def reject_page(request: Request, staff: StaffSession, withdrawal_id: BigId) -> Response:
    """Confirm a rejection, with its reason (approvers only)."""
    return _decision_page(request, staff, withdrawal_id, "reject")


def _decision_page(request: Request, staff: Session, withdrawal_id: int,
                   decision: str) -> Response:
    _require(staff, "approver", "approve or reject a withdrawal")
    w, facts = _withdrawal_facts(request, withdrawal_id)
    approve = decision == "approve"
    effect = ("Your approval is recorded; once enough different approvers agreed, the "
              "withdrawal goes on to be signed and sent." if approve else
              "The withdrawal is rejected: it is not sent and its reserve is released to the "
              "user's available balance.")
    return _confirm(
        request, staff, title=f"{'Approve' if approve else 'Reject'} withdrawal {w.id}",
        effect=effect, facts=facts, action=f"/console/withdrawals/{w.id}/approvals",
        button="Approve" if approve else "Reject", back=f"/console/withdrawals/{w.id}",
        hidden={"decision": decision},
        fields=[Field("reason", "Reason" + ("" if not approve else " (optional)"),
                      required=not approve)],
        refusal=None if w.state is State.PENDING_APPROVAL else
        f"Withdrawal {w.id} is {w.state}, not waiting for approval: there is nothing to "
        f"{decision}.")


@router.post("/withdrawals/{withdrawal_id}/approvals")
def decide(request: Request, staff: StaffSession, withdrawal_id: BigId,
           csrf: FormText = "", idempotency_key: FormText = "", decision: FormText = "",
           reason: FormText = "") -> Response:
    """Approve or reject, as ``POST /v1/withdrawals/{id}/approvals``."""
    check_csrf(staff, {"csrf": csrf})
    _require(staff, "approver", "approve or reject a withdrawal")
    if decision not in ("approve", "reject"):
        raise RequestInvalid("the decision is approve or reject")
    key = _key(idempotency_key)
    body = ApprovalCreate(decision="approve" if decision == "approve" else "reject",
                          reason=_text(reason, "a rejection's reason",
                                       required=decision == "reject"))
    principal = staff.principal
    idempotency.run(request, principal, key, "withdrawal.approval",
                    {"withdrawal_id": withdrawal_id}, body,
                    approval_work(context(request), withdrawal_id, principal, body),
                    audited=True)
    done = "approved" if body.decision == "approve" else "rejected"
    return RedirectResponse(f"/console/withdrawals/{withdrawal_id}?done={done}", status_code=303)


@router.get("/withdrawals/{withdrawal_id}/write-off-vote")
def write_off_page(request: Request, staff: StaffSession, withdrawal_id: BigId) -> Response:
    """Confirm a write-off vote: sent or not sent, and why (admins only)."""
    _require(staff, "admin", "vote on a write-off")
    w, facts = _withdrawal_facts(request, withdrawal_id)
    return _confirm(
        request, staff, title=f"Vote on the write-off of withdrawal {w.id}",
        effect="Your vote is recorded. Once two different admins agree, \"sent\" settles the "
               "withdrawal (the amount and fee leave the user's reserve) and \"not sent\" "
               "releases the reserve to the user's available balance.",
        facts=facts, action=f"/console/withdrawals/{w.id}/write-off-votes", button="Vote",
        back=f"/console/withdrawals/{w.id}",
        fields=[Field("decision", "The payout was", kind="choice", required=True,
                      choices=[("sent", "sent (it reached the chain)"),
                               ("not_sent", "not sent (it can never land)")]),
                Field("reason", "Reason (the evidence you checked)", required=True)],
        refusal=None if w.state is State.AWAITING_WRITE_OFF else
        f"Withdrawal {w.id} is {w.state}, not awaiting a write-off: there is nothing to vote "
        "on.")


@router.post("/withdrawals/{withdrawal_id}/write-off-votes")
def vote(request: Request, staff: StaffSession, withdrawal_id: BigId,
         csrf: FormText = "", idempotency_key: FormText = "", decision: FormText = "",
         reason: FormText = "") -> Response:
    """Vote, as ``POST /v1/admin/withdrawals/{id}/write-off-votes``."""
    check_csrf(staff, {"csrf": csrf})
    _require(staff, "admin", "vote on a write-off")
    if decision not in ("sent", "not_sent"):
        raise RequestInvalid("choose whether the payout was sent or not sent")
    key = _key(idempotency_key)
    text = _text(reason, "the vote's reason", required=True)
    assert text is not None
    body = WriteOffVote(decision="sent" if decision == "sent" else "not_sent", reason=text)
    principal = staff.principal
    idempotency.run(request, principal, key, "withdrawal.write_off_vote",
                    {"withdrawal_id": withdrawal_id}, body,
                    write_off_work(context(request), withdrawal_id, principal, body),
                    audited=True)
    return RedirectResponse(f"/console/withdrawals/{withdrawal_id}?done=voted", status_code=303)


def _transaction_id(value: str) -> int | None:
    text = value.strip()
    if not text:
        return None
    if not re.fullmatch(r"[0-9]{1,19}", text) or not 1 <= int(text) <= 2**63 - 1:
        raise RequestInvalid("the fixing transaction is a ledger transaction id (digits)")
    return int(text)


@router.get("/cases/{case_id}/resolve")
def resolve_page(request: Request, staff: StaffSession, uow: Uow, case_id: BigId,
                 resolution: Annotated[str, Query(max_length=2000)] = "",
                 transaction_id: Annotated[str, Query(max_length=40)] = "") -> Response:
    """Confirm a case's resolution (admins only)."""
    _require(staff, "admin", "resolve a case")
    text = _text(resolution, "a resolution", required=True)
    assert text is not None
    txid = _transaction_id(transaction_id)
    case = cases.get_case(uow, case_id)  # CaseNotFound: 404 page
    item: CaseItem = case_item(case)
    facts = [("Case", str(item.id)), ("Type", item.type), ("Subject", item.subject),
             ("Expected", item.expected or "—"), ("Observed", item.observed or "—"),
             ("Resolution", text), ("Fixing transaction", str(txid) if txid else "none")]
    return _confirm(
        request, staff, title=f"Resolve case {item.id}",
        effect="The case is marked resolved, once, with your name and this resolution"
               + (f", fixed by ledger transaction {txid} (which must reference the case)"
                  if txid else "") + ". Nothing else changes.",
        facts=facts, action=f"/console/cases/{item.id}/resolve", button="Resolve",
        back=f"/console/cases/{item.id}",
        hidden={"resolution": text, "transaction_id": str(txid) if txid else ""},
        refusal=None if case.open else f"Case {item.id} is already resolved.")


@router.post("/cases/{case_id}/resolve")
def resolve(request: Request, staff: StaffSession, case_id: BigId,
            csrf: FormText = "", idempotency_key: FormText = "", resolution: FormText = "",
            transaction_id: FormText = "") -> Response:
    """Resolve, as ``POST /v1/admin/cases/{id}/resolve``."""
    check_csrf(staff, {"csrf": csrf})
    _require(staff, "admin", "resolve a case")
    key = _key(idempotency_key)
    text = _text(resolution, "a resolution", required=True)
    assert text is not None
    body = CaseResolve(resolution=text, transaction_id=_transaction_id(transaction_id))
    principal = staff.principal
    idempotency.run(request, principal, key, "case.resolve", {"case_id": case_id}, body,
                    resolve_work(context(request), case_id, principal, body), audited=True)
    return RedirectResponse(f"/console/cases/{case_id}?{urlencode({'done': 'resolved'})}",
                            status_code=303)
