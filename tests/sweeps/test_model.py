"""The pure core of the movements: one transition table per kind, the amounts, approvals."""

from __future__ import annotations

import pytest

from sweeps import model
from sweeps.model import Event, Kind, State, TransitionRefused


def test_each_kind_has_its_own_start_and_signing_gate() -> None:
    assert model.transition(Kind.GAS_TOP_UP, None, Event.PLANNED) is State.READY
    assert model.transition(Kind.COLD_TRANSFER, None, Event.PLANNED) is State.PROPOSED
    assert model.transition(Kind.SWEEP, None, Event.PLANNED,
                            start=State.WAITING_GAS) is State.WAITING_GAS
    with pytest.raises(TransitionRefused):
        model.transition(Kind.SWEEP, None, Event.PLANNED, start=State.SIGNING)
    # A cold transfer is never signed before it is approved; a sweep never while waiting gas.
    with pytest.raises(TransitionRefused):
        model.transition(Kind.COLD_TRANSFER, State.PROPOSED, Event.NONCE_ASSIGNED)
    with pytest.raises(TransitionRefused):
        model.transition(Kind.SWEEP, State.WAITING_GAS, Event.NONCE_ASSIGNED)
    assert model.transition(Kind.SWEEP, State.WAITING_GAS, Event.GAS_ARRIVED) is State.READY
    with pytest.raises(TransitionRefused):
        model.transition(Kind.GAS_TOP_UP, State.READY, Event.GAS_ARRIVED)


def test_the_sending_part_is_shared_and_never_fails_an_unknown_outcome() -> None:
    for kind in Kind:
        assert model.transition(kind, State.SIGNED, Event.SEND_UNCONFIRMED) is State.UNKNOWN
        assert model.transition(kind, State.INCLUDED, Event.REORGED_OUT) is State.BROADCAST
        assert model.transition(kind, State.UNKNOWN, Event.ATTEMPT_SIGNED) is State.SIGNED
        assert model.transition(kind, State.UNKNOWN, Event.CONSUMED_ELSEWHERE) is State.DROPPED
        # Only a final receipt ends it, and nothing leaves a terminal state.
        for terminal in model.TERMINAL:
            for event in Event:
                assert (terminal, event) not in model.TRANSITIONS[kind]
        assert all(to is not State.REVERTED or (state, event) == (State.INCLUDED,
                                                                   Event.FINAL_REVERTED)
                   for (state, event), to in model.TRANSITIONS[kind].items())


def test_native_sweep_value_leaves_room_for_the_whole_gas_limit() -> None:
    assert model.native_sweep_value(10**18, 21_000, 10**9) == 10**18 - 21_000 * 10**9
    assert model.native_sweep_value(21_000 * 10**9, 21_000, 10**9) == 0


def test_dust_rule_compares_gas_with_a_share_of_the_value() -> None:
    assert model.is_dust(1_000, 101, 10) and not model.is_dust(1_000, 100, 10)
    # 100 USDC (6 decimals) at 0.0004 ETH each is 0.04 ETH.
    assert model.token_value_in_native(100 * 10**6, 6, 18, 4 * 10**14, 18) == 4 * 10**16


def test_top_up_covers_only_what_the_treasury_part_lacks() -> None:
    assert model.top_up_needed(0, 100_000, 10) == 1_000_000
    assert model.top_up_needed(400_000, 100_000, 10) == 600_000
    assert model.top_up_needed(2_000_000, 100_000, 10) == 0
    assert model.top_up_needed(-5, 100_000, 10) == 1_000_000  # never counts a deficit twice


def test_customer_money_moves_first() -> None:
    assert model.customer_first(150, 100) == (100, 50)
    assert model.customer_first(80, 100) == (80, 0)


def test_hot_excess_and_cold_approvals() -> None:
    assert model.hot_excess(70, 50) == 20 and model.hot_excess(40, 50) == 0
    assert model.hot_excess(10**30, None) == 0
    assert model.cold_approvals_required(20, 20) == 1
    assert model.cold_approvals_required(21, 20) == 2
    assert model.cold_approvals_required(10**30, None) == 1


def test_cold_decisions_refuse_the_proposer_and_a_second_vote() -> None:
    with pytest.raises(ValueError, match="proposed"):
        model.cold_decision(proposer="carol", actor="carol", decision="approve", earlier={},
                            required=1)
    with pytest.raises(ValueError, match="already"):
        model.cold_decision(proposer="sweeper", actor="carol", decision="approve",
                            earlier={"carol": "approve"}, required=2)
    first = model.cold_decision(proposer="sweeper", actor="carol", decision="approve",
                                earlier={}, required=2)
    assert (first.event, first.approvals) == (Event.APPROVAL_RECORDED, 1)
    second = model.cold_decision(proposer="sweeper", actor="dave", decision="approve",
                                 earlier={"carol": "approve"}, required=2)
    assert second.event is Event.APPROVED
    assert model.cold_decision(proposer="sweeper", actor="dave", decision="reject",
                               earlier={"carol": "approve"}, required=2).event is Event.REJECTED
