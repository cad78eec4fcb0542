"""Pure core of the outgoing-transaction mechanism shared by every movement we send
(withdrawals, sweeps, gas top-ups, cold transfers): fee caps, what the chain says about a
movement's attempts (``AttemptView``), and the verdict that every movement's own state machine
turns into an event of its own (``judge``, ``bump_due``).

No database, no web3, no clock reads, no settings imports: plain values in, plain values out.

All attempts of one movement share its nonce, so at most one of them can ever be included. The
nonce is the proof: an attempt with a receipt landed; the sender's nonce at the finalized block
past ours with no receipt of ours means another transaction consumed it, so none of ours can
ever land; a nonce not consumed and no attempt known to the node means nothing of ours is
pending, so a replacement with the same nonce is safe. Nothing is ever judged on a timer alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum


@dataclass(frozen=True)
class FeeCaps:
    """EIP-1559 fee caps of one attempt, in wei."""

    max_fee_per_gas: int
    max_priority_fee_per_gas: int


def initial_fee_caps(base_fee_wei: int, priority_fee_wei: int, max_fee_cap_wei: int) -> FeeCaps:
    """Caps for a first attempt: 2 x base fee + tip (room for six full blocks), capped."""
    max_fee = min(max_fee_cap_wei, 2 * base_fee_wei + priority_fee_wei)
    return FeeCaps(max(max_fee, priority_fee_wei), min(priority_fee_wei, max_fee_cap_wei))


def bumped_fee_caps(previous: FeeCaps, fresh: FeeCaps, bump_percent: int) -> FeeCaps:
    """Caps of a replacement: at least ``bump_percent`` above the previous attempt on both caps
    (nodes refuse a replacement below about +10%), and never below the fresh estimate."""
    assert bump_percent >= 10, "nodes require a replacement to raise both caps by 10% or more"

    def up(value: int) -> int:
        return -(-value * (100 + bump_percent) // 100)

    priority = max(up(previous.max_priority_fee_per_gas), fresh.max_priority_fee_per_gas)
    max_fee = max(up(previous.max_fee_per_gas), fresh.max_fee_per_gas, priority)
    return FeeCaps(max_fee, priority)


def max_gas_cost(gas_limit: int, caps: FeeCaps) -> int:
    """The most an attempt can cost in wei: its whole gas limit at its fee cap."""
    return gas_limit * caps.max_fee_per_gas


@dataclass(frozen=True)
class AttemptView:
    """What the chain says about one attempt right now."""

    attempt_id: int
    tx_hash: str
    nonce: int
    receipt_block: int | None
    receipt_block_hash: str | None
    succeeded: bool | None
    known_to_node: bool


class Verdict(StrEnum):
    """What the chain shows about a movement's attempts (inclusion and its finality are decided
    by the caller with the chain's finality rule)."""

    #: One attempt has a receipt (at most one can: they share the nonce).
    LANDED = "landed"
    #: The sender's nonce at the finalized block is past ours and no attempt of ours has a
    #: receipt: another transaction consumed it, none of ours can ever land.
    CONSUMED_ELSEWHERE = "consumed_elsewhere"
    #: An attempt is known to the node (in its mempool): nothing to conclude yet.
    PENDING = "pending"
    #: Consumed at the latest block by something that is not ours, not final yet: wait.
    CONSUMED_AT_LATEST = "consumed_at_latest"
    #: No receipt, no attempt known to the node, the nonce not consumed: nothing of ours is
    #: pending, so a replacement with the same nonce is safe.
    NOT_FOUND = "not_found"


@dataclass(frozen=True)
class Judgement:
    """A ``Verdict`` with its reason and, for ``LANDED``, the attempt that landed."""

    verdict: Verdict
    reason: str
    attempt_id: int | None = None


def judge(attempts: tuple[AttemptView, ...], *, nonce: int, finalized_nonce: int,
          latest_nonce: int) -> Judgement:
    """The verdict on a movement's attempts, all with ``nonce``, from the sender's nonce at the
    final height (``finalized_nonce``) and at the latest block."""
    landed = [a for a in attempts if a.receipt_block is not None]
    if landed:
        return Judgement(Verdict.LANDED, "receipt found", landed[0].attempt_id)
    if finalized_nonce > nonce:
        return Judgement(Verdict.CONSUMED_ELSEWHERE,
                         f"nonce {nonce} consumed at the finalized block by a transaction that "
                         "is none of our attempts")
    if any(a.known_to_node for a in attempts):
        return Judgement(Verdict.PENDING, "attempt known to the node")
    if latest_nonce > nonce:
        return Judgement(Verdict.CONSUMED_AT_LATEST,
                         f"nonce {nonce} consumed at latest, waiting for finality")
    return Judgement(Verdict.NOT_FOUND, "no receipt and unknown to the node")


def bump_due(*, last_attempt_at: datetime, now: datetime, bump_after_s: int, attempts: int,
             attempts_max: int) -> bool:
    """Whether a pending movement has waited long enough for a fee-bumped replacement (same
    nonce), and has attempts left."""
    return (now - last_attempt_at).total_seconds() >= bump_after_s and attempts < attempts_max
