"""Unit tests of the pure chain rules (no node)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chains.errors import FinalityRuleInvalid
from chains.model import (
    AmountThreshold,
    Confirmations,
    FinalityEvidence,
    FinalityPolicy,
    FinalizedTag,
    advance_cursor,
    advance_cursor_over,
    confirmations,
    cursor_heights,
    detect_reorg,
    evaluate_deposit_finality,
    evaluate_finality,
    find_common_ancestor,
    is_final,
    log_position,
    parse_finality_rule,
    parse_position,
    rewind_cursor,
)

H_A = "0x" + "aa" * 32
H_B = "0x" + "bb" * 32


class TestConfirmations:
    def test_own_block_is_the_first_confirmation(self) -> None:
        assert confirmations(head_block=100, tx_block=100) == 1

    def test_counts_head_minus_block_plus_one(self) -> None:
        assert confirmations(head_block=111, tx_block=100) == 12

    def test_lagging_head_gives_zero_not_negative(self) -> None:
        assert confirmations(head_block=99, tx_block=100) == 0


class TestIsFinal:
    @staticmethod
    def final(rule: Confirmations | FinalizedTag, *, head: int, finalized: int | None = None,
              canonical: str | None = H_A, tx_block: int = 100) -> bool:
        return is_final(rule, tx_block=tx_block, tx_block_hash=H_A, head_block=head,
                        finalized_block=finalized, canonical_hash=canonical)

    def test_final_at_exactly_n_confirmations(self) -> None:
        assert self.final(Confirmations(12), head=111)  # 111 - 100 + 1 = 12

    def test_not_final_at_n_minus_one(self) -> None:
        assert not self.final(Confirmations(12), head=110)  # 11 confirmations

    def test_one_confirmation_means_included(self) -> None:
        assert self.final(Confirmations(1), head=100)

    def test_reorged_block_is_never_final_by_depth(self) -> None:
        assert not self.final(Confirmations(1), head=1_000, canonical=H_B)

    def test_missing_canonical_block_is_not_final(self) -> None:
        assert not self.final(Confirmations(1), head=1_000, canonical=None)

    def test_finalized_tag_at_the_finalized_height(self) -> None:
        assert self.final(FinalizedTag(), head=200, finalized=100)

    def test_finalized_tag_one_above_the_finalized_height(self) -> None:
        assert not self.final(FinalizedTag(), head=200, finalized=99)

    def test_finalized_tag_needs_the_same_hash(self) -> None:
        assert not self.final(FinalizedTag(), head=200, finalized=150, canonical=H_B)

    def test_finalized_tag_without_finalized_head(self) -> None:
        assert not self.final(FinalizedTag(), head=200, finalized=None)

    def test_hash_comparison_ignores_case(self) -> None:
        assert self.final(FinalizedTag(), head=200, finalized=150, canonical="0x" + H_A[2:].upper())

    @given(st.integers(1, 10_000), st.integers(0, 10**9), st.integers(0, 20_000))
    def test_depth_rule_matches_the_definition(self, n: int, tx_block: int, extra: int) -> None:
        head = tx_block + extra
        assert self.final(Confirmations(n), head=head, tx_block=tx_block) == (
            head - tx_block + 1 >= n)


class TestEvidence:
    def test_evidence_records_rule_and_numbers(self) -> None:
        final, evidence = evaluate_finality(
            Confirmations(3), tx_block=10, tx_block_hash="0x" + H_A[2:].upper(),
            head_block=12, finalized_block=8, canonical_hash=H_A,
        )
        assert final
        assert evidence == FinalityEvidence("confirmations:3", 10, H_A, 12, 8, 3)
        assert evidence.to_json() == {
            "rule": "confirmations:3", "tx_block": 10, "tx_block_hash": H_A,
            "head_block": 12, "finalized_block": 8, "confirmations": 3,
        }


class TestParseFinalityRule:
    @pytest.mark.parametrize("value, expected", [
        ("confirmations:12", Confirmations(12)),
        (" Confirmations:1 ", Confirmations(1)),
        ({"confirmations": 12}, Confirmations(12)),
        ({"rule": "confirmations", "required": 3}, Confirmations(3)),
        ("finalized", FinalizedTag()),
        ("finalized_tag", FinalizedTag()),
        ({"finalized": True}, FinalizedTag()),
        ({"rule": "finalized"}, FinalizedTag()),
        (Confirmations(5), Confirmations(5)),
    ])
    def test_accepted_forms(self, value: object, expected: object) -> None:
        assert parse_finality_rule(value) == expected  # type: ignore[arg-type]

    @pytest.mark.parametrize("value", [
        "confirmations", "confirmations:0", "confirmations:-1", "confirmations:1.5",
        "confirmations:", "finalized:3", "safe", "", {"confirmations": 0},
        {"confirmations": True}, {"confirmations": "12"}, {"finalized": False},
        {"confirmations": 3, "finalized": True}, 12, None,
    ])
    def test_rejected_forms(self, value: object) -> None:
        with pytest.raises(FinalityRuleInvalid):
            parse_finality_rule(value)  # type: ignore[arg-type]

    @pytest.mark.parametrize("rule", [Confirmations(1), Confirmations(64), FinalizedTag()])
    def test_text_form_round_trips(self, rule: Confirmations | FinalizedTag) -> None:
        assert parse_finality_rule(str(rule)) == rule


class TestPositions:
    def test_log_position_form(self) -> None:
        assert log_position(0) == "log:0"
        assert parse_position("log:12") == ("log", 12)
        assert parse_position("call:0") == ("call", 0)

    @pytest.mark.parametrize("text", ["log", "log:", "log:-1", "event:1", "2", "log:1:2"])
    def test_invalid_positions(self, text: str) -> None:
        with pytest.raises(ValueError):
            parse_position(text)


# --------------------------------------------------------------------------- reorgs


@st.composite
def fork_scenarios(draw: st.DrawFn) -> tuple[list[tuple[int, str]], dict[int, str], int | None]:
    """A cursor over heights [low, tip] and a node chain that forked at some height.

    Returns (cursor, canonical, expected fork point). The node's chain shares the cursor's
    hashes up to the fork height and has different hashes above it; it may be shorter or
    longer than the cursor. A fork below the cursor's lowest height means no common ancestor.
    """
    low = draw(st.integers(0, 1_000))
    length = draw(st.integers(1, 40))
    tip = low + length - 1
    ours = {h: f"0x{h:064x}" for h in range(low, tip + 1)}
    fork = draw(st.integers(low - 3, tip))  # highest shared height; < low: deeper than us
    node_tip = draw(st.integers(max(fork, low - 3), tip + 5))
    canonical = {h: (ours[h] if h <= fork and h in ours else f"0x{h + 10**6:064x}")
                 for h in range(max(0, low - 3), node_tip + 1)}
    if draw(st.booleans()):  # The node may report hashes in upper case.
        canonical = {h: "0x" + x[2:].upper() for h, x in canonical.items()}
    cursor = list(ours.items())
    cursor = draw(st.permutations(cursor))
    expected = fork if fork >= low else None
    return cursor, canonical, expected


class TestFindCommonAncestor:
    @given(fork_scenarios())
    def test_returns_the_fork_point(
        self, scenario: tuple[list[tuple[int, str]], dict[int, str], int | None]
    ) -> None:
        cursor, canonical, expected = scenario
        assert find_common_ancestor(cursor, canonical) == expected

    @given(fork_scenarios())
    def test_result_is_a_matching_cursor_height_and_nothing_above_matches(
        self, scenario: tuple[list[tuple[int, str]], dict[int, str], int | None]
    ) -> None:
        cursor, canonical, _ = scenario
        found = find_common_ancestor(cursor, canonical)
        matches = [h for h, x in cursor if canonical.get(h, "").lower() == x.lower()]
        assert found == (max(matches) if matches else None)

    def test_no_reorg_returns_the_tip(self) -> None:
        cursor = [(5, H_A), (6, H_B)]
        assert find_common_ancestor(cursor, {5: H_A, 6: H_B, 7: "0x07"}) == 6

    def test_empty_cursor(self) -> None:
        assert find_common_ancestor([], {1: H_A}) is None

    def test_detect_reorg_by_parent_hash(self) -> None:
        assert not detect_reorg((10, H_A), "0x" + H_A[2:].upper())
        assert detect_reorg((10, H_A), H_B)


class TestCursor:
    def test_advance_keeps_the_highest_entries(self) -> None:
        cursor: tuple[tuple[int, str], ...] = ()
        for height in range(10):
            cursor = advance_cursor(cursor, height, f"0x{height:02x}", keep=3)
        assert cursor == ((7, "0x07"), (8, "0x08"), (9, "0x09"))

    def test_advance_replaces_a_branch(self) -> None:
        cursor = ((1, "0x01"), (2, "0x02"), (3, "0x03"))
        assert advance_cursor(cursor, 2, "0xBEEF", keep=10) == ((1, "0x01"), (2, "0xbeef"))

    @given(st.lists(st.tuples(st.integers(0, 30), st.sampled_from(["0xA", "0xb"])),
                    max_size=12),
           st.lists(st.tuples(st.integers(0, 30), st.sampled_from(["0xC", "0xd"])),
                    max_size=40),
           st.integers(1, 8))
    def test_advance_over_many_blocks_is_advancing_by_each(
            self, cursor: list[tuple[int, str]], blocks: list[tuple[int, str]],
            keep: int) -> None:
        # The definition, one block at a time: drop entries at or above it, append, keep the
        # highest ``keep``. Any cursor and any order of blocks (a scan's are ascending).
        expected: tuple[tuple[int, str], ...] = tuple(cursor)
        for height, block_hash in blocks:
            kept = [(h, x) for h, x in expected if h < height] + [(height, block_hash.lower())]
            expected = tuple(sorted(kept)[-keep:])
        if not blocks:
            expected = tuple(sorted(cursor))
        assert advance_cursor_over(cursor, blocks, keep=keep) == expected

    def test_rewind_and_heights(self) -> None:
        cursor = ((1, "0x01"), (2, "0x02"), (3, "0x03"))
        assert rewind_cursor(cursor, 1) == ((1, "0x01"),)
        assert cursor_heights(cursor) == [3, 2, 1]


class TestFinalityPolicy:
    big = AmountThreshold("ETH", 100 * 10**18, "100", Confirmations(64))
    huge = AmountThreshold("ETH", 1000 * 10**18, "1000", FinalizedTag())
    policy = FinalityPolicy(Confirmations(12), (huge, big))

    def test_both_sides_of_each_threshold(self) -> None:
        below = self.big.at_least_minor - 1
        assert self.policy.select("ETH", below) == (Confirmations(12), None)
        assert self.policy.select("ETH", self.big.at_least_minor) == (Confirmations(64), self.big)
        assert self.policy.select("ETH", self.huge.at_least_minor - 1) == (Confirmations(64),
                                                                           self.big)
        assert self.policy.select("ETH", 10**30) == (FinalizedTag(), self.huge)

    def test_other_assets_and_no_amount_get_the_chains_rule(self) -> None:
        assert self.policy.select("USDC", 10**30) == (Confirmations(12), None)
        assert self.policy.select("ETH", None) == (Confirmations(12), None)
        assert self.policy.select(None, 10**30) == (Confirmations(12), None)

    def test_strictest_and_finalized_needed(self) -> None:
        assert self.policy.strictest == FinalizedTag() and self.policy.needs_finalized
        only = FinalityPolicy(Confirmations(3), (self.big,))
        assert only.strictest == Confirmations(64) and not only.needs_finalized
        assert FinalityPolicy(Confirmations(3)).strictest == Confirmations(3)

    def test_evidence_names_the_threshold(self) -> None:
        args = {"tx_block": 100, "tx_block_hash": "0xAB", "head_block": 163,
                "finalized_block": None, "canonical_hash": "0xab"}
        final, evidence = evaluate_deposit_finality(
            self.policy, asset="ETH", amount_minor=150 * 10**18, **args)  # type: ignore[arg-type]
        assert final and evidence.confirmations == 64
        assert evidence.rule == "confirmations:64 (amount >= 100 ETH)"
        assert evidence.to_json()["threshold"] == {
            "asset": "ETH", "at_least": "100", "at_least_minor": str(100 * 10**18),
            "rule": "confirmations:64"}
        final, evidence = evaluate_deposit_finality(
            self.policy, asset="ETH", amount_minor=150 * 10**18,
            **{**args, "head_block": 162})  # type: ignore[arg-type]
        assert not final
        final, evidence = evaluate_deposit_finality(
            self.policy, asset="ETH", amount_minor=1, **args)  # type: ignore[arg-type]
        assert final and evidence.rule == "confirmations:12"
        assert "threshold" not in evidence.to_json()
