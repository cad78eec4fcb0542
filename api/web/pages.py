"""The console's entrance: signing in and out, the search page and the search itself.

Every page but the sign-in page needs a session (``api.web.session.StaffSession``); without
one it answers with the sign-in page, which comes back to the page asked for.
"""

from __future__ import annotations

import secrets
from typing import Annotated
from urllib.parse import quote

from fastapi import APIRouter, Form, Query, Request
from fastapi.responses import RedirectResponse, Response

from api.problems import ApiError, RequestInvalid
from api.routes.deps import Uow, context
from api.web import search, session, templating
from api.web.session import StaffSession

router = APIRouter(prefix="/console", include_in_schema=False)
_REASONS = {"expired": "Your session expired or ended: sign in again.",
            "signed_out": "You signed out."}


def safe_next(target: str | None) -> str:
    """Where to go after signing in: a console path, never another site."""
    if target and target.startswith("/console") and not target.startswith("//") \
            and "\\" not in target and not target.startswith("/console/login"):
        return target
    return "/console"


@router.get("/login")
def login_page(request: Request,
               next: Annotated[str | None, Query(max_length=2000)] = None,
               reason: Annotated[str | None, Query(max_length=20)] = None) -> Response:
    """The sign-in form (its token also set in a cookie)."""
    token = secrets.token_urlsafe(32)
    response = _login_form(request, next, token, _REASONS.get(reason or ""), "info")
    session.set_login_token(request, response, token)
    return response


def _login_form(request: Request, next: str | None, token: str, message: str | None,
                kind: str, status: int = 200) -> Response:
    return templating.page(
        request, "login.html", status=status, session=None, next=safe_next(next), csrf=token,
        ttl_hours=int(session.SESSION_TTL.total_seconds() // 3600), message=message,
        message_kind=kind)


@router.post("/login")
def login(request: Request, key: Annotated[str, Form(max_length=200)] = "",
          csrf: Annotated[str, Form(max_length=200)] = "",
          next: Annotated[str, Form(max_length=2000)] = "/console") -> Response:
    """Sign in with a staff key; a wrong, revoked or client key stays on the sign-in page with
    the reason."""
    session.check_login_token(request, {"csrf": csrf})
    response = RedirectResponse(safe_next(next), status_code=303)
    try:
        session.sign_in(request, response, key)
    except ApiError as exc:
        if exc.status not in (401, 403, 429):
            raise
        request.state.problem = (exc.code, exc.message)  # the reason of its audit row
        return _login_form(request, next, csrf, _sign_in_refusal(exc), "error", exc.status)
    return response


def _sign_in_refusal(exc: ApiError) -> str:
    if exc.status == 403:
        return ("This key cannot sign in to the console: only support, admin and approver keys "
                "can (client keys use the API).")
    if exc.status == 429:
        return f"Too many attempts with this key: {exc.message}."
    return "Unknown or revoked API key."


@router.post("/logout")
def logout(request: Request, staff: StaffSession,
           csrf: Annotated[str, Form(max_length=200)] = "") -> Response:
    """End the session."""
    session.check_csrf(staff, {"csrf": csrf})
    response = RedirectResponse("/console/login?reason=signed_out", status_code=303)
    session.sign_out(request, response, staff)
    return response


@router.get("")
def home(request: Request, staff: StaffSession) -> Response:
    """The search page."""
    return templating.page(request, "search.html", q="", hits=[], hint="")


@router.get("/search")
def find(request: Request, staff: StaffSession, uow: Uow,
         q: Annotated[str, Query(max_length=search.MAX_LENGTH * 2)] = "") -> Response:
    """One match: its page. Several: the list. None: the search page says so (404)."""
    try:
        hits = search.for_scope(search.find(uow, context(request).chains, q),
                                staff.reads_users)
    except search.SearchInvalid as exc:
        raise RequestInvalid(str(exc)) from None
    if len(hits) == 1:
        return RedirectResponse(hits[0].href, status_code=303)
    return templating.page(
        request, "search.html", status=200 if hits else 404, q=q.strip(), hits=hits,
        hint="Search finds user ids, clients' references, deposit addresses, transaction "
             "hashes of deposits and withdrawals, and withdrawal ids.")


def user_href(user_id: str) -> str:
    """The user page's path."""
    return f"/console/users/{quote(user_id, safe='')}"
