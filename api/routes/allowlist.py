"""Destination allowlists: list, add (``Idempotency-Key``, audited) and remove (at once,
audited) a client's allowlisted withdrawal destinations; an admin adds for a client with
``POST /v1/admin/allowlist``, and the two-admin shortening of one address's activation delay
is ``POST /v1/admin/allowlist/{id}/shorten`` (both mounted here too).

A client manages its own allowlist; support reads every client's; an admin manages any
client's (naming it). With allowlisting on for a client (configuration
``[withdrawals.allowlist]``), its users' withdrawals go only to active entries: the reserve
refuses others with 409 ``destination_not_allowed``. Nothing here moves the activation of an
address earlier except two different admins' votes.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query, Request
from fastapi.responses import JSONResponse

from api import audit, auth, idempotency
from api.auth import AdminScope, ClientOrAdmin, ClientScope, Principal, require
from api.idempotency import IdempotencyKey
from api.problems import Forbidden
from api.routes.deps import AUTHED, MONEY, Uow, context, problems
from api.routes.paging import CursorParam, cursor_id, page
from api.schemas import CHAIN_PATTERN, parse_instant
from api.schemas_allowlist import (
    AdminAllowlistEntryCreate,
    AllowlistEntries,
    AllowlistEntry,
    AllowlistEntryCreate,
    AllowlistShortening,
    ShortenVote,
    entry_view,
    shortening_view,
)
from config.uow import UnitOfWork
from withdrawals import service

router = APIRouter(prefix="/v1", tags=["allowlist"])
LIST_LIMIT_MAX = 1000
EntryId = Annotated[int, Path(ge=1, le=2**63 - 1, description="Allowlist entry id.")]
AllowlistReader = Annotated[Principal, Depends(require("client", "support", "admin"))]


def _own(principal: Principal) -> int | None:
    """The client a principal is restricted to (its own, for scope client); None: any."""
    return principal.client_id if principal.scope == "client" else None


@router.get("/allowlist", response_model=AllowlistEntries, responses=problems(*AUTHED),
            summary="Allowlisted withdrawal destinations, by id")
def list_allowlist(
    request: Request,
    principal: AllowlistReader,
    uow: Uow,
    client: Annotated[str | None, Query(min_length=1, max_length=64, description=(
        "Support and admins: only this client's entries. Clients always see their own."))] = None,
    user_id: Annotated[str | None, Query(pattern=auth.USER_ID_PATTERN, description=(
        "Only the entries for this one user (entries for every user are left out)."))] = None,
    chain: Annotated[str | None, Query(pattern=CHAIN_PATTERN,
                                       description="Only this chain's entries.")] = None,
    removed: Annotated[bool, Query(description="Also list removed entries.")] = False,
    limit: Annotated[int, Query(ge=1, le=LIST_LIMIT_MAX,
                                description="Items per page.")] = 100,
    cursor: CursorParam = None,
) -> AllowlistEntries:
    """A client's entries (its own), or every client's (support, admin), with their state at
    the engine's clock; removed ones only with ``removed=true``. A ``chain`` filter names a
    configured chain (422 ``chain_unknown``)."""
    ctx = context(request)
    if chain is not None:
        ctx.chain(chain)
    client_id = _own(principal)
    if client is not None:
        if principal.scope == "client" and client != principal.client_name:
            raise Forbidden("a client reads its own allowlist only")
        client_id = auth.client_named(uow, client)
    found = service.list_entries(uow, client_id=client_id, user_id=user_id, chain=chain,
                                 removed=removed, after_id=cursor_id(cursor) or 0,
                                 limit=limit + 1)
    items, more, after = page(found, limit, lambda e: e.id)
    now = ctx.clock()
    return AllowlistEntries(items=[entry_view(e, now) for e in items], has_more=more,
                            next_cursor=after)


@router.get("/allowlist/{entry_id}", response_model=AllowlistEntry, responses=problems(*AUTHED),
            summary="One allowlisted destination")
def get_allowlist_entry(request: Request, entry_id: EntryId,
                        principal: AllowlistReader) -> AllowlistEntry:
    """The entry (another client's: 404 ``allowlist_entry_not_found``, as a missing one)."""
    ctx = context(request)
    return entry_view(service.get_entry(ctx.engine, entry_id, client_id=_own(principal)),
                      ctx.clock())


def _add(request: Request, principal: Principal, client_id: int, body: AllowlistEntryCreate,
         idempotency_key: str | None) -> JSONResponse:
    """Add ``body``'s destination to ``client_id``'s allowlist (the routes' common part)."""
    ctx = context(request)
    delay_s = ctx.withdrawals_config().allowlist.activation_delay_s
    ctx.chain(body.chain)
    if body.user_id is not None:
        with UnitOfWork(ctx.engine) as uow:
            auth.check_client_user(uow, client_id, body.user_id)

    def work(key: str) -> tuple[int, AllowlistEntry]:
        now = ctx.clock()
        added = service.add_address(ctx.engine, service.NewAddress(
            client_id=client_id, user_id=body.user_id, chain=body.chain, address=body.address,
            label=body.label, request_key=key, added_by=principal.actor), delay_s=delay_s,
            now=now)
        return (200 if added.replayed else 201), entry_view(added.entry, now)

    return idempotency.run(request, principal, idempotency_key, "allowlist.add",
                           {"client_id": client_id}, body, work, audited=True,
                           every_scope=True)


@router.post("/allowlist", status_code=201, response_model=AllowlistEntry,
             responses=problems(*MONEY), summary="Allowlist a withdrawal destination")
def add_allowlist_entry(
    request: Request,
    body: AllowlistEntryCreate,
    principal: ClientScope,
    idempotency_key: IdempotencyKey = None,
) -> JSONResponse:
    """Add a destination for every user of the calling client or for one; it is usable from
    ``active_at`` (the configured activation delay after now, on the engine's clock), and an
    ``allowlist.address_added`` event tells the client at once. A retry with the same key
    answers the first entry; the address listed already: 409 ``allowlist_entry_exists``; a
    ``user_id`` that is not the client's: 404 ``user_not_found``. Audited."""
    return _add(request, principal, principal.client_id, body, idempotency_key)


@router.post("/admin/allowlist", status_code=201, response_model=AllowlistEntry,
             responses=problems(*MONEY), tags=["admin"],
             summary="Allowlist a withdrawal destination for a client")
def admin_add_allowlist_entry(
    request: Request,
    body: AdminAllowlistEntryCreate,
    principal: AdminScope,
    idempotency_key: IdempotencyKey = None,
) -> JSONResponse:
    """``POST /v1/allowlist`` for the client named in ``client`` (404 ``client_not_found``):
    the same activation delay, event and audit."""
    with UnitOfWork(context(request).engine) as uow:
        client_id = auth.client_named(uow, body.client)
    plain = AllowlistEntryCreate(chain=body.chain, address=body.address, label=body.label,
                                 user_id=body.user_id)
    return _add(request, principal, client_id, plain, idempotency_key)


@router.delete("/allowlist/{entry_id}", response_model=AllowlistEntry,
               responses=problems(*AUTHED), summary="Remove an allowlisted destination, at once")
def remove_allowlist_entry(request: Request, entry_id: EntryId,
                           principal: ClientOrAdmin) -> AllowlistEntry:
    """Withdrawals to it are refused from this answer on (a reserve reading it meanwhile
    finishes first); an ``allowlist.address_removed`` event is written. Final: removing it
    again changes nothing and answers it as it is. Audited."""
    ctx = context(request)
    now = ctx.clock()
    # Recorded for a client's key too, refused or not (the row is written as the response
    # starts, with a refusal's reason: api.audit).
    noted = audit.note(request, "allowlist.remove", f"entry_id={entry_id}", every_scope=True)
    entry, removed = service.remove_address(ctx.engine, entry_id, by=principal.actor,
                                            now=now, client_id=_own(principal))
    noted.details.update(address=entry.address, chain=entry.chain, removed=removed)
    return entry_view(entry, now)


@router.post("/admin/allowlist/{entry_id}/shorten", status_code=201,
             response_model=AllowlistShortening, responses=problems(*MONEY),
             summary="Vote to make one allowlisted address usable earlier (two admins)",
             tags=["admin"])
def shorten_allowlist_delay(
    request: Request,
    entry_id: EntryId,
    body: ShortenVote,
    principal: AdminScope,
    idempotency_key: IdempotencyKey = None,
) -> JSONResponse:
    """Record this admin's vote for ``active_at``; the second different admin's vote for the
    same instant applies it (``applied``, and an ``allowlist.activation_shortened`` event).
    The same admin twice, an instant not before the current activation or before the entry
    was added, an entry already active: 409 ``shortening_refused``; removed: 409
    ``allowlist_entry_removed``. Audited."""
    ctx = context(request)
    active_at = parse_instant(body.active_at, what="active_at")
    assert active_at is not None
    actor = service.Actor(principal.actor, frozenset({service.ADMIN}))

    def work(key: str) -> tuple[int, AllowlistShortening]:
        now = ctx.clock()
        voted = service.vote_shorten(ctx.engine, entry_id, actor, active_at=active_at,
                                     reason=body.reason, now=now)
        return 201, shortening_view(voted, now)

    return idempotency.run(request, principal, idempotency_key, "allowlist.shorten",
                           {"entry_id": entry_id}, body, work, audited=True)
