"""Pure core of withdrawals: states, the transition table, request validation, fee rules and
the decisions of the tracking ladder.

No database, no web3, no clock reads, no settings imports: plain values in, plain values out.

The lifecycle (DESIGN.md section 6)::

    requested --reserve_posted--> reserved --nonce_assigned--> signing --attempt_signed--> signed
        \\--approval_required--> pending_approval --approvals_completed--> reserved
    signed --send_accepted--> broadcast
    broadcast/signed/unknown --receipt_observed--> included --final_succeeded--> settled
                                                            --final_reverted--> reverted
    included --reorged_out--> broadcast (never settled on a block that went away)
    signed --send_unconfirmed--> unknown (timeout, no answer: the reserve stays)
    unknown --found_pending--> broadcast; --attempt_signed--> signed (fee-bumped replacement,
        same nonce); --proven_not_sent--> released; --escalated--> awaiting_write_off
    awaiting_write_off --written_off_as_sent / written_off_as_not_sent--> written_off
    pending_approval/reserved --canceled--> canceled; --rejected--> rejected
    (``signing`` holds a nonce of the hot wallet but nothing was sent: it is not cancelable,
    since only a transaction consuming that nonce lets the later payouts through; the
    processor signs it again, same nonce and fee caps, until an attempt is recorded.)
    written_off --closing_signed--> written_off (a zero-value self-transfer closes the nonce)
    written_off --nonce_closed--> written_off (the nonce is consumed and final; gas booked)
    reserved --gas_float_low--> reserved (the treasury cannot pay its gas yet: no nonce taken;
        signed by itself once the treasury is funded)
    included --settlement_held--> held (final on chain, but its settlement cannot be posted:
        a broken invariant; the reserve stays open and a case is opened)
    held --hold_lifted--> included (an admin fixed the cause: the processor settles again)

Every accepted event yields the new state and the effects to carry out in the same unit of
work (ledger entries) or right after it (a broadcast). Nothing is ever released on a timer:
``unknown`` leaves only on evidence from the chain or on a two-admin write-off.

Terminal states stay terminal: the only moves out of them are self-loops that never touch the
reserve (a linked return; closing the nonce of a written-off withdrawal). ``held`` is not
terminal (its reserve is open) but the processor never moves it: only an admin's retry does.

The gas float: a withdrawal is signed only if the treasury (``treasury:{chain}`` in the native
asset) can pay its maximum gas on top of the maximum gas of everything already in flight on
that chain (``GAS_COMMITTED``); ``fit_gas_float`` decides which candidates of a step fit.

Units. Ledger amounts are minor units of the ledger asset's ``scale``; on-chain amounts are
units of the token's (or native coin's) ``decimals``. Both conversions are exact or refused,
never rounded:

- ``to_chain_units`` (what is sent): an amount whose last digits do not exist on chain is
  refused at request time (``AmountNotRepresentable``, nothing written).
- ``to_ledger_units`` (what the chain charged: gas): the chain's smallest unit must exist in the
  ledger. Gas is a fact in wei that nobody chooses, so a ledger scale coarser than the chain's
  decimals could only book it rounded, and every rounding would make the treasury account drift
  from the hot wallet's real balance. The configuration loader therefore refuses, at startup, a
  hot wallet whose native asset's ledger scale is below the chain's native decimals
  (``config.withdrawals``), and ``to_ledger_units`` refuses an inexact amount as a second line.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from eth_utils.address import to_checksum_address

from outgoing.model import AttemptView, Verdict, bump_due, judge
from withdrawals.errors import (
    AddressInvalid,
    AddressZero,
    AmountNotRepresentable,
    AmountOutOfBounds,
    DestinationNotAllowed,
    TransitionRefused,
    VelocityLimitExceeded,
    WithdrawalNotCancelable,
)

ZERO_ADDRESS = "0x" + "0" * 40
_HEX = frozenset("0123456789abcdefABCDEF")


class State(StrEnum):
    """Where a withdrawal stands. Terminal states close the reserve (settle or release)."""

    REQUESTED = "requested"
    PENDING_APPROVAL = "pending_approval"
    RESERVED = "reserved"
    #: A nonce and fee caps are assigned and committed; the signature is asked for outside any
    #: transaction, and only a recorded attempt (``signed``) is ever sent.
    SIGNING = "signing"
    SIGNED = "signed"
    BROADCAST = "broadcast"
    INCLUDED = "included"
    UNKNOWN = "unknown"
    AWAITING_WRITE_OFF = "awaiting_write_off"
    SETTLED = "settled"
    REVERTED = "reverted"
    RELEASED = "released"
    CANCELED = "canceled"
    REJECTED = "rejected"
    WRITTEN_OFF = "written_off"
    #: Final on chain, settlement refused (a broken invariant): waits for an admin's retry.
    HELD = "held"

    @property
    def terminal(self) -> bool:
        """Whether the reserve has been closed (settled or released) in this state."""
        return self in TERMINAL


TERMINAL = frozenset(
    {State.SETTLED, State.REVERTED, State.RELEASED, State.CANCELED, State.REJECTED,
     State.WRITTEN_OFF}
)
#: States in which the withdrawal holds a nonce of the hot wallet and a transaction of it
#: exists on chain or is about to (``signing``: signed and sent once recorded); the processor
#: carries each of them on, and each will spend gas.
IN_FLIGHT = frozenset(
    {State.SIGNING, State.SIGNED, State.BROADCAST, State.INCLUDED, State.UNKNOWN,
     State.AWAITING_WRITE_OFF}
)
#: States whose gas the treasury may still owe: a transaction of ours may land (or has landed)
#: and its gas is not booked yet. The gas float check counts the maximum gas of every
#: withdrawal in these states (and of written-off ones whose nonce is still open) as committed.
#: ``held``: its gas was paid on chain but is booked only when it settles, so the ledger's
#: treasury balance still counts wei the hot wallet no longer has.
GAS_COMMITTED = frozenset({
    State.SIGNING,
    State.SIGNED,
    State.BROADCAST,
    State.INCLUDED,
    State.UNKNOWN,
    State.AWAITING_WRITE_OFF,
    State.HELD,
})


class Event(StrEnum):
    """Facts that move a withdrawal, in the past tense."""

    RESERVE_POSTED = "reserve_posted"
    APPROVAL_REQUIRED = "approval_required"
    APPROVAL_RECORDED = "approval_recorded"
    APPROVALS_COMPLETED = "approvals_completed"
    REJECTED = "rejected"
    CANCELED = "canceled"
    NONCE_ASSIGNED = "nonce_assigned"
    ATTEMPT_SIGNED = "attempt_signed"
    SEND_ACCEPTED = "send_accepted"
    SEND_UNCONFIRMED = "send_unconfirmed"
    RECEIPT_OBSERVED = "receipt_observed"
    REORGED_OUT = "reorged_out"
    FOUND_PENDING = "found_pending"
    NOT_FOUND = "not_found"
    FINAL_SUCCEEDED = "final_succeeded"
    FINAL_REVERTED = "final_reverted"
    PROVEN_NOT_SENT = "proven_not_sent"
    ESCALATED = "escalated"
    WRITE_OFF_VOTED = "write_off_voted"
    WRITTEN_OFF_AS_SENT = "written_off_as_sent"
    WRITTEN_OFF_AS_NOT_SENT = "written_off_as_not_sent"
    RETURN_LINKED = "return_linked"
    CLOSING_SIGNED = "closing_signed"
    NONCE_CLOSED = "nonce_closed"
    GAS_FLOAT_LOW = "gas_float_low"
    SETTLEMENT_HELD = "settlement_held"
    HOLD_LIFTED = "hold_lifted"


class Effect(StrEnum):
    """What the service must do after an accepted event, in imperative form."""

    POST_RESERVE = "post_reserve"
    POST_SETTLE = "post_settle"
    POST_RELEASE = "post_release"
    POST_GAS = "post_gas"
    POST_RETURN = "post_return"
    BROADCAST = "broadcast"


S, E, X = State, Event, Effect

#: The explicit table of allowed moves: (state, event) -> (new state, effects).
TRANSITIONS: dict[tuple[State, Event], tuple[State, tuple[Effect, ...]]] = {
    (S.REQUESTED, E.RESERVE_POSTED): (S.RESERVED, (X.POST_RESERVE,)),
    (S.REQUESTED, E.APPROVAL_REQUIRED): (S.PENDING_APPROVAL, (X.POST_RESERVE,)),
    (S.PENDING_APPROVAL, E.APPROVAL_RECORDED): (S.PENDING_APPROVAL, ()),
    (S.PENDING_APPROVAL, E.APPROVALS_COMPLETED): (S.RESERVED, ()),
    (S.PENDING_APPROVAL, E.REJECTED): (S.REJECTED, (X.POST_RELEASE,)),
    (S.RESERVED, E.REJECTED): (S.REJECTED, (X.POST_RELEASE,)),
    (S.PENDING_APPROVAL, E.CANCELED): (S.CANCELED, (X.POST_RELEASE,)),
    (S.RESERVED, E.CANCELED): (S.CANCELED, (X.POST_RELEASE,)),
    # The nonce and fee caps are committed before the signer is called (outside any row lock),
    # and the signed attempt is recorded in a second transaction before it is sent: a crash in
    # between leaves ``signing``, signed again with the same nonce and caps.
    (S.RESERVED, E.NONCE_ASSIGNED): (S.SIGNING, ()),
    (S.SIGNING, E.ATTEMPT_SIGNED): (S.SIGNED, (X.BROADCAST,)),
    # Replacements (same nonce, higher fees): at most one attempt can ever be included.
    (S.UNKNOWN, E.ATTEMPT_SIGNED): (S.SIGNED, (X.BROADCAST,)),
    (S.BROADCAST, E.ATTEMPT_SIGNED): (S.SIGNED, (X.BROADCAST,)),
    (S.SIGNED, E.SEND_ACCEPTED): (S.BROADCAST, ()),
    (S.SIGNED, E.SEND_UNCONFIRMED): (S.UNKNOWN, ()),
    (S.SIGNED, E.RECEIPT_OBSERVED): (S.INCLUDED, ()),
    (S.BROADCAST, E.RECEIPT_OBSERVED): (S.INCLUDED, ()),
    (S.UNKNOWN, E.RECEIPT_OBSERVED): (S.INCLUDED, ()),
    (S.AWAITING_WRITE_OFF, E.RECEIPT_OBSERVED): (S.INCLUDED, ()),
    (S.INCLUDED, E.REORGED_OUT): (S.BROADCAST, (X.BROADCAST,)),
    (S.UNKNOWN, E.FOUND_PENDING): (S.BROADCAST, ()),
    (S.AWAITING_WRITE_OFF, E.FOUND_PENDING): (S.BROADCAST, ()),
    (S.BROADCAST, E.NOT_FOUND): (S.UNKNOWN, ()),
    (S.INCLUDED, E.FINAL_SUCCEEDED): (S.SETTLED, (X.POST_SETTLE, X.POST_GAS)),
    (S.INCLUDED, E.FINAL_REVERTED): (S.REVERTED, (X.POST_RELEASE, X.POST_GAS)),
    (S.UNKNOWN, E.PROVEN_NOT_SENT): (S.RELEASED, (X.POST_RELEASE,)),
    (S.UNKNOWN, E.ESCALATED): (S.AWAITING_WRITE_OFF, ()),
    (S.AWAITING_WRITE_OFF, E.WRITE_OFF_VOTED): (S.AWAITING_WRITE_OFF, ()),
    (S.AWAITING_WRITE_OFF, E.WRITTEN_OFF_AS_SENT): (S.WRITTEN_OFF, (X.POST_SETTLE,)),
    (S.AWAITING_WRITE_OFF, E.WRITTEN_OFF_AS_NOT_SENT): (S.WRITTEN_OFF, (X.POST_RELEASE,)),
    (S.SETTLED, E.RETURN_LINKED): (S.SETTLED, (X.POST_RETURN,)),
    # A nonce the payout no longer needs must still be consumed, or every later payout of the
    # hot wallet waits behind it: a zero-value self-transfer (same nonce, higher fees) closes
    # it, and whatever consumed it is booked (gas only: the reserve is already closed).
    (S.WRITTEN_OFF, E.CLOSING_SIGNED): (S.WRITTEN_OFF, (X.BROADCAST,)),
    (S.WRITTEN_OFF, E.NONCE_CLOSED): (S.WRITTEN_OFF, (X.POST_GAS,)),
    # The treasury cannot pay its gas yet: it waits, unsigned (no nonce taken, nothing moved).
    (S.RESERVED, E.GAS_FLOAT_LOW): (S.RESERVED, ()),
    # The settlement of a final receipt was refused (a broken invariant): nothing is booked and
    # the reserve stays open until an admin fixes the cause and lifts the hold.
    (S.INCLUDED, E.SETTLEMENT_HELD): (S.HELD, ()),
    (S.HELD, E.HOLD_LIFTED): (S.INCLUDED, ()),
}

CANCELABLE = frozenset({State.PENDING_APPROVAL, State.RESERVED})


@dataclass(frozen=True)
class Transition:
    """An accepted event: the state before and after, the effects, and when it happened."""

    from_state: State
    event: Event
    to_state: State
    effects: tuple[Effect, ...]
    at: datetime


def transition(state: State, event: Event, *, now: datetime) -> Transition:
    """The one way a withdrawal's state changes; raises TransitionRefused if not allowed."""
    move = TRANSITIONS.get((state, event))
    if move is None:
        if event is Event.CANCELED:
            raise WithdrawalNotCancelable(f"cannot cancel a withdrawal that is {state}")
        raise TransitionRefused(f"event {event} is not allowed in state {state}")
    return Transition(state, event, move[0], move[1], now)


# --- request validation ---------------------------------------------------------------------


def normalize_address(text: str) -> str:
    """The destination as lower-case hex, or AddressInvalid / AddressZero.

    Accepted: ``0x`` + 40 hex digits, all lower-case or all upper-case (no checksum
    information, as EIP-55 reads them), or mixed-case with a valid EIP-55 checksum. Mixed case
    that fails the checksum is a typo and is refused.
    """
    if not isinstance(text, str) or len(text) != 42 or not text.startswith("0x"):
        raise AddressInvalid(f"not an EVM address: {text!r}")
    body = text[2:]
    if not set(body) <= _HEX:
        raise AddressInvalid(f"not an EVM address: {text!r}")
    unchecked = body in (body.lower(), body.upper())
    if not unchecked and to_checksum_address("0x" + body.lower()) != text:
        raise AddressInvalid(f"address {text} fails its EIP-55 checksum")
    lowered = "0x" + body.lower()
    if lowered == ZERO_ADDRESS:
        raise AddressZero("the zero address burns funds: refused")
    return lowered


def check_amount_bounds(amount_minor: object, minimum_minor: int, maximum_minor: int) -> int:
    """The amount if it is an int within [minimum, maximum] and > 0, else AmountOutOfBounds."""
    if isinstance(amount_minor, bool) or not isinstance(amount_minor, int):
        raise AmountOutOfBounds(f"amount must be an int in minor units, got {amount_minor!r}")
    if amount_minor <= 0:
        raise AmountOutOfBounds(f"amount must be positive, got {amount_minor}")
    if amount_minor < minimum_minor:
        raise AmountOutOfBounds(f"amount {amount_minor} is below the minimum {minimum_minor}")
    if amount_minor > maximum_minor:
        raise AmountOutOfBounds(f"amount {amount_minor} is above the maximum {maximum_minor}")
    return amount_minor


def check_destination(state: str | None, at: datetime | None, *, client: str | None,
                      chain: str, destination: str) -> None:
    """Refuse a destination the client's allowlist does not allow (DestinationNotAllowed with
    the reason), given its state as the reserve read it: None (allowlisting off for the
    client) and ``active`` pass; ``pending`` (active from ``at``), ``removed`` (at ``at``) and
    ``not_listed`` are refused."""
    if state is None or state == "active":
        return
    where = f"client {client}'s allowlist on {chain}"
    if state == "pending":
        assert at is not None
        raise DestinationNotAllowed(
            f"{destination} is on {where} but not active until {at.isoformat()}",
            reason="not_active", at=at.isoformat())
    if state == "removed":
        assert at is not None
        raise DestinationNotAllowed(
            f"{destination} was removed from {where} at {at.isoformat()}",
            reason="removed", at=at.isoformat())
    assert state == "not_listed", state
    raise DestinationNotAllowed(f"{destination} is not on {where}", reason="not_listed")


@dataclass(frozen=True)
class VelocityWindow:
    """One velocity limit with what its window already holds: per ``user`` or ``client``,
    ``count``/``amount_minor`` requested in the last ``window_s`` seconds, against
    ``count_max``/``amount_max_minor`` (None: no such bound)."""

    per: str
    window_s: int
    count_max: int | None
    amount_max_minor: int | None
    count: int
    amount_minor: int


def check_velocity(windows: Sequence[VelocityWindow], amount_minor: int, asset: str) -> None:
    """Refuse (VelocityLimitExceeded) a request of ``amount_minor`` that one more withdrawal in
    any of ``windows`` would take past its count or amount bound."""
    for w in windows:
        if w.count_max is not None and w.count + 1 > w.count_max:
            raise VelocityLimitExceeded(
                f"{w.count} withdrawal(s) of {asset} per {w.per} in the last {w.window_s} s: "
                f"one more would pass the limit of {w.count_max}")
        if w.amount_max_minor is not None and w.amount_minor + amount_minor > w.amount_max_minor:
            raise VelocityLimitExceeded(
                f"{w.amount_minor} + {amount_minor} {asset} per {w.per} in the last "
                f"{w.window_s} s would pass the limit of {w.amount_max_minor}")


#: On-chain amounts are uint256.
CHAIN_AMOUNT_LIMIT = 2**256


def _rescale(amount: int, from_decimals: int, to_decimals: int, what: str) -> int:
    # Annotated: ``int ** int`` is typed Any (a negative exponent would give a float).
    factor: int = 10 ** abs(to_decimals - from_decimals)
    if to_decimals >= from_decimals:
        return amount * factor
    if amount % factor:
        raise AmountNotRepresentable(
            f"{what} {amount} ({from_decimals} decimals) has no exact value with "
            f"{to_decimals} decimals")
    return amount // factor


def to_chain_units(amount_minor: int, scale: int, decimals: int) -> int:
    """Ledger minor units (``scale`` decimals) as on-chain units (``decimals``), exactly.

    ``to_chain_units(30_000_000, 6, 18) == 30 * 10**18``; going to fewer decimals must divide
    exactly or AmountNotRepresentable is raised (never rounded), as is a result that does not
    fit in a uint256.
    """
    chain_amount = _rescale(amount_minor, scale, decimals, "amount")
    if not 0 <= chain_amount < CHAIN_AMOUNT_LIMIT:
        raise AmountNotRepresentable(f"{chain_amount} does not fit in a uint256")
    return chain_amount


def to_ledger_units(chain_amount: int, decimals: int, scale: int) -> int:
    """On-chain units (``decimals``) as ledger minor units (``scale``), exactly.

    ``to_ledger_units(21_000 * 10**9, 18, 18) == 21_000 * 10**9``; with ``scale`` 20 it is 100
    times that. An amount with digits below the ledger's smallest unit raises
    AmountNotRepresentable (never rounded); see the module docstring for why.
    """
    return _rescale(chain_amount, decimals, scale, "on-chain amount")


def approvals_required(amount_minor: int, threshold_minor: int | None,
                       dual_threshold_minor: int | None) -> int:
    """0, 1 or 2 approvers: above the first threshold one, above the second two."""
    if dual_threshold_minor is not None and amount_minor > dual_threshold_minor:
        return 2
    if threshold_minor is not None and amount_minor > threshold_minor:
        return 1
    return 0


# --- fees -----------------------------------------------------------------------------------


def fee_charged(fee_minor: int, fee_max_minor: int) -> int:
    """The fee charged at settlement: the scheduled fee, never more than what was reserved."""
    assert 0 <= fee_minor <= fee_max_minor, "the configuration keeps fee <= fee_max"
    return fee_minor


# --- the gas float ---------------------------------------------------------------------------


@dataclass(frozen=True)
class GasFloatFit:
    """Which candidates the treasury can pay the gas of, in the order given.

    ``signable``/``waiting``: the candidates' keys; ``committed_minor``: the in-flight maximum
    gas plus that of the signable ones (what the treasury must cover after this step).
    """

    signable: tuple[int, ...]
    waiting: tuple[int, ...]
    committed_minor: int


def fit_gas_float(treasury_minor: int, in_flight_minor: int,
                  candidates: Sequence[tuple[int, int]]) -> GasFloatFit:
    """Take ``candidates`` (key, maximum gas) in order: each whose maximum gas fits in what the
    treasury has left after the committed sum is signable and adds to that sum; one that does
    not fit waits (a later, smaller one may still fit). All amounts in the same unit (the
    native asset's ledger minor units).

    The maximum, not the expected gas: a transaction may use all of its gas limit at its fee
    cap, and the hot wallet must never be asked to pay what the treasury does not hold.
    """
    assert in_flight_minor >= 0, "maximum gas is never negative"
    committed = in_flight_minor
    signable: list[int] = []
    waiting: list[int] = []
    for key, max_gas_minor in candidates:
        assert max_gas_minor >= 0, "maximum gas is never negative"
        if committed + max_gas_minor <= treasury_minor:
            committed += max_gas_minor
            signable.append(key)
        else:
            waiting.append(key)
    return GasFloatFit(tuple(signable), tuple(waiting), committed)


# --- the tracking ladder --------------------------------------------------------------------


@dataclass(frozen=True)
class LadderDecision:
    """What to do with an in-flight withdrawal: an event (or None: wait), and why."""

    event: Event | None
    reason: str
    attempt_id: int | None = None
    replace: bool = False


def decide_in_flight(
    state: State,
    attempts: tuple[AttemptView, ...],
    *,
    nonce: int,
    finalized_nonce: int,
    latest_nonce: int,
    unknown_since: datetime | None,
    escalate_after_s: int,
    last_attempt_at: datetime,
    bump_after_s: int,
    attempts_max: int,
    now: datetime,
) -> LadderDecision:
    """Decide the next rung for a withdrawal in ``signed``/``broadcast``/``unknown``/
    ``awaiting_write_off`` from what the chain shows (inclusion is decided by the caller
    with the finality rule before this is asked).

    The nonce is the proof: an attempt with a receipt landed; a hot-wallet nonce at the
    finalized block past ours with no receipt of ours means another transaction consumed it,
    so none of ours can ever land (released). A nonce not yet consumed and no attempt known
    to the node means nothing landed yet: a fee-bumped replacement with the same nonce is safe.
    """
    seen = judge(attempts, nonce=nonce, finalized_nonce=finalized_nonce,
                 latest_nonce=latest_nonce)
    if seen.verdict is Verdict.LANDED:
        return LadderDecision(Event.RECEIPT_OBSERVED, seen.reason, seen.attempt_id)
    if seen.verdict is Verdict.CONSUMED_ELSEWHERE:
        if state in (State.UNKNOWN, State.AWAITING_WRITE_OFF):
            return LadderDecision(Event.PROVEN_NOT_SENT if state is State.UNKNOWN else None,
                                  seen.reason)
        return LadderDecision(Event.NOT_FOUND, "nonce consumed by another transaction")
    if seen.verdict is Verdict.PENDING:
        if state in (State.UNKNOWN, State.AWAITING_WRITE_OFF):
            return LadderDecision(Event.FOUND_PENDING, seen.reason)
        if state is State.BROADCAST and bump_due(
                last_attempt_at=last_attempt_at, now=now, bump_after_s=bump_after_s,
                attempts=len(attempts), attempts_max=attempts_max):
            stuck_s = (now - last_attempt_at).total_seconds()
            return LadderDecision(Event.ATTEMPT_SIGNED, f"stuck {stuck_s:.0f}s: fee bump",
                                  replace=True)
        return LadderDecision(None, "pending in the mempool")
    if seen.verdict is Verdict.CONSUMED_AT_LATEST:
        # Consumed in a block that is not final yet, by something that is not ours: wait for
        # finality before calling it proven.
        return LadderDecision(None, seen.reason)
    if state is State.BROADCAST:
        return LadderDecision(Event.NOT_FOUND, seen.reason)
    if state is State.UNKNOWN:
        if unknown_since is not None and (now - unknown_since).total_seconds() >= escalate_after_s:
            return LadderDecision(Event.ESCALATED, "undetermined past the configured time")
        if len(attempts) < attempts_max:
            return LadderDecision(Event.ATTEMPT_SIGNED,
                                  f"nonce {nonce} not consumed and no attempt known: replace",
                                  replace=True)
        return LadderDecision(None, "attempts exhausted; waiting for escalation")
    return LadderDecision(None, "nothing to do")


@dataclass(frozen=True)
class NonceDecision:
    """What to do about the nonce of a written-off withdrawal.

    ``event``: NONCE_CLOSED (with ``attempt_id`` when one of ours consumed it), CLOSING_SIGNED
    (sign a new attempt, fees bumped over every earlier one), or None (wait). ``resend``: send
    the latest attempt's signed bytes again (recorded, but unknown to the node).
    """

    event: Event | None
    reason: str
    attempt_id: int | None = None
    resend: bool = False


def decide_nonce_closure(
    attempts: tuple[AttemptView, ...],
    *,
    nonce: int,
    landed_final: bool,
    finalized_nonce: int,
    latest_nonce: int,
    closing_attempts: int,
    last_attempt_at: datetime,
    bump_after_s: int,
    attempts_max: int,
    now: datetime,
) -> NonceDecision:
    """Decide how to close the nonce of a withdrawal that was written off: until some
    transaction consumes it and is final, every later payout of the hot wallet waits.

    ``closing_attempts`` counts the attempts signed after the write-off; the first one is
    signed at once, later ones only when the previous one is stuck ``bump_after_s`` or unknown
    to the node for that long (a lost send is first repeated with the same bytes).
    """
    landed = next((a for a in attempts if a.receipt_block is not None), None)
    if landed is not None:
        if landed_final:
            return NonceDecision(Event.NONCE_CLOSED, f"nonce {nonce} consumed by our "
                                 f"{landed.tx_hash}, final", landed.attempt_id)
        return NonceDecision(None, f"{landed.tx_hash} included, waiting for finality")
    if finalized_nonce > nonce:
        return NonceDecision(Event.NONCE_CLOSED, f"nonce {nonce} consumed at the finalized "
                             "block by a transaction that is none of ours")
    if latest_nonce > nonce:
        return NonceDecision(None, f"nonce {nonce} consumed at latest, waiting for finality")
    if closing_attempts == 0:
        return NonceDecision(Event.CLOSING_SIGNED, f"nonce {nonce} is still free: close it")
    stuck_s = (now - last_attempt_at).total_seconds()
    if stuck_s >= bump_after_s and closing_attempts < attempts_max:
        return NonceDecision(Event.CLOSING_SIGNED, f"closing attempt stuck {stuck_s:.0f}s: "
                             "fee bump")
    if not attempts[-1].known_to_node:
        return NonceDecision(None, "closing attempt unknown to the node: send it again",
                             resend=True)
    return NonceDecision(None, "closing attempt pending in the mempool")
