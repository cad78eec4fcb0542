"""Real reorgs with ``anvil_reorg``: re-landed transactions and the fork-point search."""

from __future__ import annotations

import pytest

from chains.evm import decode_receipt_transfers, encode_call
from chains.model import advance_cursor, cursor_heights, detect_reorg, find_common_ancestor
from devtools.anvil import DEV_ACCOUNTS, AnvilNode

pytestmark = pytest.mark.anvil

ALICE, BOB, CAROL, DAVE, _ = DEV_ACCOUNTS


def _cursor(node: AnvilNode, low: int, high: int) -> tuple[tuple[int, str], ...]:
    cursor: tuple[tuple[int, str], ...] = ()
    for header in node.rpc.get_headers(range(low, high + 1)):
        assert header is not None
        cursor = advance_cursor(cursor, header.number, header.hash, keep=64)
    return cursor


class TestRelandedTransaction:
    def test_resent_raw_transaction_lands_again_with_the_same_hash(
        self, anvil: AnvilNode
    ) -> None:
        token = anvil.deploy("TestToken", "USD Coin", "USDC", 6)
        anvil.transact(token, "mint", [ALICE, 10**6])
        anvil.set_automine(False)
        ours = anvil.transact(token, "transfer", [CAROL, 10**6], ALICE)
        before = anvil.receipt(ours)  # mines it
        anvil.mine(2)
        raw = anvil.raw_transaction(ours)

        anvil.reorg(3)
        assert anvil.rpc.get_receipt(ours) is None  # dropped, not back in the mempool
        assert anvil.rpc.get_transaction(ours) is None

        assert anvil.send_raw(raw) == ours
        after = anvil.receipt(ours)
        assert after["blockNumber"] != before["blockNumber"]
        assert after["blockHash"] != before["blockHash"]
        (old,) = decode_receipt_transfers(before)
        (new,) = decode_receipt_transfers(after)
        # The deposit key (tx hash, position) survives; the block does not.
        assert (new.tx_hash, new.position, new.value) == (old.tx_hash, old.position, old.value)

    def test_relanded_behind_another_transaction_keeps_its_position(
        self, anvil: AnvilNode
    ) -> None:
        token = anvil.deploy("TestToken", "USD Coin", "USDC", 6)
        anvil.transact(token, "mint", [ALICE, 100])
        anvil.transact(token, "mint", [BOB, 100])
        ours = anvil.transact(token, "transfer", [CAROL, 100], ALICE)
        before = anvil.receipt(ours)
        raw = anvil.raw_transaction(ours)
        # Rebuild the head block with BOB's token transfer in front of ours.
        front = {"from": BOB, "to": token.address,
                 "data": encode_call(token.abi, "transfer", [DAVE, 1])}
        anvil.reorg(1, [(front, 0), (raw, 0)])
        after = anvil.receipt(ours)
        assert after["blockNumber"] == before["blockNumber"]
        assert after["blockHash"] != before["blockHash"]
        assert (before["transactionIndex"], after["transactionIndex"]) == ("0x0", "0x1")
        (old,) = decode_receipt_transfers(before)
        (new,) = decode_receipt_transfers(after)
        assert (old.log_index, new.log_index) == (0, 1)
        assert old.position == new.position == "log:0"


class TestForkPoint:
    @staticmethod
    def _chain_with_transactions(node: AnvilNode, blocks: int) -> None:
        # Blocks with transactions: replacement blocks then get different hashes for sure.
        for _ in range(blocks):
            node.send_eth(ALICE, BOB, 1)

    def test_common_ancestor_after_a_real_reorg(self, anvil: AnvilNode) -> None:
        self._chain_with_transactions(anvil, 10)
        cursor = _cursor(anvil, 4, 10)
        anvil.reorg(3)  # Replaces blocks 8, 9 and 10.
        canonical = anvil.rpc.canonical_hashes(cursor_heights(cursor))
        assert [h for h, x in cursor if canonical[h] != x] == [8, 9, 10]
        assert find_common_ancestor(cursor, canonical) == 7

    def test_parent_hash_reveals_the_reorg(self, anvil: AnvilNode) -> None:
        self._chain_with_transactions(anvil, 5)
        tip = _cursor(anvil, 5, 5)[-1]
        anvil.reorg(2)
        anvil.mine(1)
        next_block = anvil.rpc.get_block(tip[0] + 1)
        assert next_block is not None and detect_reorg(tip, next_block.parent_hash)

    def test_no_reorg_means_no_detection(self, anvil: AnvilNode) -> None:
        self._chain_with_transactions(anvil, 3)
        tip = _cursor(anvil, 3, 3)[-1]
        anvil.mine(1)
        next_block = anvil.rpc.get_block(4)
        assert next_block is not None and not detect_reorg(tip, next_block.parent_hash)

    def test_reorg_deeper_than_the_cursor(self, anvil: AnvilNode) -> None:
        self._chain_with_transactions(anvil, 10)
        cursor = _cursor(anvil, 8, 10)
        anvil.reorg(5)
        canonical = anvil.rpc.canonical_hashes(cursor_heights(cursor))
        assert find_common_ancestor(cursor, canonical) is None
