"""Phase (4), closing the nonces of written-off withdrawals: a zero-value transfer from the hot
wallet to itself (for a write-off as *sent*, a copy of the payout) with fees bumped over every
earlier attempt, signed outside any transaction, recorded as an attempt before it is sent and
tracked to finality; once a transaction that consumes the nonce is final, the nonce is closed
and the gas of our attempt that landed, if one did, is booked as the company's network fee.
"""

from __future__ import annotations

from datetime import datetime
from functools import partial
from typing import Any

from sqlalchemy.engine import Engine

from chains.errors import RpcUnavailable
from chains.rpc import from_quantity
from config.uow import UnitOfWork, run_in_transaction
from config.withdrawals import WithdrawalsConfig
from outgoing.chain import ChainView
from outgoing.model import AttemptView, FeeCaps, bumped_fee_caps
from withdrawals import model, service
from withdrawals import repository as repo
from withdrawals.model import Event, State
from withdrawals.processor.context import ACTOR, ChainContext, StepReport, log
from withdrawals.processor.receipts import _gas
from withdrawals.processor.sending import _resend
from withdrawals.processor.signing import _record_replacement, _sign, _unsigned
from withdrawals.processor.tracking import _landed, _observe
from withdrawals.repository import AttemptRecord, WithdrawalRecord


def _close_nonces(engine: Engine, cfg: WithdrawalsConfig, ctx: ChainContext, *, now: datetime,
                  report: StepReport) -> None:
    with UnitOfWork(engine) as uow:
        ids = repo.list_ids_with_open_nonce(uow.conn, ctx.chain.name, cfg.batch_max)
    for withdrawal_id in ids:
        try:
            send = _close_nonce(engine, cfg, ctx, withdrawal_id, now=now, report=report)
        except RpcUnavailable as exc:
            log.warning("withdrawal %s: node unavailable while closing its nonce: %s",
                        withdrawal_id, exc.message)
            continue
        if send is not None:
            _resend(ctx, send)  # Committed first; a lost send is repeated next step.


def _close_nonce(engine: Engine, cfg: WithdrawalsConfig, ctx: ChainContext, withdrawal_id: int,
                 *, now: datetime, report: StepReport) -> AttemptRecord | None:
    """One written-off withdrawal: close its nonce, or wait; return an attempt to send."""
    with UnitOfWork(engine) as uow:
        attempts = repo.list_attempts(uow.conn, withdrawal_id)
        events = repo.list_events(uow.conn, withdrawal_id)
    written_off = next(i for i, e in enumerate(events) if e.to_state == State.WRITTEN_OFF)
    as_sent = events[written_off].event == Event.WRITTEN_OFF_AS_SENT
    closing = {e.attempt_id for e in events if e.event == Event.CLOSING_SIGNED}
    view = _observe(ctx, attempts)
    landed, final = _landed(ctx, view)
    decision = model.decide_nonce_closure(
        view.attempts, nonce=attempts[0].nonce, landed_final=bool(final and final[0]),
        finalized_nonce=view.finalized_nonce, latest_nonce=view.latest_nonce,
        closing_attempts=len(closing), last_attempt_at=attempts[-1].created_at,
        bump_after_s=cfg.bump_after_s, attempts_max=cfg.attempts_max, now=now)
    if decision.resend:
        return attempts[-1]
    if decision.event is Event.CLOSING_SIGNED:
        return _sign_closing(engine, cfg, ctx, withdrawal_id, attempts, view, decision,
                             as_sent, now=now, report=report)
    if decision.event is None:
        return None

    def work(uow: UnitOfWork) -> None:
        w = repo.get_withdrawal(uow.conn, withdrawal_id, for_update=True)
        if w is None or w.state is not State.WRITTEN_OFF or w.nonce_closed_at is not None:
            return
        _nonce_closed(uow, ctx, w, attempts, landed, view, decision, as_sent, now=now)
        report.nonces_closed += 1

    run_in_transaction(engine, work)
    return None


def _sign_closing(engine: Engine, cfg: WithdrawalsConfig, ctx: ChainContext,
                  withdrawal_id: int, attempts: list[AttemptRecord], view: ChainView,
                  decision: model.NonceDecision, as_sent: bool, *, now: datetime,
                  report: StepReport) -> AttemptRecord | None:
    """A closing attempt (fees bumped over every earlier attempt), signed outside any
    transaction and recorded if nothing moved meanwhile; returned to be sent."""
    with UnitOfWork(engine) as uow:  # A read, closed before the signer is called.
        w = repo.get_withdrawal(uow.conn, withdrawal_id)
    if w is None or w.state is not State.WRITTEN_OFF or w.nonce_closed_at is not None:
        return None
    assert w.nonce is not None
    previous = max(attempts, key=lambda a: (a.max_fee_per_gas, a.max_priority_fee_per_gas))
    caps = bumped_fee_caps(
        FeeCaps(previous.max_fee_per_gas, previous.max_priority_fee_per_gas),
        view.fresh_caps, cfg.bump_percent)
    purpose = "payout" if as_sent else "cancel"
    unsigned = _unsigned(ctx, w, w.nonce, caps, purpose)
    signed = _sign(ctx, unsigned, withdrawal_id)
    if signed is None:
        return None
    recorded = run_in_transaction(engine, partial(
        _record_replacement, ctx=ctx, withdrawal_id=withdrawal_id, expected=State.WRITTEN_OFF,
        based_on=attempts[-1], unsigned=unsigned, signed=signed, reason=decision.reason,
        now=now, event=Event.CLOSING_SIGNED, purpose=purpose))
    if recorded is not None:
        report.cancels_signed += 1
    return recorded


def _nonce_closed(uow: UnitOfWork, ctx: ChainContext, w: WithdrawalRecord,
                  attempts: list[AttemptRecord], landed: AttemptView | None, view: ChainView,
                  decision: model.NonceDecision, as_sent: bool, *, now: datetime) -> None:
    gas = None
    evidence: dict[str, Any] = {"nonce": w.nonce, "finalized_nonce": view.finalized_nonce}
    if landed is not None:
        attempt = next(a for a in attempts if a.id == landed.attempt_id)
        receipt = view.receipts[landed.tx_hash]
        gas = _gas(ctx, attempt, receipt)
        evidence |= {"tx_hash": landed.tx_hash, "purpose": attempt.purpose,
                     "gas_used": from_quantity(receipt["gasUsed"]),
                     "effective_gas_price": from_quantity(receipt["effectiveGasPrice"])}
        if attempt.purpose == "payout" and not as_sent:
            # The payout went out after two admins decided it had not: the reserve is
            # released and custody paid anyway. A loss for an operator to book, never silent.
            evidence["payout_landed_after_write_off_as_not_sent"] = True
            log.error("withdrawal %s: payout %s landed after a write-off as not sent",
                      w.id, landed.tx_hash)
    service.apply(uow, w, Event.NONCE_CLOSED, now=now, actor=ACTOR, reason=decision.reason,
                  evidence=evidence, gas=gas, attempt_id=decision.attempt_id,
                  nonce_closed_at=now, landed_attempt_id=decision.attempt_id)
