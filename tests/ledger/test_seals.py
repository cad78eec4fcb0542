"""Seals against a real PostgreSQL: the sealer covers every committed transaction exactly once
(including one that commits after a higher id), and verify names what a superuser with the
triggers disabled changed in a sealed range."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from config.uow import UnitOfWork
from ledger import integrity, sealing, service
from ledger.model import Entry, Line
from ledger.repository import seals as seals_repo
from ledger.seals import seal_once, verify_seals
from tests.ledger.conftest import Book, transfer

NOW = datetime(2026, 12, 2, 6, 0, tzinfo=UTC)


def _post(book: Book, n: int, prefix: str = "k") -> list[int]:
    wallet = book.wallet("u1")
    return [service.post_entry(book.engine, transfer(f"{prefix}{i}", book.custody, wallet,
                                                     100 + i)).transaction_id
            for i in range(n)]


def _seals(engine: Engine) -> list[seals_repo.SealRecord]:
    out = []
    with engine.connect() as conn:
        after = 0
        while (s := seals_repo.next_seal(conn, after)) is not None:
            out.append(s)
            after = s.id
    return out


def _verify(engine: Engine) -> list[tuple[str, str]]:
    """The findings of verify_seals, which must be the same with the leaves built by
    PostgreSQL and by Python."""
    with engine.connect() as conn:
        found = [(d.kind, d.subject) for d in verify_seals(conn).discrepancies]
        in_python = [(d.kind, d.subject) for d in verify_seals(conn, leaves="python")
                     .discrepancies]
    assert found == in_python
    return found


def _tamper(owner: Engine, *statements: str) -> None:
    with owner.begin() as conn:
        conn.execute(sa.text("SET LOCAL session_replication_role = replica"))
        for statement in statements:
            conn.execute(sa.text(statement))


class TestSealOnce:
    def test_every_transaction_in_exactly_one_contiguous_seal(self, book: Book) -> None:
        ids = _post(book, 5)
        made = seal_once(book.engine, NOW, max_transactions=2)
        assert [(s.from_transaction_id, s.through_transaction_id) for s in made] == [
            (1, ids[1]), (ids[1] + 1, ids[3]), (ids[3] + 1, ids[4])]
        assert [s.transactions_count for s in made] == [2, 2, 1]
        assert [s.postings_count for s in made] == [4, 4, 2]
        assert made[1].previous_hash == made[0].seal_hash
        assert seal_once(book.engine, NOW) == []
        later = _post(book, 2, "later")
        more = seal_once(book.engine, NOW)
        assert [(s.from_transaction_id, s.through_transaction_id) for s in more] == [
            (ids[4] + 1, later[1])]
        sealed = [tid for s in _seals(book.engine) for tid in s.transaction_ids]
        assert sealed == ids + later
        assert _verify(book.engine) == []

    def test_a_step_is_bounded_and_the_next_goes_on(self, book: Book) -> None:
        ids = _post(book, 5)
        assert len(seal_once(book.engine, NOW, max_transactions=1, seals_max=2)) == 2
        rest = seal_once(book.engine, NOW, max_transactions=1, seals_max=10)
        assert [s.through_transaction_id for s in rest] == ids[2:]

    def test_seals_are_append_only_for_the_owner(self, book: Book, owner: Engine) -> None:
        _post(book, 1)
        seal_once(book.engine, NOW)
        for statement in ("UPDATE ledger_seals SET sealed_at = now()", "DELETE FROM ledger_seals",
                          "TRUNCATE ledger_seals CASCADE"):
            with pytest.raises(sa.exc.DBAPIError, match="append-only"), owner.begin() as conn:
                conn.execute(sa.text(statement))

    def test_the_application_role_may_only_read_and_append(self, book: Book) -> None:
        _post(book, 1)
        seal_once(book.engine, NOW)
        with pytest.raises(sa.exc.ProgrammingError) as e, book.engine.begin() as conn:
            conn.execute(sa.text("UPDATE ledger_seals SET sealed_at = now()"))
        assert getattr(e.value.orig, "sqlstate", None) == "42501"


class TestCanonicalFormInSql:
    def test_postgres_builds_the_same_bytes_as_python(self, book: Book, owner: Engine) -> None:
        """The sealer hashes the canonical form PostgreSQL builds; it must equal
        ledger.sealing's byte for byte on every kind of value."""
        ids = _post(book, 3)
        with UnitOfWork(book.engine) as uow:
            service.reverse(uow, ids[0], idempotency_key="rev", reason="wrong user", source="t")
            uow.commit()
        reserve = transfer("reserve", book.wallet("u1"), book.withdrawals("u1"), 50)
        posted = service.post_entry(book.engine, reserve)
        with book.engine.connect() as conn:
            first = conn.execute(sa.text("SELECT min(id) FROM ledger_postings WHERE "
                                         f"transaction_id = {posted.transaction_id}")).scalar()
        closing = Entry(idempotency_key="close", kind="withdrawal_release",
                        effective_at=NOW, source="tests", reference="w:1",
                        lines=(Line(book.withdrawals("u1"), 50),
                               Line(book.wallet("u1"), -50, closes_posting_id=first)))
        last = service.post_entry(book.engine, closing).transaction_id
        # Values no service would write, to cover every escape and the out_of_period flag.
        odd = 'Z\u00fcrich "q" \\ \n\t\b\f\r \x01 \x1f \x7f \u2028 \U0001F600 /'
        with owner.begin() as conn:
            conn.execute(sa.text("SET LOCAL session_replication_role = replica"))
            conn.execute(sa.text("UPDATE ledger_transactions SET out_of_period = true,"
                                 " reason = :odd, reference = :odd WHERE id = :id"),
                         {"odd": odd, "id": ids[1]})
        with book.engine.connect() as conn:
            facts = seals_repo.transaction_facts(conn, 1, last)
            leaves = seals_repo.transaction_leaves(conn, 1, last)
            assert seals_repo.transaction_leaves(conn, 1, last, limit=2).ids == leaves.ids[:2]
        odd_tx = next(tx for tx in facts if tx.id == ids[1])
        assert odd_tx.out_of_period and odd_tx.reason == odd
        assert any(p.closes_posting_id for tx in facts for p in tx.postings)
        assert any(p.reverses_posting_id for tx in facts for p in tx.postings)
        assert any(tx.reverses_transaction_id for tx in facts)
        assert leaves.ids == [tx.id for tx in facts]
        assert leaves.leaves == [sealing.leaf_hash(tx) for tx in facts]
        assert leaves.postings_count == sum(len(tx.postings) for tx in facts)


class TestOutOfOrderCommit:
    def test_a_lower_id_committed_later_lands_in_the_next_seal(self, book: Book) -> None:
        """Two real connections: a transaction holds a lower id open while a higher one
        commits; the sealer must not seal past the open one, and seals it once it commits."""
        first = _post(book, 1, "before")
        seal_once(book.engine, NOW)
        wallet, other = book.wallet("u1"), book.wallet("u2", book.eth)
        held = UnitOfWork(book.engine)
        with held:
            low = service.post(held, transfer("low", book.custody, wallet, 7)).transaction_id
            # Other accounts: the open transaction holds its balance rows.
            high = service.post_entry(book.engine, transfer(
                "high", book.custody_eth, other, 8)).transaction_id
            assert low < high
            # The gate stays busy while `low` is open: this step seals nothing (not `high`
            # alone, which would skip `low` for ever).
            assert seal_once(book.engine, NOW, gate_timeout_ms=200) == []
            # A sealer that waits for the gate: it seals both once `low` commits.
            result: list[list[seals_repo.SealRecord]] = []
            sealer = threading.Thread(target=lambda: result.append(
                seal_once(book.engine, NOW, gate_timeout_ms=20_000)))
            sealer.start()
            time.sleep(0.3)
            assert sealer.is_alive(), "the sealer must wait for the open transaction"
            held.commit()
        sealer.join(timeout=30)
        assert [s.transaction_ids for s in result[0]] == [(low, high)]
        sealed = [tid for s in _seals(book.engine) for tid in s.transaction_ids]
        assert sealed == first + [low, high]
        assert _verify(book.engine) == []


def _sealed_book(book: Book) -> list[int]:
    ids = _post(book, 6)
    seal_once(book.engine, NOW, max_transactions=3)
    return ids


Tamper = Callable[[Engine, list[int]], None]


def _change_amount(owner: Engine, ids: list[int]) -> None:
    # Both lines, so the transaction still balances: only the seal can tell.
    _tamper(owner, "UPDATE ledger_postings SET amount = amount * 10"
                   f" WHERE transaction_id = {ids[1]}")


def _delete_posting(owner: Engine, ids: list[int]) -> None:
    _tamper(owner, f"DELETE FROM ledger_postings WHERE id = (SELECT max(id) FROM ledger_postings"
                   f" WHERE transaction_id = {ids[4]})")


def _reorder(owner: Engine, ids: list[int]) -> None:
    a, b = ids[0], ids[1]
    _tamper(owner,
            f"UPDATE ledger_transactions SET id = -1 WHERE id = {a}",
            f"UPDATE ledger_postings SET transaction_id = -1 WHERE transaction_id = {a}",
            f"UPDATE ledger_transactions SET id = {a} WHERE id = {b}",
            f"UPDATE ledger_postings SET transaction_id = {a} WHERE transaction_id = {b}",
            f"UPDATE ledger_transactions SET id = {b} WHERE id = -1",
            f"UPDATE ledger_postings SET transaction_id = {b} WHERE transaction_id = -1")


class TestTamperDetected:
    @pytest.mark.parametrize(("tamper", "kinds", "subject"), [
        (_change_amount, {"seal_root_mismatch", "seal_transaction_changed"}, "transaction {1}"),
        (_delete_posting, {"seal_root_mismatch", "seal_counts", "seal_transaction_changed"},
         "transaction {4}"),
        (_reorder, {"seal_root_mismatch", "seal_transactions_reordered"},
         "transactions {0} and {1}"),
    ], ids=["changed_amount", "deleted_posting", "reordered"])
    def test_is_named(self, book: Book, owner: Engine, tamper: Tamper, kinds: set[str],
                      subject: str) -> None:
        ids = _sealed_book(book)
        assert _verify(book.engine) == []
        tamper(owner, ids)
        found = _verify(book.engine)
        assert {k for k, _ in found} == kinds, found
        named = subject.format(*ids)
        assert any(s.endswith(named) for k, s in found if k.startswith("seal_transaction")), found

    def test_inserted_transaction_in_a_sealed_range(self, book: Book, owner: Engine) -> None:
        wallet = book.wallet("u1")
        first = _post(book, 1, "a")
        with owner.begin() as conn:  # a gap in the ids: a rolled-back writer leaves these
            gap = conn.execute(sa.text("SELECT nextval('ledger_transactions_id_seq')")).scalar()
        last = _post(book, 1, "b")
        seal_once(book.engine, NOW)
        assert _seals(book.engine)[0].transaction_ids == (first[0], last[0])
        _tamper(owner,
                "INSERT INTO ledger_transactions (id, idempotency_key, fingerprint, kind,"
                " effective_at, recorded_at, source, out_of_period, metadata)"
                f" VALUES ({gap}, 'forged', repeat('f', 64), 'transfer', now(), now(), 'x',"
                " false, '{}')",
                "INSERT INTO ledger_postings (transaction_id, line_no, account_id, asset_id,"
                " amount)"
                f" VALUES ({gap}, 1, {book.custody.id}, {book.usdc.id}, 5),"
                f" ({gap}, 2, {wallet.id}, {book.usdc.id}, -5)")
        found = _verify(book.engine)
        assert ("seal_transaction_inserted", f"seal 1: transaction {gap}") in found, found
        assert {k for k, _ in found} == {"seal_root_mismatch", "seal_counts",
                                         "seal_transaction_inserted"}

    def test_deleted_transaction_and_altered_seal_row(self, book: Book, owner: Engine) -> None:
        ids = _sealed_book(book)
        _tamper(owner, f"DELETE FROM ledger_postings WHERE transaction_id = {ids[2]}",
                f"DELETE FROM ledger_transactions WHERE id = {ids[2]}",
                "UPDATE ledger_seals SET postings_count = postings_count + 1 WHERE id = 2")
        found = _verify(book.engine)
        assert ("seal_transaction_missing", f"seal 1: transaction {ids[2]}") in found, found
        assert any(k == "seal_hash_mismatch" and s.startswith("seal 2 ") for k, s in found)

    def test_integrity_verify_reports_seal_findings(self, book: Book, owner: Engine) -> None:
        ids = _sealed_book(book)
        _change_amount(owner, ids)
        kinds = {d.kind for d in integrity.verify(book.engine, full=True).discrepancies}
        assert "seal_transaction_changed" in kinds


class TestCheckpointLink:
    def test_verify_starts_after_the_checkpoint_seal_and_full_from_the_first(
            self, book: Book, owner: Engine) -> None:
        ids = _sealed_book(book)  # seals 1 and 2
        cp = integrity.create_checkpoint(book.engine)
        _post(book, 2, "after")
        seal_once(book.engine, NOW)  # seal 3
        with book.engine.connect() as conn:
            assert seals_repo.checkpoint_seal_link(conn, cp.id) == (
                2, _seals(book.engine)[1].seal_hash)
            assert verify_seals(conn, cp).seals_checked == 1
            assert verify_seals(conn, cp).anchor_seal_id == 2
            assert verify_seals(conn).seals_checked == 3
        _change_amount(owner, ids)  # inside seal 1, before the checkpoint's seal
        assert integrity.verify(book.engine).ok
        full = {d.kind for d in integrity.verify(book.engine, full=True).discrepancies}
        assert "seal_transaction_changed" in full

    def test_an_altered_anchor_seal_breaks_the_link(self, book: Book, owner: Engine) -> None:
        _sealed_book(book)
        cp = integrity.create_checkpoint(book.engine)
        _tamper(owner, "UPDATE ledger_seals SET seal_hash = repeat('a', 64) WHERE id = 2")
        with book.engine.connect() as conn:
            report = verify_seals(conn, cp)
        kinds = [(d.kind, d.subject) for d in report.discrepancies]
        assert ("checkpoint_seal_link", f"checkpoint {cp.id}") in kinds
        # It fell back to the whole chain, which finds the altered seal itself.
        assert report.seals_checked == 2 and report.anchor_seal_id is None
        assert any(k == "seal_hash_mismatch" for k, _ in kinds)

