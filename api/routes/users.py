"""Users and what belongs to them: deposit addresses, balances, deposits.

A client acts for its own users only; another client's user answers 404. Support and admin
read any user (their ids may come from outside the API, as the ledger knows them).
"""

from __future__ import annotations

import asyncio
import functools
import re
from collections.abc import Callable
from datetime import datetime
from itertools import takewhile
from typing import Annotated

from fastapi import APIRouter, Path, Query, Request, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from api import auth
from api import problems as api_problems
from api.auth import USER_ID_PATTERN, ClientScope, Credentials, Principal, ReaderScope
from api.routes.deps import AUTHED, ApiContext, ReadUow, Uow, context, problems
from api.routes.paging import CursorParam, FromParam, ToParam, cursor_id, page, window
from api.routes.views import deposit_view, withdrawal_view
from api.schemas import (
    AddressCreate,
    Balances,
    DepositAddress,
    DepositAddresses,
    DepositPage,
    StatementBalance,
    StatementLine,
    StatementPage,
    User,
    UserCreate,
    WithdrawalPage,
    amount,
    balances_json,
    parse_instant,
)
from config.uow import UnitOfWork
from deposits import service as deposits
from ledger import service as ledger
from withdrawals import service as withdrawals
from withdrawals.model import State as WithdrawalState

router = APIRouter(prefix="/v1/users", tags=["users"])
UserId = Annotated[str, Path(pattern=USER_ID_PATTERN, description="User id.")]
#: The scopes that read a user's data (``ReaderScope``).
READERS = frozenset({"client", "support", "admin"})


@router.post("", status_code=201, response_model=User, responses={
    200: {"model": User, "description": "The client's existing user with that reference"},
    **problems(*AUTHED)}, summary="Create a user of the calling client")
def create_user(
    request: Request,
    response: Response,
    principal: ClientScope,
    uow: Uow,
    body: UserCreate | None = None,
) -> User:
    """A new user owned by the calling client; the same ``reference`` returns the same user
    (200 instead of 201)."""
    record, created = auth.create_user(uow, principal.client_id,
                                       body.reference if body else None)
    uow.commit()
    if not created:
        response.status_code = 200
    return User(id=record.id, reference=record.reference, created_at=record.created_at)


@router.post("/{user_id}/deposit-addresses", status_code=201, response_model=DepositAddress,
             responses={200: {"model": DepositAddress,
                              "description": "The user's existing address on the chain"},
                        **problems(*AUTHED)},
             summary="Get (or assign) a deposit address")
def assign_address(
    request: Request,
    response: Response,
    user_id: UserId,
    body: AddressCreate,
    principal: ClientScope,
    uow: Uow,
) -> DepositAddress:
    """The user's deposit address on ``chain``: the existing one (200) or a new one (201)."""
    ctx = context(request)
    auth.check_user(uow, principal, user_id)
    chain = ctx.chain(body.chain)
    if deposits.address_of_user(uow, chain.family, user_id) is not None:
        response.status_code = 200
    address = deposits.assign_address(uow, chain.family, user_id,
                                      ctx.address_source(chain.family))
    uow.commit()
    return DepositAddress(chain=chain.name, family=chain.family, address=address)


@router.get("/{user_id}/deposit-addresses", response_model=DepositAddresses,
            responses=problems(*AUTHED), summary="List a user's deposit addresses")
def list_addresses(
    request: Request,
    user_id: UserId,
    principal: ReaderScope,
    uow: Uow,
) -> DepositAddresses:
    """One entry per configured chain whose family has an address for the user."""
    ctx = context(request)
    auth.check_user(uow, principal, user_id)
    by_family = {f: deposits.address_of_user(uow, f, user_id)
                 for f in sorted({c.family for c in ctx.chains.chains.values()})}
    return DepositAddresses(user_id=user_id, addresses=[
        DepositAddress(chain=c.name, family=c.family, address=address)
        for c in sorted(ctx.chains.chains.values(), key=lambda c: c.name)
        if (address := by_family[c.family]) is not None])


@router.get("/{user_id}/balances", response_model=Balances, responses=problems(*AUTHED),
            summary="A user's balances per asset")
async def balances(
    request: Request,
    user_id: UserId,
    credentials: Credentials,
    as_of: Annotated[str | None, Query(max_length=64, description=(
        "Effective time bound (ISO 8601); default: now."))] = None,
    known_at: Annotated[str | None, Query(max_length=64, description=(
        "Recorded time bound (ISO 8601): the balance as known then."))] = None,
) -> Response:
    """Posted, pending incoming and outgoing, available and projected, per asset.

    Pending incoming (deposits seen on chain, not final yet) is only known for now: it is
    zero when ``as_of`` or ``known_at`` asks about the past.
    """
    # Plain requests (no query string) do not get here: ``BalancesFastPath`` answers them with
    # the same ``read_balances`` before the router. This route serves the rest (``as_of``,
    # ``known_at``, and whatever the fast path passes on) and documents the endpoint.
    body = await auth.read_as(request, credentials, READERS,
                              read_balances(context(request), user_id, as_of, known_at),
                              user_id=user_id)
    return Response(body, media_type="application/json")


def read_balances(ctx: ApiContext, user_id: str, as_of: str | None, known_at: str | None
                  ) -> Callable[[UnitOfWork, Principal], bytes]:
    """The balances read of ``auth.read_now``: the body of ``GET balances`` (``Balances``)."""

    def read(uow: UnitOfWork, principal: Principal) -> bytes:
        at = parse_instant(as_of, what="as_of")
        known = parse_instant(known_at, what="known_at")
        rows = balance_rows(uow, user_id, at, known)
        return balances_json(user_id, at or ctx.clock(), known, rows)

    return read


def balance_rows(uow: UnitOfWork, user_id: str, as_of: datetime | None,
                 known_at: datetime | None) -> list[ledger.UserBalance]:
    """The user's balances per asset as ``GET balances`` reads them (the console's user page
    too): pending incoming from the deposits only for now (zero for the past)."""
    historic = as_of is not None or known_at is not None
    pending = None if historic else deposits.pending_incoming(uow, user_id)
    return ledger.user_balances(uow, user_id, as_of=as_of, known_at=known_at,
                                pending_incoming=pending)


_BALANCES_PATH = re.compile(r"^/v1/users/([^/]+)/balances$")
_USER_ID = re.compile(USER_ID_PATTERN)
_JSON_HEADERS = [(b"content-type", b"application/json")]


class BalancesFastPath:
    """``GET /v1/users/{user_id}/balances`` without a query string, answered before FastAPI's
    router: the hot read of the API (an exchange polls it for every user).

    FastAPI's routing, dependency resolution and parameter validation cost about as much CPU
    per request as all the rest of it (bench/RESULTS.md, "HTTP API"). This ASGI middleware
    does what they do for this one request shape, no more: the path (the route's pattern and
    ``USER_ID_PATTERN``), the bearer credentials (as ``auth.bearer``), then the route's own
    ``auth.read_now`` and ``read_balances`` in one call to the reader threads
    (``ApiContext.readers``), and errors rendered by the app's own problem handlers. Anything
    else (another method or path, a query string, an id that fails its pattern, a root path)
    goes on to the app unchanged, where the route above answers it and documents the endpoint
    in the OpenAPI schema.
    """

    def __init__(self, app: ASGIApp, ctx: ApiContext) -> None:
        self.app = app
        self.ctx = ctx

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        match = (_BALANCES_PATH.fullmatch(scope["path"]) if scope["type"] == "http"
                 and scope["method"] == "GET" and not scope.get("query_string")
                 and not scope.get("root_path") else None)
        if match is None or not _USER_ID.fullmatch(user_id := match.group(1)):
            await self.app(scope, receive, send)
            return
        credentials = auth.bearer_credentials(scope["headers"])
        state = scope.setdefault("state", {})
        try:
            body = await asyncio.get_running_loop().run_in_executor(
                self.ctx.readers, functools.partial(
                    auth.read_now, self.ctx, state, credentials, READERS,
                    read_balances(self.ctx, user_id, None, None), user_id=user_id,
                    source=auth.source_of(scope)))
        except Exception as exc:
            response = await api_problems.response_for(Request(scope), exc)
            await response(scope, receive, send)
            return
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-length", str(len(body)).encode()), *_JSON_HEADERS]})
        await send({"type": "http.response.body", "body": body})


@router.get("/{user_id}/deposits", response_model=DepositPage, responses=problems(*AUTHED),
            summary="A user's deposits, newest first (cursor pagination)")
def list_deposits(
    request: Request,
    user_id: UserId,
    principal: ReaderScope,
    uow: ReadUow,
    cursor: CursorParam = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    since: FromParam = None,
    until: ToParam = None,
) -> DepositPage:
    """A page of the user's deposits with their current state, newest first; ``from`` and
    ``to`` bound the time each was first seen.

    The cursor is the id of the last deposit of the previous page (keyset pagination).
    """
    ctx = context(request)
    span = window(since, until)
    auth.check_user(uow, principal, user_id)
    rows = deposits.user_deposits(uow, user_id, limit=limit + 1, before_id=cursor_id(cursor),
                                  since=span.since, until=span.until)
    items, more, after = page(rows, limit, lambda d: d.id)
    return DepositPage(items=[deposit_view(ctx.chains, d) for d in items], has_more=more,
                       next_cursor=after)


@router.get("/{user_id}/withdrawals", response_model=WithdrawalPage,
            responses=problems(*AUTHED),
            summary="A user's withdrawals, newest first (cursor pagination)")
def list_withdrawals(
    request: Request,
    user_id: UserId,
    principal: ReaderScope,
    uow: ReadUow,
    state: Annotated[list[WithdrawalState] | None, Query(description=(
        "Only withdrawals in this state (repeat for several)."))] = None,
    cursor: CursorParam = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    since: FromParam = None,
    until: ToParam = None,
) -> WithdrawalPage:
    """A page of the user's withdrawals with their current state, newest first; ``from`` and
    ``to`` bound the time each was requested. Same scopes as the user's deposits: a client
    reads its own users only (another client's: 404)."""
    ctx = context(request)
    span = window(since, until)
    auth.check_user(uow, principal, user_id)
    rows = withdrawals.user_withdrawals(
        uow, user_id, limit=limit + 1, before_id=cursor_id(cursor),
        states=None if not state else [str(s) for s in state], since=span.since,
        until=span.until)
    items, more, after = page(rows, limit, lambda w: w.id)
    return WithdrawalPage(items=[withdrawal_view(ctx.chains, w) for w in items],
                          has_more=more, next_cursor=after)


@router.get("/{user_id}/statement", response_model=StatementPage, responses=problems(*AUTHED),
            summary="A user's statement in one asset: opening, lines, closing (cursor pagination)")
def user_statement(
    request: Request,
    user_id: UserId,
    principal: ReaderScope,
    uow: ReadUow,
    asset: Annotated[str, Query(pattern=r"^[A-Z0-9][A-Z0-9._-]{0,31}$",
                                description="Ledger asset code, e.g. USDC.")],
    cursor: CursorParam = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
    since: FromParam = None,
    until: ToParam = None,
) -> StatementPage:
    """Why is my balance X: every posting on the user's wallet and withdrawals accounts, oldest
    first, with its kind, reference and reason and the available and posted balances after it.

    ``from`` and ``to`` bound the time each posting was recorded (so that every running
    balance includes every line above it). ``opening`` is the balance just before ``from``
    (zero without it), ``closing`` is ``opening`` plus the page's lines: on the last page of
    the range, the balance at ``to``.
    """
    span = window(since, until)
    auth.check_user(uow, principal, user_id)
    return statement_page(uow, user_id, asset, after_posting_id=cursor_id(cursor), limit=limit,
                          since=span.since, until=span.until)


def statement_page(uow: UnitOfWork, user_id: str, asset: str, *, after_posting_id: int | None,
                   limit: int, since: datetime | None, until: datetime | None) -> StatementPage:
    """The body of ``GET statement`` (``custody statement`` prints it too): the lines after
    ``after_posting_id`` recorded in [since, until), with the opening and closing balances."""
    scale = ledger.get_asset(uow, asset).scale
    start = ledger.statement_start(uow, user_id, asset, recorded_before=since,
                                   after_posting_id=after_posting_id)
    lines = ledger.statement(uow, user_id, asset, after_posting_id=start.after_posting_id,
                             limit=limit + 1)
    # The lines run in posting order; the range ends at the first one recorded at or after
    # ``to`` (as the console's statement: api.web.users).
    in_range = list(takewhile(lambda ln: until is None or ln.recorded_at < until, lines))
    items, more, after = page(in_range, limit, lambda ln: ln.posting_id)
    last = items[-1] if items else None
    return StatementPage(
        user_id=user_id, asset=asset, scale=scale, range_from=since, range_to=until,
        opening=StatementBalance(available=amount(start.available_minor, scale),
                                 posted=amount(start.posted_minor, scale)),
        closing=StatementBalance(
            available=amount(last.available_minor if last else start.available_minor, scale),
            posted=amount(last.posted_minor if last else start.posted_minor, scale)),
        items=[StatementLine(
            posting_id=ln.posting_id, transaction_id=ln.transaction_id, account=ln.account,
            amount=amount(ln.amount_minor, scale), available=amount(ln.available_minor, scale),
            posted=amount(ln.posted_minor, scale), kind=ln.kind, reference=ln.reference,
            reason=ln.reason, effective_at=ln.effective_at, recorded_at=ln.recorded_at)
            for ln in items],
        has_more=more, next_cursor=after)
