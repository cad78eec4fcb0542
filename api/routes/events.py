"""The events API: the events webhooks deliver, listed and read back (``GET /v1/events``).

An integrator that missed deliveries catches up here without asking an operator to replay
them (Stripe's events API). An event here is exactly the JSON its webhook delivery carries
(``api.outbox.event_document``). A client sees its own events only (those about its users);
support and admin see every event, alerts included.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query
from pydantic import StringConstraints

from api import outbox
from api.auth import STAFF, Principal, ReaderScope
from api.problems import RequestInvalid
from api.routes.deps import AUTHED, Uow, problems
from api.schemas import parse_instant
from api.schemas_events import EVENT_TYPES, Event, EventPage

router = APIRouter(prefix="/v1/events", tags=["events"])
EVENT_ID_PATTERN = r"^evt_[a-z0-9_]{1,120}$"
_TIME = {"format": "date-time"}
_ONE_TYPE = "(" + "|".join(t.replace(".", r"\.") for t in EVENT_TYPES) + ")"
#: One value of the ``type`` filter: a known event type, or several separated by commas.
TypeList = Annotated[str, StringConstraints(pattern=f"^{_ONE_TYPE}(,{_ONE_TYPE})*$",
                                            max_length=2000)]


def event_types(values: list[str] | None) -> list[str]:
    """The ``type`` filter: repeated and/or comma-separated event types, each a known one
    (422 ``request_invalid`` otherwise); empty: every type."""
    types = sorted({t.strip() for v in values or () for t in v.split(",")})
    unknown = [t for t in types if t not in EVENT_TYPES]
    if unknown:
        raise RequestInvalid(f"unknown event type {', '.join(unknown)[:200]}; known: "
                             + ", ".join(EVENT_TYPES))
    return types


def _event(e: outbox.StoredEvent) -> Event:
    return Event.model_validate(outbox.event_document(e.event_id, e.type, e.created_at,
                                                      e.payload, e.version))


def _client_filter(principal: Principal) -> int | None:
    return None if principal.scope in STAFF else principal.client_id


@router.get("", response_model=EventPage, responses=problems(*AUTHED),
            summary="Events, newest first (cursor pagination; the webhooks' events)")
def list_events(
    principal: ReaderScope,
    uow: Uow,
    type_: Annotated[list[TypeList] | None, Query(
        alias="type", max_length=50,
        description="Only these event types: repeat the parameter or separate them by commas "
                    "(`type=deposit.credited,withdrawal.settled`). Unknown types: 422.")] = None,
    from_: Annotated[str | None, Query(
        alias="from", max_length=64, json_schema_extra=_TIME,
        description="Events created at or after this time (inclusive; ISO 8601, naive: UTC).",
        examples=["2026-12-01T00:00:00Z"])] = None,
    to: Annotated[str | None, Query(
        max_length=64, json_schema_extra=_TIME,
        description="Events created before this time (exclusive; ISO 8601, naive: UTC).",
        examples=["2026-12-02T00:00:00Z"])] = None,
    cursor: Annotated[str | None, Query(pattern=r"^[0-9]{1,18}$", description=(
        "`next_cursor` of the previous page."))] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
) -> EventPage:
    """Newest first. A client gets the events of its own users (what its webhook endpoints
    are sent); support and admin get every event, alerts included. Each item is the JSON of
    the webhook delivery (``data`` per type: the OpenAPI ``webhooks`` section). Keyset
    pagination: ``next_cursor`` is null on the last page; events written after the first page
    was read appear on a new first page, never in the middle of a walk. ``from`` is
    inclusive, ``to`` exclusive (``to`` before ``from``: an empty page)."""
    types = event_types(type_)
    since = parse_instant(from_, what="from")
    until = parse_instant(to, what="to")
    before = int(cursor) if cursor is not None else None
    rows = outbox.list_events(uow, client_id=_client_filter(principal), types=types,
                            since=since, until=until, before_id=before, limit=limit + 1)
    page = rows[:limit]
    more = len(rows) > limit
    return EventPage(items=[_event(e) for e in page], has_more=more,
                     next_cursor=str(page[-1].id) if more and page else None)


@router.get("/{event_id}", response_model=Event, responses=problems(*AUTHED),
            summary="One event (the body its webhook delivery carries)")
def get_event(
    event_id: Annotated[str, Path(pattern=EVENT_ID_PATTERN, max_length=124)],
    principal: ReaderScope,
    uow: Uow,
) -> Event:
    """404 ``event_not_found`` for an unknown event and for another client's."""
    return _event(outbox.get_event(uow, event_id, client_id=_client_filter(principal)))
