"""Errors as ``application/problem+json`` (RFC 9457), from one place.

Every expected error of the engine is a :class:`config.errors.CustodyError` with a stable
``code``; :func:`status_of` maps its class to an HTTP status (walking the class's MRO, so a new
subclass inherits its parent's status), and :func:`install` registers the handlers that turn
engine errors, request validation errors and HTTP errors into problem documents with that
``code``. Bad input is refused before anything is written, with a 4xx, never a 500.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from sqlalchemy import exc as sa_exc
from starlette.exceptions import HTTPException as StarletteHTTPException

from api.web import errors as _console
from chains import errors as ce
from config.errors import CommitInDoubt, ConfigurationInvalid, CustodyError, DatabaseUnavailable
from config.uow import is_connection_lost, sqlstate
from deposits import errors as de
from ledger import errors as le
from reconcile import errors as rce
from reserves import errors as rse
from sweeps import errors as se
from withdrawals import errors as we

PROBLEM_JSON = "application/problem+json"
#: The pydantic error type of ``api.schemas.MinorUnits`` and the code it answers with
#: (``ledger.errors.AmountInvalid.code``; api.schemas imports this module, not the reverse).
AMOUNT_ERROR = le.AmountInvalid.code
log = logging.getLogger("custody.api")


class ApiError(CustodyError):
    """Root of the HTTP layer's own errors; ``status`` is the HTTP status."""

    code = "api_error"
    status = 400
    #: Machine fields the problem document carries besides the standard ones.
    problem_extra: dict[str, Any] | None = None


class Unauthenticated(ApiError):
    """No API key, a malformed one, or one that is unknown, revoked or expired."""

    code = "unauthenticated"
    status = 401


class ApiKeyNotFound(ApiError):
    """No API key has this prefix or id (``custody keys revoke``, the admin key routes)."""

    code = "api_key_not_found"
    status = 404


class Forbidden(ApiError):
    """The key's scope does not allow this endpoint."""

    code = "forbidden"
    status = 403
    #: The refused principal (an ``api.auth.Principal``), when the refusal knows it.
    principal: Any = None


class UserNotFound(ApiError):
    """No such user, or one that belongs to another client (the same answer, on purpose)."""

    code = "user_not_found"
    status = 404


class RequestInvalid(ApiError):
    """The request is well-formed JSON but a field is unacceptable."""

    code = "request_invalid"
    status = 422


class ChainUnknown(RequestInvalid):
    """The chain is not in the configuration."""

    code = "chain_unknown"


class WithdrawalsNotConfigured(ApiError):
    """The configuration has no ``[withdrawals]`` table: this deployment pays nothing out."""

    code = "withdrawals_not_configured"
    status = 409


class IdempotencyKeyMissing(ApiError):
    """A money-moving request came without an ``Idempotency-Key`` header."""

    code = "idempotency_key_missing"
    status = 400


class IdempotencyKeyReused(ApiError):
    """The ``Idempotency-Key`` was used for a different request of this operation."""

    code = "idempotency_key_reused"
    status = 422


class IdempotencyInProgress(ApiError):
    """The first request with this ``Idempotency-Key`` is still running; retry later."""

    code = "idempotency_in_progress"
    status = 409
    retryable = True


class FundsShort(CustodyError):
    """The available balance does not cover the request; nothing was written. The detail says
    which balance was short and by how much (decimals with the asset); the problem carries
    ``account``, ``asset``, ``available``, ``needed`` and ``shortfall`` (amount objects)."""

    code = le.InsufficientFunds.code

    def __init__(self, *, account: str, asset: str, scale: int, available_minor: int,
                 needed_minor: int, what: str) -> None:
        short = needed_minor - available_minor
        super().__init__(
            f"insufficient funds: the available balance of {account} is "
            f"{plain_decimal(available_minor, scale)} {asset}, {what} needs "
            f"{plain_decimal(needed_minor, scale)} {asset} (short by "
            f"{plain_decimal(short, scale)} {asset})")
        self.problem_extra: dict[str, Any] = {
            "account": account, "asset": asset,
            "available": le_amount(available_minor, scale),
            "needed": le_amount(needed_minor, scale),
            "shortfall": le_amount(short, scale)}


def le_amount(minor: int, scale: int) -> dict[str, str]:
    """The API's amount object ``{"minor", "decimal"}``."""
    from ledger.model import amount_json

    return amount_json(minor, scale)


def plain_decimal(minor: int, scale: int) -> str:
    """Minor units as a decimal without trailing zeros (1200000000000000000 at 18: ``1.2``)."""
    text = le_amount(minor, scale)["decimal"]
    return text.rstrip("0").rstrip(".") if "." in text else text


class RateLimited(ApiError):
    """Too many requests with this API key in the current window, or too many failed
    authentications from this address (then every request from it, until the window ends)."""

    code = "rate_limited"
    status = 429
    retryable = True

    def __init__(self, message: str, retry_after_s: int) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


#: HTTP status of each engine error class; the nearest class in the MRO wins.
STATUS: dict[type[CustodyError], int] = {
    CustodyError: 422,
    ConfigurationInvalid: 503,
    DatabaseUnavailable: 503,
    # The request may have been carried out: a retry with the same Idempotency-Key finds it.
    CommitInDoubt: 503,
    le.LedgerError: 422,
    le.TransactionNotFound: 404,
    le.AccountNotFound: 404,
    le.AssetNotFound: 422,
    le.IdempotencyConflict: 409,
    # A well-formed request the current state refuses (a balance, a limit) is a conflict: the
    # same request may succeed later; 422 is for requests that never can.
    le.InsufficientFunds: 409,
    FundsShort: 409,
    le.PeriodClosed: 409,
    le.NotOutOfPeriod: 409,
    le.ReversalExceedsOriginal: 409,
    le.ReversalMismatch: 409,
    le.PeriodCloseInvalid: 409,
    le.PeriodProposalNotFound: 404,
    le.AssetScaleMismatch: 409,
    le.AccountMismatch: 409,
    de.DepositError: 409,
    de.DepositNotFound: 404,
    de.NotificationInvalid: 422,
    de.AddressSourceUnavailable: 503,
    de.WatcherBusy: 503,
    we.WithdrawalError: 409,
    we.WithdrawalRefused: 422,
    we.DailyLimitExceeded: 409,
    # Policy refusals that may pass later (the address activates, the window rolls on).
    we.VelocityLimitExceeded: 409,
    we.DestinationNotAllowed: 409,
    we.AllowlistEntryNotFound: 404,
    we.AllowlistEntryInvalid: 422,
    we.WithdrawalNotFound: 404,
    we.SignerUnavailable: 503,
    # The node of a chain could not be asked, or answered nonsense: a retry may succeed.
    ce.ChainError: 503,
    se.SweepsError: 409,
    se.SweepsNotConfigured: 409,
    se.MovementNotFound: 404,
    se.ColdTransferInvalid: 422,
    se.RefillInvalid: 422,
    se.RequestKeyReused: 422,
    se.AdminRequired: 403,
    se.HotHoldingUnavailable: 503,
    rce.ReconcileError: 409,
    rce.CaseNotFound: 404,
    rce.CaseResolutionInvalid: 422,
    rse.ReservesError: 409,
    rse.ReportNotFound: 404,
    rse.ProofNotFound: 404,
    rse.SignatureRefused: 422,
    rse.BlockNotFinal: 422,
    rse.ReportInconsistent: 500,
}


def status_of(error: CustodyError) -> int:
    """The HTTP status an engine error answers with."""
    if isinstance(error, ApiError):
        return error.status
    for cls in type(error).__mro__:
        if cls in STATUS:
            return STATUS[cls]
    return 422


def _title(code: str) -> str:
    return code.replace("_", " ").capitalize()


def problem(
    request: Request,
    status: int,
    code: str,
    detail: str,
    *,
    headers: dict[str, str] | None = None,
    **extra: Any,
) -> Response:
    """A problem document: type, title, status, detail, the stable code and the request id;
    on a console page (``api.web``), the console's error page (or its sign-in page) instead.
    The code and detail stay on the request's state, as the reason of its audit row
    (``api.audit``)."""
    request.state.problem = (code, detail)
    if _console.is_console(request):
        return _console.page_for(request, status, code, detail)
    body = {
        "type": f"urn:custody:problem:{code}",
        "title": _title(code),
        "status": status,
        "detail": detail,
        "code": code,
        "request_id": getattr(request.state, "request_id", None) or "",
        **extra,
    }
    return JSONResponse(body, status_code=status, headers=headers, media_type=PROBLEM_JSON)


async def _custody_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, CustodyError)
    status = status_of(exc)
    headers = None
    if isinstance(exc, RateLimited):
        headers = {"Retry-After": str(exc.retry_after_s)}
    elif isinstance(exc, CommitInDoubt):
        headers = {"Retry-After": "1"}
    elif status == 401:
        headers = {"WWW-Authenticate": "Bearer"}
    extra: dict[str, Any] = getattr(exc, "problem_extra", None) or {}
    return problem(request, status, exc.code, exc.message, headers=headers, **extra)


def _errors(exc: RequestValidationError) -> list[dict[str, Any]]:
    # Only where and what: the offending input is not echoed (it may be huge or sensitive).
    return [
        {"loc": [p if isinstance(p, int | str) else str(p) for p in e.get("loc", ())],
         "msg": str(e.get("msg", "")), "type": str(e.get("type", ""))}
        for e in exc.errors()
    ]


async def _validation_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    errors = _errors(exc)
    where = ", ".join(".".join(str(p) for p in e["loc"]) for e in errors[:5])
    if errors and all(e["type"] == AMOUNT_ERROR for e in errors):
        # One code for every shape of a bad amount ("0", "-1", "1.5", "1e3", a number, ...):
        # the shared ``api.schemas.MinorUnits`` type raises this error type and no other.
        return problem(request, 422, AMOUNT_ERROR,
                       f"invalid amount: {where} must be a positive integer string of minor "
                       "units below 2^127", errors=errors)
    return problem(request, 422, "request_invalid", f"invalid request: {where}", errors=errors)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, StarletteHTTPException)
    if exc.status_code == 400:
        # FastAPI's answer to a body it cannot decode: bad input like any other, 422.
        return problem(request, 422, "request_invalid", f"malformed request: {exc.detail}")
    code = {404: "not_found", 405: "method_not_allowed", 413: "payload_too_large"}.get(
        exc.status_code, "http_error")
    return problem(request, exc.status_code, code, str(exc.detail),
                   headers=dict(exc.headers) if exc.headers else None)


async def _database_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, sa_exc.DBAPIError)
    state = sqlstate(exc) or ""
    if state.startswith("22"):
        # A data exception means input slipped past validation: still the caller's input.
        log.warning("data exception from the database: %s", state)
        return problem(request, 422, "request_invalid", "a value is out of range")
    if state in ("40001", "40P01", "57014", "55P03", "53300"):
        return problem(request, 503, "database_busy", "the database is busy; retry later",
                       headers={"Retry-After": "1"})
    if is_connection_lost(exc):
        # A failover or a restart: the pool is dropped and the next connections go to the
        # (new) primary.
        return problem(request, 503, "database_unavailable",
                       "the database connection was lost; retry later",
                       headers={"Retry-After": "1"})
    raise exc


async def response_for(request: Request, exc: Exception) -> Response:
    """The problem response the handlers ``install`` registers give for ``exc``, for code that
    answers before the app's exception middleware (``api.routes.users.BalancesFastPath``);
    an exception no handler takes is raised again (a 500, as from a route)."""
    if isinstance(exc, CustodyError):
        return await _custody_error(request, exc)
    if isinstance(exc, sa_exc.DBAPIError):
        return await _database_error(request, exc)
    raise exc


def install(app: FastAPI) -> None:
    """Register the problem+json handlers on ``app``."""
    app.add_exception_handler(CustodyError, _custody_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(sa_exc.DBAPIError, _database_error)
