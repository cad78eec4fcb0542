"""The database's own guards, proved with raw SQL that bypasses the Python layer.

Each test writes through a plain connection, as the application role (``engine``) and, where
the point is that the trigger holds even for the table owner, as the owner (``owner``).
"""

from __future__ import annotations

import contextlib
import json
import re
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from config.uow import UnitOfWork
from ledger import repository as repo
from ledger import service
from tests.ledger.conftest import Book, transfer

LIMIT = 2**127


def new_txn(conn: Connection, key: str, **extra: object) -> int:
    """Insert a bare ledger transaction row and return its id."""
    cols = {
        "idempotency_key": key,
        "fingerprint": "0" * 64,
        "kind": "raw",
        "effective_at": "2026-11-01T00:00:00Z",
        "source": "raw-sql",
        **extra,
    }
    names = ", ".join(cols)
    values = ", ".join(f":{c}" for c in cols)
    return int(
        conn.execute(
            sa.text(f"INSERT INTO ledger_transactions ({names}) VALUES ({values}) RETURNING id"),
            cols,
        ).scalar_one()
    )


def add_posting(
    conn: Connection,
    txn: int,
    line: int,
    account_id: int,
    asset_id: int,
    amount: object,
    **extra: object,
) -> None:
    """Insert a posting row."""
    cols = {
        "transaction_id": txn,
        "line_no": line,
        "account_id": account_id,
        "asset_id": asset_id,
        "amount": amount,
        **extra,
    }
    names = ", ".join(cols)
    values = ", ".join(f":{c}" for c in cols)
    conn.execute(sa.text(f"INSERT INTO ledger_postings ({names}) VALUES ({values})"), cols)


def sqlstate_of(excinfo: pytest.ExceptionInfo[sa.exc.DBAPIError]) -> str:
    return str(excinfo.value.orig.sqlstate)  # type: ignore[union-attr]


def count(engine: Engine, table: str) -> int:
    with engine.connect() as conn:
        return int(conn.execute(sa.text(f"SELECT count(*) FROM {table}")).scalar_one())


class TestBalancedPerAsset:
    def test_balanced_transaction_commits(self, book: Book) -> None:
        with book.engine.begin() as conn:
            txn = new_txn(conn, "ok")
            # Two statements in one database transaction: the check runs at commit, not per row.
            add_posting(conn, txn, 1, book.custody.id, book.usdc.id, 100)
            add_posting(conn, txn, 2, book.equity.id, book.usdc.id, -100)
        assert count(book.engine, "ledger_postings") == 2

    def test_unbalanced_transaction_refused_at_commit(self, book: Book) -> None:
        conn = book.engine.connect()
        conn.begin()
        txn = new_txn(conn, "bad")
        add_posting(conn, txn, 1, book.custody.id, book.usdc.id, 100)  # accepted until commit
        add_posting(conn, txn, 2, book.equity.id, book.usdc.id, -99)
        with pytest.raises(sa.exc.DBAPIError, match="does not balance") as excinfo:
            conn.commit()
        assert sqlstate_of(excinfo) == "23514"
        conn.close()
        assert count(book.engine, "ledger_transactions") == 0

    def test_balanced_in_total_but_not_per_asset_refused(self, book: Book) -> None:
        with pytest.raises(sa.exc.DBAPIError, match="does not balance in asset"):
            with book.engine.begin() as conn:
                txn = new_txn(conn, "cross-asset")
                add_posting(conn, txn, 1, book.custody.id, book.usdc.id, 100)
                add_posting(conn, txn, 2, book.custody_eth.id, book.eth.id, -100)
        assert count(book.engine, "ledger_postings") == 0

    def test_transaction_without_postings_refused(self, book: Book) -> None:
        with pytest.raises(sa.exc.DBAPIError, match="has no postings"):
            with book.engine.begin() as conn:
                new_txn(conn, "empty")

    def test_postings_cannot_join_a_committed_transaction(self, book: Book) -> None:
        with book.engine.begin() as conn:
            txn = new_txn(conn, "closed")
            add_posting(conn, txn, 1, book.custody.id, book.usdc.id, 5)
            add_posting(conn, txn, 2, book.equity.id, book.usdc.id, -5)
        with pytest.raises(sa.exc.DBAPIError, match="can only be written with it"):
            with book.engine.begin() as conn:
                # Balanced, so only the "closed transaction" rule can refuse it.
                add_posting(conn, txn, 3, book.custody.id, book.usdc.id, 7)
                add_posting(conn, txn, 4, book.equity.id, book.usdc.id, -7)


class TestAppendOnly:
    @pytest.fixture
    def posted(self, book: Book) -> Book:
        book.deposit("u1", 100, "d1")
        return book

    @pytest.mark.parametrize(
        "statement",
        [
            "UPDATE ledger_postings SET amount = amount * 2",
            "DELETE FROM ledger_postings",
            "TRUNCATE ledger_postings CASCADE",
            "UPDATE ledger_transactions SET reason = 'edited'",
            "DELETE FROM ledger_transactions",
            "TRUNCATE ledger_transactions CASCADE",
        ],
    )
    def test_app_role_lacks_the_privilege(self, posted: Book, statement: str) -> None:
        with pytest.raises(sa.exc.DBAPIError) as excinfo:
            with posted.engine.begin() as conn:
                conn.execute(sa.text(statement))
        assert sqlstate_of(excinfo) == "42501"

    @pytest.mark.parametrize(
        "statement",
        [
            "UPDATE ledger_postings SET amount = amount * 2",
            "DELETE FROM ledger_postings",
            "TRUNCATE ledger_postings CASCADE",
            "UPDATE ledger_transactions SET reason = 'edited'",
            "DELETE FROM ledger_transactions",
            "TRUNCATE ledger_transactions CASCADE",
            "UPDATE accounts SET type = 'asset'",
            "DELETE FROM accounts",
            "DELETE FROM assets",
        ],
    )
    def test_trigger_refuses_even_the_owner(
        self, posted: Book, owner: Engine, statement: str
    ) -> None:
        with pytest.raises(sa.exc.DBAPIError, match="append-only"):
            with owner.begin() as conn:
                conn.execute(sa.text(statement))
        assert count(posted.engine, "ledger_postings") == 2

    def test_app_role_cannot_disable_triggers(self, posted: Book) -> None:
        with pytest.raises(sa.exc.DBAPIError) as excinfo:
            with posted.engine.begin() as conn:
                conn.execute(sa.text("SET session_replication_role = replica"))
        assert sqlstate_of(excinfo) == "42501"

    def test_engine_sessions_run_as_app_role(self, posted: Book) -> None:
        with posted.engine.connect() as conn:
            assert conn.execute(sa.text("SELECT current_user")).scalar() == "custody_app"

    def test_app_role_privileges_on_ledger_tables(self, posted: Book, owner: Engine) -> None:
        with owner.connect() as conn:
            rows = conn.execute(
                sa.text(
                    "SELECT table_name, privilege_type FROM information_schema.role_table_grants "
                    "WHERE grantee = 'custody_app' AND table_name IN "
                    "('ledger_transactions', 'ledger_postings')"
                )
            ).all()
        privileges = {(t, p) for t, p in rows}
        assert privileges == {
            (t, p) for t in ("ledger_transactions", "ledger_postings") for p in ("SELECT", "INSERT")
        }


class TestPostingColumns:
    def test_asset_must_equal_the_accounts_asset(self, book: Book) -> None:
        with pytest.raises(sa.exc.DBAPIError) as excinfo:
            with book.engine.begin() as conn:
                txn = new_txn(conn, "wrong-asset")
                # custody (USDC account) posted as ETH, balanced in ETH.
                add_posting(conn, txn, 1, book.custody.id, book.eth.id, 100)
                add_posting(conn, txn, 2, book.custody_eth.id, book.eth.id, -100)
        assert sqlstate_of(excinfo) == "23503"

    @pytest.mark.parametrize(
        "amount, sqlstate",
        [
            (0, "23514"),
            ("1.5", "23514"),  # a fraction: refused, never rounded
            ("0.4", "23514"),
            (str(LIMIT), "23514"),
            (str(-LIMIT), "23514"),
            (str(10**40), "23514"),
        ],
    )
    def test_bad_amounts_refused(self, book: Book, amount: object, sqlstate: str) -> None:
        with pytest.raises(sa.exc.DBAPIError) as excinfo:
            with book.engine.begin() as conn:
                txn = new_txn(conn, "bad-amount")
                conn.execute(
                    sa.text(
                        "INSERT INTO ledger_postings (transaction_id, line_no, account_id, "
                        "asset_id, amount) VALUES (:t, 1, :a, :s, CAST(:m AS numeric))"
                    ),
                    {"t": txn, "a": book.custody.id, "s": book.usdc.id, "m": str(amount)},
                )
        assert sqlstate_of(excinfo) == sqlstate

    def test_largest_amounts_accepted(self, book: Book) -> None:
        with book.engine.begin() as conn:
            txn = new_txn(conn, "max")
            add_posting(conn, txn, 1, book.custody.id, book.usdc.id, LIMIT - 1)
            add_posting(conn, txn, 2, book.equity.id, book.usdc.id, -(LIMIT - 1))
        with book.engine.connect() as conn:
            got = conn.execute(sa.text("SELECT amount FROM ledger_postings ORDER BY line_no")).all()
        assert [int(r.amount) for r in got] == [LIMIT - 1, -(LIMIT - 1)]

    def test_recorded_at_is_set_by_the_database(self, book: Book) -> None:
        with book.engine.begin() as conn:
            txn = new_txn(conn, "backdated", recorded_at="2001-01-01T00:00:00Z")
            add_posting(conn, txn, 1, book.custody.id, book.usdc.id, 1)
            add_posting(conn, txn, 2, book.equity.id, book.usdc.id, -1)
            now = conn.execute(sa.text("SELECT now()")).scalar_one()
        with book.engine.connect() as conn:
            recorded = conn.execute(
                sa.text("SELECT recorded_at FROM ledger_transactions")
            ).scalar_one()
        assert recorded >= now


class TestBalanceProjection:
    def test_flag_enforced_by_check(self, book: Book) -> None:
        wallet = book.wallet("u1")
        with pytest.raises(sa.exc.DBAPIError) as excinfo:
            with book.engine.begin() as conn:
                # A user wallet may not have debits above credits (raw balance > 0).
                conn.execute(
                    sa.text("UPDATE account_balances SET balance = 1 WHERE account_id = :a"),
                    {"a": wallet.id},
                )
        assert sqlstate_of(excinfo) == "23514"

    def test_flags_cannot_be_changed(self, book: Book) -> None:
        wallet = book.wallet("u1")
        with pytest.raises(sa.exc.DBAPIError, match="only balance and version"):
            with book.engine.begin() as conn:
                conn.execute(
                    sa.text(
                        "UPDATE account_balances SET debits_must_not_exceed_credits = false "
                        "WHERE account_id = :a"
                    ),
                    {"a": wallet.id},
                )

    # The guard fires only for an UPDATE that names one of these columns: each of them
    # alone, and one next to a balance change, as the application role and as the owner.
    @pytest.mark.parametrize("as_owner", [False, True], ids=["app", "owner"])
    @pytest.mark.parametrize(
        "assignment",
        [
            "account_id = account_id + 1",
            "asset_id = :eth",
            "debits_must_not_exceed_credits = NOT debits_must_not_exceed_credits",
            "credits_must_not_exceed_debits = NOT credits_must_not_exceed_debits",
            "balance = balance - 1, credits_must_not_exceed_debits = true",
        ],
    )
    def test_every_immutable_column_is_guarded(
        self, book: Book, owner: Engine, assignment: str, as_owner: bool
    ) -> None:
        wallet = book.wallet("u1")
        engine = owner if as_owner else book.engine
        before = self._row(book, wallet.id)
        with pytest.raises(sa.exc.DBAPIError, match="only balance and version"):
            with engine.begin() as conn:
                conn.execute(
                    sa.text(f"UPDATE account_balances SET {assignment} WHERE account_id = :a"),
                    {"a": wallet.id, "eth": book.eth.id},
                )
        assert self._row(book, wallet.id) == before

    def test_naming_an_immutable_column_unchanged_is_allowed(self, book: Book) -> None:
        # The WHEN clause still decides: the same value is no change.
        wallet = book.wallet("u1")
        before = self._row(book, wallet.id)
        with book.engine.begin() as conn:
            conn.execute(
                sa.text("UPDATE account_balances SET version = version + 1, "
                        "debits_must_not_exceed_credits = debits_must_not_exceed_credits "
                        "WHERE account_id = :a"),
                {"a": wallet.id},
            )
        after = self._row(book, wallet.id)
        assert after[4] == before[4] + 1
        assert after[:4] == before[:4] and after[5] == before[5]

    def test_balance_rows_have_only_the_known_triggers(self, owner: Engine) -> None:
        # A BEFORE UPDATE trigger that assigned account_id, asset_id or a flag in NEW would get
        # past account_balances_immutable, which fires only for UPDATEs naming those columns
        # (triggers/account_balances.sql): a new trigger here must be checked against that.
        with owner.connect() as conn:
            triggers = conn.execute(sa.text(
                "SELECT tgname, pg_get_triggerdef(oid) FROM pg_trigger "
                "WHERE tgrelid = 'account_balances'::regclass AND NOT tgisinternal "
                "ORDER BY tgname")).all()
        assert [name for name, _ in triggers] == [
            "account_balances_guard", "account_balances_immutable"]
        definitions = {str(name): str(text) for name, text in triggers}
        assert "BEFORE INSERT ON" in definitions["account_balances_guard"]
        assert ("BEFORE UPDATE OF account_id, asset_id, debits_must_not_exceed_credits, "
                "credits_must_not_exceed_debits ON") in definitions["account_balances_immutable"]

    @staticmethod
    def _row(book: Book, account_id: int) -> tuple[int, int, bool, bool, int, int]:
        """(account, asset, both flags, version, balance) of a balance row."""
        with book.engine.connect() as conn:
            r = conn.execute(
                sa.text("SELECT account_id, asset_id, debits_must_not_exceed_credits, "
                        "credits_must_not_exceed_debits, version, balance "
                        "FROM account_balances WHERE account_id = :a"),
                {"a": account_id},
            ).one()
        return int(r[0]), int(r[1]), bool(r[2]), bool(r[3]), int(r[4]), int(r[5])


class TestReversalGuard:
    def test_raw_reversal_beyond_original_refused(self, book: Book) -> None:
        original = book.deposit("u1", 100, "d1")
        with book.engine.connect() as conn:
            p1, p2 = [
                r.id
                for r in conn.execute(
                    sa.text(
                        "SELECT id FROM ledger_postings WHERE transaction_id = :t ORDER BY line_no"
                    ),
                    {"t": original},
                )
            ]
        with pytest.raises(sa.exc.DBAPIError, match="exceeds the original"):
            with book.engine.begin() as conn:
                txn = new_txn(conn, "rev", reverses_transaction_id=original)
                add_posting(
                    conn, txn, 1, book.custody.id, book.usdc.id, -101, reverses_posting_id=p1
                )
                add_posting(
                    conn, txn, 2, book.wallet("u1").id, book.usdc.id, 101, reverses_posting_id=p2
                )

    def test_raw_reversal_with_same_sign_refused(self, book: Book) -> None:
        original = book.deposit("u1", 100, "d1")
        with book.engine.connect() as conn:
            p1 = conn.execute(
                sa.text("SELECT id FROM ledger_postings WHERE transaction_id = :t AND line_no = 1"),
                {"t": original},
            ).scalar_one()
        with pytest.raises(sa.exc.DBAPIError, match="does not mirror"):
            with book.engine.begin() as conn:
                txn = new_txn(conn, "rev", reverses_transaction_id=original)
                add_posting(conn, txn, 1, book.custody.id, book.usdc.id, 10, reverses_posting_id=p1)
                add_posting(conn, txn, 2, book.equity.id, book.usdc.id, -10)


def insert_postings(conn: Connection, rows: list[dict[str, object]]) -> None:
    """Insert several postings with ONE statement (the guards run once per statement)."""
    cols = ["transaction_id", "line_no", "account_id", "asset_id", "amount",
            "closes_posting_id", "reverses_posting_id"]
    values = ", ".join(
        "(" + ", ".join(f"CAST(:{c}{i} AS {'numeric' if c == 'amount' else 'bigint'})"
                        for c in cols) + ")"
        for i in range(len(rows))
    )
    params = {f"{c}{i}": row.get(c) for i, row in enumerate(rows) for c in cols}
    conn.execute(sa.text(f"INSERT INTO ledger_postings ({', '.join(cols)}) VALUES {values}"),
                 params)


def posting_ids(book: Book, txn: int) -> list[int]:
    with book.engine.connect() as conn:
        return [
            int(r.id)
            for r in conn.execute(
                sa.text(
                    "SELECT id FROM ledger_postings WHERE transaction_id = :t ORDER BY line_no"
                ),
                {"t": txn},
            )
        ]


class TestStatementLevelGuards:
    """The posting and period guards run once per INSERT statement over all its rows: multi-row
    inserts by raw SQL must be refused exactly as row-by-row inserts are."""

    def test_multi_row_insert_into_a_committed_transaction_refused(self, book: Book) -> None:
        txn = book.deposit("u1", 100, "d1")
        wallet = book.wallet("u1")
        with pytest.raises(sa.exc.DBAPIError, match="can only be written with it") as excinfo:
            with book.engine.begin() as conn:
                fresh = new_txn(conn, "fresh")
                # One statement: two rows for the new transaction, two for the committed one.
                insert_postings(conn, [
                    dict(transaction_id=fresh, line_no=1, account_id=book.custody.id,
                         asset_id=book.usdc.id, amount=5),
                    dict(transaction_id=fresh, line_no=2, account_id=wallet.id,
                         asset_id=book.usdc.id, amount=-5),
                    dict(transaction_id=txn, line_no=3, account_id=book.custody.id,
                         asset_id=book.usdc.id, amount=7),
                    dict(transaction_id=txn, line_no=4, account_id=wallet.id,
                         asset_id=book.usdc.id, amount=-7),
                ])
        assert sqlstate_of(excinfo) == "23514"
        assert count(book.engine, "ledger_postings") == 2

    def test_postings_of_a_transaction_written_in_a_savepoint_refused(self, book: Book) -> None:
        # The gate argument (no gate trigger on postings) relies on this: a transaction row
        # written in a subtransaction carries the subtransaction's xid, not ours.
        with pytest.raises(sa.exc.DBAPIError, match="can only be written with it"):
            with book.engine.begin() as conn:
                with conn.begin_nested():
                    txn = new_txn(conn, "nested")
                add_posting(conn, txn, 1, book.custody.id, book.usdc.id, 5)

    def test_postings_insert_holds_the_write_gate(self, book: Book, owner: Engine) -> None:
        with book.engine.connect() as conn:
            conn.begin()
            txn = new_txn(conn, "gated")
            insert_postings(conn, [
                dict(transaction_id=txn, line_no=1, account_id=book.custody.id,
                     asset_id=book.usdc.id, amount=5),
                dict(transaction_id=txn, line_no=2, account_id=book.equity.id,
                     asset_id=book.usdc.id, amount=-5),
            ])
            with owner.connect() as other:
                # What a period close or a checkpoint watermark would need: refused while the
                # writer is in flight.
                taken = other.execute(sa.text("SELECT pg_try_advisory_xact_lock(7301, 1)"))
                assert taken.scalar_one() is False
            conn.commit()
        with owner.connect() as other:
            taken = other.execute(sa.text("SELECT pg_try_advisory_xact_lock(7301, 1)"))
            assert taken.scalar_one() is True

    def test_multi_row_reversal_beyond_original_refused(self, book: Book) -> None:
        original = book.deposit("u1", 100, "d1")
        book.deposit("u1", 1000, "d2")
        p1, p2 = posting_ids(book, original)
        wallet = book.wallet("u1")
        with pytest.raises(sa.exc.DBAPIError, match="exceeds the original") as excinfo:
            with book.engine.begin() as conn:
                txn = new_txn(conn, "rev", reverses_transaction_id=original)
                # Each line alone reverses 60 of 100; together 120.
                insert_postings(conn, [
                    dict(transaction_id=txn, line_no=n, account_id=acc, asset_id=book.usdc.id,
                         amount=amount, reverses_posting_id=pid)
                    for n, (acc, amount, pid) in enumerate([
                        (book.custody.id, -60, p1), (book.custody.id, -60, p1),
                        (wallet.id, 60, p2), (wallet.id, 60, p2)], start=1)
                ])
        assert sqlstate_of(excinfo) == "23514"

    def test_multi_row_reversal_mismatch_refused(self, book: Book) -> None:
        original = book.deposit("u1", 100, "d1")
        p1, p2 = posting_ids(book, original)
        wallet = book.wallet("u1")
        with pytest.raises(sa.exc.DBAPIError, match="does not mirror"):
            with book.engine.begin() as conn:
                txn = new_txn(conn, "rev", reverses_transaction_id=original)
                # The second line names the wrong account for its original.
                insert_postings(conn, [
                    dict(transaction_id=txn, line_no=1, account_id=book.custody.id,
                         asset_id=book.usdc.id, amount=-10, reverses_posting_id=p1),
                    dict(transaction_id=txn, line_no=2, account_id=book.equity.id,
                         asset_id=book.usdc.id, amount=10, reverses_posting_id=p2),
                ])
        assert wallet.id != book.equity.id

    def test_reversal_of_another_transaction_refused(self, book: Book) -> None:
        original = book.deposit("u1", 100, "d1")
        other = book.deposit("u1", 100, "d2")
        p1, _ = posting_ids(book, original)
        with pytest.raises(sa.exc.DBAPIError, match="does not mirror"):
            with book.engine.begin() as conn:
                txn = new_txn(conn, "rev", reverses_transaction_id=other)
                add_posting(conn, txn, 1, book.custody.id, book.usdc.id, -10,
                            reverses_posting_id=p1)
                add_posting(conn, txn, 2, book.equity.id, book.usdc.id, 10)

    def test_closing_beyond_the_open_amount_refused(self, book: Book) -> None:
        opened = book.deposit("u1", 100, "d1")
        book.deposit("u1", 1000, "d2")
        _, wallet_line = posting_ids(book, opened)
        wallet = book.wallet("u1")
        with book.engine.begin() as conn:  # closes 70 of the 100: fine
            txn = new_txn(conn, "c1")
            insert_postings(conn, [
                dict(transaction_id=txn, line_no=1, account_id=wallet.id, asset_id=book.usdc.id,
                     amount=70, closes_posting_id=wallet_line),
                dict(transaction_id=txn, line_no=2, account_id=book.equity.id,
                     asset_id=book.usdc.id, amount=-70),
            ])
        with pytest.raises(sa.exc.DBAPIError, match="exceeds the open amount") as excinfo:
            with book.engine.begin() as conn:  # 20 + 20 more in one statement: 110 > 100
                txn = new_txn(conn, "c2")
                insert_postings(conn, [
                    dict(transaction_id=txn, line_no=1, account_id=wallet.id,
                         asset_id=book.usdc.id, amount=20, closes_posting_id=wallet_line),
                    dict(transaction_id=txn, line_no=2, account_id=wallet.id,
                         asset_id=book.usdc.id, amount=20, closes_posting_id=wallet_line),
                    dict(transaction_id=txn, line_no=3, account_id=book.equity.id,
                         asset_id=book.usdc.id, amount=-40),
                ])
        assert sqlstate_of(excinfo) == "23514"

    def test_closing_with_the_same_sign_refused(self, book: Book) -> None:
        opened = book.deposit("u1", 100, "d1")
        _, wallet_line = posting_ids(book, opened)  # a credit (-100) on the wallet
        wallet = book.wallet("u1")
        with pytest.raises(sa.exc.DBAPIError, match="opposite sign"):
            with book.engine.begin() as conn:
                txn = new_txn(conn, "c1")
                add_posting(conn, txn, 1, wallet.id, book.usdc.id, -10,
                            closes_posting_id=wallet_line)
                add_posting(conn, txn, 2, book.equity.id, book.usdc.id, 10)

    def test_multi_row_transactions_in_a_closed_period_refused(self, book: Book) -> None:
        with book.engine.begin() as conn:
            conn.execute(sa.text("INSERT INTO ledger_periods (ends_at, closed_by) "
                                 "VALUES ('2026-11-15T00:00:00Z', 'tests')"))
        rows = "('k1', :fp, 'raw', '2026-11-20T00:00:00Z', 'raw-sql', false), " \
               "('k2', :fp, 'raw', '{eff}', 'raw-sql', {oop})"
        sql = ("INSERT INTO ledger_transactions (idempotency_key, fingerprint, kind, "
               "effective_at, source, out_of_period) VALUES ")
        for eff, oop, message in [
            ("2026-11-01T00:00:00Z", "false", "inside a period closed"),
            ("2026-11-20T00:00:00Z", "true", "not in a closed period"),
        ]:
            with pytest.raises(sa.exc.DBAPIError, match=message) as excinfo:
                with book.engine.begin() as conn:
                    conn.execute(sa.text(sql + rows.format(eff=eff, oop=oop)), {"fp": "0" * 64})
            assert sqlstate_of(excinfo) == "23514"
        assert count(book.engine, "ledger_transactions") == 0

    def test_multi_row_recorded_at_set_by_the_database(self, book: Book) -> None:
        with book.engine.begin() as conn:
            now = conn.execute(sa.text("SELECT now()")).scalar_one()
            ids = [new_txn(conn, f"b{i}", recorded_at="2001-01-01T00:00:00Z") for i in range(2)]
            for txn in ids:
                insert_postings(conn, [
                    dict(transaction_id=txn, line_no=1, account_id=book.custody.id,
                         asset_id=book.usdc.id, amount=1),
                    dict(transaction_id=txn, line_no=2, account_id=book.equity.id,
                         asset_id=book.usdc.id, amount=-1),
                ])
        with book.engine.connect() as conn:
            recorded = conn.execute(sa.text("SELECT recorded_at FROM ledger_transactions")).all()
        assert all(r.recorded_at >= now for r in recorded)

    def test_balance_row_account_cannot_be_changed(self, book: Book) -> None:
        wallet = book.wallet("u1")
        with pytest.raises(sa.exc.DBAPIError, match="only balance and version"):
            with book.engine.begin() as conn:
                conn.execute(
                    sa.text("UPDATE account_balances SET asset_id = :e WHERE account_id = :a"),
                    {"a": wallet.id, "e": book.eth.id},
                )


def raw_post(
    conn: Connection, items: list[dict[str, Any]]
) -> list[tuple[int, str, int | None]]:
    """Call ledger_post_arrays directly, as a raw caller (no Python validation) would: each item
    is a dict of raw_item's shape, flattened into the function's item and line arrays."""
    lines = [line for item in items for line in item["lines"]]
    rows = conn.exec_driver_sql(
        "SELECT item, status, transaction_id FROM ledger_post_arrays(%s::text[], %s::text[], "
        "%s::text[], %s::text[], %s::timestamptz[], %s::text[], %s::text[], %s::bigint[], "
        "%s::boolean[], %s::jsonb[], %s::int[], %s::bigint[], %s::int[], %s::numeric[], "
        "%s::bigint[], %s::bigint[])",
        tuple([[i[k] for i in items] for k in ("key", "fp", "kind", "ref", "eff", "reason",
                                                "source", "rev", "oop")]
              + [[json.dumps(i["meta"]) for i in items], [len(i["lines"]) for i in items]]
              + [[line[k] for line in lines] for k in ("a", "s", "m", "c", "r")]),
    ).all()
    return [(r.item, r.status, r.transaction_id) for r in rows]


def raw_item(key: str, lines: list[tuple[int, int, int]]) -> dict[str, Any]:
    """One item for raw_post: lines are (account id, asset id, amount)."""
    return {
        "key": key, "fp": "1" * 64, "kind": "raw", "ref": None,
        "eff": "2026-11-01T00:00:00+00:00", "reason": None, "source": "raw-sql", "rev": None,
        "oop": False, "meta": {},
        "lines": [{"a": a, "s": s, "m": str(m), "c": None, "r": None} for a, s, m in lines],
    }


def symbolic_lines(
    book: Book, lines: list[tuple[int, int, int]]
) -> list[tuple[int, int, int]]:
    """Lines given as (account, asset, amount) with accounts 0 custody (USDC), 1 equity (USDC),
    2 custody (ETH), -1 an id no account has, and assets 0 USDC, 1 ETH: the real ids."""
    accounts = {0: book.custody.id, 1: book.equity.id, 2: book.custody_eth.id, -1: 987_654_321}
    assets = {0: book.usdc.id, 1: book.eth.id}
    return [(accounts[a], assets[s], m) for a, s, m in lines]


class TestWriterRole:
    """ledger_post_arrays runs as custody_ledger_writer, which the guard triggers skip: it must
    enforce their rules itself, and nobody else may act as that role."""

    @pytest.mark.parametrize("function", ["ledger_post_arrays", "ledger_post_one"])
    def test_function_runs_as_the_writer_with_a_pinned_search_path(
        self, owner: Engine, function: str
    ) -> None:
        with owner.connect() as conn:
            row = conn.execute(sa.text(
                "SELECT pg_get_userbyid(proowner), prosecdef, proconfig FROM pg_proc "
                "WHERE proname = :f"), {"f": function}).one()
        assert row[0] == "custody_ledger_writer"
        assert row[1] is True
        assert "search_path=pg_catalog, public, pg_temp" in row[2]

    def test_app_role_cannot_act_as_the_writer(self, owner: Engine) -> None:
        # Membership is what SET ROLE and inherited rights need (for a login that is the app
        # role; the embedded server's superuser login can become any role, as it can drop any
        # trigger). Also no login may be created with the writer's name.
        with owner.connect() as conn:
            row = conn.execute(sa.text(
                "SELECT pg_has_role('custody_app', 'custody_ledger_writer', 'MEMBER'), "
                "pg_has_role('custody_app', 'custody_ledger_writer', 'SET'), "
                "(SELECT rolcanlogin FROM pg_roles WHERE rolname = 'custody_ledger_writer')"
            )).one()
        assert tuple(row) == (False, False, False)

    def test_app_role_cannot_create_objects_the_function_could_resolve(self, book: Book) -> None:
        # The function's search path includes public: an overload planted there by the app
        # role could run with the writer's rights.
        with pytest.raises(sa.exc.DBAPIError) as excinfo:
            with book.engine.begin() as conn:
                conn.execute(sa.text(
                    "CREATE FUNCTION public.width_bucket(bigint, bigint[]) RETURNS int "
                    "LANGUAGE sql AS 'SELECT 1'"))
        assert sqlstate_of(excinfo) == "42501"

    def test_writer_posts_with_the_guards_skipped_and_nothing_missing(self, book: Book) -> None:
        with book.engine.begin() as conn:
            [(_, status, txn)] = raw_post(conn, [raw_item("w1", [
                (book.custody.id, book.usdc.id, 40), (book.equity.id, book.usdc.id, -40)])])
        assert status == "posted" and txn is not None
        with book.engine.connect() as conn:
            row = conn.execute(sa.text(
                "SELECT recorded_at > now() - interval '1 minute', "
                "(SELECT sum(amount) FROM ledger_postings WHERE transaction_id = :t), "
                "(SELECT balance FROM account_balances WHERE account_id = :a) "
                "FROM ledger_transactions WHERE id = :t"), {"t": txn, "a": book.custody.id}).one()
        assert tuple(row) == (True, 0, 40)

    @pytest.mark.parametrize(
        "lines, sqlstate, message",
        [
            ([(0, 0, 40), (1, 0, -39)], "23514", "does not balance per asset"),
            # Balanced in total, not per asset.
            ([(0, 0, 40), (2, 1, -40)], "23514", "does not balance per asset"),
            ([], "23514", "has no lines"),
            # USDC custody posted as ETH, balanced in ETH.
            ([(0, 1, 40), (2, 1, -40)], "23503", "is not in asset"),
            ([(0, 0, 40), (-1, 0, -40)], "23503", "has no balance row"),
        ],
    )
    def test_function_refuses_what_the_skipped_triggers_refused(
        self, book: Book, lines: list[tuple[int, int, int]], sqlstate: str, message: str
    ) -> None:
        real = symbolic_lines(book, lines)
        with pytest.raises(sa.exc.DBAPIError, match=message) as excinfo:
            with book.engine.begin() as conn:
                # A good item first: the whole call fails, so it is not written either.
                raw_post(conn, [
                    raw_item("good", [(book.custody.id, book.usdc.id, 5),
                                      (book.equity.id, book.usdc.id, -5)]),
                    raw_item("bad", real),
                ])
        assert sqlstate_of(excinfo) == sqlstate
        assert count(book.engine, "ledger_transactions") == 0
        assert count(book.engine, "ledger_postings") == 0

    @pytest.mark.parametrize(
        "change",
        ["item array short", "line array short", "lines do not add up", "null flag",
         "assets from index 0", "keys from index 0", "two dimensions"],
    )
    def test_array_form_refuses_a_malformed_request(self, book: Book, change: str) -> None:
        # Lists, or (for the malformed cases) array literals written as text.
        arrays: list[object] = [
            ["k1"], ["1" * 64], ["raw"], [None], ["2026-11-01T00:00:00+00:00"], [None],
            ["raw-sql"], [None], [False], ["{}"], [2],
            [book.custody.id, book.equity.id], [book.usdc.id, book.usdc.id], ["5", "-5"],
            [None, None], [None, None],
        ]
        if change == "item array short":
            arrays[2] = []
        elif change == "line array short":
            arrays[13] = ["5"]
        elif change == "lines do not add up":
            arrays[10] = [3]
        elif change == "null flag":
            arrays[8] = [None]
        elif change == "assets from index 0":
            # Read by position from 1, the second line's asset (ETH custody, posted as USDC)
            # would have escaped the check, and a USDC posting landed on an ETH account.
            arrays[11] = [book.custody.id, book.custody_eth.id]
            arrays[12] = f"[0:1]={{{book.usdc.id},{book.usdc.id}}}"
        elif change == "keys from index 0":
            arrays[0] = "[0:0]={k1}"
        else:
            arrays[13] = [["5"], ["-5"]]
        with pytest.raises(sa.exc.DBAPIError) as excinfo:
            with book.engine.begin() as conn:
                conn.exec_driver_sql(
                    "SELECT * FROM ledger_post_arrays(%s::text[], %s::text[], %s::text[], "
                    "%s::text[], %s::timestamptz[], %s::text[], %s::text[], %s::bigint[], "
                    "%s::boolean[], %s::jsonb[], %s::int[], %s::bigint[], %s::int[], "
                    "%s::numeric[], %s::bigint[], %s::bigint[])", tuple(arrays)).all()
        assert sqlstate_of(excinfo) == "22023"
        assert count(book.engine, "ledger_transactions") == 0

    def test_raw_posting_added_to_a_writer_transaction_is_checked_at_commit(
        self, book: Book
    ) -> None:
        conn = book.engine.connect()
        conn.begin()
        [(_, status, txn)] = raw_post(conn, [raw_item("mixed", [
            (book.custody.id, book.usdc.id, 40), (book.equity.id, book.usdc.id, -40)])])
        assert status == "posted" and txn is not None
        # Same database transaction, so the "written with it" rule lets it in; only the
        # balance check at commit can refuse it.
        add_posting(conn, txn, 3, book.custody.id, book.usdc.id, 7)
        with pytest.raises(sa.exc.DBAPIError, match="does not balance") as excinfo:
            conn.commit()
        assert sqlstate_of(excinfo) == "23514"
        conn.close()
        assert count(book.engine, "ledger_transactions") == 0

    def test_raw_posting_naming_no_transaction_refused(self, book: Book) -> None:
        with pytest.raises(sa.exc.DBAPIError, match="does not exist") as excinfo:
            with book.engine.begin() as conn:
                add_posting(conn, 987_654_321, 1, book.custody.id, book.usdc.id, 5)
        assert sqlstate_of(excinfo) == "23503"

    @pytest.mark.parametrize("column", ["reverses_posting_id", "closes_posting_id"])
    def test_raw_posting_naming_no_original_refused(self, book: Book, column: str) -> None:
        # Was a foreign key; now the trigger finds no original to mirror.
        txn = book.deposit("u1", 100, "d1")
        with pytest.raises(sa.exc.DBAPIError, match="does not mirror|not on its account"):
            with book.engine.begin() as conn:
                fresh = new_txn(conn, "ghost", reverses_transaction_id=txn)
                add_posting(conn, fresh, 1, book.custody.id, book.usdc.id, -5,
                            **{column: 987_654_321})
                add_posting(conn, fresh, 2, book.equity.id, book.usdc.id, 5)
        assert count(book.engine, "ledger_postings") == 2

    @pytest.mark.parametrize("column", ["r", "c"])
    def test_function_judges_a_line_naming_no_original_a_mismatch(
        self, book: Book, column: str
    ) -> None:
        txn = book.deposit("u1", 100, "d1")
        item = raw_item("ghost", [(book.custody.id, book.usdc.id, -5),
                                  (book.equity.id, book.usdc.id, 5)])
        item["rev"] = txn
        item["lines"][0][column] = 987_654_321
        with book.engine.begin() as conn:
            assert raw_post(conn, [item]) == [(1, "mismatch", None)]
        assert count(book.engine, "ledger_postings") == 2


def raw_one(
    conn: Connection, key: str, lines: list[tuple[int, int, int]], *, fp: str = "1" * 64,
    eff: str = "2026-11-01T00:00:00+00:00", oop: bool | None = False,
) -> tuple[str, int | None]:
    """Call ledger_post_one as the connection's role: lines are (account id, asset id, amount)."""
    row = conn.exec_driver_sql(
        "SELECT * FROM ledger_post_one(%s, %s, 'raw', NULL, %s::timestamptz, NULL, 'raw-sql', "
        "%s, '{}'::jsonb, %s::bigint[], %s::int[], %s::numeric[])",
        (key, fp, eff, oop, [a for a, _, _ in lines], [s for _, s, _ in lines],
         [m for _, _, m in lines])).one()
    return row[0], row[1]


def balance(engine: Engine, account_id: int) -> tuple[int, int]:
    """An account's stored (balance, version)."""
    with engine.connect() as conn:
        row = conn.execute(sa.text(
            "SELECT balance, version FROM account_balances WHERE account_id = :a"),
            {"a": account_id}).one()
    return int(row[0]), int(row[1])


class TestPostOne:
    """ledger_post_one, the single-entry write path, runs as the writer role too: it must
    enforce what the skipped triggers enforce, and judge as ledger_post_arrays judges."""

    def test_posts_lines_postings_and_balances(self, book: Book) -> None:
        wallet = book.wallet("u1")
        with book.engine.begin() as conn:
            status, txn = raw_one(conn, "one", [(book.custody.id, book.usdc.id, 40),
                                                (wallet.id, book.usdc.id, -40)])
        assert status == "posted" and txn is not None
        with book.engine.connect() as conn:
            rows = conn.execute(sa.text(
                "SELECT line_no, account_id, amount FROM ledger_postings "
                "WHERE transaction_id = :t ORDER BY line_no"), {"t": txn}).all()
            recorded = conn.execute(sa.text(
                "SELECT recorded_at > now() - interval '1 minute' FROM ledger_transactions "
                "WHERE id = :t"), {"t": txn}).scalar_one()
        assert [tuple(r) for r in rows] == [(1, book.custody.id, 40), (2, wallet.id, -40)]
        assert recorded is True
        assert balance(book.engine, book.custody.id) == (40, 1)
        assert balance(book.engine, wallet.id) == (-40, 1)

    def test_repeated_account_and_several_assets(self, book: Book) -> None:
        # Not the two-line fast case: the lines are grouped per account in SQL.
        with book.engine.begin() as conn:
            status, _ = raw_one(conn, "multi", [
                (book.custody.id, book.usdc.id, 30), (book.equity.id, book.usdc.id, -10),
                (book.equity.id, book.usdc.id, -20), (book.custody_eth.id, book.eth.id, 7),
                (book.suspense.id, book.usdc.id, 5), (book.suspense.id, book.usdc.id, -5),
                (book.custody_eth.id, book.eth.id, -7)])
        assert status == "posted"
        assert balance(book.engine, book.equity.id) == (-30, 1)
        # Touched, net zero: the version still counts the transaction, as in ledger_post_arrays.
        assert balance(book.engine, book.custody_eth.id) == (0, 1)
        assert balance(book.engine, book.suspense.id) == (0, 1)

    @pytest.mark.parametrize(
        "lines, sqlstate, message",
        [
            ([(0, 0, 40), (1, 0, -39)], "23514", "does not balance per asset"),
            # Balanced in total, not per asset.
            ([(0, 0, 40), (2, 1, -40)], "23514", "does not balance per asset"),
            ([(0, 0, 40), (1, 0, -20), (2, 1, -20)], "23514", "does not balance per asset"),
            # USDC custody posted as ETH, balanced in ETH: the two-line case ...
            ([(0, 1, 40), (2, 1, -40)], "23503", "is not in asset"),
            # ... and with more lines.
            ([(0, 1, 40), (2, 1, -30), (2, 1, -10)], "23503", "is not in asset"),
            # One account with lines in two assets.
            ([(0, 0, 40), (1, 0, -40), (0, 1, 5), (2, 1, -5)], "23503", "every asset"),
            ([(0, 0, 40), (-1, 0, -40)], "23503", "has no balance row"),
            ([], "23514", "has no lines"),
        ],
    )
    def test_refuses_what_the_skipped_triggers_refused(
        self, book: Book, lines: list[tuple[int, int, int]], sqlstate: str, message: str
    ) -> None:
        real = symbolic_lines(book, lines)
        with pytest.raises(sa.exc.DBAPIError, match=message) as excinfo:
            with book.engine.begin() as conn:
                raw_one(conn, "bad", real)
        assert sqlstate_of(excinfo) == sqlstate
        assert count(book.engine, "ledger_transactions") == 0
        assert count(book.engine, "ledger_postings") == 0

    @pytest.mark.parametrize(
        "change",
        ["array short", "null element", "null flag", "null key", "null time", "from index 0"])
    def test_refuses_a_malformed_request(self, book: Book, change: str) -> None:
        arrays: list[object] = [[book.custody.id, book.equity.id],
                                [book.usdc.id, book.usdc.id], ["5", "-5"]]
        key: str | None = "k"
        eff: str | None = "2026-11-01T00:00:00+00:00"
        oop: bool | None = False
        if change == "array short":
            arrays[2] = ["5"]
        elif change == "null element":
            arrays[0] = [book.custody.id, None]
        elif change == "null flag":
            oop = None
        elif change == "null key":
            key = None
        elif change == "null time":
            eff = None
        else:
            # Unbalanced when read by position from 1 (7 + NULL), as unnest writes it (7, -3).
            arrays[2] = "[0:1]={7,-3}"
        with pytest.raises(sa.exc.DBAPIError) as excinfo:
            with book.engine.begin() as conn:
                conn.exec_driver_sql(
                    "SELECT * FROM ledger_post_one(%s, %s, 'raw', NULL, %s::timestamptz, NULL, "
                    "'raw', %s, '{}', %s::bigint[], %s::int[], %s::numeric[])",
                    (key, "1" * 64, eff, oop, *arrays)).all()
        assert sqlstate_of(excinfo) == "22023"
        assert count(book.engine, "ledger_transactions") == 0

    def test_insufficient_funds_writes_nothing(self, book: Book) -> None:
        wallet = book.wallet("u1")
        book.deposit("u1", 100, "d1")
        with book.engine.begin() as conn:
            assert raw_one(conn, "spend", [(wallet.id, book.usdc.id, 101),
                                           (book.equity.id, book.usdc.id, -101)]) == (
                "insufficient_funds", None)
            # The unit of work goes on: a refusal is a verdict, not an error.
            assert raw_one(conn, "spend2", [(wallet.id, book.usdc.id, 100),
                                            (book.equity.id, book.usdc.id, -100)])[0] == "posted"
        assert balance(book.engine, wallet.id) == (0, 2)
        assert count(book.engine, "ledger_transactions") == 2

    def test_custody_flag_and_128_bit_range(self, book: Book) -> None:
        # custody: credits must not exceed debits; equity has no flag.
        big = 2**126
        with book.engine.begin() as conn:
            assert raw_one(conn, "over", [(book.equity.id, book.usdc.id, 1),
                                          (book.custody.id, book.usdc.id, -1)]) == (
                "insufficient_funds", None)
            assert raw_one(conn, "b1", [(book.custody.id, book.usdc.id, big),
                                        (book.equity.id, book.usdc.id, -big)])[0] == "posted"
            assert raw_one(conn, "b2", [(book.custody.id, book.usdc.id, big),
                                        (book.equity.id, book.usdc.id, -big)]) == (
                "balance_out_of_range", None)
        assert balance(book.engine, book.custody.id) == (big, 1)

    def test_replay_after_the_funds_are_gone_is_still_a_replay(self, book: Book) -> None:
        wallet = book.wallet("u1")
        book.deposit("u1", 100, "d1")
        spend = [(wallet.id, book.usdc.id, 100), (book.equity.id, book.usdc.id, -100)]
        with book.engine.begin() as conn:
            status, txn = raw_one(conn, "spend", spend)
        assert status == "posted"
        with book.engine.begin() as conn:
            assert raw_one(conn, "spend", spend) == ("replayed", txn)
        assert balance(book.engine, wallet.id) == (0, 2)

    def test_plain_entries_route_here_and_reversals_do_not(
        self, book: Book, owner: Engine
    ) -> None:
        # Seen from the database: with EXECUTE on one write function taken from the
        # application role, exactly the entries routed to that function fail (42501), standalone
        # (post_entry) and inside a unit of work (post), and the others still post.
        original = book.deposit("u1", 100, "d1")
        before = balance(book.engine, book.custody.id)[0]
        with UnitOfWork(book.engine) as uow:
            record = repo.get_transaction(uow.conn, original)
        assert record is not None
        one_of_each_line = {p.id: 1 for p in record.postings}

        def standalone(key: str) -> None:
            book.deposit("u1", 1, key)

        def in_unit_of_work(key: str) -> None:
            with UnitOfWork(book.engine) as uow:
                service.post(uow, transfer(key, book.custody, book.equity, 1))
                uow.commit()

        def reverse(key: str) -> None:
            with UnitOfWork(book.engine) as uow:
                service.reverse(uow, original, idempotency_key=key, reason="test",
                                source="tests", amounts=one_of_each_line)
                uow.commit()

        with _without_execute(owner, POST_ARRAYS):
            standalone("a1")
            in_unit_of_work("a2")
            with pytest.raises(sa.exc.DBAPIError) as excinfo:
                reverse("a3")
            assert sqlstate_of(excinfo) == "42501"
        with _without_execute(owner, POST_ONE):
            for refused in (standalone, in_unit_of_work):
                with pytest.raises(sa.exc.DBAPIError) as excinfo:
                    refused("b1")
                assert sqlstate_of(excinfo) == "42501"
            reverse("b2")
        # What stood: two plain posts of 1 into custody, one reversal of 1 out of it.
        assert balance(book.engine, book.custody.id)[0] == before + 1 + 1 - 1

    def test_replay_and_conflict(self, book: Book) -> None:
        lines = [(book.custody.id, book.usdc.id, 5), (book.equity.id, book.usdc.id, -5)]
        with book.engine.begin() as conn:
            status, txn = raw_one(conn, "k", lines)
        assert status == "posted"
        with book.engine.begin() as conn:
            assert raw_one(conn, "k", lines) == ("replayed", txn)
            assert raw_one(conn, "k", lines, fp="2" * 64) == ("conflict", txn)
        assert balance(book.engine, book.custody.id) == (5, 1)

    def test_period_rules(self, book: Book, owner: Engine) -> None:
        with owner.begin() as conn:
            conn.execute(sa.text(
                "INSERT INTO ledger_periods (ends_at, closed_by) VALUES ('2026-11-15', 'tests')"))
        lines = [(book.custody.id, book.usdc.id, 5), (book.equity.id, book.usdc.id, -5)]
        with book.engine.begin() as conn:
            assert raw_one(conn, "in", lines) == ("period_closed", None)
            assert raw_one(conn, "after", lines, eff="2026-11-20T00:00:00+00:00",
                           oop=True) == ("not_out_of_period", None)
            assert raw_one(conn, "adj", lines, oop=True)[0] == "posted"
        assert count(book.engine, "ledger_transactions") == 1

    def test_balance_moved_between_read_and_lock_is_retried_not_judged(
        self, book: Book, owner: Engine
    ) -> None:
        # The entry fits the balance it reads; by the time its UPDATE holds the row, a
        # concurrent spend has committed and it no longer fits: 40001, nothing written.
        wallet = book.wallet("u1")
        book.deposit("u1", 100, "d1")
        other = book.engine.connect()
        other.begin()
        try:
            self._second_post_waits_then_fails(book, owner, other, wallet.id)
        finally:
            other.close()
        assert balance(book.engine, wallet.id) == (-40, 2)
        assert count(book.engine, "ledger_transactions") == 2

    @staticmethod
    def _second_post_waits_then_fails(
        book: Book, owner: Engine, other: Connection, wallet_id: int
    ) -> None:
        assert raw_one(other, "first", [(wallet_id, book.usdc.id, 60),
                                         (book.equity.id, book.usdc.id, -60)])[0] == "posted"
        errors: list[BaseException] = []

        def second() -> None:
            try:
                with book.engine.begin() as conn:
                    raw_one(conn, "second", [(wallet_id, book.usdc.id, 50),
                                             (book.equity.id, book.usdc.id, -50)])
            except BaseException as exc:  # noqa: BLE001 - handed to the test thread
                errors.append(exc)

        thread = threading.Thread(target=second)
        thread.start()
        with owner.connect() as watch:
            for _ in range(3000):
                waiting = watch.execute(sa.text(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                    "AND wait_event_type = 'Lock' AND query LIKE '%ledger_post_one%'")
                ).scalar_one()
                # A transaction reads pg_stat_activity once (a snapshot): end it to look again.
                watch.rollback()
                if waiting:
                    break
                time.sleep(0.01)
        assert waiting == 1, f"the second post never waited for the wallet's row: {errors}"
        other.commit()
        thread.join(10)
        assert len(errors) == 1 and isinstance(errors[0], sa.exc.DBAPIError)
        assert getattr(errors[0].orig, "sqlstate", None) == "40001"
        assert "moved between read and lock" in str(errors[0])


POST_ONE = ("ledger_post_one(text, text, text, text, timestamptz, text, text, boolean, jsonb, "
            "bigint[], int[], numeric[])")
POST_ARRAYS = ("ledger_post_arrays(text[], text[], text[], text[], timestamptz[], text[], text[], "
               "bigint[], boolean[], jsonb[], int[], bigint[], int[], numeric[], bigint[], "
               "bigint[])")


@contextlib.contextmanager
def _without_execute(owner: Engine, function: str) -> Iterator[None]:
    """The application role may not call ``function`` (this test's database only) meanwhile."""
    with owner.begin() as conn:
        conn.execute(sa.text(f"REVOKE EXECUTE ON FUNCTION {function} FROM custody_app"))
    try:
        yield
    finally:
        with owner.begin() as conn:
            conn.execute(sa.text(f"GRANT EXECUTE ON FUNCTION {function} TO custody_app"))


def writer_function(owner: Engine, name: str, args: str, body: str) -> None:
    """Create a function that runs as custody_ledger_writer, as the write functions do (a test
    stand-in for a write function with a bug), callable by the application role."""
    with owner.begin() as conn:
        conn.exec_driver_sql(
            f"CREATE FUNCTION {name}({args}) RETURNS void LANGUAGE sql SECURITY DEFINER "
            f"SET search_path = pg_catalog, public, pg_temp AS $$ {body} $$")
        conn.exec_driver_sql(f"ALTER FUNCTION {name}({args}) OWNER TO custody_ledger_writer")
        conn.exec_driver_sql(f"GRANT EXECUTE ON FUNCTION {name}({args}) TO custody_app")


def copy_with_the_bug_of_0010(owner: Engine) -> None:
    """ledger_post_arrays_0010: today's ledger_post_arrays without its array-shape guard, the
    bug revision 0010 fixed (arrays not numbered from 1 were read by position and unnested
    differently), owned by the writer role like the original."""
    with owner.begin() as conn:
        source = conn.execute(sa.text(
            "SELECT pg_get_functiondef('ledger_post_arrays'::regproc)")).scalar_one()
        guard = re.compile(r"\n  IF NOT \(ledger_array_ok\(i_key\).*?\n  END IF;\n", re.S)
        buggy, found = guard.subn("\n", source.replace(
            "public.ledger_post_arrays(", "public.ledger_post_arrays_0010(", 1), count=1)
        assert found == 1 and "ledger_array_ok" not in buggy
        # Through the driver: without parameters, psycopg sends the text as it is (the
        # function's RAISE messages hold '%').
        conn.connection.driver_connection.execute(buggy)  # type: ignore[union-attr]
        signature = ("text[], text[], text[], text[], timestamptz[], text[], text[], bigint[], "
                     "boolean[], jsonb[], int[], bigint[], int[], numeric[], bigint[], bigint[]")
        conn.exec_driver_sql(
            f"ALTER FUNCTION ledger_post_arrays_0010({signature}) OWNER TO custody_ledger_writer")
        conn.exec_driver_sql(
            f"GRANT EXECUTE ON FUNCTION ledger_post_arrays_0010({signature}) TO custody_app")


def call_0010_copy(conn: Connection, book: Book) -> list[tuple[int, str, int | None]]:
    """One item whose asset array is numbered from 0: read by position, the second line (on
    the ETH custody account) has no asset and escapes the function's check; unnested, it is
    written as a USDC posting. Balanced in USDC, within every flag."""
    rows = conn.exec_driver_sql(
        "SELECT item, status, transaction_id FROM ledger_post_arrays_0010(%s::text[], "
        "%s::text[], %s::text[], %s::text[], %s::timestamptz[], %s::text[], %s::text[], "
        "%s::bigint[], %s::boolean[], %s::jsonb[], %s::int[], %s::bigint[], %s::int[], "
        "%s::numeric[], %s::bigint[], %s::bigint[])",
        (["bug"], ["1" * 64], ["raw"], [None], ["2026-11-01T00:00:00+00:00"], [None],
         ["raw-sql"], [None], [False], ["{}"], [2], [book.equity.id, book.custody_eth.id],
         f"[0:1]={{{book.usdc.id},{book.usdc.id}}}", ["-5", "5"], [None, None], [None, None]),
    ).all()
    return [(r.item, r.status, r.transaction_id) for r in rows]


class TestWriterIsChecked:
    """The write functions run as custody_ledger_writer, which the guard triggers skip; the
    check of each posting's account, asset and transaction applies to them too, so a bug in a
    write function cannot put such a posting into the table (issue 14)."""

    def test_a_copy_with_the_bug_of_0010_is_refused(self, book: Book, owner: Engine) -> None:
        copy_with_the_bug_of_0010(owner)
        with pytest.raises(sa.exc.DBAPIError, match="the account is in asset") as excinfo:
            with book.engine.begin() as conn:
                call_0010_copy(conn, book)
        assert sqlstate_of(excinfo) == "23503"
        assert count(book.engine, "ledger_postings") == 0

    def test_without_the_check_the_copy_would_post_the_wrong_asset(
        self, book: Book, owner: Engine
    ) -> None:
        # The test above can fail: with the check off (owner's DDL, rolled back), the copy
        # writes a USDC posting on the ETH custody account and calls it posted.
        copy_with_the_bug_of_0010(owner)
        with owner.connect() as conn:
            conn.exec_driver_sql("ALTER TABLE ledger_postings "
                                 "DISABLE TRIGGER ledger_postings_account_and_transaction")
            [(_, status, txn)] = call_0010_copy(conn, book)
            landed = conn.execute(sa.text(
                "SELECT asset_id FROM ledger_postings WHERE transaction_id = :t "
                "AND account_id = :a"), {"t": txn, "a": book.custody_eth.id}).scalar_one()
            conn.rollback()
        assert status == "posted" and landed == book.usdc.id

    @pytest.mark.parametrize("missing", ["transaction", "account"])
    def test_writer_role_cannot_write_an_orphan_posting(
        self, book: Book, owner: Engine, missing: str
    ) -> None:
        txn = book.deposit("u1", 100, "d1")
        writer_function(
            owner, "bad_writer", "p_txn bigint, p_acc bigint, p_asset int",
            "INSERT INTO ledger_postings (transaction_id, line_no, account_id, asset_id, amount) "
            "VALUES (p_txn, 3, p_acc, p_asset, 5)")
        args = ((987_654_321, book.custody.id) if missing == "transaction"
                else (txn, 987_654_321))
        with pytest.raises(sa.exc.DBAPIError, match="does not exist") as excinfo:
            with book.engine.begin() as conn:
                conn.execute(sa.text("SELECT bad_writer(:t, :a, :s)"),
                             {"t": args[0], "a": args[1], "s": book.usdc.id})
        assert sqlstate_of(excinfo) == "23503"
        assert count(book.engine, "ledger_postings") == 2

    def test_writer_role_cannot_write_a_posting_in_another_asset(
        self, book: Book, owner: Engine
    ) -> None:
        txn = book.deposit("u1", 100, "d1")
        writer_function(
            owner, "bad_writer", "p_txn bigint, p_acc bigint, p_asset int",
            "INSERT INTO ledger_postings (transaction_id, line_no, account_id, asset_id, amount) "
            "VALUES (p_txn, 3, p_acc, p_asset, 5), (p_txn, 4, p_acc, p_asset, -5)")
        with pytest.raises(sa.exc.DBAPIError, match="the account is in asset") as excinfo:
            with book.engine.begin() as conn:
                conn.execute(sa.text("SELECT bad_writer(:t, :a, :s)"),
                             {"t": txn, "a": book.custody.id, "s": book.eth.id})
        assert sqlstate_of(excinfo) == "23503"
