"""The proof-of-reserves routes: the newest report and any stored one (every authenticated
scope: a report is published), and a user's inclusion proof (a client for its own users,
support and admin for anyone; another client's user answers 404).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query

from api import auth
from api.auth import USER_ID_PATTERN, AnyScope, ReaderScope
from api.routes.deps import AUTHED, ReadUow, problems
from api.schemas_reserves import InclusionProof, ReserveReport
from reserves import service

router = APIRouter(prefix="/v1/reserves", tags=["reserves"])
ReportId = Annotated[int, Path(ge=1, le=2**63 - 1, description="Report id.")]


@router.get("", response_model=ReserveReport, responses=problems(*AUTHED),
            summary="The newest proof-of-reserves report")
def latest_report(principal: AnyScope, uow: ReadUow) -> ReserveReport:
    """The newest report: per asset liabilities, custody, treasury, on-chain holdings, the
    difference and the ratio; the liabilities root; every address with its signature
    (404 ``report_not_found`` before the first report)."""
    return ReserveReport.model_validate(service.report_document(uow))


@router.get("/proofs/{user_id}", response_model=InclusionProof, responses=problems(*AUTHED),
            summary="A user's inclusion proof in a report")
def user_proof(
    user_id: Annotated[str, Path(pattern=USER_ID_PATTERN, description="User id.")],
    principal: ReaderScope,
    uow: ReadUow,
    report_id: Annotated[int | None, Query(ge=1, le=2**63 - 1, description=(
        "Report id (default: the newest)."))] = None,
) -> InclusionProof:
    """The user's leaf inputs (salt, balances), the path and the root of the report's
    liabilities tree (404 ``user_not_found``, ``report_not_found``, or ``proof_not_found``
    when the user had no ledger balance when the report was taken)."""
    auth.check_user(uow, principal, user_id)
    return InclusionProof.model_validate(service.user_proof(uow, user_id, report_id))


@router.get("/{report_id}", response_model=ReserveReport, responses=problems(*AUTHED),
            summary="A stored proof-of-reserves report")
def get_report(report_id: ReportId, principal: AnyScope, uow: ReadUow) -> ReserveReport:
    """Report ``report_id`` as published (404 ``report_not_found``)."""
    return ReserveReport.model_validate(service.report_document(uow, report_id))
