"""The managed anvil node itself: lifecycle and dev helpers."""

from __future__ import annotations

import pytest

from chains.errors import RpcUnavailable
from devtools.anvil import DEV_ACCOUNTS, AnvilNode, AnvilUnavailable, find_anvil_binary

pytestmark = pytest.mark.anvil

ALICE, BOB = DEV_ACCOUNTS[:2]


class TestLifecycle:
    def test_binary_is_found(self) -> None:
        assert find_anvil_binary(install=False)

    def test_context_manager_stops_the_process(self) -> None:
        with AnvilNode.start(chain_id=1337, no_mining=True) as node:
            assert node.rpc.chain_id() == 1337
            assert node.accounts[: len(DEV_ACCOUNTS)] == list(DEV_ACCOUNTS)
            assert not node.automine
            node.send_eth(ALICE, BOB, 1)  # returns at once: no block with --no-mining
            assert node.head() == 0
        assert node.process.poll() is not None
        assert not node.answers()
        with pytest.raises(RpcUnavailable):
            node.rpc.block_number()
        node.stop()  # idempotent

    def test_failed_start_reports_anvil_output(self) -> None:
        with pytest.raises(AnvilUnavailable, match="--no-such-flag"):
            AnvilNode.start(extra_args=["--no-such-flag"])


class TestHelpers:
    def test_mine_snapshot_revert_rollback(self, anvil: AnvilNode) -> None:
        assert anvil.mine(5) == 5
        snapshot = anvil.snapshot()
        anvil.mine(3)
        assert anvil.revert(snapshot) and anvil.head() == 5
        anvil.rollback(2)
        assert anvil.head() == 3
        anvil.rollback()
        assert anvil.head() == 2

    def test_finalized_trails_latest(self, anvil: AnvilNode) -> None:
        anvil.mine(10)
        assert anvil.finalized_block() == 10 - 2 * anvil.slots_in_an_epoch

    def test_automine_off_batches_transactions_into_one_block(self, anvil: AnvilNode) -> None:
        anvil.set_automine(False)
        hashes = [anvil.send_eth(ALICE, BOB, i + 1) for i in range(3)]
        assert anvil.rpc.get_receipt(hashes[0]) is None
        anvil.mine(1)
        blocks = {anvil.receipt(h)["blockNumber"] for h in hashes}
        assert blocks == {"0x1"}
        anvil.set_automine(True)
        receipt = anvil.receipt(anvil.send_eth(ALICE, BOB, 1))
        assert receipt["blockNumber"] == "0x2"

    def test_deploy_transact_call(self, anvil: AnvilNode) -> None:
        token = anvil.deploy("TestToken", "Token", "TKN", 18)
        assert anvil.call(token, "symbol") == "TKN"
        anvil.transact(token, "mint", [BOB, 2**200])
        assert anvil.call(token, "balanceOf", [BOB]) == 2**200
        assert anvil.call(token, "totalSupply") == 2**200
