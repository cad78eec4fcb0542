"""Pure core of the movements between our own addresses: the states, events and transition
table of each kind (a sweep, a gas top-up, a cold transfer: one table each, one function,
``transition``), and the amounts (what a native sweep sends, the dust rule, the gas a token
sweep needs, a hot wallet's excess and the approvals a cold transfer needs).

No database, no web3, no clock reads, no settings imports: plain values in, plain values out.

Every kind shares the sending part of its lifecycle with the others and with withdrawals (the
mechanism in ``outgoing``)::

    <ready to sign> --nonce_assigned--> signing --attempt_signed--> signed
    signed --send_accepted--> broadcast; --send_unconfirmed--> unknown (never failed)
    broadcast/unknown --attempt_signed--> signed (a fee-bumped replacement, same nonce)
    broadcast --not_found--> unknown; unknown --found_pending--> broadcast
    broadcast/unknown/signed --receipt_observed--> included
    included --reorged_out--> broadcast (the same bytes are sent again)
    included --final_succeeded--> final; --final_reverted--> reverted (gas booked)
    broadcast/unknown --consumed_elsewhere--> dropped (the sender's nonce was consumed at the
        final height by a transaction that is none of ours: nothing of ours can land)

Before that, each its own:

- sweep: planned --> ready (the address can pay its gas) or waiting_gas (a token sweep whose
  address needs a top-up first: --top_up_planned--> waiting_gas names it; --gas_arrived-->
  ready once the top-up is FINAL; --top_up_failed--> waiting_gas without one, and a new top-up
  is planned) or proposed (no signer for the
  address, an xpub source: listed, never signed);
- gas top-up: planned --> ready;
- cold transfer: proposed --approved--> approved (one admin, or two different admins above
  the configured amount; never the proposer) or --rejected--> rejected.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Kind(StrEnum):
    """The movement kinds of this package (the values of ``outgoing_attempts.movement_kind``)."""

    SWEEP = "sweep"
    GAS_TOP_UP = "gas_top_up"
    COLD_TRANSFER = "cold_transfer"


class State(StrEnum):
    """Where a movement is; each kind uses the states its table names."""

    PROPOSED = "proposed"
    WAITING_GAS = "waiting_gas"
    READY = "ready"
    APPROVED = "approved"
    REJECTED = "rejected"
    SIGNING = "signing"
    SIGNED = "signed"
    BROADCAST = "broadcast"
    UNKNOWN = "unknown"
    INCLUDED = "included"
    FINAL = "final"
    REVERTED = "reverted"
    DROPPED = "dropped"


class Event(StrEnum):
    """Facts (past tense); each accepted one is a history row."""

    PLANNED = "planned"
    TOP_UP_PLANNED = "top_up_planned"
    GAS_ARRIVED = "gas_arrived"
    TOP_UP_FAILED = "top_up_failed"
    APPROVAL_RECORDED = "approval_recorded"
    APPROVED = "approved"
    REJECTED = "rejected"
    NONCE_ASSIGNED = "nonce_assigned"
    ATTEMPT_SIGNED = "attempt_signed"
    SEND_ACCEPTED = "send_accepted"
    SEND_UNCONFIRMED = "send_unconfirmed"
    NOT_FOUND = "not_found"
    FOUND_PENDING = "found_pending"
    RECEIPT_OBSERVED = "receipt_observed"
    REORGED_OUT = "reorged_out"
    FINAL_SUCCEEDED = "final_succeeded"
    FINAL_REVERTED = "final_reverted"
    CONSUMED_ELSEWHERE = "consumed_elsewhere"


S, E = State, Event
#: States in which a movement's attempts are tracked on the chain.
TRACKED = frozenset({S.SIGNED, S.BROADCAST, S.UNKNOWN, S.INCLUDED})
#: States a movement never leaves.
TERMINAL = frozenset({S.FINAL, S.REVERTED, S.DROPPED, S.REJECTED})

_SENDING: dict[tuple[State | None, Event], State] = {
    (S.SIGNING, E.ATTEMPT_SIGNED): S.SIGNED,
    (S.SIGNED, E.SEND_ACCEPTED): S.BROADCAST,
    (S.SIGNED, E.SEND_UNCONFIRMED): S.UNKNOWN,
    (S.BROADCAST, E.ATTEMPT_SIGNED): S.SIGNED,
    (S.UNKNOWN, E.ATTEMPT_SIGNED): S.SIGNED,
    (S.BROADCAST, E.NOT_FOUND): S.UNKNOWN,
    (S.UNKNOWN, E.FOUND_PENDING): S.BROADCAST,
    (S.SIGNED, E.RECEIPT_OBSERVED): S.INCLUDED,
    (S.BROADCAST, E.RECEIPT_OBSERVED): S.INCLUDED,
    (S.UNKNOWN, E.RECEIPT_OBSERVED): S.INCLUDED,
    (S.INCLUDED, E.REORGED_OUT): S.BROADCAST,
    (S.INCLUDED, E.FINAL_SUCCEEDED): S.FINAL,
    (S.INCLUDED, E.FINAL_REVERTED): S.REVERTED,
    (S.BROADCAST, E.CONSUMED_ELSEWHERE): S.DROPPED,
    (S.UNKNOWN, E.CONSUMED_ELSEWHERE): S.DROPPED,
    (S.SIGNED, E.CONSUMED_ELSEWHERE): S.DROPPED,
}

TRANSITIONS: dict[Kind, dict[tuple[State | None, Event], State]] = {
    Kind.SWEEP: {
        (None, E.PLANNED): S.READY,  # or WAITING_GAS / PROPOSED: see ``planned_state``
        (S.WAITING_GAS, E.TOP_UP_PLANNED): S.WAITING_GAS,
        (S.WAITING_GAS, E.GAS_ARRIVED): S.READY,
        (S.WAITING_GAS, E.TOP_UP_FAILED): S.WAITING_GAS,
        (S.READY, E.NONCE_ASSIGNED): S.SIGNING,
        **_SENDING,
    },
    Kind.GAS_TOP_UP: {
        (None, E.PLANNED): S.READY,
        (S.READY, E.NONCE_ASSIGNED): S.SIGNING,
        **_SENDING,
    },
    Kind.COLD_TRANSFER: {
        (None, E.PLANNED): S.PROPOSED,
        (S.PROPOSED, E.APPROVAL_RECORDED): S.PROPOSED,
        (S.PROPOSED, E.APPROVED): S.APPROVED,
        (S.PROPOSED, E.REJECTED): S.REJECTED,
        (S.APPROVED, E.NONCE_ASSIGNED): S.SIGNING,
        **_SENDING,
    },
}
#: The states a sweep may be created in (``planned``).
SWEEP_START = frozenset({S.READY, S.WAITING_GAS, S.PROPOSED})
#: Where each kind waits for its nonce.
SIGNABLE = {Kind.SWEEP: S.READY, Kind.GAS_TOP_UP: S.READY, Kind.COLD_TRANSFER: S.APPROVED}


class TransitionRefused(Exception):
    """An event that the kind's table does not allow in that state (a bug or a race that the
    row lock lost: the caller re-reads)."""


def transition(kind: Kind, state: State | None, event: Event, *,
               start: State | None = None) -> State:
    """The state ``event`` moves a ``kind`` movement to from ``state`` (None: it is created;
    ``start`` names the state a sweep is planned in)."""
    to = TRANSITIONS[kind].get((state, event))
    if to is None:
        raise TransitionRefused(f"{kind}: {event} is not allowed in {state}")
    if state is None and kind is Kind.SWEEP and start is not None:
        if start not in SWEEP_START:
            raise TransitionRefused(f"a sweep cannot start in {start}")
        return start
    return to


# --- amounts (all in the chain's smallest unit) --------------------------------------------


def native_sweep_value(available: int, gas_limit: int, max_fee_per_gas: int) -> int:
    """What a native sweep sends: everything the engine's records say the address holds, minus
    the most its transaction can cost (whole gas limit at the fee cap), so that it cannot fail
    for lack of funds and leaves only the unused part of that maximum (native dust, treasury
    money). 0 or less: nothing to send."""
    return available - gas_limit * max_fee_per_gas


def is_dust(value_native: int, gas_cost_native: int, share_percent: int) -> bool:
    """Whether moving ``value_native`` (its value in the native asset) would cost more than
    ``share_percent`` of it in gas: such funds are left alone and reported."""
    return gas_cost_native * 100 > value_native * share_percent


def token_value_in_native(amount: int, decimals: int, native_decimals: int,
                          native_per_unit_scaled: int, price_scale: int) -> int:
    """The value of ``amount`` token units in the native asset's smallest unit, from a price of
    one whole token in native units times 10^price_scale (rounded down)."""
    value: int = amount * native_per_unit_scaled * 10**native_decimals // (
        10**decimals * 10**price_scale)
    return value


def top_up_needed(treasury_native: int, gas_limit: int, max_fee_per_gas: int) -> int:
    """The native asset a deposit address needs on top of the treasury money it holds so that a
    token transfer with ``gas_limit`` at ``max_fee_per_gas`` cannot fail for lack of gas (0:
    none)."""
    return max(0, gas_limit * max_fee_per_gas - max(0, treasury_native))


def customer_first(moved: int, customer: int) -> tuple[int, int]:
    """Split what a sweep moved into (customer part, treasury part): customer money first,
    since treasury dust on a deposit address is what is left over."""
    part = min(moved, customer)
    return part, moved - part


def hot_excess(hot_holding: int, hot_max: int | None) -> int:
    """What the hot wallet holds above its maximum (0 when none is configured or it is below)."""
    return 0 if hot_max is None else max(0, hot_holding - hot_max)


def cold_approvals_required(amount_minor: int, dual_above_minor: int | None) -> int:
    """Admins a cold transfer needs: one, two (different ones) above the configured amount."""
    return 2 if dual_above_minor is not None and amount_minor > dual_above_minor else 1


@dataclass(frozen=True)
class ApprovalOutcome:
    """What recording an admin's decision on a cold transfer leads to."""

    event: Event
    approvals: int


def cold_decision(*, proposer: str, actor: str, decision: str, earlier: dict[str, str],
                  required: int) -> ApprovalOutcome:
    """Check and count an admin's decision on a cold transfer; ValueError for the proposer
    deciding on their own proposal or an admin deciding twice."""
    if actor == proposer:
        raise ValueError("the admin who proposed a cold transfer cannot approve or reject it")
    if actor in earlier:
        raise ValueError(f"{actor} has already decided on this cold transfer")
    if decision == "reject":
        return ApprovalOutcome(Event.REJECTED, 0)
    approvals = 1 + sum(1 for d in earlier.values() if d == "approve")
    return ApprovalOutcome(Event.APPROVED if approvals >= required else Event.APPROVAL_RECORDED,
                           approvals)


# --- hot/cold limits (all amounts in the chain's smallest unit) ----------------------------


class LimitSide(StrEnum):
    """Which limit a hot wallet's holding is outside of (the ``side`` of an episode)."""

    ABOVE_MAX = "above_max"
    BELOW_MIN = "below_min"


def limit_side(holding: int, hot_min: int | None, hot_max: int | None) -> LimitSide | None:
    """Where ``holding`` stands: above the maximum, below the minimum, or within (None). At
    exactly a limit it is within."""
    if hot_max is not None and holding > hot_max:
        return LimitSide.ABOVE_MAX
    if hot_min is not None and holding < hot_min:
        return LimitSide.BELOW_MIN
    return None


def whole_units(amount: int, unit: int) -> int:
    """``amount`` rounded down to a multiple of ``unit`` (the chain units of one minor unit of
    the ledger asset), so that it converts to the ledger exactly."""
    assert unit >= 1
    return max(0, amount) // unit * unit


def cold_excess(holding: int, hot_max: int | None, gas_reserve: int, unit: int) -> int:
    """What the hot-limit check proposes to move to cold: the holding's excess over the
    maximum (``hot_excess``), in whole ledger units, leaving at least ``gas_reserve`` behind
    (for the native coin: the most the transfer's own gas can cost, so that it cannot fail
    for lack of funds even with a maximum below that; 0 for a token). 0: nothing to
    propose."""
    if hot_max is None:
        return 0
    return whole_units(hot_excess(holding, max(hot_max, gas_reserve)), unit)


def refill_target(hot_min: int, hot_max: int | None) -> int:
    """Where a refill brings the holding: halfway between the minimum and the maximum, or
    twice the minimum when there is no maximum (room for the next withdrawals, well away from
    both limits)."""
    return (hot_min + hot_max) // 2 if hot_max is not None else 2 * hot_min


def refill_amount(holding: int, hot_min: int, hot_max: int | None, unit: int) -> int:
    """What a refill request asks for: up to ``refill_target``, rounded up to whole ledger
    units (0: the holding is already there)."""
    assert unit >= 1
    need = max(0, refill_target(hot_min, hot_max) - holding)
    return -(-need // unit) * unit


def format_units(value: int, decimals: int) -> str:
    """A chain amount (any size: uint256) as an exact decimal string of ``decimals`` places:
    ``format_units(1500, 3) == "1.500"``."""
    sign, digits = ("-" if value < 0 else ""), str(abs(value))
    if decimals == 0:
        return sign + digits
    digits = digits.rjust(decimals + 1, "0")
    return f"{sign}{digits[:-decimals]}.{digits[-decimals:]}"
