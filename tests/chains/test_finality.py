"""Finality rules evaluated on what a real anvil reports (``finalized`` = latest - 4 here)."""

from __future__ import annotations

import pytest

from chains.model import (
    Confirmations,
    FinalityEvidence,
    FinalityRule,
    FinalizedTag,
    evaluate_finality,
)
from devtools.anvil import DEV_ACCOUNTS, AnvilNode

pytestmark = pytest.mark.anvil

ALICE, BOB = DEV_ACCOUNTS[:2]


def observe(node: AnvilNode, rule: FinalityRule, tx_block: int,
            tx_block_hash: str) -> tuple[bool, FinalityEvidence]:
    """Read head, finalized head and the canonical hash the way a watcher does, then decide."""
    head = node.rpc.block_number()
    finalized = node.rpc.get_block("finalized")
    canonical = node.rpc.get_block(tx_block)
    return evaluate_finality(
        rule, tx_block=tx_block, tx_block_hash=tx_block_hash, head_block=head,
        finalized_block=None if finalized is None else finalized.number,
        canonical_hash=None if canonical is None else canonical.hash,
    )


def _mined_transfer(node: AnvilNode) -> tuple[int, str]:
    receipt = node.receipt(node.send_eth(ALICE, BOB, 1))
    return int(receipt["blockNumber"], 16), receipt["blockHash"]


class TestOnAnvil:
    def test_confirmations_final_at_exactly_n(self, anvil: AnvilNode) -> None:
        block, block_hash = _mined_transfer(anvil)
        rule = Confirmations(3)
        seen = []
        for _ in range(3):
            final, evidence = observe(anvil, rule, block, block_hash)
            seen.append((evidence.confirmations, final))
            anvil.mine(1)
        assert seen == [(1, False), (2, False), (3, True)]

    def test_finalized_tag_follows_the_node(self, anvil: AnvilNode) -> None:
        block, block_hash = _mined_transfer(anvil)
        lag = 2 * anvil.slots_in_an_epoch
        anvil.mine(lag - 1)
        final, evidence = observe(anvil, FinalizedTag(), block, block_hash)
        assert not final and evidence.finalized_block == block - 1
        anvil.mine(1)
        final, evidence = observe(anvil, FinalizedTag(), block, block_hash)
        assert final
        assert evidence.to_json() == {
            "rule": "finalized", "tx_block": block, "tx_block_hash": block_hash,
            "head_block": block + lag, "finalized_block": block, "confirmations": lag + 1,
        }

    def test_reorged_block_is_not_final_under_either_rule(self, anvil: AnvilNode) -> None:
        block, block_hash = _mined_transfer(anvil)
        anvil.reorg(1)  # Replaces our block; anvil drops the transaction.
        anvil.mine(10)
        for rule in (Confirmations(1), FinalizedTag()):
            final, evidence = observe(anvil, rule, block, block_hash)
            assert not final and evidence.confirmations == 11

    def test_deep_reorg_rewrites_a_finalized_block(self, anvil: AnvilNode) -> None:
        # anvil does not protect finality; a watcher must notice by hash, not trust heights.
        block, block_hash = _mined_transfer(anvil)
        anvil.mine(2 * anvil.slots_in_an_epoch)
        assert observe(anvil, FinalizedTag(), block, block_hash)[0]
        anvil.reorg(anvil.head() - block + 1)
        assert not observe(anvil, FinalizedTag(), block, block_hash)[0]
