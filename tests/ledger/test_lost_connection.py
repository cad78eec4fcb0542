"""A post whose answer is lost (the connection cut for real after the server ran it): the
retry on a new connection finds the first post by its idempotency key and moves no money
twice; a post the server never saw is posted by the retry."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from config.uow import UnitOfWork
from ledger import service
from tests.ledger.conftest import Book, transfer
from tests.support.pg_proxy import PgCutProxy


def _transactions(engine: Engine, key: str) -> list[int]:
    with engine.connect() as conn:
        return list(conn.execute(sa.text(
            "SELECT id FROM ledger_transactions WHERE idempotency_key = :k"), {"k": key}).scalars())


class TestPostInDoubt:
    def test_lost_answer_is_resolved_by_the_key(self, book: Book, cut_engine: Engine,
                                                cut_proxy: PgCutProxy) -> None:
        book.deposit("u1", 100, "d1")
        entry = transfer("w1", book.wallet("u1"), book.fees, 60)
        cut = cut_proxy.arm("ledger_post_one", "after_answer")
        posted = service.post_entry(cut_engine, entry)
        assert cut.fired == 1
        assert posted.replayed
        assert _transactions(book.engine, "w1") == [posted.transaction_id]
        with UnitOfWork(book.engine) as uow:
            assert service.account_balance(uow, book.wallet("u1")).balance_minor == 40

    def test_post_the_server_never_saw_is_posted_by_the_retry(
            self, book: Book, cut_engine: Engine, cut_proxy: PgCutProxy) -> None:
        book.deposit("u1", 100, "d1")
        entry = transfer("w1", book.wallet("u1"), book.fees, 60)
        cut = cut_proxy.arm("ledger_post_one", "before")
        posted = service.post_entry(cut_engine, entry)
        assert cut.fired == 1
        assert not posted.replayed
        assert _transactions(book.engine, "w1") == [posted.transaction_id]
