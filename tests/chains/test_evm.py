"""Transfer decoding against real receipts and logs from anvil."""

from __future__ import annotations

import pytest

from chains.evm import (
    TRANSFER_TOPIC,
    decode_block_logs_transfers,
    decode_native_transfer,
    decode_receipt_transfers,
    erc20_transfer_calldata,
    is_erc20_transfer_log,
)
from chains.model import ObservedTransfer
from devtools.anvil import DEV_ACCOUNTS, AnvilNode, Contract

pytestmark = pytest.mark.anvil

ALICE, BOB, CAROL, DAVE, ERIN = DEV_ACCOUNTS


def _pad(address: str) -> str:
    return "0x" + "00" * 12 + address[2:]


class TestReceiptTransfers:
    def test_several_transfers_in_one_transaction(self, anvil_session: AnvilNode,
                                                  weth: Contract) -> None:
        anvil_session.transact(weth, "mint", [ALICE, 2**127])
        amounts = [1, 2**126, 3]
        tx_hash = anvil_session.transact(weth, "batchTransfer", [[BOB, CAROL, DAVE], amounts])
        receipt = anvil_session.receipt(tx_hash)
        transfers = decode_receipt_transfers(receipt)
        assert [t.position for t in transfers] == ["log:0", "log:1", "log:2"]
        assert [t.to_address for t in transfers] == [BOB, CAROL, DAVE]
        assert [t.value for t in transfers] == amounts
        assert transfers[1].value == 85070591730234615865843651857942052864  # 2**126, exact
        first = transfers[0]
        assert first == ObservedTransfer(
            token=weth.address, from_address=ALICE, to_address=BOB, value=1, tx_hash=tx_hash,
            block_number=int(receipt["blockNumber"], 16), block_hash=receipt["blockHash"],
            position="log:0", log_index=int(receipt["logs"][0]["logIndex"], 16),
        )

    @pytest.mark.parametrize("token_name, amount", [
        ("usdc", 30_000_000),            # 30 USDC at 6 decimals
        ("weth", 5 * 10**18 + 1),        # 5.000000000000000001 WETH at 18 decimals
    ])
    def test_six_and_eighteen_decimals(self, anvil_session: AnvilNode, token_name: str,
                                       amount: int, request: pytest.FixtureRequest) -> None:
        token: Contract = request.getfixturevalue(token_name)
        assert anvil_session.call(token, "decimals") == (6 if token_name == "usdc" else 18)
        anvil_session.transact(token, "mint", [BOB, amount])
        tx_hash = anvil_session.transact(token, "transfer", [ERIN, amount], BOB)
        (transfer,) = decode_receipt_transfers(anvil_session.receipt(tx_hash))
        assert (transfer.token, transfer.from_address, transfer.to_address, transfer.value) == (
            token.address, BOB, ERIN, amount)

    def test_mint_of_two_to_the_200_is_exact(self, anvil_session: AnvilNode,
                                             usdc: Contract) -> None:
        tx_hash = anvil_session.transact(usdc, "mint", [CAROL, 2**200])
        (transfer,) = decode_receipt_transfers(anvil_session.receipt(tx_hash))
        assert transfer.value == 2**200
        assert transfer.from_address == "0x" + "00" * 20

    def test_erc721_transfer_is_skipped(self, anvil_session: AnvilNode) -> None:
        nft = anvil_session.deploy("TestNft")
        receipt = anvil_session.receipt(anvil_session.transact(nft, "mint", [BOB, 7]))
        (log,) = receipt["logs"]
        assert log["topics"][0] == TRANSFER_TOPIC and len(log["topics"]) == 4
        assert not is_erc20_transfer_log(log)
        assert decode_receipt_transfers(receipt) == []

    def test_reverted_transfer_yields_nothing(self, anvil_session: AnvilNode,
                                              usdc: Contract) -> None:
        anvil_session.transact(usdc, "mint", [DAVE, 10])
        anvil_session.transact(usdc, "setBlocked", [ERIN, True])
        try:
            # Fixed gas: estimation of a reverting call would fail before sending.
            tx_hash = anvil_session.transact(usdc, "transfer", [ERIN, 10], DAVE, gas=100_000)
        finally:
            anvil_session.transact(usdc, "setBlocked", [ERIN, False])
        receipt = anvil_session.receipt(tx_hash)
        assert receipt["status"] == "0x0"
        assert decode_receipt_transfers(receipt) == []

    def test_approval_is_not_a_transfer(self, anvil_session: AnvilNode, usdc: Contract) -> None:
        receipt = anvil_session.receipt(anvil_session.transact(usdc, "approve", [BOB, 5]))
        assert len(receipt["logs"]) == 1
        assert decode_receipt_transfers(receipt) == []

    def test_calldata_helper_moves_tokens(self, anvil_session: AnvilNode,
                                          usdc: Contract) -> None:
        anvil_session.transact(usdc, "mint", [ALICE, 77])
        tx_hash = anvil_session.send_transaction(
            {"from": ALICE, "to": usdc.address, "data": erc20_transfer_calldata(DAVE, 77)})
        (transfer,) = decode_receipt_transfers(anvil_session.receipt(tx_hash))
        assert (transfer.to_address, transfer.value) == (DAVE, 77)


class TestPositionVersusLogIndex:
    def test_position_is_in_receipt_not_block_wide(self, anvil: AnvilNode) -> None:
        token = anvil.deploy("TestToken", "Tether", "USDT", 6)
        anvil.transact(token, "mint", [ALICE, 1_000])
        anvil.transact(token, "mint", [BOB, 1_000])
        anvil.set_automine(False)
        # Another transaction with a log goes first in the same block, so our logs are
        # block-wide logIndex 1 and 2 but receipt positions 0 and 1.
        first = anvil.transact(token, "transfer", [ERIN, 1], BOB)
        ours = anvil.transact(token, "batchTransfer", [[CAROL, DAVE], [2, 3]], ALICE)
        anvil.mine(1)
        receipt = anvil.receipt(ours)
        assert receipt["blockNumber"] == anvil.receipt(first)["blockNumber"]
        assert receipt["transactionIndex"] == "0x1"
        transfers = decode_receipt_transfers(receipt)
        assert [t.position for t in transfers] == ["log:0", "log:1"]
        assert [t.log_index for t in transfers] == [1, 2]

        # Unfiltered eth_getLogs of the block gives the same positions without receipts.
        block = int(receipt["blockNumber"], 16)
        from_logs = decode_block_logs_transfers(anvil.rpc.get_logs(block, block))
        assert from_logs == decode_receipt_transfers(anvil.receipt(first)) + transfers

        # A topic filter hides the transaction's earlier log: positions computed from
        # filtered logs are wrong, which is why the docstring demands unfiltered logs.
        filtered = anvil.rpc.get_logs(block, block, topics=[TRANSFER_TOPIC, None, _pad(DAVE)])
        (wrong,) = decode_block_logs_transfers(filtered)
        assert wrong.position == "log:0" != transfers[1].position


class TestNativeTransfers:
    def test_top_level_value_is_call_0(self, anvil_session: AnvilNode) -> None:
        tx_hash = anvil_session.send_eth(ALICE, ERIN, 10**18)
        tx = anvil_session.rpc.get_transaction(tx_hash)
        assert tx is not None
        receipt = anvil_session.receipt(tx_hash)
        transfer = decode_native_transfer(tx, receipt)
        assert transfer == ObservedTransfer(
            token=None, from_address=ALICE, to_address=ERIN, value=10**18, tx_hash=tx_hash,
            block_number=int(receipt["blockNumber"], 16), block_hash=receipt["blockHash"],
            position="call:0",
        )

    def test_zero_value_and_contract_creation_are_not_transfers(
        self, anvil_session: AnvilNode, usdc: Contract
    ) -> None:
        tx_hash = anvil_session.transact(usdc, "approve", [BOB, 1])
        tx = anvil_session.rpc.get_transaction(tx_hash)
        assert tx is not None
        assert decode_native_transfer(tx, anvil_session.receipt(tx_hash)) is None
        creation = dict(tx, to=None, value="0x5")
        assert decode_native_transfer(creation, anvil_session.receipt(tx_hash)) is None

    def test_reverted_value_transfer_is_not_a_transfer(self, anvil_session: AnvilNode,
                                                       usdc: Contract) -> None:
        # TestToken has no payable function: sending value to it reverts.
        tx_hash = anvil_session.send_transaction(
            {"from": ALICE, "to": usdc.address, "value": "0x1", "gas": hex(100_000)})
        receipt = anvil_session.receipt(tx_hash)
        tx = anvil_session.rpc.get_transaction(tx_hash)
        assert receipt["status"] == "0x0" and tx is not None
        assert decode_native_transfer(tx, receipt) is None
