"""The deposit lifecycle and the booking rules, without a database or a node."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from deposits.errors import TransitionRefused
from deposits.model import (
    AMOUNT_LIMIT,
    MOVES,
    Booking,
    DepositEvent,
    DepositState,
    Effect,
    Listing,
    Reason,
    convert_amount,
    decide_booking,
    deposit_key,
    event_at_finality,
    own_event,
    transition,
)

NOW = datetime(2026, 11, 29, tzinfo=UTC)
E, S = DepositEvent, DepositState
USDC = Listing("USDC", 6, 6, 1_000_000, frozenset({"USDC"}))


class TestTransition:
    def test_happy_path_to_credited_posts_once(self) -> None:
        state = None
        effects: list[Effect] = []
        for event in (E.TRANSFER_INCLUDED, E.CONFIRMATIONS_OBSERVED, E.FINALITY_REACHED,
                      E.ATTESTED_FOR_USER):
            moved = transition(state, event, now=NOW)
            state, effects = moved.state, effects + list(moved.effects)
        assert state is S.CREDITED
        assert effects == [Effect.POST_CREDIT]

    def test_reorg_before_finality_goes_back_to_unconfirmed_not_failed(self) -> None:
        assert transition(S.INCLUDED, E.BLOCK_REORGED_OUT, now=NOW).state is S.UNCONFIRMED
        assert transition(S.FINAL, E.BLOCK_REORGED_OUT, now=NOW).state is S.UNCONFIRMED
        assert transition(S.UNCONFIRMED, E.TRANSFER_REINCLUDED, now=NOW).state is S.INCLUDED

    def test_fails_only_from_unconfirmed(self) -> None:
        assert transition(S.UNCONFIRMED, E.NONCE_CONSUMED, now=NOW).state is S.FAILED
        for state in (S.INCLUDED, S.FINAL, S.CREDITED):
            with pytest.raises(TransitionRefused):
                transition(state, E.NONCE_CONSUMED, now=NOW)

    def test_reorg_after_credit_opens_a_case_and_alerts_without_posting(self) -> None:
        for state in (S.CREDITED, S.SUSPENSE):
            moved = transition(state, E.BLOCK_REORGED_OUT, now=NOW)
            assert moved.state is S.DISPUTED
            assert moved.effects == (Effect.OPEN_CASE, Effect.RAISE_ALERT)

    def test_early_provider_completion_is_held(self) -> None:
        assert transition(S.INCLUDED, E.PROVIDER_COMPLETED_EARLY, now=NOW).state \
            is S.HELD_FOR_REVIEW

    def test_terminal_states_accept_nothing_but_a_deep_reorg(self) -> None:
        terminal = (S.HELD_FOR_REVIEW, S.FAILED, S.IGNORED, S.DISPUTED)
        for state in terminal:
            for event in DepositEvent:
                with pytest.raises(TransitionRefused):
                    transition(state, event, now=NOW)

    def test_cannot_credit_before_final(self) -> None:
        for state in (None, S.INCLUDED, S.UNCONFIRMED, S.CREDITED):
            with pytest.raises(TransitionRefused):
                transition(state, E.ATTESTED_FOR_USER, now=NOW)

    def test_only_posting_moves_have_posting_effects(self) -> None:
        posting = {(s, e) for (s, e), (_, fx) in MOVES.items()
                   if Effect.POST_CREDIT in fx or Effect.POST_SUSPENSE in fx}
        assert posting == {(S.FINAL, E.ATTESTED_FOR_USER), (S.FINAL, E.ATTESTED_FOR_SUSPENSE),
                           (S.FINAL, E.OWN_UNATTRIBUTED)}
        capital = {(s, e) for (s, e), (_, fx) in MOVES.items() if Effect.POST_CAPITAL in fx}
        assert capital == {(S.FINAL, E.FUNDING_MATCHED), (S.SUSPENSE, E.CAPITAL_DECIDED)}

    def test_own_address_transfers_settle_only_once_final(self) -> None:
        for event in (E.INTERNAL_MATCHED, E.FUNDING_MATCHED, E.OWN_UNATTRIBUTED):
            for state in (None, S.INCLUDED, S.UNCONFIRMED):
                with pytest.raises(TransitionRefused):
                    transition(state, event, now=NOW)
        assert transition(S.FINAL, E.INTERNAL_MATCHED, now=NOW).effects == ()
        assert Effect.OPEN_CASE in transition(S.FINAL, E.OWN_UNATTRIBUTED, now=NOW).effects
        for state in (S.INTERNAL, S.CAPITAL):
            assert transition(state, E.BLOCK_REORGED_OUT, now=NOW).state is S.DISPUTED

    def test_own_event_prefers_an_internal_match(self) -> None:
        assert own_event(internal=True, funded=True) is E.INTERNAL_MATCHED
        assert own_event(internal=False, funded=True) is E.FUNDING_MATCHED
        assert own_event(internal=False, funded=False) is E.OWN_UNATTRIBUTED

    def test_own_booking_has_no_minimum(self) -> None:
        listing = Listing("ETH", 18, 18, 10**18)
        decision = decide_booking(5, listing, user_id=None, token_symbol=None, own=True)
        assert (decision.booking, decision.amount_minor) == (Booking.OWN, 5)
        ignored = decide_booking(0, listing, user_id=None, token_symbol=None, own=True)
        assert ignored.booking is Booking.IGNORE

    def test_transition_carries_the_time(self) -> None:
        assert transition(None, E.TRANSFER_INCLUDED, now=NOW).at == NOW


class TestConvertAmount:
    def test_exact_down_and_up(self) -> None:
        assert convert_amount(5 * 10**12, 18, 6) == 5
        assert convert_amount(7, 6, 18) == 7 * 10**12
        assert convert_amount(123, 6, 6) == 123

    def test_inexact_is_none_never_rounded(self) -> None:
        assert convert_amount(10**12 + 1, 18, 6) is None
        assert convert_amount(1, 18, 6) is None


class TestDecideBooking:
    def test_user(self) -> None:
        d = decide_booking(2_000_000, USDC, user_id="u1", token_symbol=None)
        assert (d.booking, d.amount_minor, d.asset_code) == (Booking.USER, 2_000_000, "USDC")

    def test_unlisted_and_fake(self) -> None:
        unlisted = Listing(None, None, None, 0, frozenset({"USDC"}))
        assert decide_booking(1, unlisted, user_id="u", token_symbol="SHIB").reason \
            is Reason.UNSUPPORTED_TOKEN
        assert decide_booking(1, unlisted, user_id="u", token_symbol="usdc ").reason \
            is Reason.FAKE_TOKEN

    def test_out_of_range(self) -> None:
        d = decide_booking(AMOUNT_LIMIT, USDC, user_id="u", token_symbol=None)
        assert (d.booking, d.reason) == (Booking.IGNORE, Reason.OUT_OF_RANGE)
        just_below = decide_booking(AMOUNT_LIMIT - 1, USDC, user_id="u", token_symbol=None)
        assert just_below.booking is Booking.USER
        # Scaling up can leave the range too.
        up = Listing("ETH", 6, 18, 0)
        assert decide_booking(2**120, up, user_id="u", token_symbol=None).reason \
            is Reason.OUT_OF_RANGE

    def test_inexact_is_review(self) -> None:
        eth6 = Listing("USDC", 18, 6, 0)
        d = decide_booking(10**12 + 1, eth6, user_id="u", token_symbol=None)
        assert (d.booking, d.reason, d.amount_minor) == (Booking.REVIEW,
                                                          Reason.INEXACT_CONVERSION, None)

    def test_below_minimum_and_unattributed_go_to_suspense(self) -> None:
        assert decide_booking(999_999, USDC, user_id="u", token_symbol=None).reason \
            is Reason.BELOW_MINIMUM
        d = decide_booking(5_000_000, USDC, user_id=None, token_symbol=None)
        assert (d.booking, d.reason) == (Booking.SUSPENSE, Reason.UNATTRIBUTED)

    def test_event_at_finality(self) -> None:
        assert event_at_finality(Booking.USER, True) is E.ATTESTED_FOR_USER
        assert event_at_finality(Booking.SUSPENSE, True) is E.ATTESTED_FOR_SUSPENSE
        assert event_at_finality(Booking.USER, False) is E.CUSTODY_RECORD_DISAGREED
        assert event_at_finality(Booking.REVIEW, True) is E.CONVERSION_INEXACT


def test_deposit_key_is_lower_case() -> None:
    assert deposit_key("eth", "0xAB", "log:1") == "deposit:eth:0xab:log:1"
