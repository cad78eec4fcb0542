"""Re-checks past the reorg window: a settled deposit whose block is replaced deeper than the
watcher's cursor is found by the ``deposits.recheck`` step, disputed with a case, no money
moved; a deposit still canonical opens nothing."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa

from config.uow import UnitOfWork
from deposits import service
from deposits.errors import ReorgTooDeep
from deposits.recheck import Rechecker, judge
from deposits.repository import DepositRecord
from ledger.integrity import verify
from tests.deposits.conftest import ALICE, BOB, NOW, Rig

ETH = 10**18
KEEP = 2  # The watcher's cursor keeps the 2 newest blocks: deepest reorg it repairs itself.


def _block(rig: Rig, tx_hash: str) -> int:
    return int(rig.node.receipt(tx_hash)["blockNumber"], 16)


def _credited_then_left_behind(rig: Rig) -> tuple[str, str, int]:
    """An old USDC deposit, and an ETH deposit 10 blocks later; both credited, and the
    watcher's cursor several blocks past the second."""
    old = rig.node.transact(rig.tokens.usdc, "transfer", [rig.user("alice"), 4_000_000], ALICE)
    rig.node.mine(10)
    new = rig.node.send_eth(BOB, rig.user("bob"), 2 * ETH)
    rig.node.mine(1)
    block = _block(rig, new)
    rig.mine_to(block + 6)
    rig.step(3)
    assert rig.deposits(old) == {"log:0": "credited"}
    assert rig.deposits(new) == {"call:0": "credited"}
    return old, new, block


def _cases(rig: Rig) -> list[Any]:
    with UnitOfWork(rig.engine) as uow:
        return service.open_cases(uow)


@pytest.mark.anvil
class TestRecheck:
    def test_a_reorg_deeper_than_the_cursor_opens_the_case_once(
            self, rig: Rig, caplog: pytest.LogCaptureFixture) -> None:
        rig.chain_options = {"cursor_keep": KEEP}
        old, new, block = _credited_then_left_behind(rig)
        head = rig.node.head()
        rig.node.reorg(head - block + 2)  # Replaces the new deposit's block, not the old one's.
        assert rig.node.rpc.get_receipt(new) is None
        assert rig.node.rpc.get_receipt(old) is not None
        # The watcher cannot name it: none of its cursor's blocks is canonical any more.
        with pytest.raises(ReorgTooDeep):
            rig.watcher().step(now=NOW)
        checker = Rechecker(rig.engine, rig.config, "dev")
        with caplog.at_level(logging.CRITICAL, logger="custody.alerts"):
            report = checker.step(now=datetime.now(UTC))
        assert (report.checked, report.gone, len(report.cases_opened)) == (2, 1, 1)
        assert any("deep reorg after crediting" in r.message for r in caplog.records)
        assert rig.deposits(new) == {"call:0": "disputed"}
        assert rig.deposits(old) == {"log:0": "credited"}
        (case,) = _cases(rig)
        assert case.kind == "deep_reorg" and case.id == report.cases_opened[0]
        assert case.expected["block_number"] == block
        assert case.observed["check"] == "recheck"
        assert case.observed["reason"] in ("block_not_canonical", "block_unknown")
        assert case.observed["canonical_hash_at_block"] != case.expected["block_hash"]
        assert rig.events(new, "call:0")[-1] == "block_reorged_out"
        # Nothing moved: the credit stands until an admin resolves the case.
        assert rig.wallet("bob", "ETH") == 2 * ETH and rig.deposit_postings() == 2
        # Idempotent: again, by the same checker or by a fresh one, no second case.
        assert checker.step(now=datetime.now(UTC)).cases_opened == []
        assert Rechecker(rig.engine, rig.config, "dev").step(
            now=datetime.now(UTC)).cases_opened == []
        assert len(_cases(rig)) == 1
        with UnitOfWork(rig.engine) as uow:  # The case's alert, for the webhooks: one.
            assert uow.conn.execute(sa.text(
                "SELECT count(*) FROM outbox_events WHERE type = 'alert.deep_reorg'")
            ).scalar_one() == 1
        assert verify(rig.engine).ok

    def test_deposits_still_canonical_open_nothing(self, rig: Rig) -> None:
        rig.chain_options = {"cursor_keep": KEEP}
        old, new, _ = _credited_then_left_behind(rig)
        rig.node.reorg(3)  # Above both deposits' blocks.
        report = Rechecker(rig.engine, rig.config, "dev").step(now=datetime.now(UTC))
        assert (report.checked, report.gone, report.cases_opened) == (2, 0, [])
        assert rig.deposits(old) == {"log:0": "credited"}
        assert rig.deposits(new) == {"call:0": "credited"}
        assert _cases(rig) == []

    def test_batches_are_bounded_and_the_horizon_in_blocks_is_kept(self, rig: Rig) -> None:
        rig.chain_options = {"cursor_keep": KEEP, "recheck_batch_max": 1}
        _credited_then_left_behind(rig)
        checker = Rechecker(rig.engine, rig.config, "dev")
        first = checker.step(now=datetime.now(UTC))
        second = checker.step(now=datetime.now(UTC))
        assert (first.checked, first.wrapped, second.checked) == (1, False, 1)
        assert checker.step(now=datetime.now(UTC)).wrapped  # End of the horizon: wraps.
        # Only blocks: the old deposit (17 blocks below the head) is outside 10 blocks.
        rig.chain_options = {"cursor_keep": KEEP, "recheck_blocks": 10, "recheck_age_s": 0}
        assert Rechecker(rig.engine, rig.config, "dev").step(now=datetime.now(UTC)).checked == 1
        # Only time: settled more than an hour before `now` is outside the horizon.
        rig.chain_options = {"cursor_keep": KEEP, "recheck_age_s": 3600}
        later = datetime.now(UTC) + timedelta(hours=2)
        assert Rechecker(rig.engine, rig.config, "dev").step(now=later).checked == 0
        rig.chain_options = {"recheck_age_s": 0}
        off = Rechecker(rig.engine, rig.config, "dev")
        assert not off.enabled and off.step(now=datetime.now(UTC)).checked == 0


def _deposit(**changes: Any) -> DepositRecord:
    base: dict[str, Any] = dict(
        id=1, chain="dev", tx_hash="0x" + "11" * 32, position="log:0", token="0x" + "aa" * 20,
        from_address="0x" + "bb" * 20, to_address="0x" + "cc" * 20, value=5, tx_from=None,
        tx_nonce=None, user_id="u", asset_code="USDC", amount_minor=5, booking="user",
        booking_reason=None, state="credited", block_number=10, block_hash="0x" + "ab" * 32,
        confirmations=3, last_event_id=1, ledger_transaction_id=1, first_seen_at=NOW,
        updated_at=NOW)
    return DepositRecord(**{**base, **changes})


def _receipt(block_hash: str, *, value: int = 5, to: str = "cc") -> dict[str, Any]:
    topic = "0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef"
    return {"blockHash": block_hash, "blockNumber": "0xa", "status": "0x1", "logs": [{
        "address": "0x" + "aa" * 20, "logIndex": "0x0", "transactionHash": "0x" + "11" * 32,
        "blockHash": block_hash, "blockNumber": "0xa", "data": "0x" + f"{value:064x}",
        "topics": [topic, "0x" + "00" * 12 + "bb" * 20, "0x" + "00" * 12 + to * 20]}]}


class TestJudge:
    d = _deposit()
    ours = "0x" + "ab" * 32
    other = "0x" + "cd" * 32

    def test_still_there(self) -> None:
        assert judge(self.d, canonical_hash=self.ours.upper().replace("0X", "0x"),
                     known_by_hash=True, receipt=_receipt(self.ours), tx=None) is None

    def test_a_lagging_node_proves_nothing(self) -> None:
        assert judge(self.d, canonical_hash=None, known_by_hash=False, receipt=None,
                     tx=None) is None

    @pytest.mark.parametrize(("canonical", "known", "receipt", "reason"), [
        ("cd", True, None, "block_not_canonical"),
        ("cd", False, None, "block_unknown"),
        ("ab", True, None, "receipt_missing"),
        ("ab", True, "cd", "receipt_in_other_block"),
    ])
    def test_gone(self, canonical: str, known: bool, receipt: str | None, reason: str) -> None:
        found = None if receipt is None else _receipt("0x" + receipt * 32)
        assert judge(self.d, canonical_hash="0x" + canonical * 32, known_by_hash=known,
                     receipt=found, tx=None) == reason

    def test_the_receipt_no_longer_holds_the_transfer(self) -> None:
        assert judge(self.d, canonical_hash=self.ours, known_by_hash=True,
                     receipt=_receipt(self.ours, value=4), tx=None) == "amount_mismatch"
        assert judge(self.d, canonical_hash=self.ours, known_by_hash=True,
                     receipt=_receipt(self.ours, to="dd"), tx=None) == "address_mismatch"
        assert judge(self.d, canonical_hash=self.ours, known_by_hash=True,
                     receipt={**_receipt(self.ours), "logs": []}, tx=None) == "transfer_missing"


@pytest.mark.anvil
def test_scheduled_per_chain_as_deposits_recheck(rig: Rig) -> None:
    from api.jobs import build_jobs, run_locked

    rig.chain_options = {"cursor_keep": KEEP}
    _, new, block = _credited_then_left_behind(rig)
    rig.node.reorg(rig.node.head() - block + 1)
    (job,) = build_jobs(rig.engine, rig.config, None, only=["deposits.recheck"])
    assert job.name == "deposits.recheck:dev" and job.interval_s == 60.0
    assert run_locked(rig.engine, job) and run_locked(rig.engine, job)
    assert rig.deposits(new) == {"call:0": "disputed"}
    assert len(_cases(rig)) == 1
    rig.chain_options = {"recheck_age_s": 0}  # No horizon: no job.
    assert build_jobs(rig.engine, rig.config, None, only=["deposits.recheck"]) == []
