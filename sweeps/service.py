"""Use cases of the movements between our own addresses, for the API and the CLI: reading
sweeps, gas top-ups and cold transfers with their timelines; proposing a cold transfer by
hand and deciding on one; requesting a refill from cold. Each opens its own units of work.

Who may act: only an admin proposes or decides a cold transfer or requests a refill
(``Actor.admin``: the API gives it to an admin-scoped key, whose client name is the actor, as
for every two-person decision there; the CLI to a name listed in ``[withdrawals.roles]
admins``). The proposer never decides on their own proposal, an admin decides once, a
rejection ends the transfer, and only an ``approved`` one is signed (``sending``). The
automatic proposals of the hot-limit check (``limits``) have the actor ``sweeper``, so every
admin may decide on them.

Amounts come in as ledger minor units and are stored in the chain's smallest unit
(``to_chain_units``: exact). A request key (the API's ``Idempotency-Key``, the CLI's
``--key``) makes a proposal or a refill request idempotent: the same request under the same
key returns the first one, a different one is refused (``RequestKeyReused``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy.engine import Engine

from config.chains import ChainsConfig
from config.sweeps import SweepsConfig
from config.uow import UnitOfWork, run_in_transaction
from config.withdrawals import WithdrawalsConfig
from outgoing import repository as outgoing
from outgoing.repository import Attempt, MovementKind
from sweeps import model
from sweeps import repository as repo
from sweeps.errors import (
    AdminRequired,
    ColdDecisionRefused,
    ColdTransferInvalid,
    ColdTransferOpen,
    MovementNotFound,
    RefillInvalid,
    RequestKeyReused,
)
from sweeps.model import Event, Kind, State
from sweeps.repository import ColdDecisionRecord, EventRecord, Movement, RefillRecord
from withdrawals.errors import AmountNotRepresentable
from withdrawals.model import to_chain_units

# Records this module returns, re-exported for its callers (routes never import a repository).
__all__ = ["Attempt", "ColdDecisionRecord", "EventRecord", "Movement", "RefillRecord"]

_MOVEMENT = {Kind.SWEEP: MovementKind.SWEEP, Kind.GAS_TOP_UP: MovementKind.GAS_TOP_UP,
             Kind.COLD_TRANSFER: MovementKind.COLD_TRANSFER}
REASON_MAX = 500


@dataclass(frozen=True)
class Actor:
    """Who acts, and whether the caller's authentication made them an admin."""

    name: str
    admin: bool


def _require_admin(actor: Actor, what: str) -> None:
    if not actor.admin:
        raise AdminRequired(f"{actor.name} is not an admin: only an admin may {what}")


# --------------------------------------------------------------------------- reading


@dataclass(frozen=True)
class Timeline:
    """A movement with everything that happened to it: its history, its signed attempts, the
    admins' decisions (a cold transfer) and its gas top-ups with theirs (a sweep)."""

    movement: Movement
    events: list[EventRecord]
    attempts: list[Attempt]
    decisions: list[ColdDecisionRecord] = field(default_factory=list)
    top_ups: list[Timeline] = field(default_factory=list)


def list_movements(engine: Engine, kind: Kind, *, chain: str | None = None,
                   states: Sequence[State] | None = None, limit: int = 200,
                   before_id: int | None = None, since: datetime | None = None,
                   until: datetime | None = None) -> list[Movement]:
    """Movements of ``kind``, newest first (ids below ``before_id``, created in
    ``[since, until)``, when given)."""
    with UnitOfWork(engine) as uow:
        return repo.list_movements(uow.conn, kind, chain=chain, states=states, limit=limit,
                                   before_id=before_id, since=since, until=until)


def get_movement(engine: Engine, kind: Kind, movement_id: int) -> Movement:
    """One movement (MovementNotFound)."""
    with UnitOfWork(engine) as uow:
        found = repo.get(uow.conn, kind, movement_id)
    if found is None:
        raise MovementNotFound(f"no {kind.value.replace('_', ' ')} {movement_id}")
    return found


def timeline(engine: Engine, kind: Kind, movement_id: int) -> Timeline:
    """The movement's timeline (MovementNotFound). A sweep's gas top-ups are every top-up its
    history names (a failed one and the one planned after it) and the one it waits for."""
    with UnitOfWork(engine) as uow:
        return _timeline(uow, kind, movement_id)


def _timeline(uow: UnitOfWork, kind: Kind, movement_id: int) -> Timeline:
    m = repo.get(uow.conn, kind, movement_id)
    if m is None:
        raise MovementNotFound(f"no {kind.value.replace('_', ' ')} {movement_id}")
    events = repo.list_events(uow.conn, kind, movement_id)
    attempts = outgoing.list_attempts(uow.conn, _MOVEMENT[kind], movement_id)
    decisions = (repo.list_cold_decisions(uow.conn, movement_id)
                 if kind is Kind.COLD_TRANSFER else [])
    top_ups: list[Timeline] = []
    if kind is Kind.SWEEP:
        named = [e.evidence.get("top_up_id") for e in events] + [m.data.get("top_up_id")]
        ids = sorted({int(i) for i in named if i is not None})
        top_ups = [_timeline(uow, Kind.GAS_TOP_UP, i) for i in ids]
    return Timeline(m, events, attempts, decisions, top_ups)


def list_cold_transfers(engine: Engine, *, chain: str | None = None,
                        states: Sequence[State] | None = None, limit: int = 200,
                        before_id: int | None = None, since: datetime | None = None,
                        until: datetime | None = None,
                        ) -> list[tuple[Movement, list[ColdDecisionRecord]]]:
    """Cold transfers, newest first, each with the admins' decisions on it (ids below
    ``before_id``, created in ``[since, until)``, when given)."""
    with UnitOfWork(engine) as uow:
        found = repo.list_movements(uow.conn, Kind.COLD_TRANSFER, chain=chain, states=states,
                                    limit=limit, before_id=before_id, since=since,
                                    until=until)
        return [(m, repo.list_cold_decisions(uow.conn, m.id)) for m in found]


def list_refills(engine: Engine, *, chain: str | None = None, state: str | None = None,
                 limit: int = 200, before_id: int | None = None,
                 since: datetime | None = None,
                 until: datetime | None = None) -> list[RefillRecord]:
    """Refill requests, newest first (ids below ``before_id``, created in ``[since, until)``,
    when given)."""
    with UnitOfWork(engine) as uow:
        return repo.list_refills(uow.conn, chain=chain, state=state, limit=limit,
                                 before_id=before_id, since=since, until=until)


# --------------------------------------------------------------------------- asset units


@dataclass(frozen=True)
class AssetUnits:
    """How one ledger asset sits on one chain: its token (None: native), on-chain decimals and
    ledger scale."""

    chain: str
    asset: str
    token: str | None
    decimals: int
    scale: int

    def chain_amount(self, amount_minor: int) -> int:
        """Ledger minor units in the chain's smallest unit (exact)."""
        return to_chain_units(amount_minor, self.scale, self.decimals)


def asset_units(chains: ChainsConfig, chain_name: str, asset: str) -> AssetUnits | None:
    """The asset on the chain, or None when the chain does not exist or carries no such
    asset (native coin or listed token)."""
    chain = chains.chains.get(chain_name)
    if chain is None or asset not in chains.assets:
        return None
    scale = chains.assets[asset].scale
    if asset == chain.native_asset:
        return AssetUnits(chain.name, asset, None, chain.native_decimals, scale)
    token = next((t for t in chain.tokens if t.asset == asset), None)
    if token is None:
        return None
    return AssetUnits(chain.name, asset, token.contract.lower(), token.decimals, scale)


def _amount(units: AssetUnits, amount_minor: int, error: type[Exception]) -> int:
    if amount_minor <= 0:
        raise error(f"the amount must be positive, got {amount_minor}")
    try:
        return units.chain_amount(amount_minor)
    except AmountNotRepresentable as exc:
        raise error(f"{amount_minor} minor units of {units.asset}: {exc}") from exc


def _reason(reason: str, error: type[Exception]) -> str:
    text = reason.strip()
    if not 1 <= len(text) <= REASON_MAX:
        raise error(f"a reason of 1 to {REASON_MAX} characters is required")
    return text


# --------------------------------------------------------------------------- cold transfers


@dataclass(frozen=True)
class ColdProposal:
    """An admin's proposal: move ``amount_minor`` (ledger minor units) of ``asset`` from the
    chain's hot wallet to the asset's configured cold address."""

    chain: str
    asset: str
    amount_minor: int
    reason: str


@dataclass(frozen=True)
class ColdPlan:
    """A validated proposal: what would be inserted."""

    proposal: ColdProposal
    units: AssetUnits
    amount: int
    sender: str
    destination: str
    approvals_required: int
    gas_limit: int


def plan_cold_transfer(chains: ChainsConfig, wcfg: WithdrawalsConfig, cfg: SweepsConfig,
                       p: ColdProposal) -> ColdPlan:
    """Validate a proposal without writing anything (ColdTransferInvalid)."""
    units = asset_units(chains, p.chain, p.asset)
    if units is None:
        raise ColdTransferInvalid(f"no asset {p.asset!r} on a chain {p.chain!r} is configured")
    swept = cfg.assets.get((p.chain, p.asset))
    if swept is None or swept.cold_address is None:
        raise ColdTransferInvalid(f"{p.asset} on {p.chain} has no cold address in [sweeps] "
                                  "(cold_address, or the chain's cold_addresses)")
    hot = wcfg.hot_wallets.get(p.chain)
    if hot is None:
        raise ColdTransferInvalid(f"{p.chain} has no hot wallet to send from")
    amount = _amount(units, p.amount_minor, ColdTransferInvalid)
    _reason(p.reason, ColdTransferInvalid)
    required = model.cold_approvals_required(p.amount_minor, swept.cold_dual_approval_above_minor)
    gas = hot.gas_limit_native if units.token is None else hot.gas_limit_token
    return ColdPlan(p, units, amount, hot.address, swept.cold_address, required, gas)


@dataclass(frozen=True)
class Proposed:
    """A proposal's outcome: the cold transfer, and whether it was there already (a replay of
    the same request key)."""

    movement: Movement
    replayed: bool


def propose_cold_transfer(engine: Engine, plan: ColdPlan, *, actor: Actor,
                          request_key: str | None, now: datetime) -> Proposed:
    """Record a validated proposal (``plan_cold_transfer``), signed only once approved.
    ColdTransferOpen when another cold transfer of the chain and asset is in flight."""
    _require_admin(actor, "propose a cold transfer")
    p = plan.proposal

    def same(m: Movement) -> bool:
        return (m.chain, m.data["asset"], m.amount("amount"), m.data["reason"],
                m.data["proposed_by"]) == (p.chain, p.asset, plan.amount, p.reason.strip(),
                                           actor.name)

    def work(uow: UnitOfWork) -> Proposed:
        if request_key is not None:
            earlier = repo.cold_by_request_key(uow.conn, request_key)
            if earlier is not None:
                if not same(earlier):
                    raise RequestKeyReused(f"the key {request_key!r} was used for another "
                                           f"proposal (cold transfer {earlier.id})")
                return Proposed(earlier, True)
        cold_id = repo.propose_cold(
            uow.conn, chain=p.chain, asset=p.asset, token=plan.units.token, sender=plan.sender,
            destination=plan.destination, amount=plan.amount,
            approvals_required=plan.approvals_required, proposed_by=actor.name,
            reason=p.reason.strip(), gas_limit=plan.gas_limit, request_key=request_key, at=now,
            evidence={"amount_minor": str(p.amount_minor), "by_hand": True})
        if cold_id is None:
            raced = None if request_key is None else repo.cold_by_request_key(uow.conn,
                                                                               request_key)
            if raced is not None:
                raise RequestKeyReused(f"the key {request_key!r} is being used by another "
                                       "proposal; retry")
            found = repo.open_cold_transfer(uow.conn, p.chain, p.asset)
            which = f"cold transfer {found.id} ({found.state})" if found else "another one"
            raise ColdTransferOpen(f"{which} of {p.asset} on {p.chain} is in flight: one at "
                                   "a time")
        created = repo.get(uow.conn, Kind.COLD_TRANSFER, cold_id)
        assert created is not None
        return Proposed(created, False)

    return run_in_transaction(engine, work)


DECISIONS = ("approve", "reject")


def decide_cold_transfer(engine: Engine, cold_id: int, *, actor: Actor, decision: str,
                         reason: str | None, now: datetime) -> Movement:
    """An admin approves or rejects a proposed cold transfer. Enough approvals (one, or two
    different admins above ``cold_dual_approval_above``) make it ``approved``: the sweeper
    signs and sends it. A rejection (with a reason) ends it. Refused (ColdDecisionRefused,
    nothing written): the proposer, a second decision of the same admin, a cold transfer not
    waiting for decisions."""
    _require_admin(actor, "approve or reject a cold transfer")
    if decision not in DECISIONS:
        raise ColdDecisionRefused(f"decision must be one of {', '.join(DECISIONS)}")
    text = None if reason is None or not reason.strip() else _reason(reason,
                                                                   ColdDecisionRefused)
    if decision == "reject" and text is None:
        raise ColdDecisionRefused("a rejection needs a reason")

    def work(uow: UnitOfWork) -> Movement:
        # The row lock serializes decisions on one transfer (race prevented: two admins both
        # reading one approval and both deciding that theirs is the first of two).
        m = repo.get(uow.conn, Kind.COLD_TRANSFER, cold_id, for_update=True)
        if m is None:
            raise MovementNotFound(f"no cold transfer {cold_id}")
        if m.state is not State.PROPOSED:
            raise ColdDecisionRefused(f"cold transfer {cold_id} is {m.state}: it no longer "
                                      "waits for decisions")
        required = int(m.data["approvals_required"])
        earlier = repo.cold_decisions(uow.conn, cold_id)
        try:
            outcome = model.cold_decision(proposer=str(m.data["proposed_by"]),
                                          actor=actor.name, decision=decision,
                                          earlier=earlier, required=required)
        except ValueError as exc:
            raise ColdDecisionRefused(f"cold transfer {cold_id}: {exc}") from None
        repo.insert_cold_decision(uow.conn, cold_id, actor.name, decision, text, now)
        approvers = sorted([a for a, d in earlier.items() if d == "approve"]
                           + ([actor.name] if decision == "approve" else []))
        to = model.transition(Kind.COLD_TRANSFER, m.state, outcome.event)
        what = {Event.APPROVED: "approved", Event.REJECTED: "rejected"}.get(
            outcome.event, f"approval {outcome.approvals} of {required}")
        return repo.record(uow.conn, m, to_state=to, event=outcome.event, actor=actor.name,
                           at=now, reason=f"{what} by {actor.name}" + (f": {text}" if text
                                                                       else ""),
                           evidence={"decision": decision, "approvals": outcome.approvals,
                                     "required": required, "approvers": approvers},
                           state_reason=text if decision == "reject" else None)

    return run_in_transaction(engine, work)


# --------------------------------------------------------------------------- refills


@dataclass(frozen=True)
class RefillAsk:
    """A request to refill the hot wallet with ``amount_minor`` (ledger minor units) of
    ``asset`` from the cold address ``source`` (None: the asset's configured cold address)."""

    chain: str
    asset: str
    amount_minor: int
    source: str | None
    reason: str


@dataclass(frozen=True)
class RefillPlan:
    """A validated refill request: what would be inserted."""

    ask: RefillAsk
    units: AssetUnits
    amount: int
    source: str
    destination: str


def plan_refill(chains: ChainsConfig, wcfg: WithdrawalsConfig, cfg: SweepsConfig,
                ask: RefillAsk) -> RefillPlan:
    """Validate a refill request without writing anything (RefillInvalid)."""
    units = asset_units(chains, ask.chain, ask.asset)
    if units is None:
        raise RefillInvalid(f"no asset {ask.asset!r} on a chain {ask.chain!r} is configured")
    chain = chains.chain(ask.chain)
    hot = wcfg.hot_wallets.get(ask.chain)
    if hot is None:
        raise RefillInvalid(f"{ask.chain} has no hot wallet to refill")
    swept = cfg.assets.get((ask.chain, ask.asset))
    source = (ask.source or (swept.cold_address if swept else None)
              or next(iter(chain.cold_addresses), None))
    if source is None:
        raise RefillInvalid(f"{ask.chain} has no cold address to refill from")
    source = source.lower()
    if source not in chain.cold_addresses:
        raise RefillInvalid(f"{source} is not one of {ask.chain}'s cold addresses "
                            f"({', '.join(chain.cold_addresses) or 'none'})")
    amount = _amount(units, ask.amount_minor, RefillInvalid)
    _reason(ask.reason, RefillInvalid)
    return RefillPlan(ask, units, amount, source, hot.address)


def request_refill(engine: Engine, plan: RefillPlan, *, actor: Actor,
                   request_key: str | None, now: datetime) -> tuple[RefillRecord, bool]:
    """Open a validated refill request (``plan_refill``); (request, replayed). The transfer
    from the cold address is signed outside the engine; once final, the watcher matches it
    to the oldest open request of the same chain, token, source, destination and amount."""
    _require_admin(actor, "request a refill")
    ask = plan.ask

    def work(uow: UnitOfWork) -> tuple[RefillRecord, bool]:
        if request_key is not None:
            earlier = repo.refill_by_request_key(uow.conn, request_key)
            if earlier is not None:
                if (earlier.chain, earlier.asset, earlier.amount, earlier.source,
                        earlier.reason, earlier.requested_by) != (
                        ask.chain, ask.asset, plan.amount, plan.source, ask.reason.strip(),
                        actor.name):
                    raise RequestKeyReused(f"the key {request_key!r} was used for another "
                                           f"refill request ({earlier.id})")
                return earlier, True
        refill_id = repo.insert_refill(
            uow.conn, chain=ask.chain, asset=ask.asset, token=plan.units.token,
            source=plan.source, destination=plan.destination, amount=plan.amount,
            requested_by=actor.name, reason=ask.reason.strip(), request_key=request_key,
            at=now)
        if refill_id is None:
            raise RequestKeyReused(f"the key {request_key!r} is being used by another refill "
                                   "request; retry")
        found = repo.get_refill(uow.conn, refill_id)
        assert found is not None
        return found, False

    return run_in_transaction(engine, work)
