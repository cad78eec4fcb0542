"""The histories check: deposit histories against the ledger. Every booked deposit (credited,
or booked to suspense or the treasury) has exactly one ledger transaction, and every deposit
ledger transaction has the history row that booked it."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy.engine import Engine

from ledger import repository as ledger_repo
from reconcile import model
from reconcile.model import Finding
from reconcile.repository import histories as repo

#: The name cases of this check are opened by.
CHECK = "reconcile.histories"
#: The most findings of each kind one run reports (the rest next run, once these are fixed).
FINDINGS_MAX = 1000


def run(engine: Engine, *, now: datetime, limit: int = FINDINGS_MAX) -> list[Finding]:
    """Compare the histories with the ledger in one read-only snapshot."""
    with ledger_repo.snapshot(engine, read_only=True) as conn:
        booked = repo.booked_without_one_transaction(conn, limit)
        unrecorded = repo.transactions_without_history(conn, limit)
    return model.history_findings(booked, unrecorded)
