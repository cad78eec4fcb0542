"""``custody seal`` and the seal findings of ``custody verify``, run as a user runs them, and the
ledger.seal job."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from api.jobs import build_jobs, run_locked
from ledger import service
from ledger.repository import seals as seals_repo
from tests.api.test_cli import custody
from tests.ledger.conftest import Book, transfer


def _post(book: Book, n: int) -> list[int]:
    wallet = book.wallet("u1")
    return [service.post_entry(book.engine, transfer(f"cli{i}", book.custody, wallet, 5 + i))
            .transaction_id for i in range(n)]


def test_export_run_and_verify(book: Book, owner: Engine, database_url: str) -> None:
    none = custody(database_url, "seal", "export")
    assert none.returncode == 2 and "error [seal_not_found]" in none.stderr
    ids = _post(book, 3)
    ran = custody(database_url, "seal", "run", "--max-transactions", "2")
    assert ran.returncode == 0 and f"2 seals: transactions 1..{ids[-1]}" in ran.stdout, ran
    exported = custody(database_url, "seal", "export", "--json")
    assert exported.returncode == 0, exported.stderr
    newest = json.loads(exported.stdout)
    with book.engine.connect() as conn:
        stored = seals_repo.newest_seal(conn)
    assert stored is not None
    assert newest == {
        "seal_id": "2", "seal_hash": stored.seal_hash, "previous_hash": stored.previous_hash,
        "merkle_root": stored.merkle_root, "from_transaction_id": str(ids[2]),
        "through_transaction_id": str(ids[2]), "transactions_count": "1",
        "postings_count": "2", "sealed_at": stored.sealed_at.astimezone(UTC).isoformat()}
    text = custody(database_url, "seal", "export")
    assert stored.seal_hash in text.stdout and f"through_transaction_id  {ids[2]}" in text.stdout
    clean = custody(database_url, "seal", "verify")
    assert clean.returncode == 0 and "ok: 2 seals recomputed after the first seal" in clean.stdout
    with owner.begin() as conn:
        conn.execute(sa.text("SET LOCAL session_replication_role = replica"))
        conn.execute(sa.text("UPDATE ledger_postings SET amount = amount * 2"
                             f" WHERE transaction_id = {ids[0]}"))
    found = custody(database_url, "verify", "--full")
    assert found.returncode == 1
    assert "seal_transaction_changed" in found.stdout
    assert f"seal 1: transaction {ids[0]}" in found.stdout
    again = custody(database_url, "seal", "verify", "--full", "--in-python")
    assert again.returncode == 1 and "seal_root_mismatch" in again.stdout


def test_the_seal_job_seals_and_is_safe_to_run_twice(book: Book) -> None:
    ids = _post(book, 2)
    [job] = [j for j in build_jobs(book.engine, None, None) if j.name == "ledger.seal"]
    now = datetime(2026, 12, 2, 6, 0, tzinfo=UTC)
    assert run_locked(book.engine, job, now=now) and run_locked(book.engine, job, now=now)
    with book.engine.connect() as conn:
        seal = seals_repo.newest_seal(conn)
        assert seals_repo.seals_count(conn) == 1
        outcomes = conn.execute(sa.text(
            "SELECT outcome FROM job_runs WHERE job = 'ledger.seal'")).scalars().all()
    assert seal is not None and seal.transaction_ids == tuple(ids)
    assert outcomes == ["ok", "ok"]
