"""The cases routes: every case of the engine (``reconcile.service``), listed and read by
staff, resolved by an admin (audited, with an ``Idempotency-Key``).

Own-address cases are resolved by two admins (``/v1/admin/cases/{id}/proposals`` and
``/approvals``, ``api.routes.treasury``) and held withdrawals by a retry; this route refuses
them (409 ``case_resolved_elsewhere``), and their own procedure resolves the case here too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Literal

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import JSONResponse

from api import idempotency
from api.auth import AdminScope, Principal, StaffReader
from api.idempotency import IdempotencyKey
from api.routes.deps import AUTHED, MONEY, ApiContext, Uow, context, problems
from api.routes.paging import CursorParam, FromParam, ToParam, cursor_id, page, window
from api.schemas_cases import CaseItem, CaseItems, CaseResolve, case_item
from config.uow import run_in_transaction
from reconcile import service

#: Mounted under ``/v1/admin`` by ``api.routes.admin`` (its router includes this one).
router = APIRouter(tags=["admin"])
BigId = Annotated[int, Path(ge=1, le=2**63 - 1)]


@router.get("/cases", response_model=CaseItems, responses=problems(*AUTHED),
            summary="Cases (open ones by default), oldest first")
def list_cases(
    principal: StaffReader,
    uow: Uow,
    type: Annotated[str | None, Query(pattern=r"^[a-z_]{1,64}$")] = None,
    status: Annotated[Literal["open", "resolved", "all"], Query()] = "open",
    limit: Annotated[int, Query(ge=1, le=service.LIST_LIMIT_MAX)] = 100,
    cursor: CursorParam = None,
    since: FromParam = None,
    until: ToParam = None,
) -> CaseItems:
    """Every case of the engine: reconciliation findings, deposit and withdrawal cases; of one
    ``type`` and ``status`` (``all``: both); ``from`` and ``to`` bound the time each was
    first seen. Oldest first: ``next_cursor`` pages on."""
    span = window(since, until)
    found = service.list_cases(uow, type=type, status=None if status == "all" else status,
                               limit=limit + 1, after_id=cursor_id(cursor) or 0,
                               since=span.since, until=span.until)
    items, more, after = page(found, limit, lambda c: c.id)
    return CaseItems(items=[case_item(c) for c in items], has_more=more, next_cursor=after)


@router.get("/cases/{case_id}", response_model=CaseItem, responses=problems(*AUTHED),
            summary="A case")
def get_case(case_id: BigId, principal: StaffReader, uow: Uow) -> CaseItem:
    """The case with its references, evidence and resolution (404 ``case_not_found``)."""
    return case_item(service.get_case(uow, case_id))


@router.post("/cases/{case_id}/resolve", status_code=200, response_model=CaseItem,
             responses=problems(*MONEY), summary="Resolve a case")
def resolve_case(
    request: Request,
    case_id: BigId,
    body: CaseResolve,
    principal: AdminScope,
    idempotency_key: IdempotencyKey = None,
) -> JSONResponse:
    """Once (409 ``case_already_resolved``); a case about a ledger transaction names the new
    transaction that fixed it, which references the case (422 ``case_resolution_invalid``)."""
    return idempotency.run(request, principal, idempotency_key, "case.resolve",
                           {"case_id": case_id}, body,
                           resolve_work(context(request), case_id, principal, body),
                           audited=True)


def resolve_work(ctx: ApiContext, case_id: int, principal: Principal,
                 body: CaseResolve) -> Callable[[str], tuple[int, CaseItem]]:
    """The resolution's work for ``idempotency.run`` (this route's and the console's)."""

    def work(key: str) -> tuple[int, CaseItem]:
        case = run_in_transaction(ctx.engine, lambda uow: service.resolve_case(
            uow, case_id, principal.actor, body.resolution, body.transaction_id,
            now=ctx.clock()))
        return 200, case_item(case)

    return work
