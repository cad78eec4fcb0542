"""The ``custody`` command line, run as a user runs it (a subprocess on a real database)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import sqlalchemy as sa

from tests.ledger.conftest import Book


def custody(database_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CUSTODY_DATABASE_URL": database_url, "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-m", "api.cli", *args],
        env=env,
        text=True,
        capture_output=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    "command",
    [
        [],
        ["db", "upgrade"],
        ["verify"],
        ["rebuild-balances"],
        ["checkpoint"],
        ["balances"],
        ["period", "close"],
        ["reverse"],
        ["demo"],
        ["watch"],
        ["timeline"],
        ["deposits"],
        ["addresses", "assign"],
        ["addresses", "list"],
        ["withdrawal", "show"],
        ["withdrawals", "open"],
        ["keys", "create"],
        ["keys", "list"],
        ["keys", "revoke"],
        ["api"],
        ["serve"],
        ["worker"],
        ["webhooks", "replay"],
        ["audit"],
    ],
)
def test_help(database_url: str, command: list[str]) -> None:
    result = custody(database_url, *command, "--help")
    assert result.returncode == 0, result.stderr
    assert "Usage" in result.stdout


def test_verify_names_the_drift_and_rebuild_fixes_it(
    book: Book, database_url: str, owner: sa.Engine
) -> None:
    book.deposit("u1", 100, "d1")
    assert custody(database_url, "db", "upgrade").returncode == 0
    ok = custody(database_url, "verify")
    assert ok.returncode == 0 and "ok" in ok.stdout
    with owner.begin() as conn:
        conn.execute(sa.text("UPDATE account_balances SET balance = balance - 1 WHERE balance < 0"))
    drift = custody(database_url, "verify")
    assert drift.returncode == 1
    assert "balance_drift" in drift.stdout and "user:u1:wallet" in drift.stdout
    as_json = custody(database_url, "verify", "--json")
    assert as_json.returncode == 1
    report = json.loads(as_json.stdout)
    assert report["ok"] is False
    assert any(d["kind"] == "balance_drift" and "user:u1:wallet" in d["subject"]
               for d in report["discrepancies"])
    rebuilt = custody(database_url, "rebuild-balances")
    assert rebuilt.returncode == 0 and "1 corrected" in rebuilt.stdout
    assert custody(database_url, "verify").returncode == 0


def test_rebuild_names_a_flag_breaking_account_in_one_line_and_rebuilds_the_others(
    book: Book, database_url: str, owner: sa.Engine
) -> None:
    book.deposit("u1", 100, "d1")
    book.deposit("u2", 100, "d2")
    with owner.begin() as conn:
        conn.execute(sa.text("SET LOCAL session_replication_role = replica"))
        conn.execute(sa.text("UPDATE ledger_postings SET amount = -amount WHERE account_id = :a"),
                     {"a": book.wallet("u2").id})
        conn.execute(sa.text("UPDATE account_balances SET balance = 0 WHERE account_id = :a"),
                     {"a": book.wallet("u1").id})
    result = subprocess.run(
        [sys.executable, "-m", "api.cli", "rebuild-balances"],
        env={**os.environ, "CUSTODY_DATABASE_URL": database_url, "COLUMNS": "80"},
        text=True, capture_output=True, timeout=120)
    assert result.returncode == 1, result.stderr
    assert "1 corrected" in result.stdout
    errors = result.stderr.splitlines()  # the progress bar draws nothing when piped
    assert len(errors) == 1, result.stderr
    assert errors[0].startswith("error [flag_violated]: 1 account(s) not rebuilt")
    assert "user:u2:wallet" in errors[0] and "debits_must_not_exceed_credits" in errors[0]
    with owner.connect() as conn:
        assert conn.execute(sa.text("SELECT balance FROM account_balances WHERE account_id = :a"),
                            {"a": book.wallet("u1").id}).scalar_one() == -100


def test_expected_errors_are_one_line_and_change_nothing(book: Book, database_url: str) -> None:
    txid = book.deposit("u1", 100, "d1")
    missing = custody(database_url, "reverse", "999", "--key", "k", "--reason", "r")
    assert missing.returncode == 2
    assert missing.stderr.strip().splitlines() == [
        "error [transaction_not_found]: no ledger transaction 999"
    ]
    done = custody(database_url, "reverse", str(txid), "--key", "k", "--reason", "typo")
    assert done.returncode == 0
    again = custody(database_url, "reverse", str(txid), "--key", "k2", "--reason", "typo")
    assert again.returncode == 2 and "reversal_exceeds_original" in again.stderr
    balances = custody(database_url, "balances", "u1")
    assert balances.returncode == 0 and "0.000000" in balances.stdout
    bad_time = custody(database_url, "period", "close", "yesterday", "--by", "me")
    assert bad_time.returncode == 2 and "ISO 8601" in bad_time.stderr


def test_unmigrated_database_gets_one_line(server_url: str) -> None:
    name = f"empty_{os.getpid()}"
    admin = sa.create_engine(server_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}"'))
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    try:
        url = sa.make_url(server_url).set(database=name).render_as_string(hide_password=False)
        result = custody(url, "verify")
        assert result.returncode == 2
        assert result.stderr.strip().splitlines() == [
            "error [database_unavailable]: the database is not migrated: "
            "run `custody db upgrade` first"
        ]
        assert custody(url, "db", "upgrade").returncode == 0
        assert custody(url, "verify").returncode == 0
    finally:
        with admin.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def test_outdated_definitions_get_one_line(database_url: str, owner: sa.Engine) -> None:
    # As after deploying code whose SQL function changed, before `custody db upgrade`.
    with owner.begin() as conn:
        conn.execute(sa.text("UPDATE schema_definitions SET sha256 = repeat('0', 64) "
                             "WHERE path = 'functions/ledger_post_one.sql'"))
    result = custody(database_url, "verify")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "error [database_unavailable]: the database's SQL definitions are older than this code "
        "(functions/ledger_post_one.sql and 0 more): run `custody db upgrade` first"
    ]
    assert custody(database_url, "db", "upgrade").returncode == 0
    assert custody(database_url, "verify").returncode == 0
