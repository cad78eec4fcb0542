"""What waits for an operator: the hold of a held withdrawal lifted by an admin once its cause is
fixed (``retry_held``), and what the API's alerts are raised from (``waiting``): open cases,
payouts waiting for the gas float, payouts the signer has not signed for
``SIGNING_OVERDUE_S``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy.engine import Engine

from config.uow import UnitOfWork, run_in_transaction
from withdrawals import repository as repo
from withdrawals.errors import RetryRefused
from withdrawals.model import Event, State
from withdrawals.repository import WithdrawalRecord
from withdrawals.service.common import ADMIN, Actor, _locked
from withdrawals.service.transitions import apply


def retry_held(engine: Engine, withdrawal_id: int, actor: Actor, *, reason: str,
               now: datetime) -> WithdrawalRecord:
    """An admin lifts the hold of a held withdrawal once its cause is fixed: ``held ->
    included`` (``hold_lifted``), and the open case gets its resolution. Nothing is booked
    here: the processor's next step books the final receipt again (and, if the cause is still
    there, holds it again with a new case). RetryRefused: no admin role, no reason, not held.
    """
    if ADMIN not in actor.roles:
        raise RetryRefused(f"{actor.id} does not have the admin role")
    if not reason or not reason.strip():
        raise RetryRefused("lifting a hold needs a reason (what was fixed)")

    def work(uow: UnitOfWork) -> WithdrawalRecord:
        # Row lock: a retry and the processor's hold are ordered; two retries lift once.
        w = _locked(uow, withdrawal_id)
        if w.state is not State.HELD:
            raise RetryRefused(f"withdrawal {w.id} is {w.state}, not held")
        cases = [c for c in repo.list_cases(uow.conn, w.id) if c.open]
        for case in cases:
            repo.resolve_case(uow.conn, case.id, resolved_by=actor.id, reason=reason, at=now)
        return apply(uow, w, Event.HOLD_LIFTED, now=now, actor=actor.id,
                     reason=f"hold lifted by {actor.id}: {reason}",
                     evidence={"cases": [c.id for c in cases]})

    return run_in_transaction(engine, work)


@dataclass(frozen=True)
class Waiting:
    """What waits for an operator on a chain: the open cases of held withdrawals, the payouts
    waiting for the gas float (``gas_float_low``) and those whose signature the signer has not
    given for ``SIGNING_OVERDUE_S`` (each holds a nonce: every later payout of the hot wallet
    waits behind it), oldest first."""

    cases: list[repo.CaseRecord]
    gas_float_low: list[WithdrawalRecord]
    signing_overdue: list[WithdrawalRecord] = field(default_factory=list)


#: A withdrawal in ``signing`` this long (its nonce taken, the signer not answering) is alerted.
SIGNING_OVERDUE_S = 120


def waiting(engine: Engine, chain: str, *, limit: int, now: datetime) -> Waiting:
    """Open withdrawal cases, payouts waiting for the gas float and payouts the signer has not
    signed for ``SIGNING_OVERDUE_S`` on ``chain`` (at most ``limit`` of each): what the API's
    alerts are raised from."""
    with UnitOfWork(engine) as uow:
        cases = repo.open_cases(uow.conn, chain, limit)
        gas = [repo.get_withdrawal(uow.conn, i)
               for i in repo.ids_waiting_for_gas(uow.conn, chain, limit)]
        signing = [repo.get_withdrawal(uow.conn, i) for i in repo.ids_signing_since(
            uow.conn, chain, now - timedelta(seconds=SIGNING_OVERDUE_S), limit)]
    return Waiting(cases, [w for w in gas if w is not None],
                   [w for w in signing if w is not None])
