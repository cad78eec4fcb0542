"""Pure rules of the deposit side: the lifecycle, amount conversion and booking decisions.

No database, no node, no clock: plain values in, plain values out.

Lifecycle (one table, ``MOVES``; ``transition`` is the only thing that changes a state)::

    (new) --transfer_included--> included --finality_reached--> final
    (new) --transfer_ignored---> ignored
    included --confirmations_observed--> included
    included|final --block_reorged_out--> unconfirmed --transfer_reincluded--> included
    unconfirmed --nonce_consumed--> failed        (sender's nonce used by another final tx)
    final --attested_for_user--> credited         effect: post DR custody / CR user wallet
    final --attested_for_suspense--> suspense     effect: post DR custody / CR suspense
    final --custody_record_disagreed|conversion_inexact--> held_for_review
    included|unconfirmed --provider_completed_early--> held_for_review
    credited|suspense --block_reorged_out--> disputed   effects: open a case, raise an alert

Transfers to our own hot and cold addresses (booking ``own``) follow the same lifecycle up to
``final``; then, instead of the user/suspense attestation events::

    final --internal_matched--> internal    a movement we made (by key): nothing posted
    final --funding_matched--> capital      effect: post DR treasury / CR equity:owner
    final --own_unattributed--> suspense    effects: post DR custody / CR suspense, open a case
    suspense --capital_decided--> capital   two admins decided it is company capital
    internal|capital --block_reorged_out--> disputed   effects: open a case, raise an alert

A reorg before crediting is never a failure: the deposit goes back to ``unconfirmed`` and its
count starts again when the same transaction lands again (same key, maybe another block).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from deposits.errors import TransitionRefused

#: Amounts handed to the ledger satisfy |x| < 2^127 (signed 128-bit, as in the database).
AMOUNT_LIMIT = 2**127


class DepositState(StrEnum):
    """Where a deposit is in its lifecycle."""

    INCLUDED = "included"  # in a canonical block, confirmations counting
    UNCONFIRMED = "unconfirmed"  # its block was reorged out; waiting to land again
    FINAL = "final"  # final under the chain's rule; waiting for the custody record
    CREDITED = "credited"  # posted to the user's wallet
    SUSPENSE = "suspense"  # posted to suspense:unattributed (below minimum, unattributable)
    HELD_FOR_REVIEW = "held_for_review"  # nothing posted; a person decides
    FAILED = "failed"  # proven gone: the sender's nonce was consumed by another final tx
    IGNORED = "ignored"  # not creditable (unsupported or fake token, out-of-range amount)
    DISPUTED = "disputed"  # credited, then its block stopped being canonical: case open
    INTERNAL = "internal"  # to our own address, made by us (internal_transfers): not posted
    CAPITAL = "capital"  # company capital: posted DR treasury / CR equity:owner


class DepositEvent(StrEnum):
    """Facts the watcher observes (past tense); each accepted one is a history row."""

    TRANSFER_IGNORED = "transfer_ignored"
    TRANSFER_INCLUDED = "transfer_included"
    CONFIRMATIONS_OBSERVED = "confirmations_observed"
    BLOCK_REORGED_OUT = "block_reorged_out"
    TRANSFER_REINCLUDED = "transfer_reincluded"
    FINALITY_REACHED = "finality_reached"
    ATTESTED_FOR_USER = "attested_for_user"
    ATTESTED_FOR_SUSPENSE = "attested_for_suspense"
    CUSTODY_RECORD_DISAGREED = "custody_record_disagreed"
    CONVERSION_INEXACT = "conversion_inexact"
    PROVIDER_COMPLETED_EARLY = "provider_completed_early"
    NONCE_CONSUMED = "nonce_consumed"
    INTERNAL_MATCHED = "internal_matched"
    FUNDING_MATCHED = "funding_matched"
    OWN_UNATTRIBUTED = "own_unattributed"
    CAPITAL_DECIDED = "capital_decided"


class Effect(StrEnum):
    """What the service must carry out with the history row (imperatives)."""

    POST_CREDIT = "post_credit"
    POST_SUSPENSE = "post_suspense"
    POST_CAPITAL = "post_capital"
    OPEN_CASE = "open_case"
    RAISE_ALERT = "raise_alert"


S, E, X = DepositState, DepositEvent, Effect

#: The allowed moves: (state before or None for a new deposit, event) -> (state after, effects).
MOVES: dict[tuple[DepositState | None, DepositEvent], tuple[DepositState, tuple[Effect, ...]]] = {
    (None, E.TRANSFER_IGNORED): (S.IGNORED, ()),
    (None, E.TRANSFER_INCLUDED): (S.INCLUDED, ()),
    (S.INCLUDED, E.CONFIRMATIONS_OBSERVED): (S.INCLUDED, ()),
    (S.INCLUDED, E.BLOCK_REORGED_OUT): (S.UNCONFIRMED, ()),
    (S.FINAL, E.BLOCK_REORGED_OUT): (S.UNCONFIRMED, ()),
    (S.UNCONFIRMED, E.TRANSFER_REINCLUDED): (S.INCLUDED, ()),
    (S.INCLUDED, E.FINALITY_REACHED): (S.FINAL, ()),
    (S.UNCONFIRMED, E.NONCE_CONSUMED): (S.FAILED, ()),
    (S.FINAL, E.ATTESTED_FOR_USER): (S.CREDITED, (X.POST_CREDIT,)),
    (S.FINAL, E.ATTESTED_FOR_SUSPENSE): (S.SUSPENSE, (X.POST_SUSPENSE,)),
    (S.FINAL, E.CUSTODY_RECORD_DISAGREED): (S.HELD_FOR_REVIEW, ()),
    (S.FINAL, E.CONVERSION_INEXACT): (S.HELD_FOR_REVIEW, ()),
    (S.INCLUDED, E.PROVIDER_COMPLETED_EARLY): (S.HELD_FOR_REVIEW, ()),
    (S.UNCONFIRMED, E.PROVIDER_COMPLETED_EARLY): (S.HELD_FOR_REVIEW, ()),
    (S.CREDITED, E.BLOCK_REORGED_OUT): (S.DISPUTED, (X.OPEN_CASE, X.RAISE_ALERT)),
    (S.SUSPENSE, E.BLOCK_REORGED_OUT): (S.DISPUTED, (X.OPEN_CASE, X.RAISE_ALERT)),
    (S.FINAL, E.INTERNAL_MATCHED): (S.INTERNAL, ()),
    (S.FINAL, E.FUNDING_MATCHED): (S.CAPITAL, (X.POST_CAPITAL,)),
    (S.FINAL, E.OWN_UNATTRIBUTED): (S.SUSPENSE, (X.POST_SUSPENSE, X.OPEN_CASE)),
    (S.SUSPENSE, E.CAPITAL_DECIDED): (S.CAPITAL, (X.POST_CAPITAL,)),
    (S.INTERNAL, E.BLOCK_REORGED_OUT): (S.DISPUTED, (X.OPEN_CASE, X.RAISE_ALERT)),
    (S.CAPITAL, E.BLOCK_REORGED_OUT): (S.DISPUTED, (X.OPEN_CASE, X.RAISE_ALERT)),
}

#: States the watcher still works on.
OPEN_STATES = frozenset({S.INCLUDED, S.UNCONFIRMED, S.FINAL})
#: States whose deposit counts as pending incoming (seen, not failed, not yet posted).
PENDING_STATES = frozenset({S.INCLUDED, S.UNCONFIRMED, S.FINAL})
#: States whose deposit has been posted to the ledger.
POSTED_STATES = frozenset({S.CREDITED, S.SUSPENSE, S.CAPITAL})
#: Settled states a reorg can still take a deposit out of (it then becomes disputed).
SETTLED_STATES = frozenset({S.CREDITED, S.SUSPENSE, S.CAPITAL, S.INTERNAL})


@dataclass(frozen=True)
class Transition:
    """The outcome of an accepted event: the new state, the effects, and when."""

    state: DepositState
    event: DepositEvent
    effects: tuple[Effect, ...]
    at: datetime


def transition(state: DepositState | None, event: DepositEvent, *, now: datetime) -> Transition:
    """Apply ``event`` to a deposit in ``state`` (None: not seen yet) at ``now``.

    Raises TransitionRefused for a move that is not in ``MOVES``.
    """
    move = MOVES.get((state, event))
    if move is None:
        raise TransitionRefused(f"{event.value} is not allowed in state {state}")
    return Transition(state=move[0], event=event, effects=move[1], at=now)


# --------------------------------------------------------------------------- amounts


def convert_amount(value: int, decimals: int, scale: int) -> int | None:
    """``value`` in on-chain ``decimals`` as minor units of a ledger ``scale``, exactly.

    None when it cannot be represented exactly (never rounded): 18 decimals into scale 6 is
    exact only when the value is a multiple of 10^12.
    """
    if value < 0:
        raise ValueError("on-chain values are non-negative")
    if scale >= decimals:
        return int(value * 10 ** (scale - decimals))
    quotient, remainder = divmod(value, 10 ** (decimals - scale))
    return None if remainder else quotient


class Booking(StrEnum):
    """Where a deposit goes once final, decided once at ingestion."""

    USER = "user"
    SUSPENSE = "suspense"
    REVIEW = "review"
    IGNORE = "ignore"
    OWN = "own"  # to our own hot or cold address: classified once final (own_event)


class Reason(StrEnum):
    """Why a deposit is not simply credited to its user."""

    UNSUPPORTED_TOKEN = "unsupported_token"
    FAKE_TOKEN = "fake_token"  # same symbol as a listed token, another contract
    OUT_OF_RANGE = "out_of_range"  # on-chain value or converted amount >= 2^127
    ZERO_AMOUNT = "zero_amount"
    INEXACT_CONVERSION = "inexact_conversion"
    BELOW_MINIMUM = "below_minimum"
    UNATTRIBUTED = "unattributed"


@dataclass(frozen=True)
class Listing:
    """What the configuration says about the transferred asset (None fields: not listed)."""

    asset_code: str | None
    decimals: int | None
    scale: int | None
    minimum_minor: int
    listed_symbols: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Decision:
    """The booking of one deposit: where it goes, why, and the ledger amount."""

    booking: Booking
    reason: Reason | None
    asset_code: str | None
    amount_minor: int | None


def decide_booking(
    value: int, listing: Listing, *, user_id: str | None, token_symbol: str | None,
    own: bool = False,
) -> Decision:
    """Decide, from plain facts, what happens to a transfer to one of our addresses.

    Order matters: an unlisted token is ignored whatever its amount; an amount at or above
    2^127 never reaches the ledger; an inexact conversion is held (never rounded); a transfer
    to our own hot or cold address (``own``) is booked ``own`` whatever its amount (no
    minimum: every wei there is accounted for); an unattributable or below-minimum deposit is
    booked to suspense so that custody still matches the chain.
    """
    if listing.asset_code is None or listing.decimals is None or listing.scale is None:
        fake = token_symbol is not None and token_symbol.strip().upper() in listing.listed_symbols
        return Decision(Booking.IGNORE, Reason.FAKE_TOKEN if fake else Reason.UNSUPPORTED_TOKEN,
                        None, None)
    if value >= AMOUNT_LIMIT:
        return Decision(Booking.IGNORE, Reason.OUT_OF_RANGE, listing.asset_code, None)
    if value == 0:
        return Decision(Booking.IGNORE, Reason.ZERO_AMOUNT, listing.asset_code, None)
    amount = convert_amount(value, listing.decimals, listing.scale)
    if amount is None:
        return Decision(Booking.REVIEW, Reason.INEXACT_CONVERSION, listing.asset_code, None)
    if amount >= AMOUNT_LIMIT:
        return Decision(Booking.IGNORE, Reason.OUT_OF_RANGE, listing.asset_code, None)
    if own:
        return Decision(Booking.OWN, None, listing.asset_code, amount)
    if user_id is None:
        return Decision(Booking.SUSPENSE, Reason.UNATTRIBUTED, listing.asset_code, amount)
    if amount < listing.minimum_minor:
        return Decision(Booking.SUSPENSE, Reason.BELOW_MINIMUM, listing.asset_code, amount)
    return Decision(Booking.USER, None, listing.asset_code, amount)


def event_at_finality(booking: Booking, attested: bool) -> DepositEvent:
    """The event that settles a final deposit once its custody record has been read."""
    if booking is Booking.REVIEW:
        return E.CONVERSION_INEXACT
    if not attested:
        return E.CUSTODY_RECORD_DISAGREED
    return E.ATTESTED_FOR_USER if booking is Booking.USER else E.ATTESTED_FOR_SUSPENSE


def own_event(*, internal: bool, funded: bool) -> DepositEvent:
    """The event that settles a final, attested transfer to our own address: a movement we
    made (``internal``) wins over a declared funding (``funded``); anything else is
    unattributed (suspense and a case)."""
    if internal:
        return E.INTERNAL_MATCHED
    return E.FUNDING_MATCHED if funded else E.OWN_UNATTRIBUTED


def deposit_key(chain: str, tx_hash: str, position: str) -> str:
    """The ledger idempotency key of a deposit's posting: one credit per deposit key."""
    return f"deposit:{chain}:{tx_hash.lower()}:{position}"
