"""Response bodies of the audit trail (``GET /v1/admin/audit``, ``custody audit --json``)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from api.repository.audit import AuditRecord
from api.schemas import Page

Outcome = Literal["ok", "refused", "failed"]
Channel = Literal["api", "console", "cli"]


class AuditError(BaseModel):
    """Why a refused or failed action was refused: the problem document's code and detail."""

    code: str = Field(description="The problem's stable code (docs/errors.md).",
                      examples=["forbidden"])
    detail: str | None = Field(description="The problem's detail, as the caller got it.",
                               examples=["scope 'support' may not do this (needs admin)"])


class AuditEntry(BaseModel):
    """One row of the audit trail: who did what to what, when, in which request, and how it
    ended."""

    id: int = Field(description="The row's id (rows are numbered in the order written).",
                    examples=[4182])
    at: datetime = Field(description="When the row was written (the database clock).")
    actor: str = Field(description="Who acted: the API client's name of the key, or "
                                   "``cli:<OS user>`` on the command line.",
                       examples=["carol"])
    client: str | None = Field(description="The acting key's client; null on the command line.",
                               examples=["carol"])
    key_prefix: str | None = Field(description="The acting key's public prefix; null on the "
                                               "command line.", examples=["3f9a0c1b2d4e"])
    scope: str | None = Field(description="The acting key's scope (client, support, admin, "
                                          "approver); null on the command line.",
                              examples=["admin"])
    channel: Channel = Field(description="Where the action came from: the API, the console or "
                                         "the command line.", examples=["api"])
    action: str = Field(description="What was done: a stable dotted name "
                                    "(``withdrawal.approval``, ``api_key.revoke``, "
                                    "``user.balances.read``, ...).",
                        examples=["withdrawal.approval"])
    target: str = Field(description="What it was done to: ``name=value`` pairs, "
                                    "comma-separated, sorted by name (empty for none).",
                        examples=["withdrawal_id=42"])
    request_id: str = Field(description="The request's ``X-Request-ID`` (API, console), or the "
                                        "id of one command line invocation.",
                            examples=["5f0c2a9e4b7d41c8a3e6f1b2c9d8e7a6"])
    status: int = Field(description="The HTTP status answered (a command line: 200, or the "
                                    "status the API gives its error).", examples=[201])
    outcome: Outcome = Field(description="ok (status below 400), refused (4xx) or failed "
                                         "(5xx).", examples=["ok"])
    error: AuditError | None = Field(description="Why it was refused or failed; null when it "
                                                 "succeeded (and on rows older than the "
                                                 "reason's recording).")
    details: dict[str, Any] = Field(description="Facts of the action: its ``idempotency_key``, "
                                                "``replayed`` for a replay, what it changed.",
                                    examples=[{"idempotency_key": "a1"}])


class AuditEntries(Page):
    """Audit rows, newest first (the list shape of every list: ``next_cursor`` pages on)."""

    items: list[AuditEntry] = Field(description="The rows of this page, newest first.")


def outcome_of(status: int) -> Outcome:
    """The outcome of an HTTP status: ok below 400, refused 4xx, failed 5xx."""
    return "ok" if status < 400 else "refused" if status < 500 else "failed"


def audit_entry(r: AuditRecord) -> AuditEntry:
    """The listed form of a stored row."""
    channel: Channel = "cli" if r.channel == "cli" else "console" if r.channel == "console" \
        else "api"
    error = None
    if r.error_code is not None:
        error = AuditError(code=r.error_code, detail=r.error_detail)
    elif r.status >= 400 and isinstance(r.details.get("error"), str):
        error = AuditError(code=r.details["error"], detail=None)  # a row from before 0033
    return AuditEntry(id=r.id, at=r.at, actor=r.actor, client=r.client_name,
                      key_prefix=r.key_prefix, scope=r.scope, channel=channel, action=r.action,
                      target=r.target, request_id=r.request_id, status=r.status,
                      outcome=outcome_of(r.status), error=error, details=r.details)
