"""verify, rebuild-balances and checkpoints against real drift and real tampering."""

from __future__ import annotations

import threading
import time

import sqlalchemy as sa

from config.uow import UnitOfWork
from ledger import integrity, service
from tests.ledger.conftest import Book, transfer


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
