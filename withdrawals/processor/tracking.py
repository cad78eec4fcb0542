"""Phase (3), tracking every in-flight withdrawal, each in its own transactions: the chain as
seen for it (``_observe``, the shared mechanism's ``outgoing.chain.observe``: receipts of all its
attempts, the hot wallet's nonce at the final height and at latest), the attempt that landed
and its finality (``_landed``), the booking of a final receipt (``_on_receipt``: settled, or
released if reverted; a refusal is held), a reorg before finality (back to broadcast tracking,
the same bytes sent again), and the unknown ladder (``_ladder``) with its fee-bumped
replacements, signed outside any transaction (``_replace_if_due``).
"""

from __future__ import annotations

from datetime import datetime
from functools import partial

from sqlalchemy.engine import Engine

from chains.errors import RpcUnavailable
from chains.model import FinalityEvidence
from chains.rpc import from_quantity
from config.uow import UnitOfWork, run_in_transaction
from config.withdrawals import WithdrawalsConfig
from outgoing import chain as outgoing_chain
from outgoing.chain import ChainView
from outgoing.model import AttemptView, FeeCaps, bumped_fee_caps
from withdrawals import model, service
from withdrawals import repository as repo
from withdrawals.errors import SettlementRefused
from withdrawals.model import Event, State
from withdrawals.processor.context import ACTOR, TRACKED, ChainContext, StepReport, _ids, log
from withdrawals.processor.holds import _hold_or_log, _refusal, _transient
from withdrawals.processor.receipts import _check_payout, _gas, _mark_included
from withdrawals.processor.sending import _resend
from withdrawals.processor.signing import _record_replacement, _sign, _unsigned
from withdrawals.repository import AttemptRecord, WithdrawalRecord


def _observe(ctx: ChainContext, attempts: list[AttemptRecord]) -> ChainView:
    return outgoing_chain.observe(ctx.rpc, ctx.rule, ctx.hot.address, attempts, ctx.fees)


def _track(engine: Engine, cfg: WithdrawalsConfig, ctx: ChainContext, *, now: datetime,
           report: StepReport) -> None:
    """Track every in-flight withdrawal, each in its own transactions: what goes wrong with one
    never stops the others. A node away is transient (the next step tries again); a settlement
    that cannot be posted is a broken invariant: that withdrawal is held (``_hold``)."""
    for withdrawal_id in _ids(engine, cfg, ctx.chain.name, TRACKED):
        try:
            _track_one(engine, cfg, ctx, withdrawal_id, now=now, report=report)
        except RpcUnavailable as exc:
            # Expected and transient: nothing is decided without the node; the next step tries.
            log.warning("withdrawal %s: node unavailable while tracking (transient, retried "
                        "next step): %s", withdrawal_id, exc.message)
        except SettlementRefused as refused:
            # The failed transaction rolled back; the hold is recorded in a new one.
            _hold_or_log(engine, ctx, withdrawal_id, refused, now=now, report=report)
        report.tracked += 1


def _track_one(engine: Engine, cfg: WithdrawalsConfig, ctx: ChainContext, withdrawal_id: int,
               *, now: datetime, report: StepReport) -> None:
    with UnitOfWork(engine) as uow:
        attempts = repo.list_attempts(uow.conn, withdrawal_id)
    view = _observe(ctx, attempts)
    landed, final = _landed(ctx, view)
    if landed is None and _replace_if_due(engine, cfg, ctx, withdrawal_id, attempts, view,
                                          now=now):
        return
    resend: AttemptRecord | None = None

    def work(uow: UnitOfWork) -> AttemptRecord | None:
        w = repo.get_withdrawal(uow.conn, withdrawal_id, for_update=True)
        if w is None or w.state not in TRACKED:
            return None
        if landed is not None and final is not None:
            _on_receipt(uow, ctx, w, attempts, landed, view, final, now=now, report=report)
            return None
        if w.state is State.INCLUDED:
            # The block that held it is gone: back to broadcast tracking, same bytes again.
            gone = next(a for a in attempts if a.id == w.landed_attempt_id)
            service.apply(uow, w, Event.REORGED_OUT, now=now, actor=ACTOR,
                          reason="receipt gone: the block was reorged out",
                          evidence={"tx_hash": gone.tx_hash, "head": view.head},
                          landed_attempt_id=None)
            return gone
        return _ladder(uow, cfg, ctx, w, attempts, view, now=now, report=report)

    resend = run_in_transaction(engine, work)
    if resend is not None:
        _resend(ctx, resend)


def _landed(ctx: ChainContext,
            view: ChainView) -> tuple[AttemptView | None, tuple[bool, FinalityEvidence] | None]:
    """The attempt with a receipt (at most one: they share a nonce) and its finality."""
    return outgoing_chain.landed(ctx.rpc, ctx.rule, view)


def _on_receipt(uow: UnitOfWork, ctx: ChainContext, w: WithdrawalRecord,
                attempts: list[AttemptRecord], landed: AttemptView, view: ChainView,
                final: tuple[bool, FinalityEvidence], *, now: datetime,
                report: StepReport) -> None:
    is_final, evidence = final
    proof = {**evidence.to_json(), "tx_hash": landed.tx_hash, "nonce": landed.nonce}
    w = _mark_included(uow, w, landed, proof, now=now)
    if not is_final:
        return
    receipt = view.receipts[landed.tx_hash]
    attempt = next(a for a in attempts if a.id == landed.attempt_id)
    proof = {**proof, "gas_used": from_quantity(receipt["gasUsed"]),
             "effective_gas_price": from_quantity(receipt["effectiveGasPrice"])}
    event = Event.FINAL_SUCCEEDED if landed.succeeded else Event.FINAL_REVERTED
    try:
        gas = _gas(ctx, attempt, receipt)
        if landed.succeeded:
            _check_payout(ctx, w, receipt)
            service.apply(uow, w, event, now=now, actor=ACTOR,
                          reason=f"final under {ctx.rule}", evidence=proof, gas=gas,
                          attempt_id=landed.attempt_id)
        else:
            service.apply(uow, w, event, now=now, actor=ACTOR,
                          reason="reverted on chain (receipt status 0), final", evidence=proof,
                          gas=gas, attempt_id=landed.attempt_id)
    except Exception as exc:
        if _transient(exc):
            raise  # The next step (or run_in_transaction's retry) books it: nothing is broken.
        raise _refusal(w, landed, event, proof, exc) from exc
    if landed.succeeded:
        report.settled += 1
    else:
        report.released += 1


def _decide(cfg: WithdrawalsConfig, w: WithdrawalRecord, attempts: list[AttemptRecord],
            view: ChainView, *, now: datetime) -> model.LadderDecision:
    assert w.nonce is not None
    return model.decide_in_flight(
        w.state, view.attempts, nonce=w.nonce, finalized_nonce=view.finalized_nonce,
        latest_nonce=view.latest_nonce, unknown_since=w.unknown_since,
        escalate_after_s=cfg.escalate_after_s, last_attempt_at=attempts[-1].created_at,
        bump_after_s=cfg.bump_after_s, attempts_max=cfg.attempts_max, now=now)


def _ladder(uow: UnitOfWork, cfg: WithdrawalsConfig, ctx: ChainContext, w: WithdrawalRecord,
            attempts: list[AttemptRecord], view: ChainView, *, now: datetime,
            report: StepReport) -> AttemptRecord | None:
    decision = _decide(cfg, w, attempts, view, now=now)
    if decision.event is None or decision.replace:
        # A replacement is signed outside any transaction (``_replace_if_due``); one asked for
        # only now, under the lock, waits for the next step.
        return None
    evidence = {"nonce": w.nonce, "finalized_nonce": view.finalized_nonce,
                "latest_nonce": view.latest_nonce, "final_height": view.final_height,
                "attempts": [a.tx_hash for a in attempts],
                "known_to_node": [a.tx_hash for a in view.attempts if a.known_to_node]}
    service.apply(uow, w, decision.event, now=now, actor=ACTOR, reason=decision.reason,
                  evidence=evidence)
    if decision.event is Event.PROVEN_NOT_SENT:
        report.released += 1
    return None


def _replace_if_due(engine: Engine, cfg: WithdrawalsConfig, ctx: ChainContext,
                    withdrawal_id: int, attempts: list[AttemptRecord], view: ChainView, *,
                    now: datetime) -> bool:
    """A fee-bumped replacement (same nonce) if the ladder asks for one: decided from the
    chain view and an unlocked read, signed outside any transaction, then recorded if the
    withdrawal is still where the decision saw it. True if the ladder asked for one."""
    with UnitOfWork(engine) as uow:  # A read, closed before the signer is called.
        w = repo.get_withdrawal(uow.conn, withdrawal_id)
    if w is None or w.state not in (State.BROADCAST, State.UNKNOWN):
        return False
    decision = _decide(cfg, w, attempts, view, now=now)
    if not decision.replace:
        return False
    assert w.nonce is not None
    previous = attempts[-1]
    caps = bumped_fee_caps(
        FeeCaps(previous.max_fee_per_gas, previous.max_priority_fee_per_gas),
        view.fresh_caps, cfg.bump_percent)
    unsigned = _unsigned(ctx, w, w.nonce, caps)
    signed = _sign(ctx, unsigned, withdrawal_id)
    if signed is not None:
        run_in_transaction(engine, partial(
            _record_replacement, ctx=ctx, withdrawal_id=withdrawal_id, expected=w.state,
            based_on=previous, unsigned=unsigned, signed=signed, reason=decision.reason,
            now=now, event=Event.ATTEMPT_SIGNED, purpose="payout"))
    return True
