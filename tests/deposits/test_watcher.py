"""The watcher against a real anvil: deposits, finality, reorgs, failures, crediting."""

from __future__ import annotations

import logging

import pytest
import sqlalchemy as sa

from chains.evm import encode_call
from chains.rpc import to_quantity
from config.uow import UnitOfWork
from deposits import repository as repo
from deposits import service
from deposits.errors import WatcherBusy
from ledger import chart
from ledger.integrity import verify
from tests.conftest import BOTH_ROUTES
from tests.deposits.conftest import ALICE, BOB, CAROL, NOW, Rig

pytestmark = pytest.mark.anvil


def _included_block(rig: Rig, tx_hash: str) -> int:
    receipt = rig.node.receipt(tx_hash)
    assert int(receipt["status"], 16) == 1
    return int(receipt["blockNumber"], 16)


class TestCrediting:
    @BOTH_ROUTES
    def test_native_and_tokens_several_in_one_transaction(self, rig: Rig) -> None:
        alice_addr, bob_addr = rig.user("alice"), rig.user("bob")
        t = rig.tokens
        big = 2**126 + 12345
        native = rig.node.send_eth(ALICE, alice_addr, 3 * 10**18)
        usdc = rig.node.transact(t.usdc, "transfer", [alice_addr, 25_000_000], ALICE)
        dai = rig.node.transact(t.dai, "transfer", [bob_addr, big], ALICE)
        batch = rig.node.transact(t.usdc, "batchTransfer",
                                  [[alice_addr, CAROL, bob_addr], [1_000_000, 7, 2_000_000]], BOB,
                                  gas=300_000)
        rig.node.mine(1)
        block = _included_block(rig, batch)
        report = rig.step()
        assert report.new_deposits == 5
        assert rig.deposits(batch) == {"log:0": "included", "log:2": "included"}
        assert rig.deposit_postings() == 0
        # Three confirmations: block b, head b + 2 -> final. One block early: nothing.
        rig.mine_to(block + 1)
        rig.step()
        assert rig.deposit_postings() == 0
        assert rig.wallet("alice", "USDC") == 0
        rig.mine_to(block + 2)
        report = rig.step()
        assert (report.finals, report.credited) == (5, 5)
        assert rig.wallet("alice", "ETH") == 3 * 10**18
        assert rig.wallet("alice", "USDC") == 26_000_000
        assert rig.wallet("bob", "USDC") == 2_000_000
        assert rig.wallet("bob", "DAI") == big
        assert rig.balance("custody:dev", "USDC") == 28_000_000
        assert rig.deposits(native) == {"call:0": "credited"}
        assert rig.deposits(usdc) == {"log:0": "credited"}
        assert rig.deposits(dai) == {"log:0": "credited"}
        assert rig.events(batch, "log:2") == [
            "transfer_included", "confirmations_observed", "finality_reached",
            "attested_for_user"]
        # Crediting again is impossible: more steps change nothing.
        rig.mine_to(block + 10)
        rig.step(2)
        assert rig.deposit_postings() == 5
        assert verify(rig.engine).ok

    def test_credited_row_records_rule_evidence_and_ledger_transaction(self, rig: Rig) -> None:
        addr = rig.user("alice")
        tx = rig.node.transact(rig.tokens.usdc, "transfer", [addr, 5_000_000], ALICE)
        rig.node.mine(1)
        block = _included_block(rig, tx)
        rig.mine_to(block + 2)
        rig.step()
        with UnitOfWork(rig.engine) as uow:
            (entry,) = service.timeline(uow, "dev", tx)
        credited = entry.events[-1]
        assert credited.state == "credited" and credited.rule == "confirmations:3"
        assert credited.evidence["tx_block"] == block
        assert credited.evidence["confirmations"] == 3
        assert credited.evidence["attestation"]["attestor"] == "node"
        assert credited.ledger_transaction_id == entry.deposit.ledger_transaction_id
        (posted,) = entry.ledger_transactions
        assert posted.idempotency_key == f"deposit:dev:{tx}:log:0"
        assert posted.metadata["rule"] == "confirmations:3"

    def test_finalized_rule_not_credited_one_block_early(self, rig: Rig) -> None:
        rig.finality = "finalized"
        addr = rig.user("alice")
        tx = rig.node.send_eth(ALICE, addr, 10**18)
        rig.node.mine(1)
        block = _included_block(rig, tx)
        # finalized = head - 4: block b is final once head = b + 4.
        rig.mine_to(block + 3)
        assert rig.node.finalized_block() == block - 1
        rig.step()
        assert rig.deposits(tx) == {"call:0": "included"}
        rig.mine_to(block + 4)
        report = rig.step()
        assert report.credited == 1
        with UnitOfWork(rig.engine) as uow:
            (entry,) = service.timeline(uow, "dev", tx)
        assert entry.events[-1].rule == "finalized"
        assert entry.events[-1].evidence["finalized_block"] == block

    def test_pending_incoming_comes_from_the_history(self, rig: Rig) -> None:
        addr = rig.user("alice")
        rig.node.transact(rig.tokens.usdc, "transfer", [addr, 50_000_000], ALICE)
        rig.node.mine(1)
        rig.step()
        with UnitOfWork(rig.engine) as uow:
            pending = service.pending_incoming(uow, "alice")
        assert pending == {"USDC": 50_000_000}
        rig.node.mine(2)
        rig.step()
        with UnitOfWork(rig.engine) as uow:
            assert service.pending_incoming(uow, "alice") == {}
            from ledger import service as ledger
            (usdc,) = ledger.user_balances(uow, "alice", pending_incoming={})
        assert usdc.posted_minor == 50_000_000


class TestReorgs:
    @BOTH_ROUTES
    def test_reorg_before_finality_reincluded_elsewhere_credited_once(self, rig: Rig) -> None:
        addr = rig.user("alice")
        t = rig.tokens
        ours = rig.node.transact(t.usdc, "transfer", [addr, 7_000_000], ALICE)
        rig.node.mine(1)
        before = rig.node.receipt(ours)
        raw = rig.node.raw_transaction(ours)
        rig.step()
        assert rig.deposits(ours) == {"log:0": "included"}
        rig.node.reorg(1)  # Drops our transaction.
        assert rig.node.rpc.get_receipt(ours) is None
        report = rig.step()
        assert report.rewound_to is not None
        assert rig.deposits(ours) == {"log:0": "unconfirmed"}
        rig.node.mine(1)
        rig.step()
        assert rig.deposits(ours) == {"log:0": "unconfirmed"}  # Not failed: not proven gone.
        # It lands again, behind another transaction that emits a log first.
        front = {"from": BOB, "to": t.usdc.address,
                 "data": encode_call(t.usdc.abi, "transfer", [CAROL, 1])}
        rig.node.reorg(1, [(front, 0), (raw, 0)])
        after = rig.node.receipt(ours)
        assert after["blockHash"] != before["blockHash"]
        assert after["logs"][0]["logIndex"] != before["logs"][0]["logIndex"]
        block = int(after["blockNumber"], 16)
        rig.step(2)  # The first step rewinds the replaced head, the second rescans it.
        assert rig.deposits(ours) == {"log:0": "included"}
        rig.mine_to(block + 2)
        rig.step(2)
        assert rig.deposits(ours) == {"log:0": "credited"}
        assert rig.events(ours, "log:0")[:3] == [
            "transfer_included", "block_reorged_out", "transfer_reincluded"]
        assert rig.wallet("alice", "USDC") == 7_000_000
        assert rig.deposit_postings() == 1
        assert verify(rig.engine).ok

    def test_nonce_replaced_by_another_final_transaction_fails(self, rig: Rig) -> None:
        addr = rig.user("alice")
        ours = rig.node.send_eth(ALICE, addr, 10**18)
        rig.node.mine(1)
        nonce = int(rig.node.rpc.get_transaction(ours)["nonce"], 16)  # type: ignore[index]
        rig.step()
        # The sender's nonce is taken by another transaction in the replacement block.
        other = {"from": ALICE, "to": CAROL, "value": to_quantity(1), "nonce": to_quantity(nonce)}
        rig.node.reorg(1, [(other, 0)])
        assert rig.node.rpc.get_receipt(ours) is None
        rig.step()
        assert rig.deposits(ours) == {"call:0": "unconfirmed"}
        rig.node.mine(1)
        rig.step()  # The replacement has 2 confirmations: not final, so not proven gone.
        assert rig.deposits(ours) == {"call:0": "unconfirmed"}
        rig.node.mine(1)
        report = rig.step()
        assert report.failed == 1
        assert rig.deposits(ours) == {"call:0": "failed"}
        assert rig.wallet("alice", "ETH") == 0 and rig.deposit_postings() == 0
        with UnitOfWork(rig.engine) as uow:
            assert service.pending_incoming(uow, "alice") == {}

    def test_deep_reorg_after_credit_opens_a_case_and_moves_no_money(
        self, rig: Rig, caplog: pytest.LogCaptureFixture
    ) -> None:
        addr = rig.user("alice")
        ours = rig.node.transact(rig.tokens.usdc, "transfer", [addr, 9_000_000], ALICE)
        rig.node.mine(3)
        rig.step()
        assert rig.deposits(ours) == {"log:0": "credited"}
        with caplog.at_level(logging.CRITICAL, logger="custody.alerts"):
            rig.node.reorg(4)  # Deeper than the 3 confirmations the rule assumed.
            report = rig.step()
        assert report is not None and len(report.cases_opened) == 1
        assert rig.deposits(ours) == {"log:0": "disputed"}
        assert any("deep reorg after crediting" in r.message for r in caplog.records)
        assert rig.wallet("alice", "USDC") == 9_000_000  # Never silently reversed.
        with UnitOfWork(rig.engine) as uow:
            (case,) = service.open_cases(uow)
            deposit = repo.lock_deposits(uow.conn, [("dev", ours, "log:0")])[("dev", ours,
                                                                              "log:0")]
        assert case.kind == "deep_reorg" and case.deposit_id == deposit.id
        assert case.ledger_transaction_id == deposit.ledger_transaction_id
        assert verify(rig.engine).ok
        # An admin resolves the case with a reversal that references it.
        with UnitOfWork(rig.engine) as uow:
            reversal = service.resolve_case(uow, case.id, resolved_by="admin:ann",
                                            reason="deposit gone after deep reorg", reverse=True)
            uow.commit()
        assert reversal is not None and rig.wallet("alice", "USDC") == 0
        with UnitOfWork(rig.engine) as uow:
            assert service.open_cases(uow) == []
        assert verify(rig.engine).ok


def test_custody_matches_customer_liabilities_per_asset(rig: Rig) -> None:
    addr = rig.user("alice")
    rig.node.transact(rig.tokens.usdc, "transfer", [addr, 5_000_000], ALICE)
    rig.node.mine(3)
    rig.step()
    assert rig.balance(chart.custody("dev").code, "USDC") == rig.wallet("alice", "USDC")


class TestCatchUp:
    def test_behind_by_many_ranges_credits_each_deposit_once_in_order(self, rig: Rig) -> None:
        """Ranges are read ahead and settled while the next one is written: same outcome."""
        rig.finality = "finalized"
        users = [rig.user(f"u{i}") for i in range(5)]
        hashes = []
        for n in range(12):
            hashes.append(rig.node.transact(rig.tokens.usdc, "transfer",
                                            [users[n % 5], 1_000_000 + n], ALICE))
            rig.node.mine(15)  # 12 deposits over ~180 blocks: four ranges of 50.
        rig.node.mine(5)
        events_seen = 0
        for _ in range(10):
            report = rig.step()
            events_seen += report.credited
            if report.caught_up and report.credited == 0 and report.finals == 0:
                break
        assert events_seen == 12 == rig.deposit_postings()
        for tx in hashes:
            assert rig.deposits(tx) == {"log:0": "credited"}
            assert rig.events(tx, "log:0") == ["transfer_included", "finality_reached",
                                               "attested_for_user"]
        assert sum(rig.wallet(f"u{i}", "USDC") for i in range(5)) == \
            sum(1_000_000 + n for n in range(12))
        assert verify(rig.engine).ok


@BOTH_ROUTES
class TestStepLock:
    def test_one_step_per_chain_and_the_lock_ends_with_each_step(self, rig: Rig) -> None:
        # Behind PgBouncer in transaction mode a session-level lock would stay on a server
        # connection after its step: a later step would find it busy, or take it again there.
        with rig.engine.connect() as holder:
            assert repo.lock_chain(holder, rig.chain)
            with pytest.raises(WatcherBusy):
                rig.watcher().step(now=NOW)
            holder.rollback()
        tx = rig.node.transact(rig.tokens.usdc, "transfer", [rig.user("alice"), 5_000_000],
                               ALICE)
        rig.mine_to(_included_block(rig, tx) + 2)
        for _ in range(5):
            rig.watcher().step(now=NOW)  # a new watcher each time: none is busy
        assert rig.deposits(tx) == {"log:0": "credited"}
        # No step left the lock behind: it is free from another connection while the one the
        # steps used last is kept busy (PgBouncer hands out its last used server first).
        with rig.engine.connect() as busy, rig.engine.connect() as probe:
            busy.execute(sa.text("SELECT 1"))
            assert repo.lock_chain(probe, rig.chain)
