"""Planning sweeps: which deposit addresses hold more credited, final funds than the asset's
sweep threshold, and what each sweep moves.

From the engine's records (``repository.address_records``: credited deposits, final top-ups
and sweeps, gas paid), never from the chain alone, so that a deposit not final yet is never
swept: it is swept later, by another sweep, and never counted twice. The chain is read only to
check that the address really holds what the records say (at the latest block: a deposit
still arriving only adds to it); an address holding less is not swept and is logged for
reconciliation.

Per address, one sweep at a time (the partial unique index on ``sweeps`` decides between two
planners), token before native (a token sweep's gas is paid from the treasury part of the
address's native balance; the native sweep that follows takes what is left):

- native: ``available`` = customer part + treasury dust; it sends ``available`` minus the gas
  it can cost at its fee cap (``model.native_sweep_value``);
- token: ``available`` = the customer part; if the address's treasury native does not cover
  ``gas_limit_token * max_fee_per_gas``, a gas top-up of the difference is planned with it and
  the sweep waits (``waiting_gas``) until that top-up is final;
- dust (the gas would cost more than ``dust_gas_share_percent`` of the value; for a token,
  valued with its configured ``native_per_unit``) is left alone and reported;
- with an address source that holds no key (an xpub), the sweep is created ``proposed``:
  listed, never signed.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from chains.balances import read_balances
from config.sweeps import PRICE_SCALE, SweepAssetConfig
from config.uow import UnitOfWork
from outgoing import chain as outgoing_chain
from outgoing.model import FeeCaps
from sweeps import model
from sweeps import repository as repo
from sweeps.model import State
from sweeps.repository import AddressRecord
from sweeps.sending import ACTOR, StepReport, SweepContext, each_in_savepoints, log
from withdrawals.model import to_chain_units


@dataclass(frozen=True)
class Candidate:
    """A sweep to plan: the address, the asset, what it moves, and the top-up it needs."""

    address: str
    asset: SweepAssetConfig
    available: int
    customer: int
    top_up: int
    gas_limit: int


def _threshold(a: SweepAssetConfig) -> int:
    return to_chain_units(a.threshold_minor, a.scale, a.decimals)


def candidates(ctx: SweepContext, records: dict[tuple[str, str | None], AddressRecord],
               busy: set[str], caps: FeeCaps, report: StepReport) -> list[Candidate]:
    """The sweep each idle address is due for (token first), dust reported in ``report``."""
    found: list[Candidate] = []
    assets = ctx.cfg.chain_assets(ctx.chain.name)
    tokens = [a for a in assets if a.token is not None]
    native = next((a for a in assets if a.token is None), None)
    share = ctx.cfg.dust_gas_share_percent
    for address in sorted({addr for addr, _ in records} - busy):
        nat = records.get((address, None), AddressRecord(address, None))
        chosen: Candidate | None = None
        for a in tokens:
            rec = records.get((address, a.token))
            if rec is None or rec.customer <= _threshold(a) or rec.customer <= 0:
                continue
            gas = ctx.hot.gas_limit_token
            top_up = model.top_up_needed(nat.treasury, gas, caps.max_fee_per_gas)
            if a.native_per_unit_scaled is not None:
                value = model.token_value_in_native(rec.customer, a.decimals,
                                                    ctx.chain.native_decimals,
                                                    a.native_per_unit_scaled, PRICE_SCALE)
                cost = gas * caps.max_fee_per_gas + (
                    ctx.hot.gas_limit_native * caps.max_fee_per_gas if top_up else 0)
                if model.is_dust(value, cost, share):
                    report.dust.append(_dust(address, a, rec.customer, cost))
                    continue
            chosen = Candidate(address, a, rec.customer, rec.customer, top_up, gas)
            break
        if chosen is None and native is not None and nat.customer > _threshold(native):
            available = nat.customer + max(0, nat.treasury)
            gas = ctx.hot.gas_limit_native
            cost = gas * caps.max_fee_per_gas
            if model.is_dust(available, cost, share) or model.native_sweep_value(
                    available, gas, caps.max_fee_per_gas) <= 0:
                report.dust.append(_dust(address, native, available, cost))
            else:
                chosen = Candidate(address, native, available, nat.customer, 0, gas)
        if chosen is not None:
            found.append(chosen)
    return found


def _dust(address: str, a: SweepAssetConfig, amount: int, gas: int) -> dict[str, Any]:
    return {"address": address, "asset": a.asset, "amount": str(amount), "max_gas_wei": str(gas)}


def plan(engine: Engine, ctx: SweepContext, *, now: datetime, report: StepReport) -> None:
    """Plan the due sweeps of the chain (and new top-ups for sweeps whose top-up failed)."""
    with UnitOfWork(engine) as uow:
        # One snapshot for every read: a sweep that finishes between two statements must not
        # make a deposit look swept, or an address look idle, that is not.
        uow.conn.execute(sa.text("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY"))
        records = repo.address_records(uow.conn, ctx.chain.name)
        busy = repo.open_sweep_addresses(uow.conn, ctx.chain.name)
        orphans = [m for m in repo.list_movements(uow.conn, model.Kind.SWEEP,
                                                  chain=ctx.chain.name,
                                                  states=[State.WAITING_GAS],
                                                  limit=ctx.cfg.batch_max)
                   if m.data["top_up_id"] is None]
    caps = outgoing_chain.fresh_caps(ctx.rpc, ctx.fees)
    def retop(uow: UnitOfWork, sweep: repo.Movement) -> None:
        nat = records.get((sweep.sender, None), AddressRecord(sweep.sender, None))
        _retop(uow, ctx, sweep, model.top_up_needed(nat.treasury, sweep.gas_limit,
                                                    caps.max_fee_per_gas), now)

    each_in_savepoints(engine, orphans, retop, lambda m: f"sweep {m.id}")
    due = candidates(ctx, records, busy, caps, report)
    if not due:
        return
    latest = ctx.rpc.block_number()
    tokens = sorted({c.asset.token for c in due if c.asset.token is not None})
    on_chain = read_balances(ctx.rpc, latest, [c.address for c in due], tokens)
    with UnitOfWork(engine) as uow:
        indexes = repo.derivation_indexes(uow.conn, ctx.chain.family, [c.address for c in due])
    plannable = []
    for c in due:
        held = (on_chain.native_minor[c.address] if c.asset.token is None
                else on_chain.tokens_minor[(c.address, c.asset.token)])
        expected = records[(c.address, c.asset.token)].expected
        if held < expected or c.address not in indexes:
            log.error("sweep of %s %s on %s not planned: the records say %s, the chain holds "
                      "%s at block %s%s", c.address, c.asset.asset, ctx.chain.name, expected,
                      held, latest, "" if c.address in indexes else " (no derivation index)")
            continue
        plannable.append(c)
    each_in_savepoints(engine, plannable,
                       lambda uow, c: _insert(uow, ctx, c, indexes[c.address], caps, now, report),
                       lambda c: f"sweep of {c.address} {c.asset.asset}")


def _insert(uow: UnitOfWork, ctx: SweepContext, c: Candidate, index: int, caps: FeeCaps,
            now: datetime, report: StepReport) -> None:
    if ctx.address_signers is None:
        state, reason = State.PROPOSED, "no signer for this address source: proposed only"
    elif c.top_up:
        state, reason = State.WAITING_GAS, "waits for its gas top-up to be final"
    else:
        state, reason = State.READY, "planned"
    evidence = {"available": str(c.available), "customer_amount": str(c.customer),
                "threshold": str(_threshold(c.asset)), "top_up": str(c.top_up),
                "max_fee_per_gas": str(caps.max_fee_per_gas)}
    sweep_id = repo.insert_sweep(
        uow.conn, chain=ctx.chain.name, address=c.address, derivation_index=index,
        destination=ctx.hot.address, asset=c.asset.asset, token=c.asset.token,
        available=c.available, customer_amount=c.customer, state=state, gas_limit=c.gas_limit,
        actor=ACTOR, at=now, reason=reason, evidence=evidence)
    if sweep_id is None:
        return  # Another planner won this address.
    if state is State.PROPOSED:
        report.proposed += 1
        return
    report.planned += 1
    if state is State.WAITING_GAS:
        sweep = repo.get(uow.conn, model.Kind.SWEEP, sweep_id, for_update=True)
        assert sweep is not None
        _attach_top_up(uow, ctx, sweep, c.top_up, now, "gas for its token transfer")
        report.top_ups_planned += 1


def _attach_top_up(uow: UnitOfWork, ctx: SweepContext, sweep: repo.Movement, amount: int,
                   now: datetime, reason: str) -> None:
    top_up_id = repo.insert_top_up(
        uow.conn, chain=ctx.chain.name, sender=ctx.hot.address, address=sweep.sender,
        amount=amount, gas_limit=ctx.hot.gas_limit_native, actor=ACTOR, at=now,
        reason=f"sweep {sweep.id}: {reason}", evidence={"sweep_id": sweep.id})
    to = model.transition(model.Kind.SWEEP, sweep.state, model.Event.TOP_UP_PLANNED)
    repo.record(uow.conn, sweep, to_state=to, event=model.Event.TOP_UP_PLANNED,
                actor=ACTOR, at=now, reason=f"gas top-up {top_up_id} planned",
                evidence={"top_up_id": top_up_id, "amount": str(amount)}, top_up_id=top_up_id)


def _retop(uow: UnitOfWork, ctx: SweepContext, sweep: repo.Movement, need: int,
           now: datetime) -> None:
    locked = repo.get(uow.conn, model.Kind.SWEEP, sweep.id, for_update=True)
    if locked is None or locked.state is not State.WAITING_GAS or locked.data["top_up_id"]:
        return
    if need <= 0:
        to = model.transition(model.Kind.SWEEP, locked.state, model.Event.GAS_ARRIVED)
        repo.record(uow.conn, locked, to_state=to, event=model.Event.GAS_ARRIVED,
                    actor=ACTOR, at=now, reason="the address holds enough treasury gas",
                    evidence={})
        return
    _attach_top_up(uow, ctx, locked, need, now, "a new top-up after the last one failed")
