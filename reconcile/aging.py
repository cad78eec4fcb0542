"""The aging check: open withdrawal reserves past the SLA, withdrawals unknown or held, and
deposits held for review, for longer than their thresholds (``config.reconcile``). Each is a
case about the withdrawal or the deposit, so it is re-sighted, not reopened, on every run."""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy.engine import Engine

from config.reconcile import ReconcileConfig
from ledger import repository as ledger_repo
from reconcile import model
from reconcile.model import Finding, WaitingKind
from reconcile.repository import aging as repo

#: The name cases of this check are opened by.
CHECK = "reconcile.aging"
#: The most items of each kind one run reads.
ITEMS_MAX = 1000


def thresholds(cfg: ReconcileConfig) -> dict[WaitingKind, int]:
    """Seconds each kind of item may wait."""
    return {WaitingKind.RESERVE: cfg.reserve_sla_s,
            WaitingKind.UNKNOWN_WITHDRAWAL: cfg.unknown_withdrawal_after_s,
            WaitingKind.HELD_WITHDRAWAL: cfg.held_withdrawal_after_s,
            WaitingKind.REVIEW_DEPOSIT: cfg.review_deposit_after_s}


def run(engine: Engine, cfg: ReconcileConfig, *, now: datetime,
        limit: int = ITEMS_MAX) -> list[Finding]:
    """The items waiting longer than their thresholds at ``now``, read in one snapshot."""
    limits = thresholds(cfg)

    def before(kind: WaitingKind) -> datetime:
        return now - timedelta(seconds=limits[kind])

    with ledger_repo.snapshot(engine, read_only=True) as conn:
        waiting = {
            WaitingKind.RESERVE: repo.open_reserves(conn, before(WaitingKind.RESERVE), limit),
            WaitingKind.UNKNOWN_WITHDRAWAL: repo.withdrawals_in(
                conn, "unknown", before(WaitingKind.UNKNOWN_WITHDRAWAL), limit),
            WaitingKind.HELD_WITHDRAWAL: repo.withdrawals_in(
                conn, "held", before(WaitingKind.HELD_WITHDRAWAL), limit),
            WaitingKind.REVIEW_DEPOSIT: repo.deposits_held_for_review(
                conn, before(WaitingKind.REVIEW_DEPOSIT), limit),
        }
    return model.aging_findings(waiting, limits, now)
