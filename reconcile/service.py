"""The cases: record what a check found, list and read cases, resolve one.

Alerts are not raised here (this package imports nothing of ``api``): the caller in ``api``
raises ``alert.case_opened`` for every id in ``Recorded.opened``, in the same unit of work
(``api.cases.record_and_alert``).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from config.uow import UnitOfWork
from reconcile import model
from reconcile.errors import (
    CaseAlreadyResolved,
    CaseNotFound,
    CaseResolutionInvalid,
    CaseResolvedElsewhere,
)
from reconcile.model import Case, CaseStatus, Finding, Recorded
from reconcile.repository import cases as repo

#: The most cases one listing returns.
LIST_LIMIT_MAX = 1000


def record_findings(uow: UnitOfWork, opened_by: str, findings: Sequence[Finding], *,
                    now: datetime) -> Recorded:
    """Make every finding a case: an open case with the same type and subject is re-sighted
    (last seen ``now``, one more sighting, the finding's observed value and evidence), any
    other finding opens a case (first and last seen ``now``). Nothing is committed here."""
    if not opened_by:
        raise ValueError("opened_by names the check or job")
    found = model.distinct(findings)
    opened: list[int] = []
    updated: list[int] = []
    ids: list[int] = []
    for case_id, is_new in repo.upsert(uow.conn, opened_by, found, now):
        (opened if is_new else updated).append(case_id)
        ids.append(case_id)
    return Recorded(opened, updated, ids)


def open_cases(uow: UnitOfWork, *, type: str | None = None,
               limit: int = LIST_LIMIT_MAX) -> list[Case]:
    """Open cases, oldest first, optionally of one type."""
    return list_cases(uow, type=type, status=CaseStatus.OPEN, limit=limit)


def list_cases(uow: UnitOfWork, *, type: str | None = None, status: str | None = None,
               subject: str | None = None, limit: int = LIST_LIMIT_MAX,
               after_id: int = 0, since: datetime | None = None,
               until: datetime | None = None) -> list[Case]:
    """Cases, oldest first (ids above ``after_id``), optionally of one type, status, subject,
    first seen in ``[since, until)``."""
    if not 1 <= limit <= LIST_LIMIT_MAX + 1:
        raise ValueError(f"limit must be 1..{LIST_LIMIT_MAX + 1}")
    return repo.select(uow.conn, type=type, status=status, subject=subject, limit=limit,
                       after_id=after_id, since=since, until=until)


def count_open_by_type(uow: UnitOfWork) -> dict[str, int]:
    """How many cases of each type are open (types with none are left out)."""
    return repo.count_open_by_type(uow.conn)


def get_case(uow: UnitOfWork, case_id: int) -> Case:
    """One case (CaseNotFound)."""
    case = repo.get(uow.conn, case_id)
    if case is None:
        raise CaseNotFound(f"no case {case_id}")
    return case


def get_cases(uow: UnitOfWork, case_ids: Sequence[int]) -> list[Case]:
    """The cases with these ids (those that exist), by id, in one read."""
    return repo.by_ids(uow.conn, case_ids) if case_ids else []


def resolve_case(uow: UnitOfWork, case_id: int, by: str, resolution: str,
                 transaction_id: int | None = None, *, now: datetime) -> Case:
    """Resolve a case a check opened, once.

    A case about a ledger transaction (its refs name one) needs the new ledger transaction
    that fixed it, and every named fix must reference the case (``reference = case:<id>``, or
    an idempotency key ``case:<id>`` or ``case:<id>:...``, as ``custody reverse TXID --key
    case:<id>`` writes): fixes are new transactions, nothing is edited. Deposit and withdrawal
    cases are resolved by their own procedures (CaseResolvedElsewhere), which resolve them
    here by trigger.
    """
    by, resolution = by.strip(), resolution.strip()
    if not by or not resolution:
        raise CaseResolutionInvalid("a resolution names who resolved it and how")
    # The row lock serializes two resolutions of one case: the second waits here, then reads
    # the case resolved and is refused.
    case = repo.get(uow.conn, case_id, lock=True)
    if case is None:
        raise CaseNotFound(f"no case {case_id}")
    if not case.open:
        raise CaseAlreadyResolved(f"case {case_id} was resolved by {case.resolved_by} at "
                                  f"{case.resolved_at}")
    if case.origin is not None:
        raise CaseResolvedElsewhere(_elsewhere(case))
    if transaction_id is None and case.needs_fix_transaction:
        raise CaseResolutionInvalid(
            f"case {case_id} is about a ledger transaction: name the new transaction that "
            f"fixed it (reference {model.fix_reference(case_id)})")
    if transaction_id is not None:
        names = repo.transaction_names(uow.conn, transaction_id)
        if names is None:
            raise CaseResolutionInvalid(f"no ledger transaction {transaction_id}")
        if not model.references_case(case_id, *names):
            raise CaseResolutionInvalid(
                f"ledger transaction {transaction_id} does not reference case {case_id} "
                f"(its key is {names[0]!r} and its reference {names[1]!r}; a fix's reference "
                f"is {model.fix_reference(case_id)!r} or its key starts with it)")
    repo.resolve(uow.conn, case_id, by=by, resolution=resolution,
                 transaction_id=transaction_id, at=now)
    resolved = repo.get(uow.conn, case_id)
    assert resolved is not None and not resolved.open
    return resolved


def next_step(case: Case) -> str:
    """What an operator does next about ``case`` (the ``next`` of its alert)."""
    if case.origin is not None:
        return _elsewhere(case)
    fix = (f"post the correcting ledger transaction with reference "
           f"{model.fix_reference(case.id)}, then " if case.needs_fix_transaction else "")
    return (f"investigate {case.subject} ({case.type}); {fix}custody cases resolve {case.id} "
            "--by NAME --resolution TEXT" + (" --transaction TXID" if fix else ""))


def _elsewhere(case: Case) -> str:
    if case.type == model.CaseType.UNATTRIBUTED_OWN_ADDRESS:
        return (f"case {case.id} is resolved by two admins: custody cases resolve "
                f"{case.refs['deposit_case_id']} --as capital|return|refund, then custody "
                "cases approve")
    if case.type == model.CaseType.DEEP_REORG:
        return (f"case {case.id} is a deep reorg of deposit {case.refs['deposit_id']}: "
                "resolve it as a deposit case (deposits.service.resolve_case, reversing the "
                "credit if the deposit is gone)")
    return (f"case {case.id} holds withdrawal {case.refs.get('withdrawal_id')}: fix the cause, "
            f"then custody withdrawal retry {case.refs.get('withdrawal_id')} --by NAME "
            "--reason TEXT")
