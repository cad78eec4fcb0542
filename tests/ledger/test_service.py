"""The ledger's use cases against a real PostgreSQL: post, batch, reverse, balances, periods."""

from __future__ import annotations

import json
import threading
from dataclasses import replace
from datetime import datetime, timedelta
from decimal import Decimal

import pytest
import sqlalchemy as sa

from config.uow import UnitOfWork, run_in_transaction
from ledger import chart, integrity, service
from ledger.errors import (
    AmountInvalid,
    EntryInvalid,
    IdempotencyConflict,
    InsufficientFunds,
    NotOutOfPeriod,
    PeriodClosed,
    PeriodCloseInvalid,
    PeriodProposalNotFound,
    ReversalExceedsOriginal,
    SecondApproverRequired,
)
from ledger.model import Entry, Line, amount_json
from ledger.repository import PeriodRecord
from tests.ledger.conftest import T0, Book, transfer


def stored(book: Book, *accounts: object) -> list[int]:
    with UnitOfWork(book.engine) as uow:
        return [b.raw_minor for b in service.account_balances(uow, list(accounts))]  # type: ignore[arg-type]


def count_transactions(book: Book) -> int:
    with book.engine.connect() as conn:
        return int(conn.execute(sa.text("SELECT count(*) FROM ledger_transactions")).scalar_one())


class TestPost:
    @pytest.mark.parametrize("text", [
        'quote " and backslash \\ and \\" both', "{braces},commas, NULL", "NULL", "", " pad ",
        "ünïcødé ✓", "tab\there\nnewline",
    ])
    def test_text_fields_round_trip_exactly(self, book: Book, text: str) -> None:
        # The request travels as PostgreSQL array literals (ledger.repository): every text
        # field must come back as sent, whatever it contains.
        wallet = book.wallet("u1")
        entry = Entry(
            idempotency_key=f"key {text}", kind=f"kind {text}"[:64], effective_at=T0,
            source=f"source {text}", reference=text, reason=text or None,
            metadata={"note": text, text: [1, "x"]},
            lines=(Line(book.custody, 2**126), Line(wallet, -(2**126))),
        )
        posted = service.post_entry(book.engine, entry)
        with UnitOfWork(book.engine) as uow:
            record = service.get_transaction(uow, posted.transaction_id)
        assert (record.idempotency_key, record.kind, record.source, record.reference,
                record.reason, record.metadata) == (
            entry.idempotency_key, entry.kind, entry.source, entry.reference, entry.reason,
            dict(entry.metadata))
        assert [p.amount_minor for p in record.postings] == [2**126, -(2**126)]
        assert record.effective_at == T0
        # The same request again is a replay: the stored fingerprint is the one Python computes.
        assert service.post_entry(book.engine, entry).replayed

    def test_post_moves_money_and_bumps_versions(self, book: Book) -> None:
        wallet = book.wallet("u1")
        posted = service.post_entry(book.engine, transfer("k1", book.custody, wallet, 100))
        assert not posted.replayed
        with UnitOfWork(book.engine) as uow:
            custody, user = service.account_balances(uow, [book.custody, wallet])
        assert (custody.balance_minor, custody.version) == (100, 1)
        assert (user.balance_minor, user.raw_minor, user.version) == (100, -100, 1)

    def test_replay_returns_first_transaction_and_moves_nothing(self, book: Book) -> None:
        wallet = book.wallet("u1")
        first = service.post_entry(book.engine, transfer("k1", book.custody, wallet, 100))
        again = service.post_entry(book.engine, transfer("k1", book.custody, wallet, 100))
        assert again.transaction_id == first.transaction_id and again.replayed
        assert stored(book, book.custody, wallet) == [100, -100]
        assert count_transactions(book) == 1

    @pytest.mark.parametrize("change", ["amount", "reason", "effective_at", "account"])
    def test_same_key_different_request_conflicts(self, book: Book, change: str) -> None:
        wallet, other = book.wallet("u1"), book.wallet("u2")
        service.post_entry(book.engine, transfer("k1", book.custody, wallet, 100))
        changed = {
            "amount": transfer("k1", book.custody, wallet, 101),
            "reason": transfer("k1", book.custody, wallet, 100, reason="other"),
            "effective_at": transfer("k1", book.custody, wallet, 100, at=T0 + timedelta(seconds=1)),
            "account": transfer("k1", book.custody, other, 100),
        }[change]
        with pytest.raises(IdempotencyConflict):
            service.post_entry(book.engine, changed)
        assert stored(book, book.custody, wallet, other) == [100, -100, 0]

    def test_insufficient_funds_writes_nothing(self, book: Book) -> None:
        book.deposit("u1", 50, "d1")
        wallet = book.wallet("u1")
        with pytest.raises(InsufficientFunds):
            service.post_entry(book.engine, transfer("w1", wallet, book.custody, 51))
        assert stored(book, book.custody, wallet) == [50, -50]
        assert count_transactions(book) == 1
        # The key was not consumed: the same key can be used once the funds are there.
        book.deposit("u1", 1, "d2")
        service.post_entry(book.engine, transfer("w1", wallet, book.custody, 51))
        assert stored(book, wallet) == [0]

    def test_custody_cannot_go_negative(self, book: Book) -> None:
        with pytest.raises(InsufficientFunds):
            service.post_entry(book.engine, transfer("x", book.equity, book.custody, 1))

    def test_unbalanced_entry_refused_before_the_database(self, book: Book) -> None:
        entry = Entry("k", "t", T0, "tests", (Line(book.custody, 100), Line(book.equity, -99)))
        with pytest.raises(EntryInvalid, match="does not balance"):
            service.post_entry(book.engine, entry)

    def test_cross_asset_entry_refused(self, book: Book) -> None:
        entry = Entry(
            "k", "t", T0, "tests", (Line(book.custody, 100), Line(book.custody_eth, -100))
        )
        with pytest.raises(EntryInvalid, match="does not balance per asset"):
            service.post_entry(book.engine, entry)

    @pytest.mark.parametrize(
        "amount", [1.0, Decimal("100"), Decimal("1.5"), True, "100", 2**127, -(2**127), 0]
    )
    def test_bad_amounts_refused_before_the_database(self, book: Book, amount: object) -> None:
        entry = Entry("k", "t", T0, "tests", (Line(book.custody, amount), Line(book.equity, -1)))  # type: ignore[arg-type]
        with pytest.raises(AmountInvalid):
            service.post_entry(book.engine, entry)
        assert count_transactions(book) == 0

    def test_naive_effective_time_refused(self, book: Book) -> None:
        entry = transfer("k", book.custody, book.equity, 1, at=T0.replace(tzinfo=None))
        with pytest.raises(EntryInvalid, match="time zone"):
            service.post_entry(book.engine, entry)


class TestBatch:
    def test_each_item_keeps_its_own_verdict(self, book: Book) -> None:
        w1, w2 = book.wallet("u1"), book.wallet("u2")
        book.deposit("u1", 100, "seed")
        entries = [
            transfer("b1", w1, book.custody, 60),  # ok: 100 -> 40
            transfer("b2", w1, book.custody, 60),  # refused: only 40 left
            transfer("b3", book.custody, w2, 10),  # ok
            transfer("seed", book.custody, book.wallet("u1"), 100, kind="deposit"),  # replay
            transfer("seed", book.custody, w2, 5, kind="deposit"),  # conflict
            transfer("b4", w2, book.custody, 10),  # ok: funded by b3 earlier in the batch
        ]
        with UnitOfWork(book.engine) as uow:
            outcomes = service.post_batch(uow, entries)
            uow.commit()
        assert [o.status for o in outcomes] == [
            "posted",
            "insufficient_funds",
            "posted",
            "replayed",
            "conflict",
            "posted",
        ]
        assert isinstance(outcomes[1].error, InsufficientFunds)
        assert isinstance(outcomes[4].error, IdempotencyConflict)
        assert stored(book, w1, w2, book.custody) == [-40, 0, 40]
        assert integrity.verify(book.engine).ok

    def test_duplicate_key_inside_a_batch(self, book: Book) -> None:
        entry = transfer("dup", book.custody, book.wallet("u1"), 5)
        other = transfer("dup", book.custody, book.wallet("u1"), 6)
        with UnitOfWork(book.engine) as uow:
            outcomes = service.post_batch(uow, [entry, entry, other])
            uow.commit()
        assert [o.status for o in outcomes] == ["posted", "replayed", "conflict"]
        assert outcomes[0].transaction_id == outcomes[1].transaction_id
        assert stored(book, book.custody) == [5]

    def test_replayed_batch_moves_nothing(self, book: Book) -> None:
        entries = [transfer(f"k{i}", book.custody, book.wallet(f"u{i}"), i + 1) for i in range(20)]
        with UnitOfWork(book.engine) as uow:
            first = service.post_batch(uow, entries)
            uow.commit()
        with UnitOfWork(book.engine) as uow:
            second = service.post_batch(uow, entries)
            uow.commit()
        assert [o.transaction_id for o in first] == [o.transaction_id for o in second]
        assert {o.status for o in second} == {"replayed"}
        assert stored(book, book.custody) == [sum(range(1, 21))]


class TestPreparedBatch:
    def test_posts_what_post_batch_posts_at_the_time_given(self, book: Book) -> None:
        w1, w2 = book.wallet("u1"), book.wallet("u2")
        book.deposit("u1", 100, "seed")
        later = T0 + timedelta(days=3)
        entries = [
            transfer("p1", w1, book.custody, 60),  # ok: 100 -> 40
            transfer("p2", w1, book.custody, 60),  # refused: only 40 left
            replace(transfer("p3", book.custody, w2, 10), metadata={"deposit_id": 7, "why": ["x"]}),
        ]
        prepared = service.prepare_batch(entries)  # their own effective time is not used
        with UnitOfWork(book.engine) as uow:
            outcomes = service.post_prepared(uow, prepared, effective_at=later)
            uow.commit()
        assert [o.status for o in outcomes] == ["posted", "insufficient_funds", "posted"]
        assert isinstance(outcomes[1].error, InsufficientFunds)
        assert stored(book, w1, w2, book.custody) == [-40, -10, 50]
        # The same entries at that time are the same requests (same fingerprints): replays.
        with UnitOfWork(book.engine) as uow:
            again = service.post_batch(uow, [replace(e, effective_at=later) for e in entries])
            at_t0 = service.post_batch(uow, [entries[0]])
            uow.commit()
        assert [o.status for o in again] == ["replayed", "insufficient_funds", "replayed"]
        assert [o.transaction_id for o in again] == [o.transaction_id for o in outcomes]
        # Another effective time is another request.
        assert at_t0[0].status == "conflict"
        with book.engine.connect() as conn:
            effective = conn.execute(sa.text(
                "SELECT DISTINCT effective_at FROM ledger_transactions "
                "WHERE idempotency_key IN ('p1', 'p3')")).scalars().all()
        assert effective == [later]
        assert integrity.verify(book.engine).ok

    def test_malformed_entries_are_refused_before_anything_is_sent(self, book: Book) -> None:
        bad = Entry(idempotency_key="bad", kind="transfer", effective_at=T0, source="test",
                    lines=(Line(book.custody, 5), Line(book.wallet("u1"), -4)))
        with pytest.raises(EntryInvalid):
            service.prepare_batch([bad])
        prepared = service.prepare_batch([transfer("ok", book.custody, book.wallet("u1"), 5)])
        with pytest.raises(EntryInvalid), UnitOfWork(book.engine) as uow:
            service.post_prepared(uow, prepared, effective_at=datetime(2026, 1, 1))
        assert count_transactions(book) == 0

class TestReverse:
    def test_full_reversal_mirrors_and_references_the_original(self, book: Book) -> None:
        original = book.deposit("u1", 100, "d1")
        posted = run_in_transaction(
            book.engine,
            lambda uow: service.reverse(
                uow, original, idempotency_key="r1", reason="booked twice", source="admin:ann"
            ),
        )
        with UnitOfWork(book.engine) as uow:
            rev = service.get_transaction(uow, posted.transaction_id)
            orig = service.get_transaction(uow, original)
        assert rev.reverses_transaction_id == original
        assert (rev.reason, rev.source, rev.kind) == ("booked twice", "admin:ann", "reversal")
        assert rev.effective_at == orig.effective_at
        assert sorted(
            (p.account_id, p.amount_minor, p.reverses_posting_id) for p in rev.postings
        ) == sorted((p.account_id, -p.amount_minor, p.id) for p in orig.postings)
        assert stored(book, book.custody, book.wallet("u1")) == [0, 0]

    def test_second_full_reversal_refused(self, book: Book) -> None:
        original = book.deposit("u1", 100, "d1")
        def reverse(key: str) -> service.Posted:
            return run_in_transaction(
                book.engine,
                lambda uow: service.reverse(
                    uow, original, idempotency_key=key, reason="x", source="tests"
                ),
            )
        reverse("r1")
        with pytest.raises(ReversalExceedsOriginal):
            reverse("r2")
        assert stored(book, book.custody) == [0]

    def test_partial_reversals_up_to_the_original(self, book: Book) -> None:
        original = book.deposit("u1", 100, "d1")
        with UnitOfWork(book.engine) as uow:
            p1, p2 = (p.id for p in service.get_transaction(uow, original).postings)

        def part(key: str, amount: int) -> None:
            run_in_transaction(
                book.engine,
                lambda uow: service.reverse(
                    uow,
                    original,
                    idempotency_key=key,
                    reason="partial",
                    source="tests",
                    amounts={p1: amount, p2: amount},
                ),
            )

        part("r1", 30)
        part("r2", 70)
        with pytest.raises(ReversalExceedsOriginal):
            part("r3", 1)
        with pytest.raises(ReversalExceedsOriginal):  # a full reversal after partial ones
            run_in_transaction(
                book.engine,
                lambda uow: service.reverse(
                    uow, original, idempotency_key="r4", reason="x", source="tests"
                ),
            )
        assert stored(book, book.custody, book.wallet("u1")) == [0, 0]

    def test_partial_reversal_must_balance(self, book: Book) -> None:
        original = book.deposit("u1", 100, "d1")
        with UnitOfWork(book.engine) as uow:
            p1, p2 = (p.id for p in service.get_transaction(uow, original).postings)
            with pytest.raises(EntryInvalid, match="does not balance"):
                service.reverse(
                    uow,
                    original,
                    idempotency_key="r",
                    reason="x",
                    source="t",
                    amounts={p1: 10, p2: 9},
                )

    def test_reversal_cannot_overdraw_the_user(self, book: Book) -> None:
        deposit = book.deposit("u1", 100, "d1")
        service.post_entry(book.engine, transfer("spend", book.wallet("u1"), book.custody, 80))
        with pytest.raises(Exception) as excinfo:
            run_in_transaction(
                book.engine,
                lambda uow: service.reverse(
                    uow, deposit, idempotency_key="r", reason="x", source="t"
                ),
            )
        assert isinstance(excinfo.value, InsufficientFunds)


class TestBalances:
    def test_three_balances_example_from_the_design(self, book: Book) -> None:
        # posted 100, a 50 deposit at one confirmation, a 30 withdrawal reserved.
        book.deposit("u1", 100, "d1")
        wallet, withdrawals = book.wallet("u1"), book.withdrawals("u1")
        service.post_entry(book.engine, transfer("reserve", wallet, withdrawals, 30))
        with UnitOfWork(book.engine) as uow:
            (b,) = service.user_balances(uow, "u1", pending_incoming={"USDC": 50})
        assert (b.posted_minor, b.pending_incoming_minor, b.pending_outgoing_minor) == (100, 50, 30)
        assert (b.projected_minor, b.available_minor, b.pending_net_minor) == (120, 70, 20)

    def test_pending_incoming_is_zero_without_deposits(self, book: Book) -> None:
        book.deposit("u1", 5, "d1")
        with UnitOfWork(book.engine) as uow:
            (b,) = service.user_balances(uow, "u1")
        assert b.pending_incoming_minor == 0 and b.projected_minor == 5

    def test_amounts_near_2_pow_126_round_trip(self, book: Book) -> None:
        big = 2**126
        with UnitOfWork(book.engine) as uow:
            equity_eth = service.open_account(uow, chart.equity_owner(), book.eth)
            wallet_eth = service.open_account(uow, chart.user_wallet("whale"), book.eth)
            uow.commit()
        service.post_entry(book.engine, transfer("fund", book.custody_eth, equity_eth, big))
        service.post_entry(book.engine, transfer("credit", equity_eth, wallet_eth, big))
        with UnitOfWork(book.engine) as uow:
            custody, wallet = service.account_balances(uow, [book.custody_eth, wallet_eth])
            replayed = service.account_balance(uow, wallet_eth, known_at=T0 + timedelta(days=3650))
            (user,) = service.user_balances(uow, "whale")
            tx = service.get_transaction(uow, 1)
        assert custody.raw_minor == big and wallet.raw_minor == -big
        assert wallet.balance_minor == big and replayed.raw_minor == -big
        assert user.available_minor == big
        assert {p.amount_minor for p in tx.postings} == {big, -big}
        rendered = json.loads(json.dumps(amount_json(-big, 18)))
        assert int(rendered["minor"]) == -big
        assert rendered["decimal"] == "-85070591730234615865.843651857942052864"
        with pytest.raises(AmountInvalid):
            service.post_entry(
                book.engine, transfer("too-big", book.custody_eth, equity_eth, 2**127)
            )


class TestBitemporal:
    def _db_now(self, book: Book) -> datetime:
        with book.engine.connect() as conn:
            now: datetime = conn.execute(sa.text("SELECT clock_timestamp()")).scalar_one()
        return now

    def test_late_entry_changes_rebuilt_past_but_not_past_as_known(self, book: Book) -> None:
        yesterday = T0
        book.deposit("u1", 100, "d1", at=yesterday)
        known_yesterday = self._db_now(book)
        # Learned today: a deposit that really happened yesterday.
        book.deposit("u1", 40, "late", at=yesterday - timedelta(hours=1))
        wallet = book.wallet("u1")
        with UnitOfWork(book.engine) as uow:
            as_known = service.account_balance(
                uow, wallet, as_of=yesterday, known_at=known_yesterday
            )
            rebuilt = service.account_balance(uow, wallet, as_of=yesterday)
            before_anything = service.account_balance(
                uow, wallet, as_of=yesterday - timedelta(days=1)
            )
        assert as_known.balance_minor == 100
        assert rebuilt.balance_minor == 140
        assert before_anything.balance_minor == 0


class TestPeriods:
    def close(self, book: Book, ends_at: datetime) -> PeriodRecord:
        with UnitOfWork(book.engine) as uow:
            period = service.close_period(uow, ends_at, closed_by="controller", reason="month end")
            uow.commit()
        return period

    def test_closed_period_refuses_entries_but_takes_adjustments(self, book: Book) -> None:
        book.deposit("u1", 100, "d1", at=T0)
        period = self.close(book, T0 + timedelta(days=1))
        wallet = book.wallet("u1")
        with pytest.raises(PeriodClosed):
            service.post_entry(book.engine, transfer("late", book.custody, wallet, 5, at=T0))
        adjusted = service.post_entry(
            book.engine,
            transfer(
                "late", book.custody, wallet, 5, at=T0, out_of_period=True, reason="found late"
            ),
        )
        with UnitOfWork(book.engine) as uow:
            tx = service.get_transaction(uow, adjusted.transaction_id)
            at_close = service.account_balance(
                uow, wallet, as_of=period.ends_at, known_at=period.closed_at
            )
            now = service.account_balance(uow, wallet, as_of=period.ends_at)
        assert tx.out_of_period and tx.effective_at == T0 and tx.recorded_at > period.closed_at
        assert at_close.balance_minor == 100  # the closed period's figure never changes
        assert now.balance_minor == 105

    def test_adjustment_outside_closed_period_refused(self, book: Book) -> None:
        self.close(book, T0)
        with pytest.raises(NotOutOfPeriod):
            service.post_entry(
                book.engine,
                transfer(
                    "k",
                    book.custody,
                    book.wallet("u1"),
                    5,
                    at=T0 + timedelta(hours=1),
                    out_of_period=True,
                ),
            )
        service.post_entry(
            book.engine,
            transfer("k", book.custody, book.wallet("u1"), 5, at=T0 + timedelta(hours=1)),
        )

    def test_reversal_into_closed_period_needs_adjustment_flag(self, book: Book) -> None:
        original = book.deposit("u1", 100, "d1", at=T0)
        self.close(book, T0 + timedelta(days=1))
        with pytest.raises(PeriodClosed):
            run_in_transaction(
                book.engine,
                lambda uow: service.reverse(
                    uow, original, idempotency_key="r", reason="x", source="t"
                ),
            )
        run_in_transaction(
            book.engine,
            lambda uow: service.reverse(
                uow, original, idempotency_key="r", reason="x", source="t", out_of_period=True
            ),
        )
        assert stored(book, book.custody) == [0]

    def test_close_must_move_forward_and_not_into_the_future(self, book: Book) -> None:
        self.close(book, T0)
        with pytest.raises(PeriodCloseInvalid):
            self.close(book, T0)
        with pytest.raises(PeriodCloseInvalid):
            self.close(book, T0 + timedelta(days=36500))

    def test_periods_are_append_only(self, book: Book, owner: sa.Engine) -> None:
        self.close(book, T0)
        with pytest.raises(sa.exc.DBAPIError, match="append-only"):
            with owner.begin() as conn:
                conn.execute(sa.text("DELETE FROM ledger_periods"))


class TestTwoPersonPeriodClose:
    def propose(self, book: Book, ends_at: datetime, by: str = "carol") -> int:
        with UnitOfWork(book.engine) as uow:
            proposal = service.propose_period_close(uow, ends_at, proposed_by=by, reason="eom")
            uow.commit()
        return proposal.id

    def approve(self, book: Book, proposal_id: int, by: str) -> int:
        with UnitOfWork(book.engine) as uow:
            period = service.approve_period_close(uow, proposal_id, approved_by=by)
            uow.commit()
        return period.id

    def periods(self, book: Book) -> list[tuple[object, ...]]:
        with book.engine.connect() as conn:
            return [tuple(r) for r in conn.execute(sa.text(
                "SELECT p.closed_by, a.approved_by, q.proposed_by FROM ledger_periods p "
                "LEFT JOIN ledger_period_approvals a ON a.period_id = p.id "
                "LEFT JOIN ledger_period_proposals q ON q.id = a.proposal_id"))]

    def test_a_proposal_closes_nothing_until_someone_else_approves(self, book: Book) -> None:
        book.deposit("u1", 100, "d1", at=T0)
        proposal = self.propose(book, T0 + timedelta(days=1))
        # Still open: an entry effective before the proposed end is accepted.
        book.deposit("u1", 5, "d2", at=T0 + timedelta(hours=1))
        with pytest.raises(SecondApproverRequired):
            self.approve(book, proposal, "carol")
        assert self.periods(book) == []
        self.approve(book, proposal, "dave")
        assert self.periods(book) == [("dave", "dave", "carol")]
        with pytest.raises(PeriodClosed):
            book.deposit("u1", 5, "d3", at=T0 + timedelta(hours=2))
        with pytest.raises(SecondApproverRequired, match="approved already"):
            self.approve(book, proposal, "erin")

    def test_proposals_that_could_never_close_are_refused(self, book: Book) -> None:
        with pytest.raises(PeriodCloseInvalid, match="future"):
            self.propose(book, T0 + timedelta(days=36500))
        self.approve(book, self.propose(book, T0), "dave")
        with pytest.raises(PeriodCloseInvalid, match="already closed"):
            self.propose(book, T0 - timedelta(days=1))
        with pytest.raises(PeriodProposalNotFound):
            self.approve(book, 987_654, "dave")

    def test_a_proposal_overtaken_by_another_close_is_refused(self, book: Book) -> None:
        early = self.propose(book, T0)
        self.approve(book, self.propose(book, T0 + timedelta(days=1)), "dave")
        with pytest.raises(PeriodCloseInvalid, match="already closed"):
            self.approve(book, early, "dave")
        assert len(self.periods(book)) == 1

    def test_concurrent_approvals_close_once(self, book: Book) -> None:
        proposal = self.propose(book, T0)
        outcomes: list[str] = []

        def approve(who: str) -> None:
            try:
                run_in_transaction(book.engine, lambda uow: service.approve_period_close(
                    uow, proposal, approved_by=who))
                outcomes.append("closed")
            except PeriodCloseInvalid as exc:
                outcomes.append(type(exc).__name__)

        threads = [threading.Thread(target=approve, args=(f"admin{i}",)) for i in range(8)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        assert sorted(outcomes) == ["SecondApproverRequired"] * 7 + ["closed"]
        assert len(self.periods(book)) == 1

    def test_database_refuses_an_approval_by_the_proposer(self, book: Book) -> None:
        proposal = self.propose(book, T0)
        with pytest.raises(sa.exc.DBAPIError, match="the proposer cannot approve"):
            with book.engine.begin() as conn:
                period = conn.execute(sa.text(
                    "INSERT INTO ledger_periods (ends_at, closed_by) VALUES (:e, 'carol') "
                    "RETURNING id"), {"e": T0}).scalar_one()
                conn.execute(sa.text(
                    "INSERT INTO ledger_period_approvals (proposal_id, period_id, approved_by) "
                    "VALUES (:p, :i, 'carol')"), {"p": proposal, "i": period})
        assert self.periods(book) == []


class TestStatement:
    def test_running_balances_explain_the_balance_and_pages_continue(self, book: Book) -> None:
        book.deposit("u1", 100, "d1")
        wallet, withdrawals = book.wallet("u1"), book.withdrawals("u1")
        service.post_entry(book.engine, transfer("reserve", wallet, withdrawals, 30,
                                                 kind="withdrawal_reserve"))
        service.post_entry(book.engine, transfer("release", withdrawals, wallet, 30,
                                                 kind="withdrawal_release", reason="canceled"))
        book.deposit("u2", 7, "other user")  # not on u1's statement
        with UnitOfWork(book.engine) as uow:
            lines = service.statement(uow, "u1", "USDC")
            first = service.statement(uow, "u1", "USDC", limit=2)
            rest = service.statement(uow, "u1", "USDC", after_posting_id=first[-1].posting_id)
            (final,) = service.user_balances(uow, "u1")
        assert [(ln.kind, ln.account, ln.amount_minor, ln.available_minor, ln.posted_minor)
                for ln in lines] == [
            ("deposit", "wallet", 100, 100, 100),
            ("withdrawal_reserve", "wallet", -30, 70, 70),
            ("withdrawal_reserve", "withdrawals", 30, 70, 100),
            ("withdrawal_release", "withdrawals", -30, 70, 70),
            ("withdrawal_release", "wallet", 30, 100, 100),
        ]
        assert first + rest == lines
        assert lines[-1].reason == "canceled"
        assert (lines[-1].available_minor, lines[-1].posted_minor) == (
            final.available_minor, final.posted_minor)
