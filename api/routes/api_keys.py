"""The API key routes under ``/v1/admin/api-keys``: list (support and admin), create and revoke
(admin, audited; create takes an ``Idempotency-Key``). Mounted by ``api.routes.admin``.

A key is checked at every request against the database (``api.auth.authorize``): revoking it
here refuses it at once in every API process. Rotation: create the new key, move the client to
it, revoke the old one; both work in between.
"""

from __future__ import annotations

import json
from typing import Annotated

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import JSONResponse

from api import audit, auth, idempotency
from api.auth import AdminScope, StaffReader
from api.idempotency import IdempotencyKey
from api.routes.deps import AUTHED, MONEY, Uow, context, problems
from api.routes.paging import CursorParam, cursor_id, page
from api.schemas_keys import ApiKeyCreate, ApiKeyCreated, ApiKeyItem, ApiKeyItems, key_item

router = APIRouter(tags=["admin"])
LIST_LIMIT_MAX = 1000
KeyId = Annotated[int, Path(ge=1, le=2**63 - 1)]


@router.get("/api-keys", response_model=ApiKeyItems, responses=problems(*AUTHED),
            summary="API keys (never their secrets), by id")
def list_api_keys(
    request: Request,
    principal: StaffReader,
    uow: Uow,
    client: Annotated[str | None, Query(min_length=1, max_length=64)] = None,
    limit: Annotated[int, Query(ge=1, le=LIST_LIMIT_MAX)] = 100,
    cursor: CursorParam = None,
) -> ApiKeyItems:
    """Every key (of ``client`` only, if given): prefix, scope, client, created, last used,
    expiry, revocation and its state at the engine's clock."""
    now = context(request).clock()
    found = auth.list_keys(uow.conn, client, after_id=cursor_id(cursor) or 0, limit=limit + 1)
    items, more, after = page(found, limit, lambda k: k.id)
    return ApiKeyItems(items=[key_item(k, now) for k in items], has_more=more, next_cursor=after)


@router.post("/api-keys", status_code=201, response_model=ApiKeyCreated,
             responses=problems(*MONEY), summary="Create an API key (shown once)")
def create_api_key(
    request: Request,
    body: ApiKeyCreate,
    principal: AdminScope,
    idempotency_key: IdempotencyKey = None,
) -> JSONResponse:
    """The whole key is in ``key`` of this answer only (a replay answers null: the secret is
    not stored anywhere). With ``expires_in``, the key is refused from ``expires_at`` on."""
    ctx = context(request)
    now = ctx.clock()
    expires = now + auth.parse_duration(body.expires_in) if body.expires_in else None
    shown: list[str] = []

    def work(key: str) -> tuple[int, ApiKeyCreated]:
        created = auth.create_key(ctx.engine, body.client, body.scope, expires_at=expires,
                                  now=now)
        shown.append(created.key)
        with ctx.engine.connect() as conn:
            record = auth.get_key(conn, created.id)
        return 201, ApiKeyCreated(**key_item(record, now).model_dump(), key=None)

    # The stored (replayable) answer has key null; this first answer alone carries it.
    response = idempotency.run(request, principal, idempotency_key, "api_key.create",
                               {"client": body.client}, body, work, audited=True)
    if shown and response.status_code == 201:
        payload = json.loads(bytes(response.body))
        payload["key"] = shown[0]
        return JSONResponse(payload, status_code=201)
    return response


@router.post("/api-keys/{key_id}/revoke", status_code=200, response_model=ApiKeyItem,
             responses=problems(*AUTHED), summary="Revoke an API key, at once everywhere")
def revoke_api_key(request: Request, key_id: KeyId, principal: AdminScope) -> ApiKeyItem:
    """Refused from the next request on, by every API process (404 ``api_key_not_found``).
    Revoking a revoked key changes nothing and answers it as it is (the first revocation is
    kept)."""
    ctx = context(request)
    now = ctx.clock()
    noted = audit.note(request, "api_key.revoke", f"key_id={key_id}")
    record, revoked = auth.revoke_key(ctx.engine, str(key_id), by=principal.actor, now=now)
    noted.details.update(prefix=record.prefix, revoked=revoked)
    return key_item(record, now)
