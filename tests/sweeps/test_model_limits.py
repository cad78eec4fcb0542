"""The pure rules of the hot/cold limits (``sweeps.model``): which side of its limits a holding
is on, the excess proposed to cold, the refill asked for, the approvals a transfer needs, the
decisions refused, and exact decimal renderings of chain amounts."""

from __future__ import annotations

import pytest

from sweeps import model
from sweeps.model import Event, LimitSide

GWEI = 10**9


class TestSides:
    @pytest.mark.parametrize("holding, side", [
        (101, LimitSide.ABOVE_MAX), (100, None), (10, None), (9, LimitSide.BELOW_MIN),
        (-5, LimitSide.BELOW_MIN)])
    def test_at_a_limit_is_within(self, holding: int, side: LimitSide | None) -> None:
        assert model.limit_side(holding, 10, 100) == side

    def test_an_unset_limit_never_counts(self) -> None:
        assert model.limit_side(10**30, 10, None) is None
        assert model.limit_side(0, None, 100) is None


class TestAmounts:
    def test_the_excess_is_whole_ledger_units_above_the_maximum(self) -> None:
        assert model.cold_excess(5_000_123, 2_000_000, 0, 1_000) == 3_000_000
        assert model.cold_excess(1_999_999, 2_000_000, 0, 1) == 0
        assert model.cold_excess(10**30, None, 0, 1) == 0

    def test_the_native_excess_leaves_the_gas_it_can_cost(self) -> None:
        reserve = 21_000 * 200 * GWEI
        assert model.cold_excess(10**18, 0, reserve, 1) == 10**18 - reserve
        assert model.cold_excess(10**18, 10**17, reserve, 1) == 9 * 10**17

    def test_the_refill_aims_halfway_and_rounds_up(self) -> None:
        assert model.refill_target(10, 100) == 55 and model.refill_target(10, None) == 20
        assert model.refill_amount(2, 10, 100, 1) == 53
        assert model.refill_amount(2, 10, 100, 10) == 60
        assert model.refill_amount(60, 10, 100, 1) == 0

    def test_whole_units_never_negative(self) -> None:
        assert model.whole_units(-7, 5) == 0 and model.whole_units(17, 5) == 15

    @pytest.mark.parametrize("value, decimals, text", [
        (0, 18, "0.000000000000000000"), (1500, 3, "1.500"), (-1, 2, "-0.01"),
        (2**256 - 1, 0, str(2**256 - 1)), (123, 6, "0.000123")])
    def test_format_units_is_exact(self, value: int, decimals: int, text: str) -> None:
        assert model.format_units(value, decimals) == text


class TestDecisions:
    def test_two_admins_above_the_amount(self) -> None:
        assert model.cold_approvals_required(21, 20) == 2
        assert model.cold_approvals_required(20, 20) == 1
        assert model.cold_approvals_required(10**30, None) == 1

    def test_the_proposer_and_a_second_decision_are_refused(self) -> None:
        with pytest.raises(ValueError, match="proposed"):
            model.cold_decision(proposer="carol", actor="carol", decision="approve",
                                earlier={}, required=1)
        with pytest.raises(ValueError, match="already"):
            model.cold_decision(proposer="sweeper", actor="dave", decision="reject",
                                earlier={"dave": "approve"}, required=2)

    def test_counting(self) -> None:
        first = model.cold_decision(proposer="sweeper", actor="dave", decision="approve",
                                    earlier={}, required=2)
        assert (first.event, first.approvals) == (Event.APPROVAL_RECORDED, 1)
        second = model.cold_decision(proposer="sweeper", actor="erin", decision="approve",
                                     earlier={"dave": "approve"}, required=2)
        assert second.event is Event.APPROVED
        no = model.cold_decision(proposer="sweeper", actor="erin", decision="reject",
                                 earlier={"dave": "approve"}, required=2)
        assert no.event is Event.REJECTED
