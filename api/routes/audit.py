"""The audit trail under ``/v1/admin/audit`` (admin only): every staff action and refusal,
newest first, by actor, time, action and outcome (``api.audit`` says what is recorded).
Mounted by ``api.routes.admin``."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query

from api import audit
from api.auth import AdminScope
from api.routes.deps import AUTHED, Uow, problems
from api.routes.paging import CursorParam, cursor_id, page
from api.schemas import INSTANT_PATTERN, INSTANT_RANGE, parse_instant
from api.schemas_audit import AuditEntries, audit_entry

router = APIRouter(tags=["admin"])
LIST_LIMIT_MAX = 1000
#: A filter's text: no control characters (PostgreSQL text holds no NUL).
_TEXT = r"^[^\x00-\x1f\x7f]+$"


@router.get("/audit", response_model=AuditEntries, responses=problems(*AUTHED),
            summary="The audit trail, newest first")
def list_audit(
    principal: AdminScope,
    uow: Uow,
    actor: Annotated[str | None, Query(min_length=1, max_length=200, pattern=_TEXT, description=(
        "Only this actor's rows (an API client's name, or ``cli:<OS user>``)."))] = None,
    since: Annotated[str | None, Query(
        max_length=64, json_schema_extra={"format": "date-time", "pattern": INSTANT_PATTERN},
        description="Only rows written at or after this time (ISO 8601; naive: UTC). "
                    + INSTANT_RANGE)] = None,
    action: Annotated[str | None, Query(min_length=1, max_length=200, pattern=_TEXT, description=(
        "Only this action (``withdrawal.approval``, ``api_key.revoke``, ...)."))] = None,
    outcome: Annotated[Literal["ok", "refused", "failed"] | None, Query(description=(
        "Only rows that ended so: ok (below 400), refused (4xx), failed (5xx)."))] = None,
    limit: Annotated[int, Query(ge=1, le=LIST_LIMIT_MAX,
                                description="Rows per page.")] = 100,
    cursor: CursorParam = None,
) -> AuditEntries:
    """Who did what to what, when, in which request, through which channel (api, console,
    cli), the status it got and, for a refusal, why (the problem's code and detail). Rows are
    append-only; reading them is not itself recorded."""
    found = audit.list_audit(uow.conn, actor=actor, since=parse_instant(since, what="since"),
                             action=action, outcome=outcome, before_id=cursor_id(cursor),
                             limit=limit + 1)
    items, more, after = page(found, limit, lambda r: r.id)
    return AuditEntries(items=[audit_entry(r) for r in items], has_more=more,
                        next_cursor=after)
