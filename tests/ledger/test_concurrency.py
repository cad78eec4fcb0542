"""Locking claims of the ledger, each proved with many real connections at once."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import pytest
import sqlalchemy as sa

from config.uow import UnitOfWork, run_in_transaction
from ledger import integrity, service
from ledger.errors import IdempotencyConflict, InsufficientFunds, ReversalExceedsOriginal
from tests.conftest import BOTH_ROUTES
from tests.ledger.conftest import Book, transfer

T = TypeVar("T")


def concurrently(n: int, work: Callable[[int], T]) -> list[T | BaseException]:
    """Run ``work(i)`` for i in range(n) on n threads released together by a barrier."""
    barrier = threading.Barrier(n)

    def run(i: int) -> T | BaseException:
        barrier.wait()
        try:
            return work(i)
        except BaseException as exc:  # collected and asserted on by the caller
            return exc

    with ThreadPoolExecutor(max_workers=n) as pool:
        return list(pool.map(run, range(n)))


def assert_ledger_sound(book: Book) -> None:
    report = integrity.verify(book.engine)
    assert report.ok, [str(d) for d in report.discrepancies]


@BOTH_ROUTES
class TestIdempotencyUnderConcurrency:
    def test_50_identical_requests_make_one_transaction(self, book: Book) -> None:
        wallet = book.wallet("u1")
        entry = transfer("same-key", book.custody, wallet, 100)
        results = concurrently(50, lambda _: service.post_entry(book.engine, entry))
        assert all(isinstance(r, service.Posted) for r in results), results
        ids = {r.transaction_id for r in results}  # type: ignore[union-attr]
        assert len(ids) == 1
        assert sum(not r.replayed for r in results) == 1  # type: ignore[union-attr]
        with book.engine.connect() as conn:
            assert conn.execute(sa.text("SELECT count(*) FROM ledger_transactions")).scalar() == 1
        with UnitOfWork(book.engine) as uow:
            assert service.account_balance(uow, wallet).balance_minor == 100
        assert_ledger_sound(book)


@BOTH_ROUTES
class TestOverdraftRace:
    def test_exactly_the_funded_spends_succeed(self, book: Book) -> None:
        wallet = book.wallet("u1")
        book.deposit("u1", 5 * 7, "fund")  # exactly 5 spends of 7
        lowest = [0]

        def client(c: int) -> int:
            wins = 0
            for attempt in range(10):
                try:
                    service.post_entry(
                        book.engine, transfer(f"spend:{c}:{attempt}", wallet, book.custody, 7)
                    )
                    wins += 1
                except InsufficientFunds:
                    pass
                with UnitOfWork(book.engine) as uow:
                    seen = service.account_balance(uow, wallet).balance_minor
                lowest[0] = min(lowest[0], seen)
            return wins

        results = concurrently(20, client)
        assert all(isinstance(r, int) for r in results), results
        assert sum(results) == 5  # type: ignore[arg-type]
        assert lowest[0] == 0  # never observed below zero
        with UnitOfWork(book.engine) as uow:
            assert service.account_balance(uow, wallet).balance_minor == 0
        with book.engine.connect() as conn:
            spends = conn.execute(
                sa.text(
                    "SELECT count(*) FROM ledger_transactions WHERE idempotency_key LIKE 'spend:%'"
                )
            )
            assert spends.scalar() == 5
        assert_ledger_sound(book)


@pytest.mark.slow
class TestHotAccount:
    def test_10000_transfers_out_of_one_hot_account(self, book: Book) -> None:
        total = 10_000
        hot = book.wallet("hot")  # flagged: may never go below zero
        users = [book.wallet(f"u{i}") for i in range(50)]
        book.deposit("hot", total * 3, "fund")
        per_client = total // 20

        def client(c: int) -> int:
            rng = random.Random(c)
            for i in range(per_client):
                wallet = users[rng.randrange(len(users))]
                service.post_entry(book.engine, transfer(f"hot:{c}:{i}", hot, wallet, 1 + i % 3))
            return per_client

        started = time.perf_counter()
        results = concurrently(20, client)
        elapsed = time.perf_counter() - started
        assert results == [per_client] * 20, [r for r in results if not isinstance(r, int)][:3]
        paid = sum(1 + i % 3 for i in range(per_client)) * 20
        with UnitOfWork(book.engine) as uow:
            hot_balance = service.account_balance(uow, hot)
            wallets = service.account_balances(uow, users)
        assert hot_balance.balance_minor == total * 3 - paid
        assert hot_balance.version == 1 + total
        assert sum(w.balance_minor for w in wallets) == paid
        assert_ledger_sound(book)
        print(f"10,000 hot-account transfers from 20 connections in {elapsed:.1f} s")


@BOTH_ROUTES
class TestConcurrentReversals:
    def test_partial_reversals_never_exceed_the_original(self, book: Book) -> None:
        original = book.deposit("u1", 100, "d1")
        with UnitOfWork(book.engine) as uow:
            p1, p2 = (p.id for p in service.get_transaction(uow, original).postings)

        def reverse(i: int) -> int:
            return run_in_transaction(
                book.engine,
                lambda uow: service.reverse(
                    uow,
                    original,
                    idempotency_key=f"r{i}",
                    reason="partial",
                    source="tests",
                    amounts={p1: 15, p2: 15},
                ),
            ).transaction_id

        results = concurrently(20, reverse)
        wins = [r for r in results if isinstance(r, int)]
        losses = [r for r in results if not isinstance(r, int)]
        assert len(wins) == 6  # 6 x 15 = 90 <= 100 < 105
        assert all(isinstance(e, ReversalExceedsOriginal) for e in losses), losses
        with UnitOfWork(book.engine) as uow:
            assert service.account_balance(uow, book.custody).balance_minor == 10
        assert_ledger_sound(book)


@BOTH_ROUTES
class TestNoDeadlocks:
    def test_crossing_transfers_all_succeed(self, book: Book) -> None:
        wallets = [book.wallet(f"u{i}") for i in range(6)]
        for i in range(6):
            book.deposit(f"u{i}", 10_000, f"seed{i}")

        def client(c: int) -> int:
            rng = random.Random(c)
            for i in range(40):
                a, b = rng.sample(wallets, 2)  # both directions between the same accounts
                service.post_entry(book.engine, transfer(f"x:{c}:{i}", a, b, 1))
            return 40

        results = concurrently(20, client)
        assert results == [40] * 20, [r for r in results if not isinstance(r, int)][:3]
        assert_ledger_sound(book)


@BOTH_ROUTES
class TestRebuildWhilePosting:
    def test_rebuild_loses_no_update(self, book: Book, owner: sa.Engine) -> None:
        wallets = [book.wallet(f"u{i}") for i in range(10)]
        # Corrupt the cache first, so that rebuilding has something to write.
        book.deposit("u0", 1_000_000, "seed")
        with owner.begin() as conn:
            conn.execute(
                sa.text("UPDATE account_balances SET balance = balance - 3 WHERE account_id = :a"),
                {"a": wallets[0].id},
            )
        stop = threading.Event()

        def poster(c: int) -> int:
            n = 0
            rng = random.Random(c)
            while not stop.is_set() and n < 400:
                target = wallets[rng.randrange(1, 10)]
                service.post_entry(book.engine, transfer(f"p:{c}:{n}", book.custody, target, 1))
                n += 1
            return n

        with ThreadPoolExecutor(max_workers=4) as pool:
            futures = [pool.submit(poster, c) for c in range(4)]
            corrected = 0
            for _ in range(5):
                corrected += integrity.rebuild_balances(book.engine, batch_size=3).corrected
            stop.set()
            posted = sum(f.result() for f in futures)
        assert posted > 0 and corrected >= 1
        # No rebuild after the posters stopped: a lost update would show here as drift.
        assert_ledger_sound(book)


@BOTH_ROUTES
class TestKeyRace:
    def test_same_key_on_disjoint_accounts_one_wins_the_other_conflicts(self, book: Book) -> None:
        # Disjoint accounts take no common lock, so both pass the key lookup; the unique index
        # makes the loser wait, skip its insert and redo the batch (40001), which then reports
        # the conflict. Run several rounds to hit the race.
        sources = [book.custody, book.equity]
        for round_ in range(10):
            wallets = [book.wallet(f"r{round_}:{i}") for i in range(2)]

            def post(i: int, round_: int = round_, wallets: list = wallets) -> object:  # type: ignore[type-arg]
                return service.post_entry(
                    book.engine, transfer(f"race:{round_}", sources[i], wallets[i], 10 + i)
                )

            results = concurrently(2, post)
            winners = [r for r in results if isinstance(r, service.Posted)]
            losers = [r for r in results if not isinstance(r, service.Posted)]
            assert len(winners) == 1 and not winners[0].replayed
            assert len(losers) == 1 and isinstance(losers[0], IdempotencyConflict), losers
        assert_ledger_sound_ignoring_custody(book)


def assert_ledger_sound_ignoring_custody(book: Book) -> None:
    # equity -> wallet credits break custody = liabilities on purpose; everything else holds.
    report = integrity.verify(book.engine)
    assert {d.kind for d in report.discrepancies} <= {"custody_mismatch"}, report.discrepancies


@BOTH_ROUTES
class TestBatchWritersRace:
    def test_batches_never_overdraw_and_post_exactly_what_is_funded(self, book: Book) -> None:
        # Batches write first and lock the balance rows last, re-judging funds under the lock
        # (40001 and a retry when a verdict would change). Eight writers of 10-entry batches
        # drain one wallet funded for exactly 100 spends, crossing each other's reads.
        wallet = book.wallet("drain")
        sinks = [book.wallet(f"sink{i}") for i in range(8)]
        book.deposit("drain", 100, "fund")

        def writer(c: int) -> int:
            posted = 0
            for round_ in range(5):
                entries = [
                    transfer(f"drain:{c}:{round_}:{i}", wallet, sinks[(c + i) % 8], 1)
                    for i in range(10)
                ]
                outcomes = service.post_entries(book.engine, entries)
                assert all(o.ok or isinstance(o.error, InsufficientFunds) for o in outcomes)
                posted += sum(o.status == "posted" for o in outcomes)
            return posted

        results = concurrently(8, writer)
        assert all(isinstance(r, int) for r in results), results
        assert sum(results) == 100  # type: ignore[arg-type]
        with UnitOfWork(book.engine) as uow:
            assert service.account_balance(uow, wallet).balance_minor == 0
            sinks_total = sum(b.balance_minor for b in service.account_balances(uow, sinks))
        assert sinks_total == 100
        assert_ledger_sound(book)
