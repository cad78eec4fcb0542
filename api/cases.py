"""Cases and their alerts: the one helper through which every check's job and CLI command
records its findings (``record_and_alert``), raising ``alert.case_opened`` for each case it
opened, in the same unit of work (``reconcile`` cannot import ``api``)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy.engine import Engine

from api import outbox
from config.uow import UnitOfWork, run_in_transaction
from reconcile import service
from reconcile.model import Case, Finding, Recorded


def record_and_alert(uow: UnitOfWork, opened_by: str, findings: Sequence[Finding],
                     now: datetime) -> Recorded:
    """Record ``findings`` as cases (``reconcile.service.record_findings``) and write an
    ``alert.case_opened`` event per newly opened case (once per case id); a re-sighted case
    raises nothing new. The caller commits."""
    recorded = service.record_findings(uow, opened_by, findings, now=now)
    for case in service.get_cases(uow, recorded.opened):
        outbox.raise_alert(uow.conn, "case_opened", f"case:{case.id}", alert_payload(case))
    return recorded


def record_check(engine: Engine, opened_by: str, findings: Sequence[Finding],
                 now: datetime) -> Recorded:
    """``record_and_alert`` in a unit of work of its own, committed (retried whole on a
    serialization failure or deadlock): what a check's job and CLI command run."""
    return run_in_transaction(engine, lambda uow: record_and_alert(uow, opened_by, findings,
                                                                    now))


def alert_payload(case: Case) -> dict[str, object]:
    """The ``alert.case_opened`` payload: the case, its type and what to do next."""
    return {"case_id": str(case.id), "type": case.type, "subject": case.subject,
            "refs": case.refs, "expected": case.expected, "observed": case.observed,
            "evidence": case.evidence, "opened_by": case.opened_by,
            "first_seen_at": case.first_seen_at.isoformat(),
            "next": service.next_step(case)}
