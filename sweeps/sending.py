"""The sending part of every movement of this package (sweeps, gas top-ups, cold transfers),
on the shared mechanism (``outgoing``), each phase in its own transactions:

- ``assign``: a movement waiting for its nonce (``model.SIGNABLE``) gets it under the nonce
  row's lock, with its gas limit and fee caps, in its history (``nonce_assigned``, state
  ``signing``), committed before anything is signed;
- ``sign``: outside any transaction, the signer (the hot wallet's, or a deposit address's by
  derivation path) signs exactly that transaction; then, under the row lock and only if the
  movement still waits in ``signing`` with that nonce and no attempt, the attempt (hash, nonce,
  caps, raw bytes) and the ``internal_transfers`` row that lets the watcher recognise the
  incoming transfer as ours are recorded together (``attempt_signed``, state ``signed``);
- ``send``: recorded attempts are broadcast outside any transaction; the outcome (accepted, or
  unconfirmed: never failed) is recorded in a new one;
- ``track``: receipts of every attempt and the sender's nonce at the final height
  (``outgoing.chain.observe``, ``outgoing.model.judge``): included, final under the chain's
  rule (gas booked, the kind's own consequence: ``finish``), reverted (gas booked), a reorg
  before finality (back to ``broadcast``, the same bytes again), the nonce consumed by another
  transaction (``dropped``), a stuck or unknown attempt replaced at the same nonce with higher
  fees (signed outside any transaction, recorded only if nothing moved meanwhile). Nothing is
  released or failed on a timer; an outcome undetermined for ``escalate_after_s`` raises an
  alert (once per process).

What differs between the kinds is only what they send (``unsigned``), who signs it
(``signer_of``) and what their finality means (``finish``): a sweep books its swept amount, a
top-up releases the sweep that waits for it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

from sqlalchemy.engine import Engine

from chains.balances import read_balances
from chains.errors import RpcUnavailable
from chains.evm import decode_receipt_transfers, erc20_transfer_calldata
from chains.model import FinalityEvidence, FinalityRule
from chains.rpc import RpcClient
from config.chains import ChainConfig
from config.errors import ConfigurationInvalid
from config.sweeps import SweepsConfig
from config.uow import UnitOfWork, is_retryable, run_in_transaction
from config.withdrawals import HotWalletConfig
from deposits import repository as deposits_repo
from ledger import chart
from ledger import service as ledger
from ledger.errors import AssetNotFound
from ledger.model import Account, Entry, credit, debit
from outgoing import chain as outgoing_chain
from outgoing import repository as outgoing
from outgoing.chain import ChainView, FeePolicy
from outgoing.errors import SignerUnavailable
from outgoing.model import (
    AttemptView,
    FeeCaps,
    Judgement,
    Verdict,
    bump_due,
    bumped_fee_caps,
    judge,
)
from outgoing.repository import Attempt, MovementKind
from outgoing.signer import AddressSigners, SignedTx, Signer, UnsignedTx
from sweeps import model
from sweeps import repository as repo
from sweeps.model import Event, Kind, State
from sweeps.repository import Movement
from withdrawals.errors import AmountNotRepresentable
from withdrawals.model import to_ledger_units

log = logging.getLogger("sweeps")
alerts = logging.getLogger("custody.alerts")
ACTOR = "sweeper"
T = TypeVar("T")
R = TypeVar("R")
SOURCE = "sweeper"
_MOVEMENT = {Kind.SWEEP: MovementKind.SWEEP, Kind.GAS_TOP_UP: MovementKind.GAS_TOP_UP,
             Kind.COLD_TRANSFER: MovementKind.COLD_TRANSFER}
#: The ``internal_transfers.kind`` of each.
_INTERNAL_KIND = {Kind.SWEEP: "sweep", Kind.GAS_TOP_UP: "gas_top_up",
                  Kind.COLD_TRANSFER: "cold_transfer"}


@dataclass
class SweepContext:
    """What the sweeper needs for one chain: its configuration, hot wallet (destination of
    sweeps, sender of top-ups and cold transfers, and the gas settings of all of them), node,
    signers and finality rule."""

    chain: ChainConfig
    hot: HotWalletConfig
    cfg: SweepsConfig
    rpc: RpcClient
    hot_signer: Signer | None
    address_signers: AddressSigners | None
    rule: FinalityRule
    fees: FeePolicy = field(init=False)
    #: ``expense:network_fees`` and ``treasury:{chain}`` in the native asset, once opened.
    gas_accounts: tuple[Account, Account] | None = None

    def __post_init__(self) -> None:
        self.fees = FeePolicy(self.hot.priority_fee_wei, self.hot.max_fee_per_gas_cap_wei)


@dataclass
class StepReport:
    """Counts of what one sweeper step did."""

    planned: int = 0
    proposed: int = 0
    top_ups_planned: int = 0
    dust: list[dict[str, Any]] = field(default_factory=list)
    signed: int = 0
    sent: int = 0
    tracked: int = 0
    final: int = 0
    reverted: int = 0
    dropped: int = 0
    skipped_locked: bool = False


def _what(m: Movement | tuple[Kind, int]) -> str:
    kind, movement_id = (m.kind, m.id) if isinstance(m, Movement) else m
    return f"{kind.value.replace('_', ' ')} {movement_id}"


def _ids(engine: Engine, ctx: SweepContext, kind: Kind, states: set[State]) -> list[int]:
    with UnitOfWork(engine) as uow:
        return repo.ids_in_states(uow.conn, kind, ctx.chain.name, states, ctx.cfg.batch_max)


def _caps_json(caps: FeeCaps) -> dict[str, str]:
    return {"max_fee_per_gas": str(caps.max_fee_per_gas),
            "max_priority_fee_per_gas": str(caps.max_priority_fee_per_gas)}


#: Movements per database transaction of a phase; each in its own savepoint.
CHUNK = 50


def each_in_savepoints(engine: Engine, items: Sequence[T],
                       work: Callable[[UnitOfWork, T], R], what: Callable[[T], str]
                       ) -> list[R | None]:
    """``work`` for every item, ``CHUNK`` items per database transaction, each item in its own
    savepoint: an item that fails (a refusal, a broken invariant) is rolled back alone, logged,
    and left where it was for the next step, and never stops the others; a serialization
    failure or a deadlock retries the whole chunk (``run_in_transaction``). Fewer commits,
    the same isolation between movements."""
    found: list[R | None] = []
    for start in range(0, len(items), CHUNK):
        chunk = items[start:start + CHUNK]

        def run(uow: UnitOfWork, chunk: Sequence[T] = chunk) -> list[R | None]:
            out: list[R | None] = []
            for item in chunk:
                savepoint = uow.conn.begin_nested()
                try:
                    out.append(work(uow, item))
                except Exception as exc:  # noqa: BLE001 - isolated per movement, logged
                    if is_retryable(exc):
                        raise
                    savepoint.rollback()
                    alerts.error("%s: not recorded, left for the next step: %s: %s",
                                 what(item), type(exc).__name__, exc)
                    out.append(None)
                else:
                    savepoint.commit()
            return out

        found += run_in_transaction(engine, run)
    return found


# --------------------------------------------------------------------------- what each sends


def unsigned(ctx: SweepContext, m: Movement, nonce: int, caps: FeeCaps) -> UnsignedTx | None:
    """The transaction ``m`` sends with ``nonce`` and ``caps`` (None: nothing left to send, a
    native sweep whose gas would take it all)."""
    d, chain_id = m.data, ctx.chain.chain_id
    if m.kind is Kind.SWEEP:
        if d["token"] is None:
            value = model.native_sweep_value(m.amount("available"), m.gas_limit,
                                             caps.max_fee_per_gas)
            if value <= 0:
                return None
            return UnsignedTx(chain_id, nonce, d["destination"], value, "0x", m.gas_limit,
                              caps.max_fee_per_gas, caps.max_priority_fee_per_gas)
        return UnsignedTx(chain_id, nonce, d["token"], 0,
                          erc20_transfer_calldata(d["destination"], m.amount("available")),
                          m.gas_limit, caps.max_fee_per_gas, caps.max_priority_fee_per_gas)
    if m.kind is Kind.GAS_TOP_UP:
        return UnsignedTx(chain_id, nonce, d["address"], m.amount("amount"), "0x", m.gas_limit,
                          caps.max_fee_per_gas, caps.max_priority_fee_per_gas)
    if d["token"] is None:
        return UnsignedTx(chain_id, nonce, d["destination"], m.amount("amount"), "0x",
                          m.gas_limit, caps.max_fee_per_gas, caps.max_priority_fee_per_gas)
    return UnsignedTx(chain_id, nonce, d["token"], 0,
                      erc20_transfer_calldata(d["destination"], m.amount("amount")),
                      m.gas_limit, caps.max_fee_per_gas, caps.max_priority_fee_per_gas)


def _position(m: Movement) -> str:
    """The deposit position of the transfer ``m`` produces at its destination: ``call:0`` for
    native value, ``log:0`` for the one ``Transfer`` of a token transfer."""
    return "call:0" if m.data.get("token") is None else "log:0"


def signer_of(ctx: SweepContext, m: Movement) -> Signer:
    """Who signs ``m``: a deposit address's signer by derivation path for a sweep, the hot
    wallet's for the others (SignerUnavailable when there is none)."""
    if m.kind is Kind.SWEEP:
        if ctx.address_signers is None:
            raise SignerUnavailable(f"no signer for deposit addresses on {ctx.chain.name} "
                                    "(an xpub source): sweeps are proposed, not signed")
        return ctx.address_signers.signer(int(m.data["derivation_index"]), m.sender)
    if ctx.hot_signer is None:
        raise SignerUnavailable(f"no signer for the hot wallet of {ctx.chain.name}")
    return ctx.hot_signer


# --------------------------------------------------------------------------- assign, sign


def assign(engine: Engine, ctx: SweepContext, kind: Kind, *, now: datetime) -> None:
    """Give every movement of ``kind`` waiting for it a nonce, gas limit and fee caps (see the
    module docstring). Chain reads happen before the transactions, never inside them."""
    with UnitOfWork(engine) as uow:
        waiting = repo.list_movements(uow.conn, kind, chain=ctx.chain.name,
                                      states=[model.SIGNABLE[kind]], limit=ctx.cfg.batch_max)
    if not waiting:
        return
    caps = outgoing_chain.fresh_caps(ctx.rpc, ctx.fees)
    waiting = sorted(waiting, key=lambda w: w.id)
    if kind is not Kind.SWEEP:
        waiting = _affordable(ctx, waiting, caps)
    chain_nonces = outgoing_chain.nonces(ctx.rpc, [m.sender for m in waiting])
    each_in_savepoints(
        engine, waiting,
        lambda uow, m: _assign_one(uow, ctx, kind, m.id, caps, chain_nonces[m.sender], now),
        _what)


def _affordable(ctx: SweepContext, waiting: list[Movement], caps: FeeCaps) -> list[Movement]:
    """Of the hot wallet's top-ups and cold transfers waiting for a nonce (in order), those it
    can pay at the latest block, value and whole gas limit at the fee cap, each on top of the
    ones before it. A nonce handed to a transaction the node refuses would block every later
    transaction of the wallet, withdrawals included: the others wait, logged, unsigned and
    with no nonce taken, and go on by themselves once the wallet is funded."""
    if not waiting:
        return []
    hot = waiting[0].sender
    tokens = sorted({str(m.data["token"]) for m in waiting if m.data.get("token")})
    balances = read_balances(ctx.rpc, ctx.rpc.block_number(), [hot], tokens)
    native = balances.native_minor[hot]
    held = {t: balances.tokens_minor[(hot, t)] for t in tokens}
    found = []
    for m in waiting:
        token = m.data.get("token")
        gas = m.gas_limit * caps.max_fee_per_gas
        value = 0 if token else m.amount("amount")
        if m.sender != hot or native < value + gas or (token and held[token] < m.amount("amount")):
            log.warning("%s waits: the hot wallet %s cannot pay it now (holds %s wei%s)",
                        _what(m), m.sender, native,
                        f", {held[token]} of {token}" if token else "")
            continue
        native -= value + gas
        if token:
            held[token] -= m.amount("amount")
        found.append(m)
    return found


def _assign_one(uow: UnitOfWork, ctx: SweepContext, kind: Kind, movement_id: int,
                caps: FeeCaps, chain_nonce: int, now: datetime) -> None:
    m = repo.get(uow.conn, kind, movement_id, for_update=True)
    if m is None or m.state is not model.SIGNABLE[kind]:
        return
    if kind is Kind.SWEEP and m.data["token"] is not None:
        caps = _within_gas_budget(uow, ctx, m, caps)
    nonce = outgoing.allocate_nonce(uow.conn, ctx.chain.name, m.sender, chain_nonce)
    to = model.transition(kind, m.state, Event.NONCE_ASSIGNED)
    repo.record(uow.conn, m, to_state=to, event=Event.NONCE_ASSIGNED, actor=ACTOR, at=now,
                reason=f"nonce {nonce} assigned, to be signed", nonce=nonce,
                evidence={"sender": m.sender, "nonce": nonce, "gas_limit": m.gas_limit,
                          **_caps_json(caps)})


def _within_gas_budget(uow: UnitOfWork, ctx: SweepContext, m: Movement,
                       caps: FeeCaps) -> FeeCaps:
    """A token sweep pays its gas from the treasury part of its address's native balance (the
    top-up that was final before it became ready), never from customer money: its fee cap is
    held to what that part can pay at the full gas limit."""
    native = repo.address_records(uow.conn, ctx.chain.name, [m.sender]).get((m.sender, None))
    budget = 0 if native is None else native.treasury
    most = max(0, budget) // m.gas_limit
    if caps.max_fee_per_gas <= most:
        return caps
    return FeeCaps(most, min(caps.max_priority_fee_per_gas, most))


def sign(engine: Engine, ctx: SweepContext, kind: Kind, *, now: datetime,
         report: StepReport) -> None:
    """Sign every movement of ``kind`` in ``signing`` outside any transaction with the nonce and
    caps committed by ``assign``, then record the attempts. A signature lost to a crash or a
    timeout costs nothing: only recorded attempts are ever sent."""
    with UnitOfWork(engine) as uow:  # Reads, closed before the signer is called.
        waiting = repo.list_movements(uow.conn, kind, chain=ctx.chain.name,
                                      states=[State.SIGNING], limit=ctx.cfg.batch_max)
        assigned = repo.last_events(uow.conn, kind, [m.id for m in waiting],
                                    Event.NONCE_ASSIGNED)
    signed_txs: list[tuple[Movement, UnsignedTx, SignedTx]] = []
    for m in sorted(waiting, key=lambda w: w.id):
        event = assigned.get(m.id)
        if event is None or m.nonce is None:
            continue
        caps = FeeCaps(int(event.evidence["max_fee_per_gas"]),
                       int(event.evidence["max_priority_fee_per_gas"]))
        tx = unsigned(ctx, m, m.nonce, caps)
        if tx is None:
            log.error("%s: nothing left to send at nonce %s; left in signing", _what(m), m.nonce)
            continue
        try:
            signer = signer_of(ctx, m)
        except SignerUnavailable as exc:
            log.warning("%s: %s", _what(m), exc.message)
            continue
        signed = outgoing_chain.sign(signer, tx, _what(m))
        if signed is not None:  # None: the signer is away; signed again next step.
            signed_txs.append((m, tx, signed))
    recorded = each_in_savepoints(
        engine, signed_txs,
        lambda uow, item: _record_first(uow, ctx, kind, item[0].id, item[1], item[2], now),
        lambda item: _what(item[0]))
    report.signed += sum(1 for r in recorded if r)


def _record_first(uow: UnitOfWork, ctx: SweepContext, kind: Kind, movement_id: int,
                  tx: UnsignedTx, signed: SignedTx, now: datetime) -> bool:
    m = repo.get(uow.conn, kind, movement_id, for_update=True)
    if (m is None or m.state is not State.SIGNING or m.nonce != tx.nonce
            or outgoing.list_attempts(uow.conn, _MOVEMENT[kind], movement_id)):
        return False
    _record_attempt(uow, ctx, m, tx, signed, 1, now, "first attempt")
    return True


def _record_attempt(uow: UnitOfWork, ctx: SweepContext, m: Movement, tx: UnsignedTx,
                    signed: SignedTx, attempt_no: int, now: datetime, reason: str) -> Attempt:
    """The attempt, the key of the transfer it will produce at our own address (so that the
    watcher books it as internal, custody-neutral), and the history row: one transaction,
    committed before anything is sent."""
    attempt = outgoing.insert_attempt(
        uow.conn, kind=_MOVEMENT[m.kind], movement_id=m.id, attempt_no=attempt_no,
        chain=ctx.chain.name, sender=m.sender, nonce=tx.nonce, tx_hash=signed.tx_hash,
        raw_tx=signed.raw_tx, max_fee_per_gas=tx.max_fee_per_gas,
        max_priority_fee_per_gas=tx.max_priority_fee_per_gas, gas_limit=tx.gas_limit, at=now)
    deposits_repo.insert_internal_transfer(uow.conn, (ctx.chain.name, signed.tx_hash, _position(m)),
                                      _INTERNAL_KIND[m.kind], f"{m.kind.value}:{m.id}")
    to = model.transition(m.kind, m.state, Event.ATTEMPT_SIGNED)
    repo.record(uow.conn, m, to_state=to, event=Event.ATTEMPT_SIGNED, actor=ACTOR, at=now,
                reason=reason, attempt_id=attempt.id,
                evidence={"tx_hash": signed.tx_hash, "nonce": tx.nonce, "value": str(tx.value),
                          "attempt_no": attempt_no,
                          **_caps_json(FeeCaps(tx.max_fee_per_gas,
                                               tx.max_priority_fee_per_gas))})
    return attempt


# --------------------------------------------------------------------------- send


def send(engine: Engine, ctx: SweepContext, kind: Kind, *, now: datetime,
         report: StepReport) -> None:
    """Broadcast the latest attempt of every movement of ``kind`` in ``signed`` (batched), then
    record each outcome in its own transaction."""
    ids = _ids(engine, ctx, kind, {State.SIGNED})
    if not ids:
        return
    with UnitOfWork(engine) as uow:
        found = outgoing.list_attempts_many(uow.conn, _MOVEMENT[kind], ids)
    latest = [found[i][-1] for i in ids if found[i]]
    outcomes = outgoing_chain.send_many(ctx.rpc, latest)
    report.sent += len(latest)

    def record(uow: UnitOfWork, item: tuple[Attempt, outgoing_chain.SendOutcome]) -> None:
        a, outcome = item
        e = Event.SEND_ACCEPTED if outcome.accepted else Event.SEND_UNCONFIRMED
        m = repo.get(uow.conn, kind, a.movement_id, for_update=True)
        if m is None or m.state is not State.SIGNED:
            return  # Another step moved it meanwhile (it found a receipt): keep that.
        repo.record(uow.conn, m, to_state=model.transition(kind, m.state, e), event=e,
                    actor=ACTOR, at=now, reason=outcome.reason, evidence=outcome.evidence,
                    attempt_id=a.id)

    each_in_savepoints(engine, list(zip(latest, outcomes, strict=True)), record,
                       lambda item: _what((kind, item[0].movement_id)))


# --------------------------------------------------------------------------- track


def track(engine: Engine, ctx: SweepContext, kind: Kind, *, now: datetime,
          report: StepReport) -> None:
    """Track every movement of ``kind`` in flight: one batched observation of the chain for
    all of them (``outgoing.chain.observe_many``), then each in its own savepoint
    (``each_in_savepoints``), so what goes wrong with one never stops the others. The node
    away: nothing is decided, the next step tries again."""
    states = [State.BROADCAST, State.UNKNOWN, State.INCLUDED]
    with UnitOfWork(engine) as uow:
        movements = repo.list_movements(uow.conn, kind, chain=ctx.chain.name, states=states,
                                        limit=ctx.cfg.batch_max)
        found = outgoing.list_attempts_many(uow.conn, _MOVEMENT[kind],
                                            [m.id for m in movements])
    movements = [m for m in movements if found[m.id]]
    if not movements:
        return
    try:
        observed = outgoing_chain.observe_many(ctx.rpc, ctx.rule,
                                               [(m.sender, found[m.id]) for m in movements],
                                               ctx.fees)
    except RpcUnavailable as exc:
        log.warning("%s on %s: node unavailable while tracking (retried next step): %s",
                    kind.value, ctx.chain.name, exc.message)
        return
    ensure_gas_accounts(engine, ctx)
    due: list[_Seen] = []
    for m, seen in zip(movements, observed, strict=True):
        report.tracked += 1
        attempts, view = found[m.id], seen.view
        hit, final = outgoing_chain.landed_in(ctx.rule, seen)
        verdict = judge(view.attempts, nonce=attempts[0].nonce,
                        finalized_nonce=view.finalized_nonce, latest_nonce=view.latest_nonce)
        try:
            if hit is None and _replace_if_due(engine, ctx, m, attempts, view, verdict.verdict,
                                               now=now):
                continue
        except RpcUnavailable as exc:
            log.warning("%s: node unavailable (retried next step): %s", _what(m), exc.message)
            continue
        due.append(_Seen(m, attempts, view, hit, final, verdict))
    resends = each_in_savepoints(
        engine, due, lambda uow, d: _track_one(uow, ctx, d, now=now, report=report),
        lambda d: _what(d.movement))
    for attempt in resends:
        if attempt is not None:
            outgoing_chain.resend(ctx.rpc, attempt)


@dataclass(frozen=True)
class _Seen:
    """What tracking saw of one movement, before its row is locked."""

    movement: Movement
    attempts: list[Attempt]
    view: ChainView
    hit: AttemptView | None
    final: tuple[bool, FinalityEvidence] | None
    verdict: Judgement


def _track_one(uow: UnitOfWork, ctx: SweepContext, d: _Seen, *, now: datetime,
               report: StepReport) -> Attempt | None:
    """Record what the chain showed for one movement, under its row lock (re-read: another
    step may have moved it); return an attempt to send again, if any."""
    attempts, view, hit, final, seen = d.attempts, d.view, d.hit, d.final, d.verdict
    m = repo.get(uow.conn, d.movement.kind, d.movement.id, for_update=True)
    if m is None or m.state not in (State.BROADCAST, State.UNKNOWN, State.INCLUDED):
        return None
    if hit is not None and final is not None:
        is_final, evidence = final
        attempt = next(a for a in attempts if a.id == hit.attempt_id)
        proof = {**evidence.to_json(), "tx_hash": hit.tx_hash, "nonce": hit.nonce}
        if m.state is State.INCLUDED and m.data["landed_attempt_id"] != hit.attempt_id:
            m = repo.record(uow.conn, m, to_state=State.BROADCAST, event=Event.REORGED_OUT,
                            actor=ACTOR, at=now, reason="another attempt landed instead",
                            evidence=proof, landed_attempt_id=None)
        if m.state is not State.INCLUDED:
            m = repo.record(uow.conn, m, to_state=State.INCLUDED, event=Event.RECEIPT_OBSERVED,
                            actor=ACTOR, at=now, reason=f"included in block {hit.receipt_block}",
                            evidence=proof, attempt_id=hit.attempt_id,
                            landed_attempt_id=hit.attempt_id)
        if is_final:
            _final(uow, ctx, m, attempt, view.receipts[hit.tx_hash], bool(hit.succeeded),
                   proof, now=now, report=report)
        return None
    if m.state is State.INCLUDED:
        gone = next(a for a in attempts if a.id == m.data["landed_attempt_id"])
        repo.record(uow.conn, m, to_state=State.BROADCAST, event=Event.REORGED_OUT,
                    actor=ACTOR, at=now, reason="receipt gone: the block was reorged out",
                    evidence={"tx_hash": gone.tx_hash, "head": view.head},
                    landed_attempt_id=None)
        return gone  # Back to broadcast tracking: the same bytes again (same hash).
    facts = {"nonce": attempts[0].nonce, "finalized_nonce": view.finalized_nonce,
             "latest_nonce": view.latest_nonce, "final_height": view.final_height,
             "attempts": [a.tx_hash for a in attempts]}
    if seen.verdict is Verdict.CONSUMED_ELSEWHERE:
        repo.record(uow.conn, m, to_state=State.DROPPED, event=Event.CONSUMED_ELSEWHERE,
                    actor=ACTOR, at=now, reason=seen.reason, evidence=facts)
        _after_failure(uow, ctx, m, now=now)
        report.dropped += 1
        return None
    if seen.verdict is Verdict.PENDING and m.state is State.UNKNOWN:
        repo.record(uow.conn, m, to_state=State.BROADCAST, event=Event.FOUND_PENDING,
                    actor=ACTOR, at=now, reason=seen.reason, evidence=facts)
        return None
    if seen.verdict is Verdict.NOT_FOUND:
        if m.state is State.BROADCAST:
            repo.record(uow.conn, m, to_state=State.UNKNOWN, event=Event.NOT_FOUND,
                        actor=ACTOR, at=now, reason=seen.reason, evidence=facts)
        _escalate_once(m, attempts, ctx.cfg.escalate_after_s, now=now)
        return attempts[-1]  # Unknown to the node: the same bytes again (same hash).
    return None


_ALERTED: set[tuple[Kind, int]] = set()


def _escalate_once(m: Movement, attempts: list[Attempt], escalate_after_s: int, *,
                   now: datetime) -> None:
    """An outcome still unknown past ``escalate_after_s`` raises one alert per process. Never
    acted on: an unknown outcome is resolved only by the chain (the attempts and the nonce)."""
    age_s = (now - attempts[0].created_at).total_seconds()
    if age_s >= escalate_after_s and (m.kind, m.id) not in _ALERTED:
        _ALERTED.add((m.kind, m.id))
        alerts.warning("%s on %s: outcome unknown for %.0fs (nonce %s, attempts %s); it stays "
                       "in flight until the chain decides", _what(m), m.chain, age_s, m.nonce,
                       [a.tx_hash for a in attempts])


def _replace_if_due(engine: Engine, ctx: SweepContext, m: Movement, attempts: list[Attempt],
                    view: ChainView, verdict: Verdict, *, now: datetime) -> bool:
    """A fee-bumped replacement at the same nonce when an attempt is stuck (pending, or unknown
    to the node, past ``bump_after_s``): decided from the chain view and an unlocked read,
    signed outside any transaction, recorded only if the movement is still where the decision
    saw it and its latest attempt is still the one the bump was computed from."""
    if m.state not in (State.BROADCAST, State.UNKNOWN):
        return False
    if verdict not in (Verdict.PENDING, Verdict.NOT_FOUND) or not bump_due(
            last_attempt_at=attempts[-1].created_at, now=now, bump_after_s=ctx.cfg.bump_after_s,
            attempts=len(attempts), attempts_max=ctx.cfg.attempts_max):
        return False
    previous = attempts[-1]
    caps = bumped_fee_caps(FeeCaps(previous.max_fee_per_gas, previous.max_priority_fee_per_gas),
                           view.fresh_caps, ctx.cfg.bump_percent)
    if m.kind is Kind.SWEEP and m.data["token"] is not None:
        with UnitOfWork(engine) as uow:
            held = _within_gas_budget(uow, ctx, m, caps)
        if held != caps:
            # The treasury gas on the address cannot pay a bump: a replacement it cannot pay
            # would be refused, and the last attempt would be one that never lands. Keep the
            # attempt there is (sent again as it is) until fees fall.
            log.info("%s: no fee bump, its address's treasury gas pays %s per gas at most",
                     _what(m), held.max_fee_per_gas)
            return False
    assert m.nonce is not None
    tx = unsigned(ctx, m, m.nonce, caps)
    if tx is None:
        return False
    try:
        signed = outgoing_chain.sign(signer_of(ctx, m), tx, _what(m))
    except SignerUnavailable as exc:
        log.warning("%s: %s", _what(m), exc.message)
        return False
    if signed is None:
        return True

    def record(uow: UnitOfWork) -> Attempt | None:
        now_m = repo.get(uow.conn, m.kind, m.id, for_update=True)
        latest = outgoing.list_attempts(uow.conn, _MOVEMENT[m.kind], m.id)
        if now_m is None or now_m.state is not m.state or latest[-1].id != previous.id:
            return None  # Something moved: the signature is dropped, never sent.
        return _record_attempt(uow, ctx, now_m, tx, signed, previous.attempt_no + 1, now,
                               f"stuck since {previous.created_at.isoformat()}: fee bump")

    run_in_transaction(engine, record)
    return True


# --------------------------------------------------------------------------- finality


def _gas_entry(uow: UnitOfWork, ctx: SweepContext, m: Movement, wei: int,
               now: datetime) -> Entry | None:
    """``DR expense:network_fees / CR treasury:{chain}`` in the native asset, exactly."""
    if wei == 0:
        return None
    expense, treasury = ctx.gas_accounts or _open_gas_accounts(uow, ctx)
    scale = expense.asset.scale
    try:
        amount = to_ledger_units(wei, ctx.chain.native_decimals, scale)
    except AmountNotRepresentable as exc:
        raise ConfigurationInvalid(f"{_what(m)}: gas {wei} cannot be booked exactly in "
                                   f"{ctx.chain.native_asset} (scale {scale})") from exc
    return Entry(idempotency_key=f"{m.kind.value}:{m.id}:gas", kind=f"{m.kind.value}_gas",
                 effective_at=now, source=SOURCE, reference=f"{m.kind.value}:{m.id}",
                 reason=f"gas paid by {m.sender}",
                 lines=(debit(expense, amount), credit(treasury, amount)),
                 metadata={"amount_chain": str(wei), "chain_decimals": ctx.chain.native_decimals})


def _open_gas_accounts(uow: UnitOfWork, ctx: SweepContext) -> tuple[Account, Account]:
    asset = ledger.get_asset(uow, ctx.chain.native_asset)
    return (ledger.open_account(uow, chart.expense_network_fees(), asset),
            ledger.open_account(uow, chart.treasury(ctx.chain.name), asset))


def ensure_gas_accounts(engine: Engine, ctx: SweepContext) -> None:
    """Open ``expense:network_fees`` and ``treasury:{chain}`` in the native asset once, in a
    committed transaction of their own, so that the gas entries of a step reuse them (an
    account opened inside a chunk that rolled back would not exist)."""
    if ctx.gas_accounts is None:
        try:
            ctx.gas_accounts = run_in_transaction(engine,
                                                  lambda uow: _open_gas_accounts(uow, ctx))
        except AssetNotFound:
            # Nothing of the native asset is booked yet (the treasury's funding is not final):
            # each gas entry then waits in its savepoint and is booked by a later step.
            log.info("%s: no %s in the ledger yet; gas entries wait", ctx.chain.name,
                     ctx.chain.native_asset)


def _final(uow: UnitOfWork, ctx: SweepContext, m: Movement, attempt: Attempt,
           receipt: dict[str, Any], succeeded: bool, proof: dict[str, Any], *, now: datetime,
           report: StepReport) -> None:
    """Book a final receipt: the gas, and what the kind's finality means (``finish``)."""
    wei = outgoing_chain.gas_paid_wei(receipt)
    entry = _gas_entry(uow, ctx, m, wei, now)
    transaction_id = ledger.post(uow, entry).transaction_id if entry is not None else None
    proof = {**proof, "gas_paid": str(wei)}
    if not succeeded:
        repo.record(uow.conn, m, to_state=State.REVERTED, event=Event.FINAL_REVERTED,
                    actor=ACTOR, at=now, reason="reverted on chain (receipt status 0), final",
                    evidence=proof, attempt_id=attempt.id, ledger_transaction_id=transaction_id,
                    gas_paid=wei, **({"swept_amount": 0} if m.kind is Kind.SWEEP else {}))
        _after_failure(uow, ctx, m, now=now)
        report.reverted += 1
        return
    columns: dict[str, Any] = {"gas_paid": wei}
    if m.kind is Kind.SWEEP:
        columns["swept_amount"] = _swept(ctx, m, attempt, receipt)
        proof["swept_amount"] = str(columns["swept_amount"])
    m = repo.record(uow.conn, m, to_state=State.FINAL, event=Event.FINAL_SUCCEEDED,
                    actor=ACTOR, at=now, reason=f"final under {ctx.rule}", evidence=proof,
                    attempt_id=attempt.id, ledger_transaction_id=transaction_id, **columns)
    if m.kind is Kind.GAS_TOP_UP:
        waiting = repo.sweep_waiting_on(uow.conn, m.id)
        sweep = None if waiting is None else repo.get(uow.conn, Kind.SWEEP, waiting,
                                                      for_update=True)
        if sweep is not None and sweep.state is State.WAITING_GAS:
            repo.record(uow.conn, sweep, to_state=State.READY, event=Event.GAS_ARRIVED,
                        actor=ACTOR, at=now, reason=f"gas top-up {m.id} is final",
                        evidence={"top_up_id": m.id, "tx_hash": attempt.tx_hash,
                                  "amount": str(m.amount("amount"))})
    report.final += 1


def _swept(ctx: SweepContext, m: Movement, attempt: Attempt, receipt: dict[str, Any]) -> int:
    """What a final sweep moved: a native sweep's value follows from its attempt's fee cap (the
    rule ``unsigned`` signed it with); a token sweep's receipt must pay exactly ``available``
    to the hot wallet (anything else is refused loudly: nothing is booked)."""
    if m.data["token"] is None:
        return model.native_sweep_value(m.amount("available"), m.gas_limit,
                                        attempt.max_fee_per_gas)
    paid = [t.value for t in decode_receipt_transfers(receipt)
            if t.token == m.data["token"] and t.from_address == m.sender
            and t.to_address == m.data["destination"]]
    if paid != [m.amount("available")]:
        raise AssertionError(f"{_what(m)}: receipt pays {paid}, expected "
                             f"[{m.amount('available')}]")
    return m.amount("available")


def _after_failure(uow: UnitOfWork, ctx: SweepContext, m: Movement, *, now: datetime) -> None:
    """A top-up that will never arrive (reverted, or its nonce consumed elsewhere): the sweep
    waiting for it goes on waiting without one, and the planner sends a new top-up."""
    if m.kind is not Kind.GAS_TOP_UP:
        return
    waiting = repo.sweep_waiting_on(uow.conn, m.id)
    sweep = None if waiting is None else repo.get(uow.conn, Kind.SWEEP, waiting,
                                                  for_update=True)
    if sweep is not None:
        repo.record(uow.conn, sweep, to_state=State.WAITING_GAS, event=Event.TOP_UP_FAILED,
                    actor=ACTOR, at=now, reason=f"gas top-up {m.id} will not arrive",
                    evidence={"top_up_id": m.id}, top_up_id=None)
