"""Reads: a withdrawal by id, the withdrawals of a chain in given states, the unknown outcomes
of a chain, the open items (reserves not closed yet, flagged and logged past the SLA) and the
timeline of one withdrawal.
"""

from __future__ import annotations

from collections.abc import Sequence
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


def find_withdrawal(uow: UnitOfWork, withdrawal_id: int) -> WithdrawalRecord | None:
    """A withdrawal by id, or None."""
    return repo.get_withdrawal(uow.conn, withdrawal_id)


def user_withdrawals(uow: UnitOfWork, user_id: str, *, limit: int,
                     before_id: int | None = None, states: Sequence[str] | None = None,
                     since: datetime | None = None,
                     until: datetime | None = None) -> list[WithdrawalRecord]:
    """A page of the user's withdrawals, newest first (pass the last id of the previous page as
    ``before_id`` for the next), optionally in ``states`` and requested in ``[since, until)``."""
    if limit < 1:
        raise ValueError(f"limit must be at least 1, got {limit}")
    return repo.withdrawals_of_user(uow.conn, user_id, limit=limit, before_id=before_id,
                                    states=states, since=since, until=until)


def withdrawal_of_tx_hash(uow: UnitOfWork, tx_hash: str) -> int | None:
    """The withdrawal that broadcast (or signed) the transaction ``tx_hash``, if any."""
    return repo.withdrawal_of_tx_hash(uow.conn, tx_hash.lower())


def unknown_outcomes(uow: UnitOfWork, chain: str, *, limit: int) -> list[WithdrawalRecord]:
    """Withdrawals of ``chain`` whose outcome is unknown (``unknown`` or awaiting a write-off),
    oldest first, at most ``limit``."""
    ids = repo.list_ids_in_states(uow.conn, chain, [State.UNKNOWN, State.AWAITING_WRITE_OFF],
                                  limit)
    found = [repo.get_withdrawal(uow.conn, wid) for wid in ids]
    return [w for w in found if w is not None]


def withdrawals_in_states(uow: UnitOfWork, chain: str, states: Sequence[State], *,
                         limit: int) -> list[WithdrawalRecord]:
    """Withdrawals of ``chain`` in ``states`` (waiting for approval, held...), oldest first, at
    most ``limit``."""
    ids = repo.list_ids_in_states(uow.conn, chain, states, limit)
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
