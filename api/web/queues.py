"""The queues page (what needs a person) and the case page.

The queues: withdrawals waiting for approval, unknown withdrawals by age, reserves open past
the SLA, deposits held for review, held withdrawals and open cases, each row linking to its
page, each table capped at :data:`CAP` rows (and saying so). Every list is read by the service
the API, the CLI or the metrics read it with (``withdrawals.service``, ``deposits.service``,
``reconcile.service``).

The case page shows a case as ``GET /v1/admin/cases/{id}`` does (``api.schemas_cases``), with
the resolve form for admins (``api.web.actions`` confirms and runs it).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Annotated, Any, Generic, TypeVar

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import Response

from api.routes.deps import ApiContext, Uow, context
from api.routes.views import scale_of
from api.schemas_cases import case_item
from api.web import templating
from api.web.labels import state_class
from api.web.session import StaffSession
from config.uow import UnitOfWork
from deposits import service as deposits
from reconcile import service as cases
from withdrawals import service as withdrawals
from withdrawals.model import State

router = APIRouter(prefix="/console", include_in_schema=False)
#: The most rows a queue's table shows.
CAP = 100
T = TypeVar("T")
_DONE = {"resolved": "Case resolved."}


@dataclass(frozen=True)
class Queue(Generic[T]):
    """The rows of one table (at most :data:`CAP`) and whether more were left out."""

    rows: list[T]
    more: bool


def _queue(rows: list[T]) -> Queue[T]:
    return Queue(rows[:CAP], len(rows) > CAP)


@dataclass(frozen=True)
class Unknown:
    """An unknown withdrawal and how long its outcome has been unknown."""

    withdrawal: withdrawals.WithdrawalRecord
    age_s: float


def _in_states(uow: UnitOfWork, ctx: ApiContext,
               states: list[State]) -> Queue[withdrawals.WithdrawalRecord]:
    found = [w for chain in sorted(ctx.chains.chains)
             for w in withdrawals.withdrawals_in_states(uow, chain, states, limit=CAP + 1)]
    return _queue(sorted(found, key=lambda w: w.id))


def _unknown(uow: UnitOfWork, ctx: ApiContext, now: datetime) -> Queue[Unknown]:
    found = [Unknown(w, (now - (w.unknown_since or w.state_changed_at)).total_seconds())
             for chain in sorted(ctx.chains.chains)
             for w in withdrawals.unknown_outcomes(uow, chain, limit=CAP + 1)]
    return _queue(sorted(found, key=lambda u: -u.age_s))


def _overdue(ctx: ApiContext, now: datetime) -> Queue[withdrawals.OpenItem] | None:
    """Reserves open past the SLA; None when withdrawals are not configured here."""
    if ctx.withdrawals is None:
        return None
    items = withdrawals.open_items(ctx.engine, ctx.withdrawals, now=now,
                                   older_than=timedelta(seconds=ctx.withdrawals.open_item_sla_s))
    return _queue([i for i in items if i.overdue])


@router.get("/queues")
def queues_page(request: Request, staff: StaffSession, uow: Uow) -> Response:
    """Everything waiting for a person, oldest (or longest waiting) first."""
    ctx = context(request)
    now = ctx.clock()
    # An approver sees the withdrawal queues only (the API lets it read withdrawals alone).
    readers = staff.reads_users
    held_deposits = [d for chain in sorted(ctx.chains.chains) if readers
                     for d in deposits.held_for_review(uow, chain, limit=CAP + 1)]
    return templating.page(
        request, "queues.html", now=now, cap=CAP,
        sla_s=ctx.withdrawals.open_item_sla_s if ctx.withdrawals else None,
        pending=_in_states(uow, ctx, [State.PENDING_APPROVAL]),
        unknown=_unknown(uow, ctx, now), overdue=_overdue(ctx, now),
        held_deposits=_queue(sorted(held_deposits, key=lambda d: d.id)),
        held=_in_states(uow, ctx, [State.HELD]),
        cases=_queue(cases.list_cases(uow, status="open", limit=CAP + 1) if readers else []),
        readers=readers,
        scale_of=lambda code: scale_of(ctx.chains, code), state_class=state_class)


@router.get("/cases/{case_id}")
def case_page(request: Request, staff: StaffSession, uow: Uow,
              case_id: Annotated[int, Path(ge=1, le=2**63 - 1)],
              done: Annotated[str | None, Query(max_length=20)] = None) -> Response:
    """The case (404 ``case_not_found``), with the resolve form for an admin while it is open
    and resolved here (not by its own procedure); 403 for an approver, as the API."""
    staff.require_reader()
    case = cases.get_case(uow, case_id)
    return templating.page(
        request, "case.html", case=case_item(case), resolvable=case.open and case.origin is None,
        needs_fix=case.needs_fix_transaction,
        evidence=_pretty(case.evidence), links=_links(case.refs), state_class=state_class,
        message=_DONE.get(done or ""), message_kind="ok")


def _pretty(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True, default=str)


def _links(refs: dict[str, str]) -> dict[str, str]:
    """The console pages a case's references lead to (a withdrawal, a deposit's transaction)."""
    found = {}
    if refs.get("withdrawal_id", "").isdigit():
        found["withdrawal_id"] = f"/console/withdrawals/{refs['withdrawal_id']}"
    if refs.get("chain") and refs.get("tx_hash"):
        found["tx_hash"] = f"/console/deposits/{refs['chain']}/{refs['tx_hash']}"
    return found
