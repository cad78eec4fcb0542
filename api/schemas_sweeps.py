"""Request and response bodies of the sweep, cold-transfer and refill routes
(``api.routes.sweeps``), and the conversions of ``sweeps.service`` records into them; the CLI
(``api.cli_sweeps``) prints the same bodies with ``--json``.

A module of its own beside ``api.schemas`` (which it builds on), which has grown past the size
one module should have. Amounts the caller gives are ledger minor units as strings of digits,
as everywhere in this API. The movements store amounts in the chain's smallest unit (wei,
token units): they are shown as ``OnChainAmount`` (units, the token's on-chain decimals and the
exact decimal rendering), and a cold transfer's or a refill's amount, which is whole ledger
units by construction, also as the usual ``Amount``.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from api.schemas import (
    ADDRESS_PATTERN,
    ASSET_PATTERN,
    CHAIN_PATTERN,
    Amount,
    Attempt,
    Body,
    MinorUnits,
    Page,
    Text,
    amount,
)
from config.chains import ChainsConfig
from sweeps import model, service
from sweeps.model import Kind, State
from sweeps.service import Movement

if TYPE_CHECKING:
    from sweeps.sending import StepReport

# --- shapes -----------------------------------------------------------------------------------


class OnChainAmount(BaseModel):
    """An amount in the chain's smallest unit, with the on-chain decimals of its token (or
    native coin) and its exact decimal rendering; all strings but ``decimals``."""

    units: str
    decimals: int
    decimal: str


class MovementEvent(BaseModel):
    """One row of a movement's history."""

    id: int
    event: str
    from_state: str | None
    to_state: str
    actor: str
    reason: str | None
    evidence: dict[str, Any]
    ledger_transaction_id: int | None
    attempt_id: int | None
    occurred_at: datetime
    recorded_at: datetime


class GasTopUp(BaseModel):
    """Native coin sent from the hot wallet to a deposit address for a token sweep's gas."""

    id: int
    chain: str
    sender: str
    address: str
    amount: OnChainAmount
    state: str
    state_reason: str | None
    nonce: int | None
    gas_paid: OnChainAmount | None
    created_at: datetime
    updated_at: datetime


class GasTopUpTimeline(BaseModel):
    """A gas top-up with its history and attempts."""

    top_up: GasTopUp
    events: list[MovementEvent]
    attempts: list[Attempt]


class Sweep(BaseModel):
    """A sweep of a deposit address to the hot wallet. ``needs_signer``: proposed only (the
    address source holds no key, an xpub): the engine never signs it."""

    id: int
    chain: str
    address: str
    derivation_index: int
    destination: str
    asset: str
    token: str | None
    available: OnChainAmount
    customer_amount: OnChainAmount
    swept_amount: OnChainAmount | None
    gas_paid: OnChainAmount | None
    state: str
    state_reason: str | None
    needs_signer: bool
    nonce: int | None
    top_up_id: int | None
    created_at: datetime
    updated_at: datetime


class Sweeps(Page):
    """Sweeps, newest first."""

    items: list[Sweep]


class SweepTimeline(BaseModel):
    """A sweep with its history, its attempts and its gas top-ups (each with theirs)."""

    sweep: Sweep
    events: list[MovementEvent]
    attempts: list[Attempt]
    top_ups: list[GasTopUpTimeline]


class SweepRunCreate(Body):
    """Run one sweeper step of ``chain`` now."""

    chain: str = Field(pattern=CHAIN_PATTERN)


class Dust(BaseModel):
    """Funds left on a deposit address because moving them would cost too much gas (chain
    units: the asset's, and wei for the gas)."""

    address: str
    asset: str
    amount: str
    max_gas_wei: str


class SweepStep(BaseModel):
    """What one sweeper step did (counts), and the dust it left."""

    chain: str
    planned: int
    proposed: int
    top_ups_planned: int
    signed: int
    sent: int
    tracked: int
    final: int
    reverted: int
    dropped: int
    dust: list[Dust]
    #: Another process was stepping this chain: this one did nothing.
    skipped_locked: bool


class ColdTransferCreate(Body):
    """Move ``amount`` (minor units of the asset) from the chain's hot wallet to the asset's
    configured cold address, once approved by admins other than the proposer."""

    chain: str = Field(pattern=CHAIN_PATTERN)
    asset: str = Field(pattern=ASSET_PATTERN)
    amount: MinorUnits
    reason: Text


class ColdDecision(BaseModel):
    """An admin's decision on a cold transfer."""

    approver: str
    decision: str
    reason: str | None
    decided_at: datetime


class ColdTransfer(BaseModel):
    """A transfer from the hot wallet to cold: signed only once ``approved``."""

    id: int
    chain: str
    asset: str
    token: str | None
    sender: str
    destination: str
    amount: Amount
    amount_onchain: OnChainAmount
    approvals_required: int
    decisions: list[ColdDecision]
    proposed_by: str
    reason: str
    state: str
    state_reason: str | None
    nonce: int | None
    gas_paid: OnChainAmount | None
    created_at: datetime
    updated_at: datetime


class ColdTransfers(Page):
    """Cold transfers, newest first."""

    items: list[ColdTransfer]


class ColdTransferTimeline(BaseModel):
    """A cold transfer with its history and attempts."""

    cold_transfer: ColdTransfer
    events: list[MovementEvent]
    attempts: list[Attempt]


class RefillCreate(Body):
    """Ask for ``amount`` (minor units of the asset) to be sent from a cold address to the
    chain's hot wallet; ``source`` defaults to the asset's configured cold address."""

    chain: str = Field(pattern=CHAIN_PATTERN)
    asset: str = Field(pattern=ASSET_PATTERN)
    amount: MinorUnits
    source: str | None = Field(default=None, pattern=ADDRESS_PATTERN)
    reason: Text


class Refill(BaseModel):
    """A refill request; ``matched`` once the final transfer that fulfils it was booked as an
    internal movement."""

    id: int
    chain: str
    asset: str
    token: str | None
    source: str
    destination: str
    amount: Amount
    amount_onchain: OnChainAmount
    requested_by: str
    reason: str
    state: str
    matched_tx_hash: str | None
    matched_position: str | None
    created_at: datetime
    updated_at: datetime


class Refills(Page):
    """Refill requests, newest first."""

    items: list[Refill]


# --- conversions ------------------------------------------------------------------------------


def onchain(units: int, decimals: int) -> OnChainAmount:
    """An OnChainAmount."""
    return OnChainAmount(units=str(units), decimals=decimals,
                         decimal=model.format_units(units, decimals))


def _decimals(chains: ChainsConfig, chain: str, asset: str) -> tuple[int, int]:
    """(on-chain decimals, ledger scale) of the asset on the chain; (0, 0) for one no longer
    configured (units shown as they are)."""
    units = service.asset_units(chains, chain, asset)
    return (0, 0) if units is None else (units.decimals, units.scale)


def _native_decimals(chains: ChainsConfig, chain: str) -> int:
    found = chains.chains.get(chain)
    return 18 if found is None else found.native_decimals


def _maybe(value: Any, decimals: int) -> OnChainAmount | None:
    return None if value is None else onchain(int(value), decimals)


def _nonce(m: Movement) -> int | None:
    return m.nonce


def event_view(e: service.EventRecord) -> MovementEvent:
    """A history row."""
    return MovementEvent(id=e.id, event=e.event, from_state=e.from_state, to_state=e.to_state,
                         actor=e.actor, reason=e.reason, evidence=e.evidence,
                         ledger_transaction_id=e.ledger_transaction_id,
                         attempt_id=e.attempt_id, occurred_at=e.occurred_at,
                         recorded_at=e.recorded_at)


def attempt_view(a: service.Attempt) -> Attempt:
    """A signed attempt."""
    return Attempt(attempt_no=a.attempt_no, tx_hash=a.tx_hash, nonce=a.nonce,
                   max_fee_per_gas=str(a.max_fee_per_gas),
                   max_priority_fee_per_gas=str(a.max_priority_fee_per_gas),
                   gas_limit=a.gas_limit, created_at=a.created_at)


def sweep_view(chains: ChainsConfig, m: Movement) -> Sweep:
    """A sweep's body."""
    d = m.data
    decimals, _ = _decimals(chains, m.chain, str(d["asset"]))
    return Sweep(
        id=m.id, chain=m.chain, address=d["address"], derivation_index=d["derivation_index"],
        destination=d["destination"], asset=d["asset"], token=d["token"],
        available=onchain(m.amount("available"), decimals),
        customer_amount=onchain(m.amount("customer_amount"), decimals),
        swept_amount=_maybe(d["swept_amount"], decimals),
        gas_paid=_maybe(d["gas_paid"], _native_decimals(chains, m.chain)),
        state=str(m.state), state_reason=d["state_reason"],
        needs_signer=m.state is State.PROPOSED, nonce=_nonce(m), top_up_id=d["top_up_id"],
        created_at=d["created_at"], updated_at=d["updated_at"])


def top_up_view(chains: ChainsConfig, m: Movement) -> GasTopUp:
    """A gas top-up's body."""
    d, native = m.data, _native_decimals(chains, m.chain)
    return GasTopUp(id=m.id, chain=m.chain, sender=d["sender"], address=d["address"],
                    amount=onchain(m.amount("amount"), native), state=str(m.state),
                    state_reason=d["state_reason"], nonce=_nonce(m),
                    gas_paid=_maybe(d["gas_paid"], native), created_at=d["created_at"],
                    updated_at=d["updated_at"])


def sweep_timeline_view(chains: ChainsConfig, tl: service.Timeline) -> SweepTimeline:
    """A sweep's timeline body."""
    assert tl.movement.kind is Kind.SWEEP
    return SweepTimeline(
        sweep=sweep_view(chains, tl.movement), events=[event_view(e) for e in tl.events],
        attempts=[attempt_view(a) for a in tl.attempts],
        top_ups=[GasTopUpTimeline(top_up=top_up_view(chains, t.movement),
                                  events=[event_view(e) for e in t.events],
                                  attempts=[attempt_view(a) for a in t.attempts])
                 for t in tl.top_ups])


def cold_view(chains: ChainsConfig, m: Movement,
              decisions: list[service.ColdDecisionRecord]) -> ColdTransfer:
    """A cold transfer's body."""
    d = m.data
    decimals, scale = _decimals(chains, m.chain, str(d["asset"]))
    units = m.amount("amount")
    return ColdTransfer(
        id=m.id, chain=m.chain, asset=d["asset"], token=d["token"], sender=d["sender"],
        destination=d["destination"], amount=amount(units // 10 ** (decimals - scale), scale),
        amount_onchain=onchain(units, decimals), approvals_required=d["approvals_required"],
        decisions=[ColdDecision(approver=x.approver, decision=x.decision, reason=x.reason,
                                decided_at=x.decided_at) for x in decisions],
        proposed_by=d["proposed_by"], reason=d["reason"], state=str(m.state),
        state_reason=d["state_reason"], nonce=_nonce(m),
        gas_paid=_maybe(d["gas_paid"], _native_decimals(chains, m.chain)),
        created_at=d["created_at"], updated_at=d["updated_at"])


def cold_timeline_view(chains: ChainsConfig, tl: service.Timeline) -> ColdTransferTimeline:
    """A cold transfer's timeline body."""
    assert tl.movement.kind is Kind.COLD_TRANSFER
    return ColdTransferTimeline(cold_transfer=cold_view(chains, tl.movement, tl.decisions),
                                events=[event_view(e) for e in tl.events],
                                attempts=[attempt_view(a) for a in tl.attempts])


def refill_view(chains: ChainsConfig, r: service.RefillRecord) -> Refill:
    """A refill request's body."""
    decimals, scale = _decimals(chains, r.chain, r.asset)
    return Refill(id=r.id, chain=r.chain, asset=r.asset, token=r.token, source=r.source,
                  destination=r.destination,
                  amount=amount(r.amount // 10 ** (decimals - scale), scale),
                  amount_onchain=onchain(r.amount, decimals), requested_by=r.requested_by,
                  reason=r.reason, state=r.state, matched_tx_hash=r.matched_tx_hash,
                  matched_position=r.matched_position, created_at=r.created_at,
                  updated_at=r.updated_at)


def step_view(chain: str, report: StepReport) -> SweepStep:
    """A sweeper step's report."""
    return SweepStep(chain=chain, planned=report.planned, proposed=report.proposed,
                     top_ups_planned=report.top_ups_planned, signed=report.signed,
                     sent=report.sent, tracked=report.tracked, final=report.final,
                     reverted=report.reverted, dropped=report.dropped,
                     dust=[Dust(**d) for d in report.dust],
                     skipped_locked=report.skipped_locked)
