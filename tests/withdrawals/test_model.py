"""The pure core: transitions, validation, fees, the ladder, and the configuration loader."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from config.errors import ConfigurationInvalid
from outgoing.model import AttemptView
from withdrawals import errors, model
from withdrawals.model import Effect, Event, State

from .conftest import config_toml, load

NOW = datetime(2026, 11, 30, tzinfo=UTC)


class TestTransition:
    def test_every_move_in_the_table_is_accepted(self) -> None:
        for (state, event), (to, effects) in model.TRANSITIONS.items():
            t = model.transition(state, event, now=NOW)
            assert (t.to_state, t.effects, t.at) == (to, effects, NOW)

    def test_everything_else_is_refused(self) -> None:
        for state in State:
            for event in Event:
                if (state, event) not in model.TRANSITIONS:
                    with pytest.raises(errors.TransitionRefused):
                        model.transition(state, event, now=NOW)

    def test_terminal_states_only_loop_without_touching_the_reserve(self) -> None:
        loops = set()
        for (state, event), (to, effects) in model.TRANSITIONS.items():
            if state.terminal:
                assert to is state
                assert not {Effect.POST_RESERVE, Effect.POST_SETTLE, Effect.POST_RELEASE} & set(
                    effects)
                loops.add((state, event))
        assert loops == {(State.SETTLED, Event.RETURN_LINKED),
                         (State.WRITTEN_OFF, Event.CLOSING_SIGNED),
                         (State.WRITTEN_OFF, Event.NONCE_CLOSED)}

    def test_nothing_releases_an_unknown_without_proof(self) -> None:
        releasing = {(s, e) for (s, e), (_, fx) in model.TRANSITIONS.items()
                     if Effect.POST_RELEASE in fx and s in (State.UNKNOWN,
                                                           State.AWAITING_WRITE_OFF)}
        assert releasing == {(State.UNKNOWN, Event.PROVEN_NOT_SENT),
                             (State.AWAITING_WRITE_OFF, Event.WRITTEN_OFF_AS_NOT_SENT)}

    def test_cancel_after_signing_has_its_own_error(self) -> None:
        for state in (State.SIGNING, State.SIGNED):
            with pytest.raises(errors.WithdrawalNotCancelable):
                model.transition(state, Event.CANCELED, now=NOW)


class TestSigning:
    def test_a_nonce_is_assigned_before_anything_is_signed(self) -> None:
        t = model.transition(State.RESERVED, Event.NONCE_ASSIGNED, now=NOW)
        assert (t.to_state, t.effects) == (State.SIGNING, ())
        t = model.transition(State.SIGNING, Event.ATTEMPT_SIGNED, now=NOW)
        assert (t.to_state, t.effects) == (State.SIGNED, (Effect.BROADCAST,))
        # The old shortcut is gone: a first attempt is recorded only after its nonce and caps.
        with pytest.raises(errors.TransitionRefused):
            model.transition(State.RESERVED, Event.ATTEMPT_SIGNED, now=NOW)

    def test_signing_only_leaves_by_a_recorded_attempt(self) -> None:
        # The nonce is taken: no cancel, no rejection, no release, no second nonce.
        moves = {e: to for (s, e), (to, _) in model.TRANSITIONS.items() if s is State.SIGNING}
        assert moves == {Event.ATTEMPT_SIGNED: State.SIGNED}
        assert State.SIGNING not in model.CANCELABLE
        assert State.SIGNING in model.IN_FLIGHT and not State.SIGNING.terminal

    def test_signing_is_entered_only_from_reserved(self) -> None:
        into = {(s, e) for (s, e), (to, _) in model.TRANSITIONS.items() if to is State.SIGNING}
        assert into == {(State.RESERVED, Event.NONCE_ASSIGNED)}


class TestValidation:
    def test_addresses(self) -> None:
        good = "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC"
        assert model.normalize_address(good) == good.lower()
        assert model.normalize_address(good.lower()) == good.lower()
        # All upper case carries no checksum, as all lower case (EIP-55).
        assert model.normalize_address(good.upper().replace("0X", "0x")) == good.lower()
        bads = (good[:-1] + "c", good[:-1], 5, "0x" + "g" * 40, "0X" + good[2:].lower())
        for bad in bads:
            with pytest.raises(errors.AddressInvalid):
                model.normalize_address(bad)  # type: ignore[arg-type]
        with pytest.raises(errors.AddressZero):
            model.normalize_address("0x" + "0" * 40)

    def test_chain_units_are_exact(self) -> None:
        assert model.to_chain_units(30_000_000, 6, 18) == 30 * 10**18
        assert model.to_chain_units(30_000_000, 6, 6) == 30_000_000
        assert model.to_chain_units(1_600_000, 7, 6) == 160_000
        with pytest.raises(errors.AmountNotRepresentable):
            model.to_chain_units(1_600_001, 7, 6)

    def test_chain_amounts_fit_in_uint256(self) -> None:
        assert model.to_chain_units(2**127 - 1, 0, 0) == 2**127 - 1
        with pytest.raises(errors.AmountNotRepresentable, match="uint256"):
            model.to_chain_units(10**30, 0, 60)

    def test_ledger_units_are_exact(self) -> None:
        gas_wei = 21_000 * 1_875_000_007  # a realistic price: not a whole gwei
        assert model.to_ledger_units(gas_wei, 18, 18) == gas_wei
        assert model.to_ledger_units(gas_wei, 18, 20) == gas_wei * 100
        assert model.to_ledger_units(21_000 * 10**9, 18, 9) == 21_000
        with pytest.raises(errors.AmountNotRepresentable):
            model.to_ledger_units(gas_wei, 18, 9)  # never rounded
        assert model.to_ledger_units(0, 18, 6) == 0

    def test_approvals_required(self) -> None:
        assert [model.approvals_required(a, 10, 50) for a in (10, 11, 50, 51)] == [0, 1, 1, 2]
        assert model.approvals_required(10**9, None, None) == 0


def view(**kw: object) -> AttemptView:
    base: dict[str, object] = dict(attempt_id=1, tx_hash="0x1", nonce=7,
                                   receipt_block=None, receipt_block_hash=None,
                                   succeeded=None, known_to_node=False)
    base.update(kw)
    return AttemptView(**base)  # type: ignore[arg-type]


def decide(state: State, attempts: tuple[AttemptView, ...], *, finalized_nonce: int = 7,
           latest_nonce: int = 7, since_s: float = 0,
           exhausted: bool = False) -> model.LadderDecision:
    return model.decide_in_flight(
        state, attempts, nonce=7, finalized_nonce=finalized_nonce, latest_nonce=latest_nonce,
        unknown_since=NOW - timedelta(seconds=since_s), escalate_after_s=600,
        last_attempt_at=NOW - timedelta(seconds=since_s), bump_after_s=300,
        attempts_max=1 if exhausted else 5, now=NOW)


class TestLadder:
    def test_receipt_wins(self) -> None:
        d = decide(State.UNKNOWN, (view(receipt_block=5, receipt_block_hash="0xb"),))
        assert d.event is Event.RECEIPT_OBSERVED

    def test_pending_is_found(self) -> None:
        assert decide(State.UNKNOWN, (view(known_to_node=True),)).event is Event.FOUND_PENDING

    def test_free_nonce_and_nothing_known_replaces(self) -> None:
        d = decide(State.UNKNOWN, (view(),))
        assert (d.event, d.replace) == (Event.ATTEMPT_SIGNED, True)

    def test_consumed_at_finalized_by_another_proves_not_sent(self) -> None:
        assert decide(State.UNKNOWN, (view(),), finalized_nonce=8,
                      latest_nonce=8).event is Event.PROVEN_NOT_SENT

    def test_consumed_only_at_latest_waits(self) -> None:
        assert decide(State.UNKNOWN, (view(),), latest_nonce=8).event is None

    def test_escalates_after_the_configured_time_only(self) -> None:
        late = decide(State.UNKNOWN, (view(),), since_s=601, exhausted=True)
        assert late.event is Event.ESCALATED
        assert decide(State.UNKNOWN, (view(),), since_s=599, exhausted=True).event is None

    def test_stuck_broadcast_is_bumped(self) -> None:
        d = decide(State.BROADCAST, (view(known_to_node=True),), since_s=301)
        assert (d.event, d.replace) == (Event.ATTEMPT_SIGNED, True)


def closing(attempts: tuple[AttemptView, ...], *, landed_final: bool = False,
            finalized_nonce: int = 7, latest_nonce: int = 7, closing_attempts: int = 0,
            since_s: float = 0) -> model.NonceDecision:
    return model.decide_nonce_closure(
        attempts, nonce=7, landed_final=landed_final, finalized_nonce=finalized_nonce,
        latest_nonce=latest_nonce, closing_attempts=closing_attempts,
        last_attempt_at=NOW - timedelta(seconds=since_s), bump_after_s=300, attempts_max=2,
        now=NOW)


class TestNonceClosure:
    def test_free_nonce_gets_a_closing_attempt_at_once(self) -> None:
        assert closing((view(),)).event is Event.CLOSING_SIGNED

    def test_final_receipt_closes_with_its_attempt(self) -> None:
        landed = view(attempt_id=2, receipt_block=9, receipt_block_hash="0xb")
        d = closing((view(), landed), landed_final=True, closing_attempts=1)
        assert (d.event, d.attempt_id) == (Event.NONCE_CLOSED, 2)
        assert closing((view(), landed), closing_attempts=1).event is None  # not final yet

    def test_consumed_by_another_transaction(self) -> None:
        d = closing((view(),), finalized_nonce=8, latest_nonce=8)
        assert (d.event, d.attempt_id) == (Event.NONCE_CLOSED, None)
        assert closing((view(),), latest_nonce=8).event is None

    def test_pending_closing_attempt_waits_then_is_bumped_within_bounds(self) -> None:
        pending = (view(), view(attempt_id=2, known_to_node=True))
        assert closing(pending, closing_attempts=1, since_s=10).event is None
        assert closing(pending, closing_attempts=1, since_s=301).event is Event.CLOSING_SIGNED
        assert closing(pending, closing_attempts=2, since_s=301).event is None

    def test_lost_closing_send_is_repeated(self) -> None:
        d = closing((view(), view(attempt_id=2)), closing_attempts=1, since_s=10)
        assert (d.event, d.resend) == (None, True)


class TestConfig:
    def test_example_shape_loads(self) -> None:
        _, cfg = load(config_toml())
        policy = cfg.policy("devnet", "USDC")
        assert policy is not None and (policy.fee_minor, policy.fee_max_minor) == (400_000,
                                                                                   2_000_000)
        assert cfg.policy("devnet", "DAI") is None and cfg.approvers == {"alice", "bob"}

    @pytest.mark.parametrize(("old", "new"), [
        ('fee = "0.40"', 'fee = "3.00"'),  # fee above fee_max
        ('fee = "0.40"', 'fee = "0.4000001"'),  # more decimals than the scale
        ('address = "0x', 'address = "0xzz'),
        ('key_env = "CUSTODY_TEST_HOT_KEY"', 'key_env = "lower case"'),
        ('bump_percent = 25', 'bump_percent = 5'),
    ])
    def test_invalid_configuration_is_refused(self, old: str, new: str) -> None:
        text = config_toml().replace(old, new, 1)
        assert text != config_toml()
        with pytest.raises(ConfigurationInvalid):
            load(text)

    def test_native_scale_coarser_than_chain_decimals_is_refused_at_startup(self) -> None:
        coarse = config_toml().replace("[assets.ETH]\nscale = 18", "[assets.ETH]\nscale = 9")
        assert coarse != config_toml()
        with pytest.raises(ConfigurationInvalid, match="gas this wallet pays"):
            load(coarse)
        finer = config_toml().replace("[assets.ETH]\nscale = 18", "[assets.ETH]\nscale = 20")
        load(finer)  # finer than wei: every gas amount is exact

    def test_example_file_is_valid(self) -> None:
        from pathlib import Path

        example = Path(__file__).resolve().parents[2] / "config" / "withdrawals.example.toml"
        chains_part = config_toml().split("[withdrawals]")[0]
        load(chains_part + example.read_text())
