"""verify, rebuild-balances and checkpoints against real drift and real tampering."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Iterator

import pytest
import sqlalchemy as sa

from config.uow import UnitOfWork
from ledger import integrity, service
from tests.ledger.conftest import Book, transfer

#: Writes a fault as a superuser; returns the discrepancies verify must report for it.
Fault = Callable[[Book, sa.Engine], list[integrity.Discrepancy]]


def kinds(book: Book, *, full: bool = False) -> set[str]:
    return {d.kind for d in integrity.verify(book.engine, full=full).discrepancies}


def tamper(owner: sa.Engine, statement: str, **params: object) -> None:
    """Write as a superuser with triggers disabled: what verify must catch."""
    with owner.begin() as conn:
        conn.execute(sa.text("SET LOCAL session_replication_role = replica"))
        conn.execute(sa.text(statement), params)


class TestVerify:
    def test_clean_ledger_verifies(self, book: Book) -> None:
        book.deposit("u1", 100, "d1")
        report = integrity.verify(book.engine)
        assert report.ok and report.accounts >= 6

    def test_changed_posting_is_detected(self, book: Book, owner: sa.Engine) -> None:
        book.deposit("u1", 100, "d1")
        tamper(owner, "UPDATE ledger_postings SET amount = 90 WHERE line_no = 1")
        assert {
            "balance_drift",
            "transaction_unbalanced",
            "trial_balance",
            "custody_mismatch",
        } <= kinds(book)

    def test_deleted_posting_is_detected(self, book: Book, owner: sa.Engine) -> None:
        book.deposit("u1", 100, "d1")
        tamper(owner, "DELETE FROM ledger_postings WHERE line_no = 2")
        assert {"balance_drift", "transaction_unbalanced"} <= kinds(book)

    def test_drifted_cache_is_detected_and_rebuilt(self, book: Book, owner: sa.Engine) -> None:
        book.deposit("u1", 100, "d1")
        wallet = book.wallet("u1")
        with owner.begin() as conn:
            conn.execute(
                sa.text(
                    "UPDATE account_balances SET balance = -7, version = 9 WHERE account_id = :a"
                ),
                {"a": wallet.id},
            )
        assert {"balance_drift", "trial_balance"} <= kinds(book)
        report = integrity.rebuild_balances(book.engine)
        assert report.corrected == 1
        assert integrity.verify(book.engine).ok
        with UnitOfWork(book.engine) as uow:
            restored = service.account_balance(uow, wallet)
        assert (restored.balance_minor, restored.version) == (100, 1)

    def test_dropped_cache_is_rebuilt(self, book: Book, owner: sa.Engine) -> None:
        book.deposit("u1", 100, "d1")
        with owner.begin() as conn:
            conn.execute(sa.text("DELETE FROM account_balances"))
        assert "balance_missing" in kinds(book)
        seen: list[tuple[int, int]] = []
        integrity.rebuild_balances(
            book.engine, batch_size=2, progress=lambda done, total: seen.append((done, total))
        )
        assert seen[-1][0] == seen[-1][1] and len(seen) > 1
        assert integrity.verify(book.engine).ok

    def test_company_money_in_custody_breaks_the_custody_invariant(self, book: Book) -> None:
        # Balanced and allowed by every flag, but custody no longer equals what customers own.
        book.deposit("u1", 100, "d1")
        service.post_entry(book.engine, transfer("oops", book.custody, book.equity, 5))
        assert kinds(book) == {"custody_mismatch"}


class TestCheckpoints:
    def test_verify_and_rebuild_start_from_the_newest_verified_checkpoint(
        self, book: Book, owner: sa.Engine
    ) -> None:
        book.deposit("u1", 100, "d1")
        cp = integrity.create_checkpoint(book.engine)
        assert cp.verified and cp.through_posting_id == 2
        book.deposit("u1", 5, "d2")
        report = integrity.verify(book.engine)
        assert report.ok and report.checkpoint_id == cp.id
        assert report.replayed_from_posting_id == 2
        # Tampering below the checkpoint is invisible to a checkpointed verify but not to --full.
        tamper(owner, "UPDATE ledger_postings SET amount = 99 WHERE id = 1")
        assert integrity.verify(book.engine).ok
        assert "transaction_unbalanced" in kinds(book, full=True)

    def test_tampered_checkpoint_is_detected(self, book: Book, owner: sa.Engine) -> None:
        book.deposit("u1", 100, "d1")
        cp = integrity.create_checkpoint(book.engine)
        tamper(
            owner,
            "UPDATE balance_checkpoint_entries SET balance = balance + 1 "
            "WHERE checkpoint_id = :c AND balance > 0",
            c=cp.id,
        )
        assert "checkpoint_digest" in kinds(book)

    def test_checkpoint_over_drifted_cache_is_not_verified(
        self, book: Book, owner: sa.Engine
    ) -> None:
        book.deposit("u1", 100, "d1")
        with owner.begin() as conn:
            conn.execute(
                sa.text("UPDATE account_balances SET balance = balance + 1 WHERE balance < 0")
            )
        cp = integrity.create_checkpoint(book.engine)
        assert not cp.verified
        assert integrity.verify(book.engine).checkpoint_id is None  # unverified ones are skipped

    def test_rebuild_uses_the_checkpoint(self, book: Book, owner: sa.Engine) -> None:
        book.deposit("u1", 100, "d1")
        integrity.create_checkpoint(book.engine)
        book.deposit("u1", 5, "d2")
        with owner.begin() as conn:
            conn.execute(sa.text("DELETE FROM account_balances"))
        assert integrity.rebuild_balances(book.engine).checkpoint_id is not None
        assert integrity.verify(book.engine, full=True).ok

    def test_rebuild_keeps_a_flag_breaking_account_and_rebuilds_the_rest_of_its_batch(
        self, book: Book, owner: sa.Engine
    ) -> None:
        book.deposit("u1", 100, "d1")
        book.deposit("u2", 100, "d2")
        u1, u2 = book.wallet("u1"), book.wallet("u2")
        # u2's deposit rewritten as a debit: its wallet replays to +100, overdrawn.
        tamper(owner, "UPDATE ledger_postings SET amount = -amount WHERE account_id = :a", a=u2.id)
        with owner.begin() as conn:
            conn.execute(sa.text("UPDATE account_balances SET balance = 0 WHERE account_id = :a"),
                         {"a": u1.id})
        report = integrity.rebuild_balances(book.engine, batch_size=100)
        assert [(r.code, r.asset_code, r.flag, r.replayed, r.stored) for r in report.refused] == [
            ("user:u2:wallet", u2.asset.code, "debits_must_not_exceed_credits", 100, -100)]
        with UnitOfWork(book.engine) as uow:
            assert service.account_balance(uow, u1).balance_minor == 100  # rebuilt
            assert service.account_balance(uow, u2).balance_minor == 100  # as stored
        assert "flag_violated" in kinds(book)

    def test_watermark_waits_for_postings_in_flight(self, book: Book) -> None:
        wallet = book.wallet("u1")
        uow = UnitOfWork(book.engine).__enter__()
        service.post(uow, transfer("in-flight", book.custody, wallet, 10))  # not committed yet
        result: list[int] = []
        thread = threading.Thread(
            target=lambda: result.append(
                integrity.create_checkpoint(book.engine).through_posting_id
            )
        )
        thread.start()
        time.sleep(0.5)
        assert thread.is_alive(), "the watermark must wait for the uncommitted posting"
        uow.commit()
        uow.__exit__(None, None, None)
        thread.join(10)
        assert result == [2]
        assert integrity.verify(book.engine).ok


def superuser_txn(owner: sa.Engine, key: str, postings: list[tuple[int | None, int, int]],
                  *, txn: int | None = None) -> tuple[int, list[int]]:
    """As a superuser with triggers off: a new ledger transaction (unless ``txn`` names one,
    existing or not) and its postings (account id, asset id, amount; the account None for an id
    no account has). Returns the transaction id and the posting ids.

    While ``HIDDEN_IDS`` is set, the postings take ids counting down from 0 instead of the
    sequence's: below every checkpoint's watermark, where only a full verify looks."""
    with owner.begin() as conn:
        conn.execute(sa.text("SET LOCAL session_replication_role = replica"))
        if txn is None:
            txn = int(conn.execute(sa.text(
                "INSERT INTO ledger_transactions (idempotency_key, fingerprint, kind, effective_at,"
                " source) VALUES (:k, repeat('0', 64), 'raw', now(), 'superuser') RETURNING id"),
                {"k": key}).scalar_one())
        ids = []
        for n, (a, s, m) in enumerate(postings, start=1):
            pid = next(HIDDEN_IDS[0]) if HIDDEN_IDS else None
            ids.append(int(conn.execute(sa.text(
                "INSERT INTO ledger_postings (id, transaction_id, line_no, account_id, asset_id,"
                " amount) VALUES (coalesce(:id, nextval('ledger_postings_id_seq')), :t, :n, :a,"
                " :s, :m) RETURNING id"),
                {"id": pid, "t": txn, "n": n, "a": MISSING if a is None else a, "s": s,
                 "m": m}).scalar_one()))
    return txn, ids


#: See superuser_txn.
HIDDEN_IDS: list[Iterator[int]] = []
MISSING = 987_654_321


def fault_wrong_asset(book: Book, owner: sa.Engine) -> list[integrity.Discrepancy]:
    """USDC custody posted in ETH, against ETH custody: balanced in ETH, wrong on one line,
    within every flag."""
    txn, ids = superuser_txn(owner, "wrong-asset", [
        (book.custody.id, book.eth.id, -5), (book.custody_eth.id, book.eth.id, 5)])
    return [integrity.Discrepancy(
        "posting_asset_mismatch", f"posting {ids[0]} (transaction {txn}) on custody:eth (USDC)",
        "asset USDC", "asset ETH")]


def fault_orphan_transaction(book: Book, owner: sa.Engine) -> list[integrity.Discrepancy]:
    """Two balanced postings naming a ledger transaction that does not exist."""
    _, ids = superuser_txn(owner, "", [
        (book.custody.id, book.usdc.id, 5), (book.equity.id, book.usdc.id, -5)],
        txn=MISSING)
    return [integrity.Discrepancy("posting_orphan", f"posting {pid} (transaction {MISSING})",
                                  f"transaction {MISSING}", "no such transaction")
            for pid in ids]


def fault_orphan_account(book: Book, owner: sa.Engine) -> list[integrity.Discrepancy]:
    """A balanced transaction, one of whose postings is on an account that does not exist."""
    txn, ids = superuser_txn(owner, "orphan-account", [
        (book.custody.id, book.usdc.id, 5), (None, book.usdc.id, -5)])
    return [integrity.Discrepancy("posting_orphan", f"posting {ids[1]} (transaction {txn})",
                                  f"account {MISSING}", "no such account")]


def fault_unbalanced_in_eth(book: Book, owner: sa.Engine) -> list[integrity.Discrepancy]:
    """Balanced in USDC, not in ETH: every posting on an account of its own asset."""
    txn, _ = superuser_txn(owner, "unbalanced-eth", [
        (book.custody.id, book.usdc.id, 5), (book.equity.id, book.usdc.id, -5),
        (book.custody_eth.id, book.eth.id, 7)])
    return [integrity.Discrepancy("transaction_unbalanced", f"transaction {txn} ETH", "0", "7")]


FAULTS = [fault_wrong_asset, fault_orphan_transaction, fault_orphan_account,
          fault_unbalanced_in_eth]


class TestPostingsTheCheckWouldRefuse:
    """Rows the insert check refuses (wrong asset, missing account or transaction) and
    unbalanced transactions, written by a superuser with triggers off: verify names them."""

    @pytest.mark.parametrize("fault", FAULTS, ids=lambda f: f.__name__)
    def test_found_after_the_checkpoint(self, book: Book, owner: sa.Engine,
                                        fault: Fault) -> None:
        book.deposit("u1", 100, "d1")
        cp = integrity.create_checkpoint(book.engine)
        expected = fault(book, owner)
        report = integrity.verify(book.engine)
        assert report.checkpoint_id == cp.id
        assert set(expected) <= set(report.discrepancies)

    # A posting on a missing account cannot be checkpointed over (the checkpoint's entries
    # refer to accounts): create_checkpoint fails on it, so it is never below a checkpoint
    # written after it (see the watermark test below for a row hidden there).
    @pytest.mark.parametrize("fault", [f for f in FAULTS if f is not fault_orphan_account],
                             ids=lambda f: f.__name__)
    def test_found_below_the_newest_checkpoint_with_full(
        self, book: Book, owner: sa.Engine, fault: Fault
    ) -> None:
        book.deposit("u1", 100, "d1")
        expected = fault(book, owner)
        # The superuser keeps the balances in step (as a rebuild would), so that a checkpoint
        # taken afterwards verifies and covers the faulty rows.
        integrity.rebuild_balances(book.engine)
        cp = integrity.create_checkpoint(book.engine)
        with owner.connect() as conn:
            newest = conn.execute(sa.text("SELECT max(id) FROM ledger_postings")).scalar_one()
        assert cp.verified and cp.through_posting_id == newest
        assert integrity.verify(book.engine).checkpoint_id == cp.id
        report = integrity.verify(book.engine, full=True)
        assert report.checkpoint_id is None
        assert set(expected) <= set(report.discrepancies)

    @pytest.mark.parametrize("fault", FAULTS, ids=lambda f: f.__name__)
    def test_found_with_full_when_written_below_the_watermark(
        self, book: Book, owner: sa.Engine, fault: Fault
    ) -> None:
        # Written after the checkpoint, with ids below its watermark (only a superuser can
        # choose a posting's id): the checkpointed verify does not read them, the full one does.
        book.deposit("u1", 100, "d1")
        cp = integrity.create_checkpoint(book.engine)
        HIDDEN_IDS.append(itertools.count(0, -1))
        try:
            expected = fault(book, owner)
        finally:
            HIDDEN_IDS.clear()
        report = integrity.verify(book.engine)
        assert report.checkpoint_id == cp.id
        assert not set(expected) & set(report.discrepancies)
        assert set(expected) <= set(integrity.verify(book.engine, full=True).discrepancies)

    def test_clean_ledger_has_no_posting_findings(self, book: Book) -> None:
        book.deposit("u1", 100, "d1")
        eth_wallet = book.wallet("u1", book.eth)
        service.post_entry(book.engine, transfer("e1", book.custody_eth, eth_wallet, 3,
                                                 kind="deposit"))
        assert integrity.verify(book.engine, full=True).ok
