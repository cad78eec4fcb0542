"""The shared mechanism's pure core: fee caps and the verdict on a movement's attempts."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from outgoing.model import (
    AttemptView,
    FeeCaps,
    Verdict,
    bump_due,
    bumped_fee_caps,
    initial_fee_caps,
    judge,
    max_gas_cost,
)

NOW = datetime(2026, 12, 2, tzinfo=UTC)


def view(**kw: object) -> AttemptView:
    base: dict[str, object] = dict(attempt_id=1, tx_hash="0x1", nonce=7, receipt_block=None,
                                   receipt_block_hash=None, succeeded=None, known_to_node=False)
    base.update(kw)
    return AttemptView(**base)  # type: ignore[arg-type]


def test_fee_bump_raises_both_caps() -> None:
    prev = FeeCaps(100, 10)
    assert bumped_fee_caps(prev, FeeCaps(50, 5), 25) == FeeCaps(125, 13)
    assert bumped_fee_caps(prev, FeeCaps(500, 50), 25) == FeeCaps(500, 50)


def test_initial_caps_are_capped_and_cover_the_tip() -> None:
    assert initial_fee_caps(10, 2, 1_000) == FeeCaps(22, 2)
    assert initial_fee_caps(10, 2, 15) == FeeCaps(15, 2)
    assert initial_fee_caps(0, 5, 3) == FeeCaps(5, 3)
    assert max_gas_cost(21_000, FeeCaps(22, 2)) == 21_000 * 22


def test_a_receipt_is_landed_whatever_the_nonces_say() -> None:
    j = judge((view(), view(attempt_id=2, receipt_block=9, receipt_block_hash="0xb")),
              nonce=7, finalized_nonce=8, latest_nonce=8)
    assert (j.verdict, j.attempt_id) == (Verdict.LANDED, 2)


def test_nonce_consumed_at_the_final_height_without_our_receipt_is_consumed_elsewhere() -> None:
    assert judge((view(known_to_node=True),), nonce=7, finalized_nonce=8,
                 latest_nonce=8).verdict is Verdict.CONSUMED_ELSEWHERE


def test_consumed_only_at_latest_waits_for_finality() -> None:
    assert judge((view(),), nonce=7, finalized_nonce=7,
                 latest_nonce=8).verdict is Verdict.CONSUMED_AT_LATEST


def test_known_to_the_node_is_pending_and_nothing_known_is_not_found() -> None:
    assert judge((view(known_to_node=True),), nonce=7, finalized_nonce=7,
                 latest_nonce=7).verdict is Verdict.PENDING
    assert judge((view(),), nonce=7, finalized_nonce=7,
                 latest_nonce=7).verdict is Verdict.NOT_FOUND


def test_bump_due_after_the_wait_and_within_the_attempts() -> None:
    last = NOW - timedelta(seconds=30)
    assert bump_due(last_attempt_at=last, now=NOW, bump_after_s=30, attempts=1, attempts_max=2)
    assert not bump_due(last_attempt_at=last, now=NOW, bump_after_s=31, attempts=1,
                        attempts_max=2)
    assert not bump_due(last_attempt_at=last, now=NOW, bump_after_s=30, attempts=2,
                        attempts_max=2)
