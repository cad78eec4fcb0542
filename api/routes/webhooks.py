"""Webhook endpoints through the admin API (``/v1/admin/webhook-endpoints``): create, list,
read, rotate the signing secret, disable. The same operations as ``custody webhooks ...``
(``api.outbox``).

Support and admin read; only admin changes anything. Every POST takes an ``Idempotency-Key``
and is audited. A secret is in the answer of create and rotate only (a retry under the same
key answers the same body, secret included: the caller that lost the first answer still gets
it; that stored answer is sealed under the secrets key like the endpoint's secret); list and
read never show it.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import JSONResponse

from api import idempotency, outbox
from api.auth import AdminScope, StaffReader
from api.idempotency import IdempotencyKey
from api.routes.deps import AUTHED, MONEY, Uow, context, problems
from api.schemas_events import (
    WebhookEndpoint,
    WebhookEndpointCreate,
    WebhookEndpointPage,
    WebhookEndpointSecret,
)
from config.uow import run_in_transaction

router = APIRouter(prefix="/v1/admin/webhook-endpoints", tags=["webhooks"])
EndpointId = Annotated[int, Path(ge=1, le=2**63 - 1)]


def endpoint_view(row: outbox.EndpointRow) -> WebhookEndpoint:
    """An endpoint's response body (no secret)."""
    return WebhookEndpoint(
        id=str(row.id), client=row.client_name, url=row.url, events=row.event_types,
        alerts=row.alerts, state="enabled" if row.disabled_at is None else "disabled",
        created_at=row.created_at, updated_at=row.updated_at, rotated_at=row.rotated_at,
        previous_secret_expires_at=row.previous_secret_expires_at)


def _with_secret(row: outbox.EndpointRow, secret: str) -> WebhookEndpointSecret:
    return WebhookEndpointSecret(**endpoint_view(row).model_dump(), secret=secret)


@router.post("", status_code=201, response_model=WebhookEndpointSecret,
             responses=problems(*MONEY), summary="Create a webhook endpoint (secret shown once)")
def create_endpoint(
    request: Request,
    body: WebhookEndpointCreate,
    principal: AdminScope,
    idempotency_key: IdempotencyKey = None,
) -> JSONResponse:
    """A new endpoint of the API client ``client`` (besides its others), receiving ``events``
    (null: every type; ``alert.*`` also needs ``alerts``). Its events from now on are
    delivered to it, signed with the secret in this answer (docs/webhooks.md); older events
    only through a replay. An unknown client: 404 ``client_not_found``; an unknown event type:
    422."""
    ctx = context(request)

    def work(key: str) -> tuple[int, WebhookEndpointSecret]:
        row, secret = run_in_transaction(ctx.engine, lambda uow: outbox.create_endpoint(
            uow, body.client, body.url, alerts=body.alerts, event_types=body.events))
        return 201, _with_secret(row, secret)

    return idempotency.run(request, principal, idempotency_key, "webhook_endpoint.create", {},
                           body, work, audited=True, sealed=True)


@router.get("", response_model=WebhookEndpointPage, responses=problems(*AUTHED),
            summary="Webhook endpoints, oldest first (cursor pagination)")
def list_endpoints(
    principal: StaffReader,
    uow: Uow,
    client: Annotated[str | None, Query(min_length=1, max_length=200,
                                        description="Only this API client's.")] = None,
    cursor: Annotated[str | None, Query(pattern=r"^[0-9]{1,18}$", description=(
        "`next_cursor` of the previous page."))] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
) -> WebhookEndpointPage:
    """Enabled and disabled endpoints, by id; never their secrets."""
    rows = outbox.list_endpoints(uow, client_name=client,
                                 after_id=int(cursor) if cursor is not None else None,
                                 limit=limit + 1)
    page = rows[:limit]
    more = len(rows) > limit
    return WebhookEndpointPage(items=[endpoint_view(r) for r in page], has_more=more,
                               next_cursor=str(page[-1].id) if more and page else None)


@router.get("/{endpoint_id}", response_model=WebhookEndpoint, responses=problems(*AUTHED),
            summary="A webhook endpoint")
def get_endpoint(endpoint_id: EndpointId, principal: StaffReader, uow: Uow) -> WebhookEndpoint:
    """404 ``webhook_endpoint_not_found`` for an unknown id."""
    return endpoint_view(outbox.get_endpoint(uow, endpoint_id))


@router.post("/{endpoint_id}/rotate", status_code=200, response_model=WebhookEndpointSecret,
             responses=problems(*MONEY),
             summary="Rotate the signing secret (the old one stays valid 24 hours)")
def rotate_endpoint(
    request: Request,
    endpoint_id: EndpointId,
    principal: AdminScope,
    idempotency_key: IdempotencyKey = None,
) -> JSONResponse:
    """A new secret, shown once. For 24 hours (``previous_secret_expires_at``) deliveries carry
    two signatures, ``t=...,v1=<new>,v1=<old>``, so a receiver can switch at its own pace; then
    only the new one. A disabled endpoint: 422 ``webhook_endpoint_invalid``."""
    ctx = context(request)

    def work(key: str) -> tuple[int, WebhookEndpointSecret]:
        row, secret = run_in_transaction(ctx.engine, lambda uow: outbox.rotate_endpoint(
            uow, endpoint_id, ctx.clock()))
        return 200, _with_secret(row, secret)

    return idempotency.run(request, principal, idempotency_key, "webhook_endpoint.rotate",
                           {"endpoint_id": endpoint_id}, None, work, audited=True, sealed=True)


@router.post("/{endpoint_id}/disable", status_code=200, response_model=WebhookEndpoint,
             responses=problems(*MONEY), summary="Disable a webhook endpoint")
def disable_endpoint(
    request: Request,
    endpoint_id: EndpointId,
    principal: AdminScope,
    idempotency_key: IdempotencyKey = None,
) -> JSONResponse:
    """Nothing more is sent to it (pending deliveries stay unsent; the log is kept). The
    events stay readable through ``GET /v1/events``."""
    ctx = context(request)

    def work(key: str) -> tuple[int, WebhookEndpoint]:
        row = run_in_transaction(ctx.engine, lambda uow: outbox.disable_endpoint(
            uow, endpoint_id, ctx.clock()))
        return 200, endpoint_view(row)

    return idempotency.run(request, principal, idempotency_key, "webhook_endpoint.disable",
                           {"endpoint_id": endpoint_id}, None, work, audited=True)

