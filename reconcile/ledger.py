"""The ledger check: ``ledger.integrity.verify``'s findings (stored balances against replayed
postings, trial balance, custody against customer liabilities, unbalanced or empty transactions,
over-consumed postings, checkpoint digests, and whatever verify learns later), one case type per
kind of finding, keyed by what it is about."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy.engine import Engine

from ledger import repository as ledger_repo
from ledger.integrity import VerifyReport, verify
from reconcile import model
from reconcile.model import Finding
from reconcile.repository import ledger as repo

#: The name cases of this check are opened by.
CHECK = "reconcile.ledger"


def run(engine: Engine, *, full: bool = False, now: datetime) -> list[Finding]:
    """Verify the ledger (``full``: from the first posting) and return one finding per
    discrepancy. ``now`` is unused by verify; it is taken so every check has one signature."""
    return findings_of(engine, verify(engine, full=full))


def findings_of(engine: Engine, report: VerifyReport) -> list[Finding]:
    """The findings of a verify report (account ids read for the account findings)."""
    if report.ok:
        return []
    names = model.account_names(report.discrepancies)
    with ledger_repo.snapshot(engine, read_only=True) as conn:
        accounts = repo.account_ids(conn, names)
    return model.ledger_findings(report.discrepancies, accounts)
