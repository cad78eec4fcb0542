"""Signing in to the staff console, its sessions and the CSRF tokens of its forms.

- A person signs in once with a staff API key (support, admin or approver; a client key is
  refused). The key is checked as the API checks it (``api.auth.authorize``: unknown, revoked,
  rate-limited or of the wrong scope) and never stored or put in a cookie.
- The session is a row of ``console_sessions`` holding the SHA-256 of a random 256-bit token,
  the key signed in with and the CSRF token of its forms. The browser holds the token in a
  cookie signed with the console's secret (``itsdangerous``; the secret is one row of
  ``console_secrets``, sealed under ``CUSTODY_SECRETS_KEY``, shared by every API process)
  together with its expiry: HttpOnly, SameSite=Strict, Secure when the request came over
  HTTPS. A request's session is the live row of a cookie whose signature holds and that has
  not expired: not ended by a sign-out, its key not revoked.
- Every form carries the session's CSRF token; a POST without it (or with another) is refused
  with 403 and changes nothing. The sign-in form, before any session exists, carries a token of
  its own, also kept in a short-lived cookie (double submit).
- Sign-in and sign-out are audited (``api_audit``: ``console.sign_in``, ``console.sign_out``);
  the actions of the console are audited by the same code as the API's.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import timedelta
from typing import Annotated, Any

from fastapi import Depends, Request, Response
from fastapi.security import HTTPAuthorizationCredentials
from itsdangerous import BadSignature, URLSafeSerializer

from api import audit, auth
from api.auth import Principal
from api.problems import ApiError, Forbidden
from api.repository import console as repo
from api.routes.deps import ApiContext, context
from config.encryption import CONSOLE_PURPOSE, keyring
from config.uow import UnitOfWork

COOKIE = "custody_console"
LOGIN_COOKIE = "custody_console_login"
#: How long a session lasts from its sign-in (a working day), whatever is done in it.
SESSION_TTL = timedelta(hours=8)
LOGIN_TTL_S = 900
#: The scopes that may sign in.
STAFF_SCOPES = frozenset({"support", "admin", "approver"})
#: The scopes that read users, deposits and cases (the API's ``StaffReader``).
READERS = ("admin", "support")


class SignInRequired(ApiError):
    """No session: the page asks to sign in (a redirect to the sign-in page)."""

    code = "sign_in_required"
    status = 401


class SessionExpired(SignInRequired):
    """The cookie named a session that expired, ended or whose key was revoked or expired."""

    code = "session_expired"


class CsrfRefused(ApiError):
    """A form posted without the session's CSRF token."""

    code = "csrf_refused"
    status = 403


@dataclass(frozen=True)
class Session:
    """The signed-in person: the principal of the key signed in with, and the session's CSRF
    token (put in every form)."""

    id: int
    principal: Principal
    csrf_token: str

    def may(self, *scopes: str) -> bool:
        """Whether this person's scope is one of ``scopes``."""
        return self.principal.scope in scopes

    @property
    def reads_users(self) -> bool:
        """Whether this person reads users, deposits and cases: support and admin, as in the
        API (an approver reads withdrawals only)."""
        return self.may(*READERS)

    def require_reader(self) -> None:
        """Refuse (403, as the API's routes do) an approver on a page of users, deposits or
        cases."""
        if not self.reads_users:
            raise Forbidden(f"scope {self.principal.scope!r} may not read this page (needs "
                            f"{' or '.join(READERS)}): an approver key reads withdrawals only")


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _serializer(ctx: ApiContext) -> URLSafeSerializer:
    # Read once per process: the first process to sign anything stores the secret (sealed
    # under the secrets key: a dump of the database forges no session).
    if ctx.console_secret is None:
        keys = keyring()
        with UnitOfWork(ctx.engine) as uow:
            sealed = repo.signing_secret(
                uow.conn, keys.seal(secrets.token_urlsafe(48), CONSOLE_PURPOSE), ctx.clock())
            uow.commit()
        ctx.console_secret = keys.open(sealed, CONSOLE_PURPOSE)
    return URLSafeSerializer(ctx.console_secret, salt="custody-console-session")


def _set_cookie(request: Request, response: Response, name: str, value: str,
                max_age: int) -> None:
    response.set_cookie(name, value, max_age=max_age, path="/console", httponly=True,
                        samesite="strict", secure=request.url.scheme == "https")


def sign_in(request: Request, response: Response, key: str) -> Session:
    """Check ``key`` as the API would (401 unknown, 403 a client key, 429 over its rate limit),
    open a session and set its cookie on ``response``."""
    ctx = context(request)
    credentials = HTTPAuthorizationCredentials(scheme="Bearer", credentials=key.strip())
    with ctx.autocommit.connect() as conn:
        try:
            principal = auth.authorize(conn, ctx, credentials, STAFF_SCOPES,
                                        source=auth.source_of(request.scope))
        except Forbidden as refused:
            request.state.principal = refused.principal  # a client key: audited (api.audit)
            raise
    token, csrf = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
    now = ctx.clock()
    _end_previous(ctx, request)
    expires = now + SESSION_TTL
    with UnitOfWork(ctx.engine) as uow:
        session_id = repo.insert_session(uow.conn, _digest(token), principal.key_id, csrf, now,
                                         expires)
        uow.commit()
    signed = _serializer(ctx).dumps({"t": token, "e": int(expires.timestamp())})
    _set_cookie(request, response, COOKIE, signed, int(SESSION_TTL.total_seconds()))
    response.delete_cookie(LOGIN_COOKIE, path="/console")
    request.state.principal = principal
    audit.note(request, "console.sign_in", f"session={session_id}")
    session = Session(session_id, principal, csrf)
    request.state.console_session = session
    return session


def _end_previous(ctx: ApiContext, request: Request) -> None:
    """End the session the browser still holds, if any: signing in again never leaves an old
    session alive behind the new cookie."""
    try:
        previous = _token(ctx, request)
    except SessionExpired:
        return
    if previous is None:
        return
    with UnitOfWork(ctx.engine) as uow:
        row = repo.live_session(uow.conn, _digest(previous), ctx.clock())
        if row is not None:
            repo.end_session(uow.conn, row.id, ctx.clock())
        uow.commit()


def _token(ctx: ApiContext, request: Request) -> str | None:
    """The session token of a well-signed, unexpired cookie; None without a cookie; raises
    SessionExpired for a cookie that is badly signed or expired."""
    cookie = request.cookies.get(COOKIE)
    if not cookie:
        return None
    try:
        payload: Any = _serializer(ctx).loads(cookie)
    except BadSignature:
        raise SessionExpired("the session cookie is not valid: sign in again") from None
    if (not isinstance(payload, dict) or not isinstance(payload.get("t"), str)
            or not isinstance(payload.get("e"), int)):
        raise SessionExpired("the session cookie is not valid: sign in again")
    if payload["e"] <= ctx.clock().timestamp():
        raise SessionExpired("your session expired: sign in again")
    token: str = payload["t"]
    return token


def current(request: Request) -> Session:
    """The request's session (a dependency): SignInRequired without one, SessionExpired when
    it expired, ended or its key was revoked."""
    ctx = context(request)
    token = _token(ctx, request)
    if token is None:
        raise SignInRequired("sign in with a staff API key")
    with UnitOfWork(ctx.autocommit) as uow:
        row = repo.live_session(uow.conn, _digest(token), ctx.clock())
    if row is None:
        raise SessionExpired("your session ended or expired: sign in again")
    principal = Principal(row.key_id, row.key_prefix, row.client_id, row.client_name, row.scope)
    request.state.principal = principal
    session = Session(row.id, principal, row.csrf_token)
    request.state.console_session = session
    return session


def sign_out(request: Request, response: Response, session: Session) -> None:
    """End the session (the cookie is useless from now on, even if kept) and drop the cookie."""
    ctx = context(request)
    with UnitOfWork(ctx.engine) as uow:
        repo.end_session(uow.conn, session.id, ctx.clock())
        uow.commit()
    response.delete_cookie(COOKIE, path="/console")
    audit.note(request, "console.sign_out", f"session={session.id}")


def check_csrf(session: Session, form: dict[str, str]) -> None:
    """Refuse (403) a form whose CSRF token is not the session's."""
    given = form.get("csrf", "")
    if not hmac.compare_digest(given.encode(), session.csrf_token.encode()):
        raise CsrfRefused("this form is not from your session (CSRF token missing or wrong): "
                          "reload the page and try again")


def set_login_token(request: Request, response: Response, token: str) -> None:
    """Keep the sign-in form's ``token`` in a short-lived cookie (double submit)."""
    _set_cookie(request, response, LOGIN_COOKIE, token, LOGIN_TTL_S)


def check_login_token(request: Request, form: dict[str, str]) -> None:
    """Refuse (403) a sign-in form whose token is not the one in its cookie."""
    cookie = request.cookies.get(LOGIN_COOKIE, "")
    given = form.get("csrf", "")
    if not cookie or not hmac.compare_digest(given.encode(), cookie.encode()):
        raise CsrfRefused("the sign-in form expired or is not from this site: "
                          "reload the page and try again")


#: The signed-in person of a console page.
StaffSession = Annotated[Session, Depends(current)]
