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
- Every staff action, and every refusal of one, appends a row to ``api_audit`` (append-only in
  the database): ``api.audit`` says which, from the principal left on the request's state.

The SQL of these tables (clients, keys, users) is in ``api.repository.clients``.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import hmac
import math
import re
import secrets
from collections.abc import Callable, Coroutine, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Annotated, Any, TypeVar

from fastapi import Depends, Request, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.engine import Connection, Engine

from api.problems import (
    ApiKeyNotFound,
    Forbidden,
    RateLimited,
    RequestInvalid,
    Unauthenticated,
    UserNotFound,
)
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
    id: int = 0
    expires_at: datetime | None = None


def create_key(engine: Engine, client_name: str, scope: str, *,
               expires_at: datetime | None = None, now: datetime | None = None) -> CreatedKey:
    """Create a key of ``scope`` for ``client_name`` (the client is created if new), valid
    until ``expires_at`` (None: until revoked), which must be after ``now`` when given."""
    if scope not in SCOPES:
        raise RequestInvalid(f"scope must be one of {', '.join(SCOPES)}")
    if not _CLIENT.fullmatch(client_name):
        raise RequestInvalid("client names are 1-64 letters, digits and _ . @ -")
    if expires_at is not None:
        if expires_at.tzinfo is None:
            raise RequestInvalid("the expiry needs a time zone (for example 2027-01-01T00:00Z)")
        if now is not None and expires_at <= now:
            raise RequestInvalid(f"the expiry {expires_at.isoformat()} is not in the future")
    prefix, secret = secrets.token_hex(6), secrets.token_urlsafe(32)
    with UnitOfWork(engine) as uow:
        client_id = repo.ensure_client(uow.conn, client_name)
        key_id = repo.insert_key(uow.conn, client_id, prefix, _digest(secret), scope,
                                 expires_at)
        uow.commit()
    return CreatedKey(f"cust_{prefix}_{secret}", prefix, client_name, scope, key_id, expires_at)


_DURATION = re.compile(r"^([1-9][0-9]{0,5})([mhdw])$")
_UNITS = {"m": timedelta(minutes=1), "h": timedelta(hours=1), "d": timedelta(days=1),
          "w": timedelta(weeks=1)}


def parse_duration(text: str) -> timedelta:
    """``30d``, ``12h``, ``90m``, ``2w``: a key's lifetime (RequestInvalid otherwise)."""
    match = _DURATION.match(text.strip())
    if match is None:
        raise RequestInvalid(f"a lifetime is a number and a unit m, h, d or w (30d), "
                             f"not {text!r}")
    return int(match.group(1)) * _UNITS[match.group(2)]


def find_key(conn: Connection, prefix_or_id: str) -> repo.KeyRecord:
    """The key of a public prefix (12 hex digits, or the key itself) or an id
    (ApiKeyNotFound otherwise)."""
    text = prefix_or_id.strip()
    match = _KEY.fullmatch(text)
    if match is not None:
        text = match.group(1)
    found: repo.KeyRecord | None = None
    if re.fullmatch(r"[0-9a-f]{12}", text):
        found = repo.key_by_prefix(conn, text)
    if found is None and re.fullmatch(r"[1-9][0-9]{0,17}", text):
        found = repo.key_by_id(conn, int(text))
    if found is None:
        raise ApiKeyNotFound(f"no API key {prefix_or_id!r} (give its prefix or id)")
    return found


def list_keys(conn: Connection, client_name: str | None = None, *, after_id: int = 0,
              limit: int = 1000) -> list[repo.KeyRecord]:
    """Keys by id (never their secrets), of ``client_name`` only if given."""
    return repo.list_keys(conn, client_name, after_id=after_id, limit=limit)


def get_key(conn: Connection, key_id: int) -> repo.KeyRecord:
    """The key ``key_id`` (ApiKeyNotFound)."""
    found = repo.key_by_id(conn, key_id)
    if found is None:
        raise ApiKeyNotFound(f"no API key {key_id}")
    return found


def revoke_key(engine: Engine, prefix_or_id: str, *, by: str, now: datetime
               ) -> tuple[repo.KeyRecord, bool]:
    """Revoke a key (refused at once by every process: nothing caches keys); the key after it
    and whether this call revoked it (False: it was revoked before, which is kept)."""
    with UnitOfWork(engine) as uow:
        found = find_key(uow.conn, prefix_or_id)
        revoked = repo.revoke_key(uow.conn, found.id, by, now)
        after = repo.key_by_id(uow.conn, found.id)
        uow.commit()
    assert after is not None
    return after, revoked


#: Compared with the digest of a key whose prefix matches no row, so that an unknown prefix
#: takes the same path (one ``compare_digest`` of two 64-character strings) as a wrong secret.
_NO_DIGEST = "0" * 64


def authorize(conn: Connection, ctx: ApiContext, credentials: HTTPAuthorizationCredentials | None,
              scopes: frozenset[str], *, user_id: str | None = None,
              source: str | None = None) -> Principal:
    """The caller's principal, checked in this order: the failed authentications of its
    address ``source`` (429 over ``RateLimits.auth_failures``, whatever the key), a valid key
    (401: missing or malformed; or unknown, wrong secret, revoked or expired at the engine's
    clock, each of these four counted as a failure of ``source``), its rate limit (429, the
    request is counted), its scope among ``scopes`` (403), and, with ``user_id``, that it may
    act on that user (404). One statement on ``conn`` when the key is good, which should be in
    autocommit mode (``ApiContext.autocommit``): the count is committed with the statement,
    whatever the route does next, and the counter's row lock is not held across a round trip
    (``api.repository.clients.authorize_row``). Nothing about keys is cached in the process,
    so a key revoked by any process is refused at its next request everywhere.

    The digest is compared with ``hmac.compare_digest``, also when no key has the prefix
    (against a constant), so the Python side takes the same path for an unknown prefix as for
    a wrong secret. ``source`` None (an internal caller): no failure count.
    """
    failures_limit = ctx.rate_limits.auth_failures
    match = _KEY.fullmatch(credentials.credentials) if credentials is not None else None
    if match is None:  # Not counted: no secret was tried (nothing to guess with).
        raise Unauthenticated("a valid API key is required: Authorization: Bearer <key>")
    prefix, secret = match.groups()
    digest = _digest(secret)
    row = repo.authorize_row(conn, prefix, digest, user_id, ctx.rate_limits.windows_json,
                             now=ctx.clock(), source=source,
                             failure_window_s=failures_limit.window_s)
    (key_id, key_prefix, scope, client_id, client_name, requests, left_s, owns_user, _,
     stored, revoked, expired, failures, failures_left_s) = row
    if source is not None and failures is not None and failures >= failures_limit.requests_max:
        raise RateLimited(f"more than {failures_limit.requests_max} failed authentications "
                          f"from this address in {failures_limit.window_s} s",
                          retry_after_s=max(1, math.ceil(float(failures_left_s))))
    if not hmac.compare_digest(stored or _NO_DIGEST, digest) or key_id is None:
        _failed(conn, ctx, source, "unknown API key")
    if revoked:
        _failed(conn, ctx, source, f"API key {key_prefix} is revoked")
    if expired:
        _failed(conn, ctx, source, f"API key {key_prefix} has expired")
    assert requests is not None, "a live key with the right digest is counted"
    limit = ctx.rate_limits.of(scope)
    if requests > limit.requests_max:
        raise RateLimited(f"more than {limit.requests_max} requests in {limit.window_s} s",
                          retry_after_s=max(1, math.ceil(float(left_s))))
    principal = Principal(key_id, key_prefix, client_id, client_name, scope)
    if principal.scope not in scopes:
        refused = Forbidden(f"scope {principal.scope!r} may not do this "
                            f"(needs {' or '.join(sorted(scopes))})")
        refused.principal = principal  # who was refused, for the audit row (``read_now``)
        raise refused
    if user_id is not None and principal.scope not in STAFF and not owns_user:
        raise UserNotFound(f"no user {user_id}")
    return principal


def _failed(conn: Connection, ctx: ApiContext, source: str | None, message: str) -> None:
    """Count a failed authentication of ``source`` and raise Unauthenticated (or RateLimited,
    if this failure is over the limit)."""
    if source is not None:
        limit = ctx.rate_limits.auth_failures
        failures, left_s = repo.count_failure(conn, source, limit.window_s)
        if failures > limit.requests_max:
            raise RateLimited(f"more than {limit.requests_max} failed authentications from "
                              f"this address in {limit.window_s} s",
                              retry_after_s=max(1, math.ceil(left_s)))
    raise Unauthenticated(message)


def source_of(scope: Any) -> str:
    """The client address of an ASGI ``scope`` (uvicorn's, after its trusted proxy headers),
    or ``unknown``."""
    client = scope.get("client")
    return str(client[0])[:100] if client else "unknown"


def authenticate(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Security(bearer)],
) -> Principal:
    """The caller's principal from ``Authorization: Bearer <key>``, counted against its rate
    limit; 401 without a valid key, 429 over the limit (one statement, its own transaction)."""
    ctx = context(request)
    with ctx.autocommit.connect() as conn:
        principal = authorize(conn, ctx, credentials, frozenset(SCOPES),
                              source=source_of(request.scope))
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
             work: Callable[[UnitOfWork, Principal], T], *, user_id: str | None = None,
             source: str | None = None) -> T:
    """Authenticate, count, authorize (``authorize``) and run the read ``work``, all on one
    pooled connection, in this thread; the principal is put in ``state`` (the ASGI scope's
    ``state``, which is ``request.state``; also when its scope is refused, for the audit row).

    The unit of work is in autocommit mode, so ``work`` must only read. Every statement is its
    own transaction: the rate-limit upsert commits (and releases the lock on the key's counter,
    the hottest row there is: every request of a key updates it) inside the database, at the
    end of its statement, instead of one client round trip later; and the reads, which at READ
    COMMITTED each take their own snapshot anyway, need no BEGIN and COMMIT round trips. No
    ROLLBACK is ever sent either, which matters: psycopg forgets its prepared statements on
    every ROLLBACK, and the statements here are prepared once per connection (no parse, no plan).
    """
    with UnitOfWork(ctx.autocommit) as uow:
        try:
            principal = authorize(uow.conn, ctx, credentials, scopes, user_id=user_id,
                                  source=source)
        except Forbidden as refused:
            state["principal"] = refused.principal  # a scope refusal is audited (api.audit)
            raise
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
                                       user_id=user_id, source=source_of(request.scope)))


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


def client_named(uow: UnitOfWork, name: str) -> int:
    """The id of the client named ``name`` (404 ``client_not_found`` when there is none)."""
    from api.outbox import ClientNotFound

    found = repo.client_id(uow.conn, name)
    if found is None:
        raise ClientNotFound(f"no API client named {name!r}")
    return found


def check_client_user(uow: UnitOfWork, client_id: int, user_id: str) -> str:
    """``user_id`` if it is a user of ``client_id``, else UserNotFound (404)."""
    if user_id not in repo.users_of_client(uow.conn, client_id, [user_id]):
        raise UserNotFound(f"no user {user_id} of this client")
    return user_id


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
