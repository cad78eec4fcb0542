"""Errors on the console's pages: an HTML page with a plain message (never a stack trace, never
a problem+json document), or the sign-in page for a missing or expired session.

``api.problems`` hands every error of a path under ``/console`` to :func:`page_for`, so the
console's routes raise the same engine errors as the API's and both answer with the same
status and code.
"""

from __future__ import annotations

from urllib.parse import urlencode

from fastapi import Request
from fastapi.responses import RedirectResponse, Response

from api.web import templating

PREFIX = "/console"
_SIGN_IN = frozenset({"sign_in_required", "session_expired"})
_TITLES = {400: "Bad request", 401: "Sign in needed", 403: "Not allowed", 404: "Not found",
           409: "Not possible now", 422: "Not accepted", 429: "Too many requests",
           503: "Unavailable"}


def is_console(request: Request) -> bool:
    """Whether the request is for a console page."""
    path = request.url.path
    return path == PREFIX or path.startswith(PREFIX + "/")


def page_for(request: Request, status: int, code: str, detail: str) -> Response:
    """The page answering an error: the sign-in page (303) for a missing or expired session,
    else the error page with the message and the request id."""
    if code in _SIGN_IN:
        target = request.url.path if request.method == "GET" else PREFIX
        if request.url.query and request.method == "GET":
            target += "?" + request.url.query
        # A return path the sign-in page would refuse as too long: the console's home instead.
        query = {"next": target if len(target) <= 2000 else PREFIX}
        if code == "session_expired":
            query["reason"] = "expired"
        response = RedirectResponse(f"{PREFIX}/login?{urlencode(query)}", status_code=303)
        if code == "session_expired":
            response.delete_cookie("custody_console", path=PREFIX)
        return response
    return templating.page(
        request, "error.html", status=status, title=_TITLES.get(status, "Error"), code=code,
        detail=detail, status_code=status,
        request_id=getattr(request.state, "request_id", "") or "")
