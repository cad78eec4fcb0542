"""``Idempotency-Key`` on every money-moving request, stored in PostgreSQL.

Semantics (the IETF Idempotency-Key draft, DESIGN.md section 7), per (client, operation, key):

- no key: 400; a key used before with another request (another fingerprint): 422;
- the first request still running: 409 (``idempotency_in_progress``), retry later;
- the first request completed: its response again, same status and body, with the header
  ``Idempotent-Replayed: true``; nothing runs a second time.

The record is claimed (``in_progress``) in its own committed transaction before the operation
runs, and completed with the response after it. Only successful responses are stored: when the
operation fails (a refusal, bad input, a crash) the claim is released, so the key can be retried
and bad input leaves nothing behind. A claim left ``in_progress`` by a process that died is taken
over after ``stale_s`` seconds; the operations are idempotent themselves (withdrawal request key,
ledger idempotency key, one vote per person), so running one again cannot move money twice.
Completed records are kept at least 24 hours (``cleanup`` refuses less, and so does a trigger).
An answer that carries a secret (``sealed``: a new webhook signing secret) is stored sealed
under the secrets key (``config.encryption``), for that client, operation and key only.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Header, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from sqlalchemy.engine import Connection, Engine

from api.audit import note, target_of
from api.auth import Principal
from api.problems import (
    IdempotencyInProgress,
    IdempotencyKeyMissing,
    IdempotencyKeyReused,
)
from api.repository import idempotency as repo
from api.routes.deps import IDEMPOTENCY_RETENTION_S, context
from config.encryption import keyring, purpose_of_answer
from config.uow import UnitOfWork

HEADER = "Idempotency-Key"
#: Printable ASCII without spaces, 1 to 200 characters.
KEY_PATTERN = r"^[!-~]{1,200}$"
_KEY = re.compile(KEY_PATTERN)
_CLAIM_ATTEMPTS = 3


class StoredJSONResponse(JSONResponse):
    """A JSON response replayed from storage: the stored bytes go out exactly as first sent."""

    def render(self, content: Any) -> bytes:
        return content.encode() if isinstance(content, str) else super().render(content)


@dataclass(frozen=True)
class StoredResponse:
    """The response of a completed request."""

    status: int
    body: str


def fingerprint(operation: str, target: Mapping[str, Any], body: Mapping[str, Any] | None) -> str:
    """SHA-256 over the canonical form of what the request asks for."""
    blob = json.dumps({"op": operation, "target": dict(target), "body": body},
                      sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


def claim(engine: Engine, client_id: int, operation: str, key: str, fp: str, *,
          stale_s: int, method: str | None = None,
          path: str | None = None) -> StoredResponse | None:
    """Claim the key for the request ``method`` ``path`` (None: go ahead), or the stored
    response of a completed first request.

    Raises IdempotencyKeyReused (another fingerprint: naming the request stored under the key)
    or IdempotencyInProgress.
    """
    for _ in range(_CLAIM_ATTEMPTS):
        with UnitOfWork(engine) as uow:
            # A concurrent claim of the same key waits in insert_claim until the first one
            # commits, then finds its row: exactly one request runs.
            if repo.insert_claim(uow.conn, client_id, operation, key, fp, method=method,
                                 path=path):
                uow.commit()
                return None
            row = repo.lock_record(uow.conn, client_id, operation, key, stale_s=stale_s)
            if row is None:
                continue  # The first request failed and released the key meanwhile: claim again.
            if row.fingerprint != fp:
                raise key_reused(key, operation, row)
            if row.state == "completed":
                assert row.response_status is not None and row.response_body is not None
                return StoredResponse(row.response_status, row.response_body)
            if not row.stale:
                raise IdempotencyInProgress(
                    f"the first {operation} request with {HEADER} {key!r} is still running")
            repo.touch(uow.conn, client_id, operation, key)
            uow.commit()
            return None
    raise IdempotencyInProgress(f"{HEADER} {key!r} is contended; retry")


def key_reused(key: str, operation: str, row: repo.IdempotencyRecord) -> IdempotencyKeyReused:
    """The refusal of another request under a used key: it names the request stored under it
    (method, path, when, and the id of the resource its response names, if any)."""
    resource = _resource_id(row.response_body)
    request = (f"{row.method} {row.path}" if row.method and row.path
               else f"a {operation} request")
    when = f" at {row.created_at.isoformat()}" if row.created_at else ""
    what = (f" (answered {row.response_status}" + (f", id {resource}" if resource is not None
                                                   else "") + ")"
            if row.state == "completed" else " (still running)")
    error = IdempotencyKeyReused(
        f"{HEADER} {key!r} was already used for another request: {request}{when}{what}; "
        "use a new key for a new request")
    error.problem_extra = {"stored_request": {
        "operation": operation, "method": row.method, "path": row.path,
        "received_at": row.created_at.isoformat() if row.created_at else None,
        "state": row.state, "resource_id": resource}}
    return error


def _resource_id(body: str | None) -> int | str | None:
    """The ``id`` of a stored response body (or of its first object member: a timeline's)."""
    if not body:
        return None
    try:
        doc = json.loads(body)
    except ValueError:
        return None
    if not isinstance(doc, dict):
        return None
    for candidate in (doc, *(v for v in doc.values() if isinstance(v, dict))):
        for name in ("id", "case_id", "transaction_id"):
            value = candidate.get(name)
            if isinstance(value, int | str) and not isinstance(value, bool):
                return value
    return None


def complete(engine: Engine, client_id: int, operation: str, key: str, status: int,
             body: str) -> None:
    """Store the response of the claimed request."""
    with UnitOfWork(engine) as uow:
        repo.complete(uow.conn, client_id, operation, key, status, body)
        uow.commit()


def release(engine: Engine, client_id: int, operation: str, key: str) -> None:
    """Drop the claim of a request that failed, so that the key can be used again."""
    with UnitOfWork(engine) as uow:
        repo.release(uow.conn, client_id, operation, key)
        uow.commit()


def cleanup(conn: Connection, *, retention_s: int = IDEMPOTENCY_RETENTION_S) -> int:
    """Delete records older than ``retention_s`` (at least 24 hours); returns how many."""
    if retention_s < IDEMPOTENCY_RETENTION_S:
        raise ValueError(f"idempotency keys are kept at least {IDEMPOTENCY_RETENTION_S} s")
    return repo.delete_older_than(conn, retention_s)


Work = Callable[[str], tuple[int, BaseModel]]


def run(request: Request, principal: Principal, key: str | None, operation: str,
        target: Mapping[str, Any], body: BaseModel | None, work: Work, *,
        audited: bool = False, every_scope: bool = False, sealed: bool = False) -> JSONResponse:
    """Run ``work(key)`` at most once per (client, operation, key) and answer with its response.

    ``work`` returns (status, response model). With ``audited``, the request notes its action
    for the audit trail (``api.audit.note``: the operation, the target, the key, whether it
    was a replay); the row itself, with the status and a refusal's reason, is written once as
    the response starts (``api.app.RequestIdMiddleware``), for a staff principal (for any
    with ``every_scope``). With
    ``sealed`` (the answer carries a secret), the stored answer is sealed under the secrets key.
    """
    noted = (note(request, operation, target_of(target),
                  {"idempotency_key": key} if key is not None else {}, every_scope=every_scope)
             if audited else None)
    if key is None:
        raise IdempotencyKeyMissing(f"{operation} moves money: send an {HEADER} header")
    assert _KEY.fullmatch(key), "the header parameter's pattern is validated by FastAPI"
    ctx = context(request)
    fp = fingerprint(operation, target, body.model_dump(mode="json") if body else None)
    stored = claim(ctx.engine, principal.client_id, operation, key, fp,
                   stale_s=ctx.idempotency_stale_s, method=request.method,
                   path=request.url.path[:2000])
    if stored is not None:
        if sealed:
            stored = StoredResponse(stored.status, keyring().open(
                stored.body, purpose_of_answer(principal.client_id, operation, key)))
        if noted is not None:
            noted.details["replayed"], noted.status = True, stored.status
        return StoredJSONResponse(stored.body, status_code=stored.status,
                                  headers={"Idempotent-Replayed": "true"})
    try:
        status, model = work(key)
    except BaseException:
        release(ctx.engine, principal.client_id, operation, key)
        raise
    response = JSONResponse(model.model_dump(mode="json"), status_code=status)
    # Stored as the exact bytes sent, so that a replay is byte-identical.
    sent = bytes(response.body).decode()
    if sealed:
        sent = keyring().seal(sent, purpose_of_answer(principal.client_id, operation, key))
    complete(ctx.engine, principal.client_id, operation, key, status, sent)
    if noted is not None:
        noted.status = status
    return response


#: The header parameter of money-moving routes (missing: 400 from ``run``, not 422).
IdempotencyKey = Annotated[str | None, Header(
    alias=HEADER, pattern=KEY_PATTERN,
    description="Required: 1-200 printable ASCII characters, unique per request.")]
