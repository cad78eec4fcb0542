"""``custody audit``: the audit trail on the command line; ``audited``: the row every mutating
command leaves in it.

Mounted by ``api/cli.py`` with ``app.add_typer(audit_cli)`` (no name: the command is
``custody audit``).

- A command decorated with :func:`audited` (under ``@friendly``, so that it sees the engine's
  error itself) appends one row when it ends: actor ``cli:<OS user>``, channel ``cli``, no key
  (client, prefix and scope null), the request id of this invocation (one per process, as each
  invocation is one), the action and target it names, status 200, or for a refusal the status
  the API gives that error and its code and message (also for an error line the command
  printed itself before exiting 2). Exit 1 (findings reported, a command that did its work)
  is a success with ``exit_code`` 1 in the details. A failure of the database itself (or of
  the settings) writes no row: nothing reached the engine and nothing could be written. A row
  that cannot be written after another failure is logged, and the command's own error is what
  the operator sees; after a success it fails the command loudly.
- ``custody audit`` reads the trail newest first with the API's filters and pages
  (``GET /v1/admin/audit``); ``--json`` prints the API's shape.
"""

from __future__ import annotations

import getpass
import json
import logging
import sys
import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from functools import wraps
from typing import Annotated, Any, Literal, TypeVar

import typer

from api.cli_reads import JsonOption
from api.console import console, friendly, last_error
from config.errors import ConfigurationInvalid, CustodyError, DatabaseUnavailable

audit_cli = typer.Typer()
F = TypeVar("F", bound=Callable[..., Any])
log = logging.getLogger("custody.audit")
#: The id of this invocation (created on first use; a process is one invocation).
_invocation: list[str] = []
#: The status of an error line a command printed itself (its code alone does not say).
_PRINTED_ERROR_STATUS = 422


def invocation_id() -> str:
    """The request id of this command line invocation (32 hex digits, as the API's)."""
    if not _invocation:
        _invocation.append(uuid.uuid4().hex)
    return _invocation[0]


def cli_actor() -> str:
    """``cli:<OS user>``: the actor of what a command line does (``cli:unknown`` when the uid
    has no name, in a container)."""
    try:
        name = getpass.getuser()[:100] or "unknown"
    except (KeyError, OSError):
        name = "unknown"
    return f"cli:{name}"


Target = Sequence[str] | Callable[[Mapping[str, Any]], Mapping[str, Any]]


def audited(action: str, target: Target = (), details: Sequence[str] = (),
            **facts: Any) -> Callable[[F], F]:
    """Record one audit row per run of the decorated command: ``action`` on ``target`` (the
    named parameters that were given, or what a function of the parameters returns), with the
    parameters named in ``details`` and the constant ``facts`` as details."""

    def decorate(fn: F) -> F:
        @wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            values = (target(kwargs) if callable(target)
                      else {n: kwargs[n] for n in target if kwargs.get(n) is not None})
            noted = {**facts, **{n.rstrip("_"): kwargs[n] for n in details
                                 if kwargs.get(n) is not None}}
            last_error.clear()
            try:
                result = fn(*args, **kwargs)
            except (ConfigurationInvalid, DatabaseUnavailable):
                raise  # nothing reached the engine, and nothing could record it
            except CustodyError as exc:
                from api.problems import status_of

                _record_after_failure(action, values, noted, status_of(exc), exc.code,
                                      exc.message)
                raise
            except typer.Exit as exc:
                if exc.exit_code in (0, 1):
                    _record(action, values, {**noted, **({"exit_code": 1} if exc.exit_code
                                                          else {})}, 200)
                else:
                    code, message = (last_error[0] if last_error
                                     else ("command_failed", f"exit status {exc.exit_code}"))
                    _record_after_failure(action, values, {**noted,
                                                           "exit_code": exc.exit_code},
                                          _PRINTED_ERROR_STATUS, code, message)
                raise
            except Exception as exc:
                if not _database_failed(exc):
                    _record_after_failure(action, values, noted, 500, "internal_error",
                                          type(exc).__name__)
                raise
            _record(action, values, noted, 200)
            return result

        return wrapper  # type: ignore[return-value]

    return decorate


def _database_failed(exc: Exception) -> bool:
    """Whether ``exc`` is the database failing to answer (then no row can be written)."""
    if "sqlalchemy" not in sys.modules:
        return False
    from sqlalchemy.exc import InterfaceError, OperationalError

    return isinstance(exc, OperationalError | InterfaceError)


def _record(action: str, target: Mapping[str, Any], details: Mapping[str, Any], status: int,
            code: str | None = None, message: str | None = None) -> None:
    from api.audit import record, target_of
    from api.repository.audit import AuditRow
    from config.database import get_engine

    row = AuditRow(actor=cli_actor(), client_id=None, key_prefix=None, scope=None,
                   action=action, target=target_of(target), request_id=invocation_id(),
                   status=status, channel="cli",
                   details_json=json.dumps(details, default=str, sort_keys=True),
                   error_code=code, error_detail=None if message is None else message[:2000])
    record(get_engine(), row)


def _record_after_failure(action: str, target: Mapping[str, Any], details: Mapping[str, Any],
                          status: int, code: str, message: str) -> None:
    """``_record`` of a failed command: if the row cannot be written either (the database is
    what failed), say so in the log and let the command's own error go on."""
    try:
        _record(action, target, details, status, code, message)
    except Exception as exc:  # the command's error is the one to report
        log.warning("the audit row of %s could not be written: %s", action, exc)


def _when(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ")


@audit_cli.command("audit")
@friendly
def show_audit(
    actor: Annotated[str | None, typer.Option(
        help="Only this actor's rows (an API client's name, or cli:<OS user>).")] = None,
    since: Annotated[str | None, typer.Option(
        help="Only rows written at or after this ISO 8601 time (naive: UTC).")] = None,
    action: Annotated[str | None, typer.Option(
        help="Only this action (withdrawal.approval, api_key.revoke, ...).")] = None,
    outcome: Annotated[Literal["ok", "refused", "failed"] | None, typer.Option(
        help="Only rows that ended so: ok, refused (4xx) or failed (5xx).")] = None,
    limit: Annotated[int, typer.Option(min=1, max=1000, help="Rows per page.")] = 100,
    cursor: Annotated[int | None, typer.Option(
        min=1, help="next_cursor of the previous page (same filters).")] = None,
    as_json: JsonOption = False,
) -> None:
    """The audit trail, newest first: who did what to what, when, in which request, through
    which channel (api, console, cli), the status and, for a refusal, why. The rows of
    ``GET /v1/admin/audit``, with its filters and pages (--json: its shape)."""
    from api.audit import list_audit
    from api.render import grid, print_grid
    from api.routes.paging import page
    from api.schemas import parse_instant
    from api.schemas_audit import AuditEntries, audit_entry
    from config.database import get_engine

    with get_engine().connect() as conn:
        found = list_audit(conn, actor=actor, since=parse_instant(since, what="--since"),
                           action=action, outcome=outcome, before_id=cursor,
                           limit=limit + 1)
    rows, more, after = page(found, limit, lambda r: r.id)
    body = AuditEntries(items=[audit_entry(r) for r in rows], has_more=more,
                        next_cursor=after)
    if as_json:
        from api.cli_reads import print_json

        print_json(body)
        return
    g = grid(None, "id", "at", "actor", "channel", "action", "target", "status", "reason",
             "request id", right=("id", "status"))
    for e in body.items:
        reason = ("" if e.error is None else e.error.code if not e.error.detail
                  else f"{e.error.code}: {e.error.detail}")
        g.add_row(str(e.id), _when(e.at), e.actor, e.channel, e.action, e.target,
                  str(e.status), reason, e.request_id)
    print_grid(console, g)
    if body.next_cursor is not None:
        console.print(f"more: --cursor {body.next_cursor}", highlight=False, markup=False)
