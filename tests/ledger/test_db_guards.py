"""The database's own guards, proved with raw SQL that bypasses the Python layer.

Each test writes through a plain connection, as the application role (``engine``) and, where
the point is that the trigger holds even for the table owner, as the owner (``owner``).
"""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from tests.ledger.conftest import Book

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
