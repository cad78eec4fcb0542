"""The chain side of withdrawals: sign, send, track to finality, settle, and the unknown ladder.

One ``step`` per chain: (1) sign reserved withdrawals, but only those whose maximum gas the
treasury can pay on top of the maximum gas already in flight on the chain (the gas float,
``model.fit_gas_float``): the others wait, unsigned and with no nonce taken, as
``gas_float_low`` (one history row, an alert on ``custody.alerts``), and go on by themselves
once the treasury is funded, since the balance is read afresh every step. Signing is in three
parts so that no row lock is held while the signer (possibly a remote KMS, HSM or MPC service,
with a timeout) is called: transaction A locks the withdrawal, allocates the nonce under the
nonce row's lock, fixes the gas limit and fee caps in the history and moves it to ``signing``;
the signer is called outside any transaction; transaction B locks the withdrawal again, checks
it still waits in ``signing`` with that nonce and no attempt, records the attempt (hash, nonce,
caps, raw bytes) and moves it to ``signed``. Only recorded attempts are ever sent, so a crash or
a signer timeout between A and B loses nothing: the next step signs the same nonce and caps
again (a signature that was never recorded was never sent). (2) send signed attempts (outside
any database transaction; the outcome is recorded in a new one); (3) track every in-flight
withdrawal: receipts of all its attempts, the hot wallet's nonce at the final height and at
latest, finality under the chain's rule. Settlement happens only on a final receipt; a reorg
before finality sends the withdrawal back to broadcast tracking (and re-sends the same signed
bytes). Nothing is released without proof from the chain or a two-admin write-off. A fee-bumped
replacement is decided from the chain view and an unlocked read, signed outside any
transaction, and recorded under the row lock only if the withdrawal is still in the state the
decision saw and its latest attempt is still the one the bump was computed from (otherwise the
signature is dropped: it was never sent).
(4) close the nonces of written-off withdrawals: a nonce handed out but never consumed blocks
every later payout of the hot wallet, so the processor consumes it with a zero-value transfer
from the hot wallet to itself (same nonce, fees bumped over every earlier attempt: it replaces
a payout still in some mempool), signed outside any transaction like a replacement, recorded as
an attempt before it is sent and tracked to finality; its gas is the company's network fee. A
withdrawal written off as *sent* gets a fee-bumped copy of its payout instead, so that the
chain comes to match the books. The nonce is never handed to another payout: after a send whose
answer was lost, nothing proves that the old payout is not in some mempool, and only a
transaction with higher fees displaces it.

A final receipt whose settlement cannot be posted (a settlement mismatch, a ledger refusal such
as an account past its limit or an idempotency conflict, any broken invariant) is not an
expected error: its transaction rolls back, and a new one moves that withdrawal to ``held``
with the evidence and a case (``withdrawal_cases``), with a CRITICAL alert naming what to do
next; the chain's other withdrawals go on in the same step. Its reserve stays open; an admin's
``custody withdrawal retry`` sends it back to ``included`` once the cause is fixed. Expected,
transient failures (the node or the database away, a busy lock) are retried by the next step
and never hold anything.

Gas is booked exactly: the receipt's wei are converted to the native asset's ledger scale
(``withdrawals.model.to_ledger_units``; a coarser scale is refused when the configuration is
loaded).

A step holds a session-level advisory lock per chain, so two processes never step one chain at
once; a killed process releases it with its connection. Every phase is safe to repeat after a
crash at any point: signed bytes are re-sent as they are (same hash), a replacement keeps the
withdrawal's nonce, and ledger entries carry idempotency keys.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from typing import Any

from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import Engine

from chains.errors import ChainError, RpcError, RpcUnavailable
from chains.evm import decode_receipt_transfers, erc20_transfer_calldata, receipt_succeeded
from chains.model import (
    Confirmations,
    FinalityEvidence,
    FinalityRule,
    evaluate_finality,
    parse_finality_rule,
)
from chains.rpc import RpcClient, from_quantity
from config.chains import ChainConfig
from config.errors import CustodyError, DatabaseUnavailable
from config.uow import UnitOfWork, run_in_transaction, sqlstate
from config.withdrawals import HotWalletConfig, WithdrawalsConfig
from ledger import chart
from ledger import service as ledger
from ledger.errors import LedgerError
from withdrawals import model, service
from withdrawals import repository as repo
from withdrawals.errors import (
    InvariantBroken,
    SettlementMismatch,
    SettlementRefused,
    SignerAnswerInvalid,
    SignerUnavailable,
)
from withdrawals.model import AttemptView, Event, FeeCaps, State
from withdrawals.repository import AttemptRecord, WithdrawalRecord
from withdrawals.signer import SignedTx, Signer, UnsignedTx

log = logging.getLogger("withdrawals.processor")
#: What operations page on: a payout that waits for the treasury, a withdrawal held.
alerts = logging.getLogger("custody.alerts")
ACTOR = "processor"
TRACKED = (State.BROADCAST, State.INCLUDED, State.UNKNOWN, State.AWAITING_WRITE_OFF)


@dataclass
class ChainContext:
    """What a processor needs for one chain."""

    chain: ChainConfig
    hot: HotWalletConfig
    rpc: RpcClient
    signer: Signer
    rule: FinalityRule = field(init=False)

    def __post_init__(self) -> None:
        self.rule = parse_finality_rule(self.chain.finality)
        if self.signer.address != self.hot.address:
            raise SignerUnavailable(f"signer key is for {self.signer.address}, "
                                    f"not the hot wallet {self.hot.address}")


@dataclass
class StepReport:
    """Counts of what one step did."""

    signed: int = 0
    sent: int = 0
    tracked: int = 0
    settled: int = 0
    released: int = 0
    cancels_signed: int = 0
    nonces_closed: int = 0
    gas_waiting: int = 0
    held: int = 0
    skipped_locked: bool = False


def step(engine: Engine, cfg: WithdrawalsConfig, ctx: ChainContext, *,
         now: datetime) -> StepReport:
    """One bounded pass over the chain's withdrawals (see the module docstring)."""
    report = StepReport()
    with engine.connect() as lock_conn:
        if not repo.try_lock_chain(lock_conn, ctx.chain.name):
            lock_conn.rollback()
            report.skipped_locked = True
            return report
        lock_conn.commit()
        try:
            _sign_reserved(engine, cfg, ctx, now=now, report=report)  # nonces and caps taken
            _sign_assigned(engine, cfg, ctx, now=now, report=report)  # signed, then recorded
            _send_signed(engine, cfg, ctx, now=now, report=report)
            _track(engine, cfg, ctx, now=now, report=report)
            _send_signed(engine, cfg, ctx, now=now, report=report)  # replacements just signed
            _close_nonces(engine, cfg, ctx, now=now, report=report)
        finally:
            repo.unlock_chain(lock_conn, ctx.chain.name)
            lock_conn.commit()
    return report


def _ids(engine: Engine, cfg: WithdrawalsConfig, chain: str,
         states: tuple[State, ...]) -> list[int]:
    with UnitOfWork(engine) as uow:
        return repo.list_ids_in_states(uow.conn, chain, states, cfg.batch_max)


# --- signing --------------------------------------------------------------------------------


def _fresh_caps(ctx: ChainContext) -> FeeCaps:
    latest = ctx.rpc.request("eth_getBlockByNumber", ["latest", False])
    base_fee = from_quantity(latest.get("baseFeePerGas", "0x0"))
    return model.initial_fee_caps(base_fee, ctx.hot.priority_fee_wei,
                                  ctx.hot.max_fee_per_gas_cap_wei)


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
    """Call the signer; never inside a database transaction (a remote signer may take its whole
    timeout). None when it cannot sign now: nothing was recorded or sent, so nothing is lost."""
    try:
        return ctx.signer.sign(unsigned)
    except SignerAnswerInvalid as exc:
        alerts.critical("withdrawal %s: signer answer refused (nonce %s): %s; check the signer",
                        withdrawal_id, unsigned.nonce, exc.message)
    except SignerUnavailable as exc:
        log.warning("withdrawal %s: signer unavailable (nonce %s): %s", withdrawal_id,
                    unsigned.nonce, exc.message)
    return None


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
    attempt_id = repo.insert_attempt(
        uow.conn, withdrawal_id=w.id, attempt_no=attempt_no, chain=ctx.chain.name,
        hot_wallet=ctx.hot.address, nonce=unsigned.nonce, tx_hash=signed.tx_hash,
        raw_tx=signed.raw_tx, max_fee_per_gas=caps.max_fee_per_gas,
        max_priority_fee_per_gas=caps.max_priority_fee_per_gas, gas_limit=unsigned.gas_limit,
        at=now, purpose=purpose)
    service.apply(uow, w, event, now=now, actor=ACTOR, reason=reason, attempt_id=attempt_id,
                  evidence={"tx_hash": signed.tx_hash, "nonce": unsigned.nonce,
                            "attempt_no": attempt_no, "purpose": purpose, **_caps_json(caps)})
    return AttemptRecord(attempt_id, w.id, attempt_no, ctx.chain.name, ctx.hot.address,
                         unsigned.nonce, signed.tx_hash, signed.raw_tx, caps.max_fee_per_gas,
                         caps.max_priority_fee_per_gas, unsigned.gas_limit, now, purpose)


# --- sending --------------------------------------------------------------------------------


def _send_signed(engine: Engine, cfg: WithdrawalsConfig, ctx: ChainContext, *, now: datetime,
                 report: StepReport) -> None:
    for withdrawal_id in _ids(engine, cfg, ctx.chain.name, (State.SIGNED,)):
        with UnitOfWork(engine) as uow:
            attempts = repo.list_attempts(uow.conn, withdrawal_id)
        latest = attempts[-1]
        event, evidence = _send(ctx, latest)
        report.sent += 1

        def record(uow: UnitOfWork, i: int = withdrawal_id, e: Event = event,
                   ev: dict[str, Any] = evidence, a: AttemptRecord = latest) -> None:
            w = repo.get_withdrawal(uow.conn, i, for_update=True)
            # Another step may have moved it meanwhile (it found a receipt): keep that.
            if w is None or w.state is not State.SIGNED:
                return
            service.apply(uow, w, e, now=now, actor=ACTOR, reason=ev.get("error", "accepted"),
                          evidence=ev, attempt_id=a.id)

        run_in_transaction(engine, record)


def _send(ctx: ChainContext, attempt: AttemptRecord) -> tuple[Event, dict[str, Any]]:
    """Broadcast an attempt's signed bytes. Any failure is an unknown outcome, never a
    failure: the node may have taken it before the answer was lost."""
    evidence: dict[str, Any] = {"tx_hash": attempt.tx_hash, "nonce": attempt.nonce}
    try:
        ctx.rpc.send_raw_transaction(attempt.raw_tx)
    except RpcUnavailable as exc:
        return Event.SEND_UNCONFIRMED, {**evidence, "error": f"no answer: {exc.message}"}
    except RpcError as exc:
        return Event.SEND_UNCONFIRMED, {**evidence, "error": f"node error: {exc.message}"}
    return Event.SEND_ACCEPTED, evidence


def _resend(ctx: ChainContext, attempt: AttemptRecord) -> None:
    try:
        ctx.rpc.send_raw_transaction(attempt.raw_tx)
    except ChainError as exc:
        log.info("re-send of %s: %s", attempt.tx_hash, exc.message)


# --- tracking -------------------------------------------------------------------------------


@dataclass(frozen=True)
class ChainView:
    """The chain as seen for one withdrawal."""

    attempts: tuple[AttemptView, ...]
    receipts: dict[str, dict[str, Any]]
    head: int
    finalized_block: int | None
    final_height: int
    finalized_nonce: int
    latest_nonce: int
    fresh_caps: FeeCaps


def _observe(ctx: ChainContext, attempts: list[AttemptRecord]) -> ChainView:
    receipts = ctx.rpc.get_receipts([a.tx_hash for a in attempts])
    head = ctx.rpc.block_number()
    finalized = ctx.rpc.get_block("finalized")
    finalized_block = finalized.number if finalized else None
    if isinstance(ctx.rule, Confirmations):
        final_height = max(0, head - ctx.rule.required + 1)
    else:
        final_height = finalized_block or 0
    views = []
    found: dict[str, dict[str, Any]] = {}
    for a, receipt in zip(attempts, receipts, strict=True):
        if receipt is not None:
            found[a.tx_hash] = receipt
            views.append(AttemptView(
                a.id, a.tx_hash, a.nonce, from_quantity(receipt["blockNumber"]),
                str(receipt["blockHash"]).lower(), receipt_succeeded(receipt), True))
        else:
            known = ctx.rpc.get_transaction(a.tx_hash) is not None
            views.append(AttemptView(a.id, a.tx_hash, a.nonce, None, None, None, known))
    return ChainView(tuple(views), found, head, finalized_block, final_height,
                     ctx.rpc.get_transaction_count(ctx.hot.address, final_height),
                     ctx.rpc.get_transaction_count(ctx.hot.address, "latest"), _fresh_caps(ctx))


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
    landed = next((a for a in view.attempts if a.receipt_block is not None), None)
    if landed is None:
        return None, None
    assert landed.receipt_block is not None and landed.receipt_block_hash is not None
    canonical = ctx.rpc.get_block(landed.receipt_block)
    return landed, evaluate_finality(
        ctx.rule, tx_block=landed.receipt_block, tx_block_hash=landed.receipt_block_hash,
        head_block=view.head, finalized_block=view.finalized_block,
        canonical_hash=canonical.hash if canonical else None)


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


def _mark_included(uow: UnitOfWork, w: WithdrawalRecord, landed: AttemptView,
                   proof: dict[str, Any], *, now: datetime) -> WithdrawalRecord:
    """Move ``w`` to ``included`` on ``landed`` unless it is there already (from another
    attempt of the same nonce after a reorg: out first)."""
    if w.state is State.INCLUDED and w.landed_attempt_id == landed.attempt_id:
        return w
    if w.state is State.INCLUDED:  # Another attempt of the same nonce, after a reorg.
        w = service.apply(uow, w, Event.REORGED_OUT, now=now, actor=ACTOR,
                          reason="another attempt landed instead", evidence=proof)
    return service.apply(uow, w, Event.RECEIPT_OBSERVED, now=now, actor=ACTOR,
                         reason=f"included in block {landed.receipt_block}", evidence=proof,
                         attempt_id=landed.attempt_id, landed_attempt_id=landed.attempt_id)


# --- holds: a final receipt whose settlement cannot be posted -------------------------------

#: SQLSTATE classes of a database that is away or busy (connection, serialization, resources,
#: operator intervention) and lock_not_available: retried, never a reason to hold.
_TRANSIENT_SQLSTATE_CLASSES = ("08", "40", "53", "57")


def _transient(exc: BaseException) -> bool:
    """Expected and transient (the node or the database away, a lock busy, a serialization
    conflict): the next step tries again and nothing is held. Anything else raised while
    booking a final receipt is a broken invariant."""
    if isinstance(exc, (RpcUnavailable, DatabaseUnavailable)):
        return True
    if isinstance(exc, sa_exc.DBAPIError):
        state = sqlstate(exc)
        if state is None:
            return isinstance(exc, sa_exc.OperationalError) or exc.connection_invalidated
        return state[:2] in _TRANSIENT_SQLSTATE_CLASSES or state == "55P03"
    return False


def _refusal(w: WithdrawalRecord, landed: AttemptView, event: Event, proof: dict[str, Any],
             exc: Exception) -> SettlementRefused:
    """The broken invariant ``exc`` met while booking ``event`` for ``w``, as what the hold
    records: the case kind, the cause's code and message, and the evidence."""
    if isinstance(exc, SettlementMismatch):
        kind, cause, message = "settlement_mismatch", exc.code, exc.message
    elif isinstance(exc, LedgerError):
        kind, cause, message = "ledger_refused", exc.code, exc.message
    elif isinstance(exc, (InvariantBroken, CustodyError)):
        # E.g. gas that cannot be booked exactly (configuration_invalid), a refused transition.
        kind, cause, message = "invariant_broken", exc.code, exc.message
    else:
        kind, cause, message = "invariant_broken", type(exc).__name__, str(exc)
    evidence = {**proof, "booking": str(event), "receipt_block": landed.receipt_block,
                "attempt_id": landed.attempt_id, "error": cause, "message": message[:2000],
                "exception": type(exc).__name__}
    return SettlementRefused(f"withdrawal {w.id}: {event} cannot be booked: {cause}: {message}",
                             kind=kind, cause=cause, attempt_id=landed.attempt_id,
                             evidence=evidence)


def _hold_or_log(engine: Engine, ctx: ChainContext, withdrawal_id: int,
                 refused: SettlementRefused, *, now: datetime, report: StepReport) -> None:
    """Hold the withdrawal and alert; if even that fails, say so loudly and go on with the
    other withdrawals (the next step meets the same refusal and tries the hold again)."""
    try:
        case_id = run_in_transaction(engine, partial(
            _hold, ctx=ctx, withdrawal_id=withdrawal_id, refused=refused, now=now))
    except Exception:
        alerts.critical("withdrawal %s on %s: settlement refused (%s) and the hold could not be "
                        "recorded; retried next step", withdrawal_id, ctx.chain.name,
                        refused.message, exc_info=True)
        return
    if case_id is None:
        return
    report.held += 1
    alerts.critical(
        "withdrawal %s on %s HELD (case %s, %s): %s. A broken invariant: its payout is final on "
        "chain but nothing was booked and its reserve stays open; the chain's other payouts go "
        "on. Next: read the case's evidence (`custody withdrawal show %s`), fix the cause, then "
        "`custody withdrawal retry %s --by NAME --reason TEXT` to settle it again.",
        withdrawal_id, ctx.chain.name, case_id, refused.kind, refused.message, withdrawal_id,
        withdrawal_id)


def _hold(uow: UnitOfWork, ctx: ChainContext, withdrawal_id: int, refused: SettlementRefused,
          now: datetime) -> int | None:
    """Record the hold in a new transaction: ``included`` (if the rolled-back transaction had
    only just observed the receipt) -> ``held``, with its history rows and a case. The id of
    the case, or None when the withdrawal moved meanwhile (held once: held is not tracked)."""
    # Row lock: tracking and a retry are ordered; the second sees the first's state.
    w = repo.get_withdrawal(uow.conn, withdrawal_id, for_update=True)
    if w is None or w.state not in TRACKED:
        return None
    evidence = refused.evidence
    if w.state is not State.INCLUDED or w.landed_attempt_id != refused.attempt_id:
        landed = AttemptView(refused.attempt_id, str(evidence["tx_hash"]),
                             int(str(evidence["nonce"])), int(str(evidence["receipt_block"])),
                             None, None, True)
        w = _mark_included(uow, w, landed, evidence, now=now)
    reason = f"{refused.cause}: {refused.evidence['message']}"
    service.apply(uow, w, Event.SETTLEMENT_HELD, now=now, actor=ACTOR, reason=reason,
                  evidence={**evidence, "kind": refused.kind}, attempt_id=refused.attempt_id)
    return repo.insert_case(uow.conn, withdrawal_id=w.id, kind=refused.kind, reason=reason,
                            evidence=evidence, opened_by=ACTOR, at=now)


def _gas(ctx: ChainContext, attempt: AttemptRecord, receipt: dict[str, Any]) -> service.Gas:
    """What the landed attempt paid, in the chain's smallest unit; the ledger entry converts
    it exactly to the native asset's ledger scale."""
    paid = from_quantity(receipt["gasUsed"]) * from_quantity(receipt["effectiveGasPrice"])
    return service.Gas(attempt.attempt_no, ctx.chain.native_asset, paid,
                       ctx.chain.native_decimals)


def _check_payout(ctx: ChainContext, w: WithdrawalRecord, receipt: dict[str, Any]) -> None:
    if w.token is None:
        return  # A native payout's value is the signed transaction's own value.
    paid = [t for t in decode_receipt_transfers(receipt)
            if t.token == w.token and t.from_address == ctx.hot.address
            and t.to_address == w.destination]
    if [t.value for t in paid] != [w.chain_amount]:
        raise SettlementMismatch(f"withdrawal {w.id}: receipt pays {[t.value for t in paid]}, "
                                 f"expected [{w.chain_amount}]")


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
    caps = model.bumped_fee_caps(
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


# --- closing the nonces of written-off withdrawals ----------------------------------------


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
    caps = model.bumped_fee_caps(
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


# --- running --------------------------------------------------------------------------------


def build_context(chains: Any, cfg: WithdrawalsConfig, chain_name: str, *,
                  environ: dict[str, str] | None = None,
                  rpc_url: str | None = None) -> ChainContext:
    """The context of one chain from the configuration, with the signer its hot wallet names
    (``withdrawals.signer.signer_for``: a local key or a remote signing service; the key or a
    secret URL comes from ``environ``, which defaults to ``os.environ``)."""
    from withdrawals.signer import signer_for

    chain = chains.chain(chain_name)
    hot = cfg.hot_wallet(chain_name)
    rpc = RpcClient(rpc_url or chain.rpc_url, rpc_timeout_ms=chain.rpc_timeout_ms,
                    retries_max=chain.rpc_retries_max, backoff_ms=20, backoff_max_ms=200)
    return ChainContext(chain, hot, rpc, signer_for(hot, environ=environ))


def check_configuration(ctx: ChainContext) -> list[str]:
    """The chain's configuration against its node before anything is signed (``chains.probe``:
    ``eth_chainId`` and each listed token's ``decimals()``): one line per mismatch, empty when
    they agree. The scheduler runs the same check in ``api.jobs.ChainGate``; this is for the
    processor started on its own (``python -m withdrawals.processor``)."""
    from chains.probe import ChainExpected, TokenExpected, probe

    expected = ChainExpected(ctx.chain.name, ctx.chain.chain_id, tuple(
        TokenExpected(t.contract, t.decimals, t.symbol) for t in ctx.chain.tokens))
    return [f.line() for f in probe(ctx.rpc, expected).mismatches]


def run(engine: Engine, cfg: WithdrawalsConfig, ctx: ChainContext, *, interval_s: float,
        steps_max: int | None = None, on_step: Any = None) -> None:
    """Step the chain every ``interval_s`` seconds, ``steps_max`` times (None: until killed)."""
    import time
    from datetime import UTC

    done = 0
    while steps_max is None or done < steps_max:
        report = step(engine, cfg, ctx, now=datetime.now(UTC))
        if on_step is not None:
            on_step(report)
        done += 1
        time.sleep(interval_s)


def main(argv: list[str] | None = None) -> None:
    """``python -m withdrawals.processor CHAIN [--interval-s S]``: the processor loop, with the
    configuration from ``CUSTODY_CONFIG`` and the database from the settings."""
    import argparse
    import sys

    from config.chains import load_chains_config
    from config.database import get_engine
    from config.withdrawals import load_withdrawals_config

    parser = argparse.ArgumentParser(prog="withdrawals.processor")
    parser.add_argument("chain")
    parser.add_argument("--interval-s", type=float, default=1.0)
    args = parser.parse_args(argv)
    chains = load_chains_config()
    cfg = load_withdrawals_config(chains)
    ctx = build_context(chains, cfg, args.chain)
    mismatches = check_configuration(ctx)
    if mismatches:
        for line in mismatches:
            alerts.critical("%s", line)
            print(f"error [config_mismatch]: {line}", file=sys.stderr)
        raise SystemExit(2)
    print("ready", flush=True)
    sys.stdout.flush()
    run(get_engine(), cfg, ctx, interval_s=args.interval_s)


if __name__ == "__main__":  # pragma: no cover
    main()
