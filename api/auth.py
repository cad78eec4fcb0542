"""Authentication, scopes, users' ownership and the audit trail of the HTTP API.

- An API key is ``cust_<prefix>_<secret>``: 48 bits of public prefix (to find the row) and a
  256-bit random secret of which only the SHA-256 is stored. A high-entropy secret needs no slow
  hash: nothing can be guessed from its digest. The key is shown once, when it is created.
- Each key belongs to a client (a principal: an exchange backend, or a person or team for staff
  scopes) and has one scope: ``client`` acts for its own users only, ``support`` reads any user,
  ``admin`` runs the admin actions, ``approver`` approves withdrawals. The client's name is the
  actor recorded in histories; a principal holding both a client and an approver key therefore
  cannot approve its own requests (the withdrawal service refuses it).
- A user belongs to the client that created it. Another client's user answers 404, exactly as a
  user that does not exist, so that ids cannot be probed.
- Every admin or approver action appends a row to ``api_audit`` (append-only in the database).

The SQL of these tables (clients, keys, users, audit) is in ``api.repository.clients``.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import math
import re
import secrets
from collections.abc import Callable, Coroutine, Iterable
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar

from fastapi import Depends, Request, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.engine import Connection, Engine

from api.problems import Forbidden, RateLimited, RequestInvalid, Unauthenticated, UserNotFound
from api.repository import clients as repo
from api.repository.clients import UserRecord
from api.routes.deps import ApiContext, context
from config.uow import UnitOfWork

SCOPES = ("client", "support", "admin", "approver")
STAFF = frozenset({"support", "admin", "approver"})
_KEY = re.compile(r"^cust_([0-9a-f]{12})_([A-Za-z0-9_-]{43})$")
_CLIENT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$")
USER_ID_PATTERN = r"^[A-Za-z0-9_.-]{1,100}$"

bearer = HTTPBearer(auto_error=False, scheme_name="ApiKey",
                    description="An API key: `Authorization: Bearer cust_...`.")


@dataclass(frozen=True)
class Principal:
    """Who is calling: the key, its client and its scope."""

    key_id: int
    key_prefix: str
    client_id: int
    client_name: str
    scope: str

    @property
    def actor(self) -> str:
        """The name recorded as the actor of what this principal does."""
        return self.client_name


# --- keys -------------------------------------------------------------------------------------


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


@dataclass(frozen=True)
class CreatedKey:
    """A new key: ``key`` is shown once and never stored."""

    key: str
    prefix: str
    client_name: str
    scope: str


def create_key(engine: Engine, client_name: str, scope: str) -> CreatedKey:
    """Create a key of ``scope`` for ``client_name`` (the client is created if new)."""
    if scope not in SCOPES:
        raise RequestInvalid(f"scope must be one of {', '.join(SCOPES)}")
    if not _CLIENT.match(client_name):
        raise RequestInvalid("client names are 1-64 letters, digits and _ . @ -")
    prefix, secret = secrets.token_hex(6), secrets.token_urlsafe(32)
    with UnitOfWork(engine) as uow:
        client_id = repo.ensure_client(uow.conn, client_name)
        repo.insert_key(uow.conn, client_id, prefix, _digest(secret), scope)
        uow.commit()
    return CreatedKey(f"cust_{prefix}_{secret}", prefix, client_name, scope)


def authorize(conn: Connection, ctx: ApiContext, credentials: HTTPAuthorizationCredentials | None,
              scopes: frozenset[str], *, user_id: str | None = None) -> Principal:
    """The caller's principal, checked in this order: a valid key (401), its rate limit (429,
    the request is counted), its scope among ``scopes`` (403), and, with ``user_id``, that it
    may act on that user (404). One statement on ``conn``, which should be in autocommit mode
    (``ApiContext.autocommit``): the count is committed with the statement, whatever the route
    does next, and the counter's row lock is not held across a round trip
    (``api.repository.clients.authorize_row``).
    """
    match = _KEY.match(credentials.credentials) if credentials is not None else None
    if match is None:
        raise Unauthenticated("a valid API key is required: Authorization: Bearer <key>")
    prefix, secret = match.groups()
    row = repo.authorize_row(conn, prefix, _digest(secret), user_id,
                             ctx.rate_limits.windows_json)
    if row is None:
        raise Unauthenticated("unknown or revoked API key")
    key_id, key_prefix, scope, client_id, client_name, requests, left_s, owns_user, _ = row
    limit = ctx.rate_limits.of(scope)
    if requests > limit.requests_max:
        raise RateLimited(f"more than {limit.requests_max} requests in {limit.window_s} s",
                          retry_after_s=max(1, math.ceil(float(left_s))))
    principal = Principal(key_id, key_prefix, client_id, client_name, scope)
    if principal.scope not in scopes:
        raise Forbidden(f"scope {principal.scope!r} may not do this "
                        f"(needs {' or '.join(sorted(scopes))})")
    if user_id is not None and principal.scope not in STAFF and not owns_user:
        raise UserNotFound(f"no user {user_id}")
    return principal


def authenticate(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Security(bearer)],
) -> Principal:
    """The caller's principal from ``Authorization: Bearer <key>``, counted against its rate
    limit; 401 without a valid key, 429 over the limit (one statement, its own transaction)."""
    ctx = context(request)
    with ctx.autocommit.connect() as conn:
        principal = authorize(conn, ctx, credentials, frozenset(SCOPES))
    request.state.principal = principal
    return principal


def require(*scopes: str) -> Callable[..., Coroutine[Any, Any, Principal]]:
    """A dependency: the authenticated principal, if its scope is one of ``scopes`` (else 403).

    The check itself is ``async``: pure CPU, so FastAPI runs it on the event loop instead of
    sending it through the threadpool (only ``authenticate`` needs the database).
    """
    allowed = frozenset(scopes)
    assert allowed <= set(SCOPES), scopes

    async def dependency(principal: Annotated[Principal, Depends(authenticate)]) -> Principal:
        if principal.scope not in allowed:
            raise Forbidden(f"scope {principal.scope!r} may not do this "
                            f"(needs {' or '.join(sorted(allowed))})")
        return principal

    return dependency


T = TypeVar("T")
#: The bearer credentials of a request, for routes that authenticate inside ``read_as``.
Credentials = Annotated[HTTPAuthorizationCredentials | None, Security(bearer)]


def bearer_credentials(
        headers: Iterable[tuple[bytes, bytes]]) -> HTTPAuthorizationCredentials | None:
    """The credentials ``bearer`` (``HTTPBearer(auto_error=False)``) finds in raw ASGI
    ``headers``: the first ``Authorization`` header, if it is ``Bearer <something>``; for the
    hot path (``api.routes.users.BalancesFastPath``), which skips FastAPI's dependencies."""
    value = next((v for k, v in headers if k == b"authorization"), b"").decode("latin-1")
    scheme, _, param = value.partition(" ")
    param = param.strip()
    if not (value and scheme and param) or scheme.lower() != "bearer":
        return None
    return HTTPAuthorizationCredentials(scheme=scheme, credentials=param)


def read_now(ctx: ApiContext, state: dict[str, Any],
             credentials: HTTPAuthorizationCredentials | None, scopes: frozenset[str],
             work: Callable[[UnitOfWork, Principal], T], *, user_id: str | None = None) -> T:
    """Authenticate, count, authorize (``authorize``) and run the read ``work``, all on one
    pooled connection, in this thread; the principal is put in ``state`` (the ASGI scope's
    ``state``, which is ``request.state``).

    The unit of work is in autocommit mode, so ``work`` must only read. Every statement is its
    own transaction: the rate-limit upsert commits (and releases the lock on the key's counter,
    the hottest row there is: every request of a key updates it) inside the database, at the
    end of its statement, instead of one client round trip later; and the reads, which at READ
    COMMITTED each take their own snapshot anyway, need no BEGIN and COMMIT round trips. No
    ROLLBACK is ever sent either, which matters: psycopg forgets its prepared statements on
    every ROLLBACK, and the statements here are prepared once per connection (no parse, no plan).
    """
    with UnitOfWork(ctx.autocommit) as uow:
        principal = authorize(uow.conn, ctx, credentials, scopes, user_id=user_id)
        state["principal"] = principal
        return work(uow, principal)


async def read_as(request: Request, credentials: HTTPAuthorizationCredentials | None,
                  scopes: frozenset[str], work: Callable[[UnitOfWork, Principal], T], *,
                  user_id: str | None = None) -> T:
    """``read_now`` in one call to the reader threads (``ApiContext.readers``): the hot read
    path of a route."""
    ctx = context(request)
    state = request.scope.setdefault("state", {})
    return await asyncio.get_running_loop().run_in_executor(
        ctx.readers, functools.partial(read_now, ctx, state, credentials, scopes, work,
                                       user_id=user_id))


#: The principal of a request, by the scopes an endpoint allows.
ClientScope = Annotated[Principal, Depends(require("client"))]
ReaderScope = Annotated[Principal, Depends(require("client", "support", "admin"))]
AnyScope = Annotated[Principal, Depends(require(*SCOPES))]
StaffReader = Annotated[Principal, Depends(require("support", "admin"))]
AdminScope = Annotated[Principal, Depends(require("admin"))]
ApproverScope = Annotated[Principal, Depends(require("approver"))]
ClientOrAdmin = Annotated[Principal, Depends(require("client", "admin"))]


# --- users --------------------------------------------------------------------------------------


def create_user(uow: UnitOfWork, client_id: int, reference: str | None
                ) -> tuple[UserRecord, bool]:
    """Create a user of ``client_id``; with a known ``reference``, the existing one (False)."""
    created = repo.insert_user(uow.conn, f"usr_{secrets.token_hex(10)}", client_id, reference)
    if created is not None:
        return created, True
    return repo.user_by_reference(uow.conn, client_id, reference), False


def visible_users(uow: UnitOfWork, principal: Principal, user_ids: Iterable[str]) -> set[str]:
    """Those of ``user_ids`` the principal may see: its own users (client), or all (staff)."""
    wanted = sorted(set(user_ids))
    if principal.scope in STAFF:
        return set(wanted)
    return repo.users_of_client(uow.conn, principal.client_id, wanted)


def check_user(uow: UnitOfWork, principal: Principal, user_id: str) -> str:
    """``user_id`` if the principal may act on it, else UserNotFound (404, never 403)."""
    if user_id not in visible_users(uow, principal, [user_id]):
        raise UserNotFound(f"no user {user_id}")
    return user_id


# --- audit --------------------------------------------------------------------------------------


def audit(engine: Engine, request: Request, principal: Principal, action: str, target: str,
          status: int, details: dict[str, Any] | None = None) -> None:
    """Append an audit row for an admin or approver action (its own short transaction)."""
    with UnitOfWork(engine) as uow:
        repo.insert_audit(
            uow.conn, actor=principal.actor, client=principal.client_id,
            key_prefix=principal.key_prefix, scope=principal.scope, action=action, target=target,
            request_id=getattr(request.state, "request_id", ""), status=status,
            details_json=json.dumps(details or {}, default=str))
        uow.commit()
