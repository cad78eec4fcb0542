"""Internal transfers on anvil: ETH paid to our addresses by calls inside a transaction.

One transaction through a hand-written splitter (``devtools.forwarders``) pays, in this order:
alice (``call:0.0``), someone else (``call:0.1``), a contract that forwards to carol and then
reverts (``call:0.2``; carol's ``call:0.2.0`` is undone), bob (``call:0.3``) and a contract
that self-destructs to dave (``call:0.4``, dave's ``call:0.4.0``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace

import pytest

from chains.model import parse_finality_rule
from config.uow import UnitOfWork
from deposits import repository as repo
from deposits import scanner, service
from deposits.attestors import NodeReceiptAttestor, Verdict
from deposits.model import DepositState
from devtools import forwarders
from ledger.integrity import verify
from tests.deposits.conftest import ALICE, EVE, Rig

pytestmark = pytest.mark.anvil
ETH = 10**18
OURS = {"call:0.0": "alice", "call:0.3": "bob", "call:0.4.0": "dave"}
PAID = {"alice": 1 * ETH, "bob": 3 * ETH, "dave": ETH // 2}


@dataclass
class Payout:
    """The splitter transaction and where it landed."""

    tx_hash: str
    block: int
    block_hash: str


def pay_out(rig: Rig) -> Payout:
    """Deploy the contracts and send the one splitter transaction (mined in its own block)."""
    node = rig.node
    addr = {u: rig.user(u) for u in ("alice", "bob", "carol", "dave")}
    splitter = forwarders.deploy_runtime(node, forwarders.splitter_runtime())
    reverter = forwarders.deploy_runtime(node, forwarders.reverter_runtime(addr["carol"]))
    doomed = forwarders.deploy_runtime(node, forwarders.selfdestructor_runtime(addr["dave"]))
    tx = forwarders.split(node, splitter, [
        (addr["alice"], PAID["alice"]), (EVE, 5 * ETH), (reverter, 2 * ETH),
        (addr["bob"], PAID["bob"]), (doomed, PAID["dave"])], ALICE)
    receipt = node.receipt(tx)
    assert int(receipt["status"], 16) == 1
    return Payout(tx, int(receipt["blockNumber"], 16), str(receipt["blockHash"]))


@pytest.fixture(params=["debug_traceBlockByHash", "trace_block"])
def traced(request: pytest.FixtureRequest, rig: Rig) -> Rig:
    """The rig with tracing on, through each trace method."""
    rig.chain_options = {"trace_method": request.param}
    return rig


class TestInternalTransfers:
    def test_each_payout_is_a_deposit_at_its_path_reverted_one_is_not(self, traced: Rig) -> None:
        rig = traced
        paid = pay_out(rig)
        report = rig.step()
        assert report.new_deposits == 3
        # No call:0 (the value went to the splitter), nothing for carol (reverted) or eve.
        assert rig.deposits(paid.tx_hash) == dict.fromkeys(OURS, "included")
        rig.mine_to(paid.block + 1)
        rig.step()
        assert rig.deposit_postings() == 0
        rig.mine_to(paid.block + 2)
        report = rig.step()
        assert (report.finals, report.credited) == (3, 3)
        assert rig.deposits(paid.tx_hash) == dict.fromkeys(OURS, "credited")
        for user, amount in PAID.items():
            assert rig.wallet(user, "ETH") == amount
        assert rig.wallet("carol", "ETH") == 0
        assert rig.balance("custody:dev", "ETH") == sum(PAID.values())
        with UnitOfWork(rig.engine) as uow:
            (entry,) = [e for e in service.timeline(uow, "dev", paid.tx_hash)
                        if e.deposit.position == "call:0.3"]
        assert entry.deposit.value == PAID["bob"] and entry.deposit.to_address == rig.user("bob")
        (posted,) = entry.ledger_transactions
        assert posted.idempotency_key == f"deposit:dev:{paid.tx_hash}:call:0.3"
        assert entry.events[-1].evidence["attestation"]["attestor"] == "node"
        rig.mine_to(paid.block + 10)
        rig.step(2)
        assert rig.deposit_postings() == 3
        assert verify(rig.engine).ok

    def test_reorg_moves_the_transaction_to_another_block_same_positions_one_credit(
            self, traced: Rig) -> None:
        rig = traced
        paid = pay_out(rig)
        raw = rig.node.raw_transaction(paid.tx_hash)
        rig.step()
        assert rig.deposits(paid.tx_hash) == dict.fromkeys(OURS, "included")
        rig.node.reorg(1)  # Drops the transaction.
        assert rig.node.rpc.get_receipt(paid.tx_hash) is None
        assert rig.step().rewound_to is not None
        assert rig.deposits(paid.tx_hash) == dict.fromkeys(OURS, "unconfirmed")
        rig.node.mine(1)
        rig.node.send_raw(raw)  # Lands again, one block higher.
        again = rig.node.receipt(paid.tx_hash)
        block = int(again["blockNumber"], 16)
        assert block == paid.block + 2 and again["blockHash"] != paid.block_hash
        rig.step()
        assert rig.deposits(paid.tx_hash) == dict.fromkeys(OURS, "included")
        rig.mine_to(block + 1)
        rig.step()
        assert rig.deposit_postings() == 0  # Counting restarted at the new block.
        rig.mine_to(block + 2)
        rig.step()
        assert rig.deposits(paid.tx_hash) == dict.fromkeys(OURS, "credited")
        for position in OURS:
            assert rig.events(paid.tx_hash, position)[:3] == [
                "transfer_included", "block_reorged_out", "transfer_reincluded"]
        for user, amount in PAID.items():
            assert rig.wallet(user, "ETH") == amount
        assert rig.deposit_postings() == 3
        assert verify(rig.engine).ok

    def test_tracing_off_says_so_and_sees_no_internal_transfer(
            self, rig: Rig, caplog: pytest.LogCaptureFixture) -> None:
        rig.chain_options = {"trace_internal": False}
        with caplog.at_level(logging.WARNING, logger="custody.deposits.watcher"):
            rig.watcher()
        (line,) = [r.getMessage() for r in caplog.records if "trace_internal" in r.getMessage()]
        assert line.startswith("dev: trace_internal is off")
        paid = pay_out(rig)
        rig.mine_to(paid.block + 2)
        report = rig.step()
        assert report.new_deposits == 0 and rig.deposits(paid.tx_hash) == {}

    def test_attestor_rereads_the_trace_at_the_deposit_position(self, traced: Rig) -> None:
        rig = traced
        paid = pay_out(rig)
        rig.mine_to(paid.block + 2)
        rig.step()
        assert rig.deposits(paid.tx_hash) == dict.fromkeys(OURS, "credited")
        with UnitOfWork(rig.engine) as uow:
            (bob,) = [d for d in repo.deposits_in_states(uow.conn, "dev", [DepositState.CREDITED],
                                                         limit=10)
                      if d.position == "call:0.3"]
        attestor = NodeReceiptAttestor(rig.node.rpc, parse_finality_rule(rig.finality),
                                       trace_method=rig.chain_options["trace_method"])
        verdicts = attestor.attest([
            bob,
            replace(bob, id=-1, position="call:0.2.0"),  # carol's: undone by the revert
            replace(bob, id=-2, position="call:0.1"),  # eve's: not this address
            replace(bob, id=-3, value=bob.value + 1),
            replace(bob, id=-4, position="call:0.9")])
        assert {i: (v.verdict, v.reason) for i, v in verdicts.items()} == {
            bob.id: (Verdict.AGREED, None),
            -1: (Verdict.DISAGREED, "transfer_missing"),
            -2: (Verdict.DISAGREED, "address_mismatch"),
            -3: (Verdict.DISAGREED, "amount_mismatch"),
            -4: (Verdict.DISAGREED, "transfer_missing")}


class TestTraceRace:
    @pytest.mark.parametrize("method", ["debug_traceBlockByHash", "trace_block"])
    def test_a_block_reorged_between_reading_and_tracing_ends_the_prefix(
            self, rig: Rig, method: str) -> None:
        paid = pay_out(rig)
        rig.node.mine(1)
        rpc = rig.node.rpc
        read = []
        for height in (paid.block, paid.block + 1):
            raw = rpc.request("eth_getBlockByNumber", [hex(height), False])
            read.append((scanner._header(raw), rpc.request("eth_getBlockReceipts",
                                                           [hex(height)])))
        rig.node.reorg(2)  # Both blocks read are replaced before their traces are asked.
        kept, traces = scanner._trace_blocks(rpc, read, method)
        assert kept == [] and traces == {}
