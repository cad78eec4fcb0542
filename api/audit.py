"""The audit trail (``api_audit``): which actions are recorded, by whom, and how it is read.

- **One row per request**, written in one place: ``api.app.RequestIdMiddleware`` asks
  :func:`request_row` as the response starts (before its first byte is sent, so a caller that
  got an answer finds its row) and appends it in its own short transaction. A request that
  fails with no response (a 500) is recorded as it leaves. So a successful action is recorded
  once, a refused one once, and a replay of an ``Idempotency-Key`` once more (as a replay).
- **What is recorded**: every request of a staff principal (support, admin, approver) that is
  not a plain read (``POST``: actions, also when refused), every staff read of a user's data
  (:data:`ACTIONS` names those routes: balances, deposits, withdrawals, statements, timelines,
  the console's user page; custodians account for staff access to customer data), every staff
  request refused (4xx), and every scope refusal (403), whoever asked. A client's own requests
  are not recorded (the hot paths, ``GET balances``, pay one dictionary look-up, no insert),
  except the routes of :data:`EVERY_SCOPE` (a client's changes to its withdrawal allowlist,
  refused or not: they decide what may leave the custodian; their routes note their action
  with ``note(..., every_scope=True)``).
- **What a row says**: the actor and the key (client, prefix, scope), the action (a stable
  dotted name: the route's :data:`ACTIONS` entry, or what the route noted with :func:`note`,
  which ``api.idempotency.run`` does with its operation name), the target (``name=value``
  pairs), the request id, the channel (``api``, ``console``, ``cli``), the HTTP status, and for
  a refusal the problem's code and detail (``api.problems.problem`` leaves them on the
  request's state).
- **The command line** records its mutating commands through ``api.cli_audit.audited``: actor
  ``cli:<OS user>``, one request id per invocation, no key.
- The table is append-only (triggers for every role, and the application role has only
  SELECT and INSERT). It is read newest first with keyset pagination (:func:`list_audit`).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from fastapi import Request
from sqlalchemy.engine import Connection, Engine

from api.repository import audit as repo
from api.repository.audit import OUTCOME_SQL, AuditRecord, AuditRow
from config.uow import run_in_transaction

log = logging.getLogger("custody.audit")
STAFF = frozenset({"support", "admin", "approver"})
OUTCOMES = tuple(OUTCOME_SQL)
#: Methods that only read.
_READS = frozenset({"GET", "HEAD", "OPTIONS"})
_DETAIL_MAX = 2000

#: The action of each route (``METHOD template``) whose requests are recorded by name: every
#: route a staff scope may write through, the client routes a staff key may be refused on, and
#: the reads of a user's data (recorded for staff, never for clients). A route noting its own
#: action (``api.idempotency.run``) uses the same name, so that a refusal before the route's
#: code ran (scope, validation, a missing ``Idempotency-Key``) and its success agree.
ACTIONS: dict[str, str] = {
    "POST /v1/users": "user.create",
    "POST /v1/users/{user_id}/deposit-addresses": "deposit_address.assign",
    "POST /v1/users/{user_id}/withdrawals": "withdrawal.create",
    "POST /v1/withdrawals/{withdrawal_id}/cancel": "withdrawal.cancel",
    "POST /v1/withdrawals/{withdrawal_id}/approvals": "withdrawal.approval",
    "POST /v1/admin/ledger/transactions/{transaction_id}/reversals": "ledger.reversal",
    "POST /v1/admin/periods": "ledger.period_close",
    "POST /v1/admin/periods/proposals/{proposal_id}/approvals": "ledger.period_close_approval",
    "POST /v1/admin/withdrawals/{withdrawal_id}/write-off-votes": "withdrawal.write_off_vote",
    "POST /v1/admin/withdrawals/{withdrawal_id}/returns": "withdrawal.return_link",
    "POST /v1/admin/cases/{case_id}/resolve": "case.resolve",
    "POST /v1/admin/cases/{case_id}/proposals": "case.proposal",
    "POST /v1/admin/cases/{case_id}/approvals": "case.approval",
    "POST /v1/admin/treasury/fundings": "treasury.funding",
    "POST /v1/admin/api-keys": "api_key.create",
    "POST /v1/admin/api-keys/{key_id}/revoke": "api_key.revoke",
    "POST /v1/admin/sweeps/run": "sweeps.run",
    "POST /v1/admin/cold-transfers": "cold_transfer.propose",
    "POST /v1/admin/cold-transfers/{cold_transfer_id}/approvals": "cold_transfer.decision",
    "POST /v1/admin/refills": "refill.request",
    "POST /v1/admin/webhook-endpoints": "webhook_endpoint.create",
    "POST /v1/admin/webhook-endpoints/{endpoint_id}/rotate": "webhook_endpoint.rotate",
    "POST /v1/admin/webhook-endpoints/{endpoint_id}/disable": "webhook_endpoint.disable",
    "POST /v1/allowlist": "allowlist.add",
    "POST /v1/admin/allowlist": "allowlist.add",
    "DELETE /v1/allowlist/{entry_id}": "allowlist.remove",
    "POST /v1/admin/allowlist/{entry_id}/shorten": "allowlist.shorten",
    "POST /console/login": "console.sign_in",
    "POST /console/logout": "console.sign_out",
    "POST /console/withdrawals/{withdrawal_id}/approvals": "withdrawal.approval",
    "POST /console/withdrawals/{withdrawal_id}/write-off-votes": "withdrawal.write_off_vote",
    "POST /console/cases/{case_id}/resolve": "case.resolve",
    # Reads of a user's data (staff only).
    "GET /v1/users/{user_id}/deposit-addresses": "user.addresses.read",
    "GET /v1/users/{user_id}/balances": "user.balances.read",
    "GET /v1/users/{user_id}/deposits": "user.deposits.read",
    "GET /v1/users/{user_id}/withdrawals": "user.withdrawals.read",
    "GET /v1/users/{user_id}/statement": "user.statement.read",
    "GET /v1/reserves/proofs/{user_id}": "user.proof.read",
    "GET /v1/deposits/{chain}/{tx_hash}": "deposit.read",
    "GET /v1/withdrawals/{withdrawal_id}": "withdrawal.read",
    "GET /v1/withdrawals/by-tx/{chain}/{tx_hash}": "withdrawal.read",
    "GET /v1/admin/ledger/transactions/{transaction_id}": "ledger.transaction.read",
    "GET /console/users/{user_id}": "user.read",
    "GET /console/deposits/{chain}/{tx_hash}": "deposit.read",
    "GET /console/withdrawals/{withdrawal_id}": "withdrawal.read",
}


#: The routes recorded for a client's key too (``METHOD template``).
EVERY_SCOPE = frozenset({"POST /v1/allowlist", "DELETE /v1/allowlist/{entry_id}"})


@dataclass
class Note:
    """What a route says of its action (``request.state.audit``): the name, the target and
    facts for ``details``, which it may add to until the response starts; ``status``, the
    action's own status when the response is another (a console form answers 303 after the
    action's 201), recorded unless the response is an error; ``every_scope``, recorded for a
    client's key too (an action that changes what may leave the custodian)."""

    action: str
    target: str
    details: dict[str, Any] = field(default_factory=dict)
    status: int | None = None
    every_scope: bool = False


def note(request: Request, action: str, target: str,
         details: Mapping[str, Any] | None = None, *, every_scope: bool = False) -> Note:
    """Say what this request does, for its audit row (written only if the request is one that
    is recorded, or for any principal with ``every_scope``; no database work here)."""
    noted = Note(action, target, dict(details or {}), every_scope=every_scope)
    request.state.audit = noted
    return noted


def target_of(values: Mapping[str, Any]) -> str:
    """``name=value`` pairs, sorted by name, comma-separated (the target of a row)."""
    return ",".join(f"{k}={v}" for k, v in sorted(values.items()))


#: The templates of ``ACTIONS`` as patterns, for a request no route answered (the balances
#: fast path, ``api.routes.users.BalancesFastPath``, answers before the router).
_PATTERNS = [(re.compile("^" + re.sub(r"\\{(\w+)\\}", r"(?P<\1>[^/]+)", re.escape(key))
                         + "$"), key) for key in ACTIONS]


def _route(scope: Mapping[str, Any]) -> tuple[str, Mapping[str, Any]]:
    """``METHOD template`` of the request and its path parameters."""
    method = str(scope.get("method", ""))
    path = getattr(scope.get("route"), "path", None)
    if isinstance(path, str):
        return f"{method} {path}", scope.get("path_params") or {}
    asked = f"{method} {scope.get('path', '')}"
    for pattern, key in _PATTERNS:
        match = pattern.match(asked)
        if match is not None:
            return key, match.groupdict()
    return asked, {}


def request_row(scope: Mapping[str, Any], status: int,
                error: tuple[str, str] | None = None) -> AuditRow | None:
    """The audit row of the HTTP request ``scope`` answered ``status`` (None: not recorded;
    see the module's docstring). ``error`` (code, detail) is the reason of a failure that has
    no problem document (an exception no handler took); a problem's is on the state."""
    state = scope.get("state")
    principal = state.get("principal") if state else None
    if principal is None:
        return None
    noted: Note | None = state.get("audit") if state else None
    method = str(scope.get("method", ""))
    if principal.scope not in STAFF and status != 403 and not (noted and noted.every_scope) \
            and (method in _READS or _route(scope)[0] not in EVERY_SCOPE):
        return None  # a client's own request: the hot paths stop here
    assert state is not None
    key, path_params = _route(scope)
    if (method in _READS and status < 400 and noted is None and key not in ACTIONS):
        return None  # a staff read of no user's data (queues, lists, reports)
    problem = state.get("problem") or error
    code, detail = problem if problem is not None and status >= 400 else (None, None)
    if noted is not None and noted.status is not None and status < 400:
        status = noted.status
    return AuditRow(
        actor=principal.actor, client_id=principal.client_id, key_prefix=principal.key_prefix,
        scope=principal.scope,
        action=noted.action if noted is not None else ACTIONS.get(key, key),
        target=(noted.target if noted is not None
                else target_of(path_params)),
        request_id=str(state.get("request_id") or ""), status=status,
        channel="console" if str(scope.get("path", "")).startswith("/console") else "api",
        details_json=json.dumps(noted.details if noted is not None else {}, default=str,
                                sort_keys=True),
        error_code=code[:100] if code else None,
        error_detail=detail[:_DETAIL_MAX] if detail is not None else None)


def record(engine: Engine, row: AuditRow) -> int:
    """Append ``row`` in its own short transaction; its id. A connection lost before the
    commit is retried on a new one (``run_in_transaction``: a failover); a row that still
    cannot be written is logged whole at ERROR before the error goes on, so that the action
    it records, committed already, is not left without a trace."""
    try:
        return run_in_transaction(engine, lambda uow: repo.insert(uow.conn, row))
    except Exception:
        log.error("audit row not written: %s", json.dumps(dataclasses.asdict(row), default=str))
        raise


def list_audit(conn: Connection, *, actor: str | None = None, since: datetime | None = None,
               action: str | None = None, outcome: str | None = None,
               before_id: int | None = None, limit: int = 100) -> list[AuditRecord]:
    """Rows newest first, after the cursor ``before_id`` (the last id of the previous page),
    matching every filter given (``outcome``: ok, refused or failed)."""
    assert outcome is None or outcome in OUTCOME_SQL, outcome
    return repo.list_rows(conn, actor=actor, since=since, action=action, outcome=outcome,
                          before_id=before_id, limit=limit)
