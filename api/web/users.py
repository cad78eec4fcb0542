"""The user page: "why is my balance X?". Per asset the balances (as of a time, as known at a
time), the deposit addresses, deposits and withdrawals newest first, and the statement of one
asset over a date range with its opening balance, plain labels and running balances.

Every figure is read by the services the API reads it with (``api.routes.users.balance_rows``,
``deposits.service``, ``withdrawals.service``, ``ledger.service.statement``), so the page and
the API always agree.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from itertools import takewhile
from typing import Annotated
from urllib.parse import urlencode

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import Response

from api.auth import USER_ID_PATTERN
from api.problems import RequestInvalid, UserNotFound
from api.repository import console as repo
from api.routes.deps import Uow, context
from api.routes.users import balance_rows
from api.routes.views import scale_of
from api.schemas import parse_instant
from api.web import templating
from api.web.labels import state_class, statement_label
from api.web.session import StaffSession
from config.uow import UnitOfWork
from deposits import service as deposits
from ledger import service as ledger
from withdrawals import service as withdrawals

router = APIRouter(prefix="/console", include_in_schema=False)
PAGE = 20
STATEMENT_PAGE = 200
_CURSOR = r"^[0-9]{1,18}$"
Cursor = Annotated[str | None, Query(pattern=_CURSOR)]
Instant = Annotated[str | None, Query(max_length=64)]


@dataclass(frozen=True)
class Line:
    """A statement line as the page shows it."""

    line: ledger.StatementLine
    label: str


@router.get("/users/{user_id}")
def user_page(
    request: Request,
    staff: StaffSession,
    uow: Uow,
    user_id: Annotated[str, Path(pattern=USER_ID_PATTERN)],
    as_of: Instant = None,
    known_at: Instant = None,
    dcursor: Cursor = None,
    wcursor: Cursor = None,
    asset: Annotated[str | None, Query(pattern=r"^[A-Z0-9][A-Z0-9._-]{0,31}$")] = None,
    since: Instant = None,
    until: Instant = None,
    scursor: Cursor = None,
) -> Response:
    """The user's page (404 for an id neither the API nor the ledger knows; 403 for an
    approver, as the API's user routes)."""
    staff.require_reader()
    ctx = context(request)
    at = parse_instant(as_of or None, what="as of")
    known = parse_instant(known_at or None, what="as known at")
    start = parse_instant(since or None, what="from")
    end = parse_instant(until or None, what="to")
    if start and end and end <= start:
        raise RequestInvalid("the statement's range ends before it starts")
    record = repo.user_record(uow.conn, user_id)
    balances = balance_rows(uow, user_id, at, known)
    current = balances if at is None and known is None else balance_rows(uow, user_id, None,
                                                                          None)
    if record is None and not current:
        raise UserNotFound(f"no user {user_id}: neither the API nor the ledger knows this id")
    addresses = [(c.name, c.family, address)
                 for c in sorted(ctx.chains.chains.values(), key=lambda c: c.name)
                 if (address := deposits.address_of_user(uow, c.family, user_id)) is not None]
    found_deposits = deposits.user_deposits(uow, user_id, limit=PAGE + 1,
                                            before_id=int(dcursor) if dcursor else None)
    found_withdrawals = withdrawals.user_withdrawals(
        uow, user_id, limit=PAGE + 1, before_id=int(wcursor) if wcursor else None)
    assets = sorted(b.asset.code for b in current)
    chosen = asset or (assets[0] if assets else None)
    statement = _statement(uow, user_id, chosen, start, end, scursor) if chosen else None
    here = {k: v for k, v in request.query_params.items()}

    def link(**changes: str | None) -> str:
        query = {**here, **changes}
        return f"{request.url.path}?{urlencode({k: v for k, v in query.items() if v})}"

    return templating.page(
        request, "user.html", user_id=user_id, record=record,
        client=repo.client_name(uow.conn, record.client_id) if record else None,
        balances=balances, as_of=as_of or "", known_at=known_at or "",
        asked_at=at, asked_known=known, now=ctx.clock(), addresses=addresses,
        deposits=found_deposits[:PAGE], withdrawals=found_withdrawals[:PAGE],
        deposits_next=(link(dcursor=str(found_deposits[PAGE - 1].id))
                       if len(found_deposits) > PAGE else None),
        deposits_first=link(dcursor=None) if dcursor else None,
        withdrawals_next=(link(wcursor=str(found_withdrawals[PAGE - 1].id))
                          if len(found_withdrawals) > PAGE else None),
        withdrawals_first=link(wcursor=None) if wcursor else None,
        scale_of=lambda code: scale_of(ctx.chains, code), state_class=state_class,
        assets=assets, asset=chosen, since=since or "", until=until or "",
        statement=statement,
        statement_next=(link(scursor=str(statement.lines[-1].line.posting_id))
                        if statement and statement.more else None),
        statement_first=link(scursor=None) if scursor else None)


@dataclass(frozen=True)
class Statement:
    """One page of the statement: the opening balances, the lines, the closing balances, and
    whether lines of the range follow."""

    asset: str
    scale: int
    opening: ledger.StatementStart
    lines: list[Line]
    closing_available: int
    closing_posted: int
    more: bool


def _statement(uow: UnitOfWork, user_id: str, asset: str, since: datetime | None,
               until: datetime | None, cursor: str | None) -> Statement:
    scale = ledger.get_asset(uow, asset).scale  # AssetNotFound: 404, said on the page
    opening = ledger.statement_start(uow, user_id, asset, recorded_before=since,
                                     after_posting_id=int(cursor) if cursor else None)
    lines = ledger.statement(uow, user_id, asset, after_posting_id=opening.after_posting_id,
                             limit=STATEMENT_PAGE + 1)
    # The lines run in posting order: the range ends at the first one recorded at or after
    # ``until`` (so that every running balance shown includes every line above it).
    in_range = list(takewhile(lambda ln: until is None or ln.recorded_at < until, lines))
    more = len(in_range) > STATEMENT_PAGE
    shown = in_range[:STATEMENT_PAGE]
    last = shown[-1] if shown else None
    return Statement(
        asset=asset, scale=scale, opening=opening,
        lines=[Line(ln, statement_label(ln.kind, ln.account, ln.amount_minor)) for ln in shown],
        closing_available=last.available_minor if last else opening.available_minor,
        closing_posted=last.posted_minor if last else opening.posted_minor, more=more)
