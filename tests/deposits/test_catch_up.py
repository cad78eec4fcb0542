"""Catching up: deposits final at first sight are credited by the scan's own transaction, and
their transactions are not read (bench/deposit_bench.py measures what that buys)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from chains.errors import RpcUnavailable
from chains.rpc import RpcCall, RpcClient
from config.uow import UnitOfWork
from deposits.attestors import Attestation, Verdict
from deposits.errors import CursorMoved
from deposits.repository import DepositRecord
from deposits.watcher import Watcher
from ledger.integrity import verify
from tests.deposits.conftest import ALICE, NOW, Rig

pytestmark = pytest.mark.anvil


class CountingRpc(RpcClient):
    """An RPC client that remembers the method of every call it sends."""

    def __init__(self, url: str) -> None:
        super().__init__(url, rpc_timeout_ms=5000, retries_max=2)
        self.methods: list[str] = []

    def batch(self, calls: Sequence[RpcCall]) -> list[Any]:
        self.methods += [c.method for c in calls]
        return super().batch(calls)

    def request(self, method: str, params: Sequence[Any] = ()) -> Any:
        self.methods.append(method)
        return super().request(method, params)


class Disagreeing:
    """An attestor whose record never matches (and counts the deposits it was asked about)."""

    name = "test"

    def __init__(self) -> None:
        self.asked: list[str] = []

    def attest(self, deposits: Sequence[DepositRecord]) -> dict[int, Attestation]:
        self.asked += [d.tx_hash for d in deposits]
        return {d.id: Attestation(Verdict.DISAGREED, "amount_mismatch") for d in deposits}


class Unreachable:
    """An attestor whose node does not answer, until it is told to."""

    name = "node"

    def __init__(self, rig: Rig) -> None:
        self.down = True
        self.node = Watcher(rig.engine, rig.config, rig.chain).attestor

    def attest(self, deposits: Sequence[DepositRecord]) -> dict[int, Attestation]:
        if self.down:
            raise RpcUnavailable("the attestor's node does not answer")
        return self.node.attest(deposits)


def _watcher(rig: Rig, rpc: RpcClient) -> Watcher:
    """A watcher of the rig's chain scanning through ``rpc`` (the attestor has its own)."""
    return Watcher(rig.engine, rig.config, rig.chain, rpc=rpc)


def _row(rig: Rig, tx_hash: str) -> sa.Row[Any]:
    with UnitOfWork(rig.engine) as uow:
        return uow.conn.execute(sa.text(
            "SELECT tx_from, tx_nonce, state, ledger_transaction_id FROM deposits "
            "WHERE tx_hash = :t"), {"t": tx_hash}).one()


def _history(rig: Rig, tx_hash: str) -> list[sa.Row[Any]]:
    with UnitOfWork(rig.engine) as uow:
        return list(uow.conn.execute(sa.text(
            "SELECT event, state, rule, evidence, ledger_transaction_id FROM deposit_events "
            "WHERE tx_hash = :t ORDER BY id"), {"t": tx_hash}).all())


def test_a_deposit_final_at_first_sight_is_credited_by_the_scan_that_finds_it(
        rig: Rig) -> None:
    tx = rig.node.transact(rig.tokens.usdc, "transfer", [rig.user("alice"), 7_000_000], ALICE)
    rig.node.mine(1)
    rig.node.mine(5)  # confirmations:3 -> final when the watcher first reads it
    rpc = CountingRpc(rig.node.url)
    watcher = _watcher(rig, rpc)
    report = watcher.step(now=NOW)
    assert (report.new_deposits, report.finals, report.credited) == (1, 1, 1)
    assert rig.wallet("alice", "USDC") == 7_000_000
    # One transaction wrote the three rows; the credit carries the finality evidence and the
    # custody record's attestation, as a credit by the settle phase does.
    history = _history(rig, tx)
    assert [(h.event, h.state) for h in history] == [
        ("transfer_included", "included"), ("finality_reached", "final"),
        ("attested_for_user", "credited")]
    credit = history[-1]
    assert credit.rule == "confirmations:3"
    assert credit.evidence["attestation"]["attestor"] == "node"
    assert credit.evidence["tx_block_hash"] == history[1].evidence["tx_block_hash"]
    row = _row(rig, tx)
    assert (row.state, row.ledger_transaction_id) == ("credited", credit.ledger_transaction_id)
    with UnitOfWork(rig.engine) as uow:
        writers = set(uow.conn.execute(sa.text(
            "SELECT xmin::text FROM deposit_events WHERE tx_hash = :t UNION "
            "SELECT xmin::text FROM deposits WHERE tx_hash = :t UNION "
            "SELECT xmin::text FROM ledger_transactions WHERE id = :l UNION "
            "SELECT xmin::text FROM watcher_cursors WHERE chain = 'dev'"),
            {"t": tx, "l": credit.ledger_transaction_id}).scalars())
    assert len(writers) == 1  # the history, the posting and the cursor: one transaction
    # Final at first sight, it can no longer fail: its transaction was not read. The sender
    # comes from the receipt; there is no nonce.
    assert "eth_getTransactionByHash" not in rpc.methods
    assert (row.tx_from, row.tx_nonce) == (ALICE.lower(), None)
    watcher.step(now=NOW)
    assert rig.deposit_postings() == 1
    assert verify(rig.engine).ok


def test_a_deposit_not_final_yet_is_read_whole_and_credited_later(rig: Rig) -> None:
    tx = rig.node.transact(rig.tokens.usdc, "transfer", [rig.user("alice"), 7_000_000], ALICE)
    rig.node.mine(1)
    rpc = CountingRpc(rig.node.url)
    watcher = _watcher(rig, rpc)
    report = watcher.step(now=NOW)
    assert (report.new_deposits, report.credited) == (1, 0)
    assert "eth_getTransactionByHash" in rpc.methods
    row = _row(rig, tx)
    assert row.state == "included"
    assert row.tx_from == ALICE.lower() and row.tx_nonce is not None  # the failure proof's input
    rig.node.mine(3)
    assert watcher.step(now=NOW).credited == 1
    assert rig.wallet("alice", "USDC") == 7_000_000


def test_a_record_that_disagrees_leaves_the_deposit_final_and_uncredited(rig: Rig) -> None:
    tx = rig.node.transact(rig.tokens.usdc, "transfer", [rig.user("alice"), 7_000_000], ALICE)
    rig.node.mine(6)
    attestor = Disagreeing()
    watcher = rig.watcher(attestor=attestor)
    report = watcher.step(now=NOW)
    assert report.credited == 0
    # Asked before the scan's transaction, and again by the settle phase, which holds it.
    assert attestor.asked == [tx, tx]
    assert [h.event for h in _history(rig, tx)] == [
        "transfer_included", "finality_reached", "custody_record_disagreed"]
    assert rig.deposit_postings() == 0
    assert rig.wallet("alice", "USDC") == 0


def test_a_refused_credit_rolls_back_the_whole_scan(rig: Rig, owner: Engine) -> None:
    tx = rig.node.transact(rig.tokens.usdc, "transfer", [rig.user("alice"), 7_000_000], ALICE)
    rig.node.mine(6)
    post = "ledger_post_arrays"  # the ledger's batch write path, the credit's post
    with owner.begin() as conn:
        conn.execute(sa.text(f"REVOKE EXECUTE ON FUNCTION {post} FROM custody_app"))
    try:
        # The database refuses the credit: the scan that found the deposit fails with it.
        with pytest.raises(sa.exc.ProgrammingError, match="permission denied"):
            rig.watcher().step(now=NOW)
    finally:
        with owner.begin() as conn:
            conn.execute(sa.text(f"GRANT EXECUTE ON FUNCTION {post} TO custody_app"))
    # Nothing of that scan is there: no deposit, no history, the cursor did not move.
    assert rig.deposits(tx) == {}
    with UnitOfWork(rig.engine) as uow:
        assert uow.conn.execute(sa.text(
            "SELECT count(*) FROM watcher_cursors WHERE chain = 'dev'")).scalar_one() == 0
    report = rig.watcher().step(now=NOW)
    assert (report.new_deposits, report.credited) == (1, 1)
    assert rig.deposit_postings() == 1
    assert rig.wallet("alice", "USDC") == 7_000_000
    assert verify(rig.engine).ok


def test_an_attestor_that_fails_does_not_stop_the_scan(rig: Rig) -> None:
    tx = rig.node.transact(rig.tokens.usdc, "transfer", [rig.user("alice"), 7_000_000], ALICE)
    rig.node.mine(6)
    attestor = Unreachable(rig)
    watcher = rig.watcher(attestor=attestor)
    # The scan records the deposit as final; the settle phase meets the failure, as before.
    with pytest.raises(RpcUnavailable):
        watcher.step(now=NOW)
    assert rig.deposits(tx) == {"log:0": "final"}
    assert rig.deposit_postings() == 0
    attestor.down = False
    assert watcher.step(now=NOW).credited == 1
    assert rig.wallet("alice", "USDC") == 7_000_000
    assert [h.event for h in _history(rig, tx)] == [
        "transfer_included", "finality_reached", "attested_for_user"]


def test_two_watchers_taking_turns_never_overwrite_each_others_cursor(rig: Rig) -> None:
    # Each watcher remembers the cursor its last step wrote and does not read it again; when
    # another process stepped in between, its write is refused and its next step reads anew.
    rig.chain_options["scan_blocks_max"] = 4
    txs = []
    for i in range(6):
        txs.append(rig.node.transact(rig.tokens.usdc, "transfer",
                                     [rig.user(f"u{i}"), 1_000_000 + i], ALICE))
        rig.node.mine(3)
    rig.node.mine(6)  # every deposit final at first sight: the planned path
    first, second = rig.watcher(), rig.watcher()
    moved = 0
    for turn in range(40):
        watcher = first if turn % 2 == 0 else second
        try:
            report = watcher.step(now=NOW)
        except CursorMoved:
            moved += 1
            continue
        if report.caught_up and rig.deposit_postings() == len(txs):
            break
    assert moved >= 1  # a stale cursor was met, and refused
    assert rig.deposit_postings() == len(txs)
    for i, tx in enumerate(txs):
        assert rig.deposits(tx) == {"log:0": "credited"}
        assert rig.wallet(f"u{i}", "USDC") == 1_000_000 + i
    with UnitOfWork(rig.engine) as uow:  # the cursor is one chain of blocks, ending at the head
        cursor = uow.conn.execute(sa.text(
            "SELECT recent FROM watcher_cursors WHERE chain = 'dev'")).scalar_one()
    heights = [h for h, _ in cursor]
    assert heights == list(range(heights[0], heights[-1] + 1))
    assert heights[-1] == rig.node.head()
    assert verify(rig.engine).ok
    first.close()
    second.close()
