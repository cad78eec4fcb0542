"""Reads: a withdrawal by id, the unknown outcomes of a chain, the open items (reserves not closed
yet, flagged and logged past the SLA) and the timeline of one withdrawal.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy.engine import Engine

from config.uow import UnitOfWork
from config.withdrawals import WithdrawalsConfig
from ledger import service as ledger
from ledger.repository import TransactionRecord
from withdrawals import repository as repo
from withdrawals.errors import WithdrawalNotFound
from withdrawals.model import State
from withdrawals.repository import WithdrawalRecord
from withdrawals.service.common import log


def get_withdrawal(engine: Engine, withdrawal_id: int) -> WithdrawalRecord:
    """A withdrawal by id, or WithdrawalNotFound."""
    with UnitOfWork(engine) as uow:
        w = repo.get_withdrawal(uow.conn, withdrawal_id)
    if w is None:
        raise WithdrawalNotFound(f"no withdrawal {withdrawal_id}")
    return w


def unknown_outcomes(uow: UnitOfWork, chain: str, *, limit: int) -> list[WithdrawalRecord]:
    """Withdrawals of ``chain`` whose outcome is unknown (``unknown`` or awaiting a write-off),
    oldest first, at most ``limit``."""
    ids = repo.list_ids_in_states(uow.conn, chain, [State.UNKNOWN, State.AWAITING_WRITE_OFF],
                                  limit)
    found = [repo.get_withdrawal(uow.conn, wid) for wid in ids]
    return [w for w in found if w is not None]


@dataclass(frozen=True)
class OpenItem:
    """A reserve not closed yet, its age and whether it is past the SLA."""

    row: repo.OpenItemRow
    age_s: float
    overdue: bool


def open_items(engine: Engine, cfg: WithdrawalsConfig, *, older_than: timedelta,
               now: datetime) -> list[OpenItem]:
    """Reserves still open that were posted more than ``older_than`` ago; those past the
    configured SLA are flagged and logged as an alert (a warning on the ``withdrawals``
    logger that the operations alerting picks up)."""
    with UnitOfWork(engine) as uow:
        rows = repo.open_reserves(uow.conn, now - older_than)
    items = []
    for row in rows:
        age = (now - row.reserved_at).total_seconds()
        item = OpenItem(row, age, age > cfg.open_item_sla_s)
        if item.overdue:
            log.warning("withdrawal %s reserve open for %.0fs (SLA %ss): %s %s", row.withdrawal_id,
                        age, cfg.open_item_sla_s, row.state, row.state_reason or "")
        items.append(item)
    return items


@dataclass(frozen=True)
class Timeline:
    """Everything that happened to one withdrawal."""

    withdrawal: WithdrawalRecord
    events: list[repo.EventRecord]
    attempts: list[repo.AttemptRecord]
    decisions: list[repo.DecisionRecord]
    returns: list[repo.ReturnRecord]
    transactions: list[TransactionRecord]
    cases: list[repo.CaseRecord] = field(default_factory=list)


def timeline(engine: Engine, withdrawal_id: int) -> Timeline:
    """The withdrawal with its history, attempts, votes, returns and ledger transactions."""
    with UnitOfWork(engine) as uow:
        w = repo.get_withdrawal(uow.conn, withdrawal_id)
        if w is None:
            raise WithdrawalNotFound(f"no withdrawal {withdrawal_id}")
        return Timeline(
            withdrawal=w, events=repo.list_events(uow.conn, w.id),
            attempts=repo.list_attempts(uow.conn, w.id),
            decisions=repo.list_decisions(uow.conn, w.id),
            returns=repo.list_returns(uow.conn, w.id),
            transactions=[ledger.get_transaction(uow, t)
                          for t in repo.ledger_transaction_ids(uow.conn, w.id)],
            cases=repo.list_cases(uow.conn, w.id),
        )
