"""The judgement of custody against the chain on plain values (``reconcile.chain_model``): a
difference is explained only within what the named movements in flight allow."""

from __future__ import annotations

from reconcile.chain_model import (
    GROUP,
    NAMED_MAX,
    NamedMovement,
    Position,
    evidence,
    holder_of,
    judge,
    verdicts,
)

HOT, COLD, D1 = "0x" + "aa" * 20, "0x" + "cc" * 20, "0x" + "01" * 20
TOKEN = "0x" + "70" * 20


def _pos(on_chain: int, expected: int, *, token: str | None = None,
         addresses: tuple[str, ...] = (HOT,), **flows: int) -> Position:
    return Position("dev", addresses[0] if len(addresses) == 1 else GROUP, addresses,
                    "ETH" if token is None else "USDC", token, 18, on_chain, expected, **flows)


class TestJudge:
    def test_no_difference_and_nothing_moving_is_explained(self) -> None:
        assert judge(_pos(10, 10), [], incoming_known=True).explained

    def test_any_difference_with_nothing_moving_is_not(self) -> None:
        assert not judge(_pos(9, 10), [], incoming_known=True).explained
        assert not judge(_pos(11, 10), [], incoming_known=True).explained

    def test_outgoing_and_gas_bound_the_difference_below(self) -> None:
        p = _pos(10 - 7 - 3, 10, outgoing=7, gas_max=3)
        v = judge(p, [], incoming_known=True)
        assert (v.low, v.high, v.explained) == (-10, 0, True)
        assert not judge(_pos(10 - 7 - 4, 10, outgoing=7, gas_max=3), [],
                         incoming_known=True).explained

    def test_incoming_and_held_bound_it_above(self) -> None:
        assert judge(_pos(10 + 5 + 2, 10, incoming=5, held=2), [], incoming_known=True).explained
        assert not judge(_pos(10 + 8, 10, incoming=5, held=2), [],
                         incoming_known=True).explained
        # Something moving in does not excuse money that left.
        assert not judge(_pos(9, 10, incoming=5), [], incoming_known=True).explained

    def test_an_unscanned_block_lifts_only_the_upper_bound(self) -> None:
        assert judge(_pos(10**6, 10), [], incoming_known=False).explained
        v = judge(_pos(9, 10), [], incoming_known=False)
        assert (v.low, v.high, v.explained) == (0, None, False)


class TestHolders:
    def test_a_lone_hot_wallet_is_its_own_holder_else_the_group(self) -> None:
        assert holder_of(HOT, [HOT]) == HOT
        assert holder_of(HOT, [HOT, COLD]) == GROUP
        assert holder_of(D1, [HOT]) == D1
        assert _pos(1, 1).subject == f"custody:dev:{HOT}:ETH"
        assert _pos(1, 1, addresses=(HOT, COLD)).subject == "custody:dev:hot+cold:ETH"

    def test_movements_are_named_where_they_move_the_asset_or_pay_gas(self) -> None:
        eth = _pos(1, 1, addresses=(D1,))
        usdc = _pos(1, 1, addresses=(D1,), token=TOKEN)
        token_sweep = NamedMovement("sweep", 1, "broadcast", D1, HOT, TOKEN, 5, gas_max=2)
        top_up = NamedMovement("gas_top_up", 2, "included", HOT, D1, None, 3, gas_max=1)
        elsewhere = NamedMovement("withdrawal", 3, "broadcast", HOT, "0x" + "ee" * 20, None, 4)
        eth_v, usdc_v = verdicts([eth, usdc], [token_sweep, top_up, elsewhere],
                                 incoming_known=True)
        assert [m.id for m in eth_v.movements] == [1, 2]  # the sweep's gas, the top-up
        assert [m.id for m in usdc_v.movements] == [1]

    def test_evidence_names_bounds_and_at_most_some_movements(self) -> None:
        many = [NamedMovement("deposit", i, "included", "0x" + "ee" * 20, HOT, None, 1)
                for i in range(NAMED_MAX + 5)]
        v = judge(_pos(7, 10, incoming=len(many)), many, incoming_known=True)
        e = evidence(v, {"block_number": 12})
        assert e["block_number"] == 12 and e["difference"] == "-3"
        assert (e["allowed_low"], e["allowed_high"]) == ("0", str(len(many)))
        assert e["movements_in_flight"] == NAMED_MAX + 5
        assert len(e["movements"]) == NAMED_MAX  # type: ignore[arg-type]


class TestFindings:
    def test_a_group_finding_says_what_each_of_its_addresses_holds(self) -> None:
        from reconcile.custody import CustodyCheck

        group = judge(_pos(7, 10, addresses=(HOT, COLD)), [], incoming_known=True)
        alone = judge(_pos(7, 10, addresses=(D1,)), [], incoming_known=True)
        fine = judge(_pos(10, 10, addresses=(HOT,)), [], incoming_known=True)
        check = CustodyCheck("dev", "confirmations:3", 40, "0x" + "ab" * 32, 42,
                             (group, alone, fine), {(HOT, "ETH"): 5, (COLD, "ETH"): 2})
        first, second = check.findings
        assert (first.type, first.subject) == ("custody_chain_mismatch",
                                               "custody:dev:hot+cold:ETH")
        assert (first.expected, first.observed) == ("10", "7")
        assert first.evidence["on_chain_by_address"] == {HOT: "5", COLD: "2"}
        assert first.evidence["block_number"] == 40 and first.evidence["watcher_block"] == 42
        assert second.subject == f"custody:dev:{D1}:ETH"
        assert "on_chain_by_address" not in second.evidence
