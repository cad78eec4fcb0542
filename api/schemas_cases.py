"""Request and response bodies of the cases routes (``api.routes.cases``)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field

from api.schemas import Body, Page, Text
from reconcile import service
from reconcile.model import Case


class CaseItem(BaseModel):
    """A case: a discrepancy a check found, or a deposit or withdrawal case. Amounts
    (``expected``, ``observed``) are strings of minor units where they are amounts."""

    id: int
    type: str
    subject: str = Field(description="The stable key: the same discrepancy is the same case.")
    refs: dict[str, str]
    expected: str | None
    observed: str | None
    evidence: dict[str, Any]
    status: str = Field(description="open | resolved")
    first_seen_at: datetime
    last_seen_at: datetime
    seen_count: int
    opened_by: str
    resolution: str | None
    resolved_by: str | None
    resolved_at: datetime | None
    resolution_transaction_id: int | None = Field(
        description="The new ledger transaction that fixed it (it references the case).")
    next: str | None = Field(description="What to do next (open cases).")


class CaseItems(Page):
    """Cases, oldest first."""

    items: list[CaseItem]


class CaseResolve(Body):
    """Resolve a case once: how, and the new ledger transaction that fixed it when the case is
    about a ledger transaction (its ``reference`` is ``case:<id>``, or its idempotency key
    starts with it)."""

    resolution: Text
    transaction_id: int | None = Field(default=None, ge=1, le=2**63 - 1)


def case_item(case: Case) -> CaseItem:
    """A case's response body."""
    return CaseItem(id=case.id, type=case.type, subject=case.subject, refs=case.refs,
                    expected=case.expected, observed=case.observed, evidence=case.evidence,
                    status=case.status, first_seen_at=case.first_seen_at,
                    last_seen_at=case.last_seen_at, seen_count=case.seen_count,
                    opened_by=case.opened_by, resolution=case.resolution,
                    resolved_by=case.resolved_by, resolved_at=case.resolved_at,
                    resolution_transaction_id=case.resolution_transaction_id,
                    next=service.next_step(case) if case.open else None)
