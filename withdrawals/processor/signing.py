"""Phase (1), signing: fee caps read from the chain, the gas float check (``_within_gas_float``:
a reserved withdrawal whose maximum gas the treasury cannot pay waits, unsigned and with no
nonce taken, as ``gas_float_low``), the nonce, gas limit and fee caps committed first
(transaction A, ``_assign_nonce``), the signer called outside any transaction (``_sign``), and
the signed attempt recorded under the row lock (transaction B, ``_record_first``; a replacement
or a nonce closing, ``_record_replacement``, which tracking and closing use).
"""

from __future__ import annotations

from datetime import datetime
from functools import partial
from typing import Any

from sqlalchemy.engine import Engine

from chains.evm import erc20_transfer_calldata
from config.uow import UnitOfWork, run_in_transaction
from config.withdrawals import WithdrawalsConfig
from ledger import chart
from ledger import service as ledger
from outgoing import chain as outgoing_chain
from outgoing.model import FeeCaps
from outgoing.signer import SignedTx, UnsignedTx
from withdrawals import model, service
from withdrawals import repository as repo
from withdrawals.model import Event, State
from withdrawals.processor.context import ACTOR, ChainContext, StepReport, _ids, alerts, log
from withdrawals.repository import AttemptRecord, WithdrawalRecord


def _fresh_caps(ctx: ChainContext) -> FeeCaps:
    return outgoing_chain.fresh_caps(ctx.rpc, ctx.fees)


def _gas_limit(ctx: ChainContext, w: WithdrawalRecord, purpose: str) -> int:
    if purpose == "cancel" or w.token is None:
        return ctx.hot.gas_limit_native
    return ctx.hot.gas_limit_token


def _unsigned(ctx: ChainContext, w: WithdrawalRecord, nonce: int, caps: FeeCaps,
              purpose: str = "payout", gas_limit: int | None = None) -> UnsignedTx:
    gas = gas_limit or _gas_limit(ctx, w, purpose)
    if purpose == "cancel":
        # Zero value to ourselves: consumes the nonce, moves nothing but gas.
        return UnsignedTx(ctx.chain.chain_id, nonce, ctx.hot.address, 0, "0x", gas,
                          caps.max_fee_per_gas, caps.max_priority_fee_per_gas)
    if w.token is None:
        to, value, data = w.destination, w.chain_amount, "0x"
    else:
        to, value = w.token, 0
        data = erc20_transfer_calldata(w.destination, w.chain_amount)
    return UnsignedTx(ctx.chain.chain_id, nonce, to, value, data, gas, caps.max_fee_per_gas,
                      caps.max_priority_fee_per_gas)


def _sign_reserved(engine: Engine, cfg: WithdrawalsConfig, ctx: ChainContext, *, now: datetime,
                   report: StepReport) -> None:
    ids = _ids(engine, cfg, ctx.chain.name, (State.RESERVED,))
    if not ids:
        return
    # Chain reads happen before the database transactions, never inside them.
    chain_nonce = ctx.rpc.get_transaction_count(ctx.hot.address, "pending")
    caps = _fresh_caps(ctx)
    # Before any nonce is taken: a nonce handed to a payout the hot wallet cannot pay the gas
    # of would block every later payout of the wallet behind it.
    ids = _within_gas_float(engine, ctx, ids, caps, now=now, report=report)
    for withdrawal_id in ids:
        run_in_transaction(engine, partial(_assign_nonce, ctx=ctx, withdrawal_id=withdrawal_id,
                                           chain_nonce=chain_nonce, caps=caps, now=now))


def _payout_gas_limit(ctx: ChainContext, token: str | None) -> int:
    """The gas limit a first attempt of a payout of ``token`` (None: native) uses."""
    return ctx.hot.gas_limit_native if token is None else ctx.hot.gas_limit_token


def _treasury_minor(uow: UnitOfWork, ctx: ChainContext) -> tuple[int, int]:
    """The ledger balance of ``treasury:{chain}`` in the native asset and that asset's scale
    (0 and the chain's decimals when the ledger has neither yet: a fresh install)."""
    code = chart.treasury(ctx.chain.name).code
    asset, found = repo.find_accounts(uow.conn, ctx.chain.native_asset, [code])
    if asset is None:
        return 0, ctx.chain.native_decimals
    account = found.get(code)
    if account is None:
        return 0, asset.scale
    return ledger.account_balance(uow, account).balance_minor, asset.scale


def _within_gas_float(engine: Engine, ctx: ChainContext, ids: list[int], caps: FeeCaps, *,
                      now: datetime, report: StepReport) -> list[int]:
    """Of the reserved ``ids`` (in order), those whose maximum gas the treasury can pay on top
    of the maximum gas already committed on the chain (``model.GAS_COMMITTED``); the others
    wait, unsigned, with the reason ``gas_float_low`` (``_wait_for_gas_float``).

    The balance is read afresh every step, so a funding posted meanwhile (``DR treasury /
    CR equity:owner``) lets the waiting ones go on the next step without anyone acting. One
    processor step per chain at a time (the advisory lock) keeps the committed sum exact.
    """
    with UnitOfWork(engine) as uow:
        treasury_minor, scale = _treasury_minor(uow, ctx)
        in_flight_wei = repo.in_flight_max_gas(
            uow.conn, ctx.chain.name, sorted(model.GAS_COMMITTED),
            gas_limit_native=ctx.hot.gas_limit_native, gas_limit_token=ctx.hot.gas_limit_token,
            fresh_max_fee_per_gas=caps.max_fee_per_gas)
        tokens = repo.tokens_of(uow.conn, ids)

    def minor(wei: int) -> int:
        # Exact (the configuration refuses a native scale below the chain's decimals).
        return model.to_ledger_units(wei, ctx.chain.native_decimals, scale)

    in_flight = minor(in_flight_wei)
    max_gas = {i: minor(_payout_gas_limit(ctx, tokens.get(i)) * caps.max_fee_per_gas) for i in ids}
    fit = model.fit_gas_float(treasury_minor, in_flight, [(i, max_gas[i]) for i in ids])
    for withdrawal_id in fit.waiting:
        evidence = {"native_asset": ctx.chain.native_asset, "treasury_minor": str(treasury_minor),
                    "in_flight_max_gas_minor": str(in_flight),
                    "signed_this_step_max_gas_minor": str(fit.committed_minor - in_flight),
                    "max_gas_minor": str(max_gas[withdrawal_id]),
                    "max_fee_per_gas": str(caps.max_fee_per_gas)}
        report.gas_waiting += 1
        if run_in_transaction(engine, partial(_wait_for_gas_float, withdrawal_id=withdrawal_id,
                                              evidence=evidence, now=now)):
            alerts.warning(
                "withdrawal %s on %s waits: gas float low (treasury:%s holds %s %s minor, "
                "%s committed in flight, this payout may cost %s). Fund the treasury "
                "(a declared funding: DR treasury:%s / CR equity:owner); it is signed by "
                "itself once the float covers it.", withdrawal_id, ctx.chain.name,
                ctx.chain.name, treasury_minor, ctx.chain.native_asset, fit.committed_minor,
                max_gas[withdrawal_id], ctx.chain.name)
    return list(fit.signable)


def _wait_for_gas_float(uow: UnitOfWork, withdrawal_id: int, evidence: dict[str, Any],
                        now: datetime) -> bool:
    """Record that a reserved withdrawal waits for the gas float: one history row per wait
    (none while it already carries the reason). Whether it was recorded now."""
    # Row lock: a cancel in between is seen (it is no longer reserved).
    w = repo.get_withdrawal(uow.conn, withdrawal_id, for_update=True)
    if w is None or w.state is not State.RESERVED or w.state_reason == repo.GAS_FLOAT_LOW:
        return False
    service.apply(uow, w, Event.GAS_FLOAT_LOW, now=now, actor=ACTOR, reason=repo.GAS_FLOAT_LOW,
                  evidence=evidence)
    return True


def _assign_nonce(uow: UnitOfWork, ctx: ChainContext, withdrawal_id: int, chain_nonce: int,
                  caps: FeeCaps, now: datetime) -> bool:
    """Transaction A of a first payout: the nonce, the gas limit and the fee caps are taken and
    committed (``signing``) before the signer is called, so that a crash while signing finds
    them again: the same transaction is signed anew, never one with another nonce."""
    # Row lock: cancel and nonce assignment are ordered; the second sees the first's state.
    w = repo.get_withdrawal(uow.conn, withdrawal_id, for_update=True)
    if w is None or w.state is not State.RESERVED:
        return False
    nonce = repo.allocate_nonce(uow.conn, ctx.chain.name, ctx.hot.address, chain_nonce)
    service.apply(uow, w, Event.NONCE_ASSIGNED, now=now, actor=ACTOR,
                  reason=f"nonce {nonce} assigned, to be signed",
                  evidence={"hot_wallet": ctx.hot.address, "nonce": nonce,
                            "gas_limit": _gas_limit(ctx, w, "payout"), **_caps_json(caps)},
                  hot_wallet=ctx.hot.address, nonce=nonce)
    return True


def _caps_json(caps: FeeCaps) -> dict[str, str]:
    return {"max_fee_per_gas": str(caps.max_fee_per_gas),
            "max_priority_fee_per_gas": str(caps.max_priority_fee_per_gas)}


def _sign_assigned(engine: Engine, cfg: WithdrawalsConfig, ctx: ChainContext, *,
                   now: datetime, report: StepReport) -> None:
    """Sign every withdrawal in ``signing`` outside any transaction, with the nonce and caps
    committed by transaction A, then record the attempt (transaction B). Only a recorded
    attempt is ever sent, so a signature lost to a crash or a timeout costs nothing."""
    for withdrawal_id in _ids(engine, cfg, ctx.chain.name, (State.SIGNING,)):
        with UnitOfWork(engine) as uow:  # A read, closed before the signer is called.
            w = repo.get_withdrawal(uow.conn, withdrawal_id)
            assigned = repo.last_event(uow.conn, withdrawal_id, Event.NONCE_ASSIGNED)
        unsigned = _assigned_tx(ctx, w, assigned)
        if unsigned is None:
            continue
        signed = _sign(ctx, unsigned, withdrawal_id)
        if signed is None:
            return  # The signer is away: the others wait for the next step, nonces kept.
        if run_in_transaction(engine, partial(_record_first, ctx=ctx,
                                              withdrawal_id=withdrawal_id, unsigned=unsigned,
                                              signed=signed, now=now)):
            report.signed += 1


def _assigned_tx(ctx: ChainContext, w: WithdrawalRecord | None,
                 assigned: repo.EventRecord | None) -> UnsignedTx | None:
    """The transaction that transaction A fixed for ``w``, or None if there is none to sign."""
    if w is None or w.state is not State.SIGNING or assigned is None:
        return None
    evidence = assigned.evidence
    assert w.nonce is not None and evidence["nonce"] == w.nonce, "set in one transaction"
    if w.hot_wallet != ctx.hot.address:
        # The configuration changed under a withdrawal that holds the old wallet's nonce.
        log.error("withdrawal %s: nonce %s belongs to hot wallet %s, not the configured %s; "
                  "not signed", w.id, w.nonce, w.hot_wallet, ctx.hot.address)
        return None
    caps = FeeCaps(int(evidence["max_fee_per_gas"]), int(evidence["max_priority_fee_per_gas"]))
    return _unsigned(ctx, w, w.nonce, caps, gas_limit=int(evidence["gas_limit"]))


def _sign(ctx: ChainContext, unsigned: UnsignedTx, withdrawal_id: int) -> SignedTx | None:
    """The shared mechanism's signer call (``outgoing.chain.sign``): outside any transaction,
    None when it cannot sign now (nothing was recorded or sent, so nothing is lost)."""
    return outgoing_chain.sign(ctx.signer, unsigned, f"withdrawal {withdrawal_id}")


def _record_first(uow: UnitOfWork, ctx: ChainContext, withdrawal_id: int,
                  unsigned: UnsignedTx, signed: SignedTx, now: datetime) -> bool:
    """Transaction B of a first payout: record the attempt if the withdrawal still waits for it
    (else the signature is dropped; it was never sent)."""
    # Row lock, re-read under it: signing is not cancelable, but a step that overlapped this
    # one (a processor outliving its lock's connection) may have recorded the attempt already.
    w = repo.get_withdrawal(uow.conn, withdrawal_id, for_update=True)
    if (w is None or w.state is not State.SIGNING or w.nonce != unsigned.nonce
            or repo.list_attempts(uow.conn, withdrawal_id)):
        return False
    _record_attempt(uow, ctx, w, unsigned, signed, 1, now, "first attempt")
    return True


def _record_replacement(uow: UnitOfWork, ctx: ChainContext, withdrawal_id: int,
                        expected: State, based_on: AttemptRecord, unsigned: UnsignedTx,
                        signed: SignedTx, reason: str, now: datetime, *, event: Event,
                        purpose: str) -> AttemptRecord | None:
    """Record a replacement (fee bump or nonce closing) signed outside the transaction, if the
    withdrawal is still where the decision saw it: in ``expected``, its latest attempt still
    ``based_on``, its nonce not closed. Otherwise None: the signature is dropped, never sent."""
    # Row lock, re-read under it: the decision was taken without the lock, from the chain.
    w = repo.get_withdrawal(uow.conn, withdrawal_id, for_update=True)
    attempts = repo.list_attempts(uow.conn, withdrawal_id)
    if (w is None or w.state is not expected or w.nonce_closed_at is not None
            or not attempts or attempts[-1].id != based_on.id):
        return None
    return _record_attempt(uow, ctx, w, unsigned, signed, based_on.attempt_no + 1, now, reason,
                           purpose=purpose, event=event)


def _record_attempt(uow: UnitOfWork, ctx: ChainContext, w: WithdrawalRecord,
                    unsigned: UnsignedTx, signed: SignedTx, attempt_no: int, now: datetime,
                    reason: str, *, purpose: str = "payout",
                    event: Event = Event.ATTEMPT_SIGNED) -> AttemptRecord:
    """Record a signed attempt with its history row (the row locked by the caller); it is sent
    after the commit."""
    caps = FeeCaps(unsigned.max_fee_per_gas, unsigned.max_priority_fee_per_gas)
    attempt = repo.insert_attempt(
        uow.conn, withdrawal_id=w.id, attempt_no=attempt_no, chain=ctx.chain.name,
        hot_wallet=ctx.hot.address, nonce=unsigned.nonce, tx_hash=signed.tx_hash,
        raw_tx=signed.raw_tx, max_fee_per_gas=caps.max_fee_per_gas,
        max_priority_fee_per_gas=caps.max_priority_fee_per_gas, gas_limit=unsigned.gas_limit,
        at=now, purpose=purpose)
    service.apply(uow, w, event, now=now, actor=ACTOR, reason=reason, attempt_id=attempt.id,
                  evidence={"tx_hash": signed.tx_hash, "nonce": unsigned.nonce,
                            "attempt_no": attempt_no, "purpose": purpose, **_caps_json(caps)})
    return attempt
