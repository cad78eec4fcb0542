"""The ledger check on a real database: a stored balance changed by a superuser is exactly one
balance-drift case about that account; seen again (by the check or by the ``ledger.reconcile``
job) it is updated, never opened twice."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from api.cases import record_check
from api.jobs import LedgerDrift, reconcile
from config.uow import UnitOfWork
from ledger import service as ledger
from ledger.seals import seal_once
from reconcile import ledger as ledger_check
from tests.reconcile.conftest import alerts, all_cases

T0 = datetime(2026, 12, 2, 6, 0, tzinfo=UTC)


def test_a_stored_balance_changed_by_a_superuser_is_one_balance_drift_case(
        wbook: Engine, owner: Engine) -> None:
    assert ledger_check.run(wbook, now=T0) == []
    with UnitOfWork(wbook) as uow:
        wallet = ledger.get_account(uow, "user:u1:wallet", "USDC")
    with owner.begin() as conn:
        conn.execute(sa.text("UPDATE account_balances SET balance = balance - 7 "
                             "WHERE account_id = :a"), {"a": wallet.id})
    findings = ledger_check.run(wbook, now=T0)
    recorded = record_check(wbook, ledger_check.CHECK, findings, T0)
    (case,) = all_cases(wbook)
    assert recorded.opened == [case.id] and recorded.updated == []
    assert (case.type, case.subject, case.opened_by) == (
        "balance_drift", f"account:{wallet.id}", "reconcile.ledger")
    assert case.refs == {"account_id": str(wallet.id), "account": "user:u1:wallet",
                         "asset": "USDC"}
    # Raw balances, debit positive: the wallet (credit-normal) holds -150 USDC.
    assert (case.expected, case.observed) == ("-150000000", "-150000007")
    # The scheduled job sees it again: the same case, one more sighting, one alert in all.
    with pytest.raises(LedgerDrift):
        reconcile(wbook, T0 + timedelta(minutes=1))
    (again,) = all_cases(wbook)
    assert (again.id, again.seen_count, again.last_seen_at) == (
        case.id, 2, T0 + timedelta(minutes=1))
    assert [a["case_id"] for a in alerts(wbook)] == [str(case.id)]
    assert len(alerts(wbook, "ledger_drift")) == 1


def test_postings_on_accounts_of_another_asset_are_one_case_each_and_nothing_else(
        wbook: Engine, owner: Engine) -> None:
    """A superuser (triggers off) writes a transaction in ETH on two USDC accounts, balanced in
    ETH and with the stored balances kept in step: nothing but the two postings is wrong, so
    exactly their two cases open; seen again, they are updated."""
    with UnitOfWork(wbook) as uow:
        wallet = ledger.get_account(uow, "user:u1:wallet", "USDC")
    with owner.begin() as conn:
        custody = conn.execute(sa.text(
            "SELECT a.id FROM accounts a JOIN assets s ON s.id = a.asset_id"
            " WHERE s.code = 'USDC' AND a.code LIKE 'custody:%' ORDER BY a.id LIMIT 1")
        ).scalar_one()
        eth = conn.execute(sa.text("SELECT id FROM assets WHERE code = 'ETH'")).scalar_one()
        conn.execute(sa.text("SET LOCAL session_replication_role = replica"))
        txn = conn.execute(sa.text(
            "INSERT INTO ledger_transactions (idempotency_key, fingerprint, kind, effective_at,"
            " source) VALUES ('wrong-asset', repeat('0', 64), 'raw', now(), 'superuser')"
            " RETURNING id")).scalar_one()
        ids = [conn.execute(sa.text(
            "INSERT INTO ledger_postings (transaction_id, line_no, account_id, asset_id, amount)"
            " VALUES (:t, :n, :a, :s, :m) RETURNING id"),
            {"t": txn, "n": n, "a": a, "s": eth, "m": m}).scalar_one()
            for n, (a, m) in enumerate([(custody, 5), (wallet.id, -5)], start=1)]
        for a, m in [(custody, 5), (wallet.id, -5)]:
            conn.execute(sa.text("UPDATE account_balances SET balance = balance + :m,"
                                 " version = version + 1 WHERE account_id = :a"), {"a": a, "m": m})
    findings = ledger_check.run(wbook, now=T0)
    assert sorted((f.type, f.subject) for f in findings) == sorted(
        ("posting_asset_mismatch", f"posting:{pid}") for pid in ids)
    recorded = record_check(wbook, ledger_check.CHECK, findings, T0)
    cases = all_cases(wbook)
    assert sorted(recorded.opened) == sorted(c.id for c in cases) and len(cases) == 2
    by_posting = {c.refs["posting_id"]: c for c in cases}
    assert set(by_posting) == {str(pid) for pid in ids}
    assert all(c.refs["ledger_transaction_id"] == str(txn) and c.refs["asset"] == "USDC"
               and (c.expected, c.observed) == ("asset USDC", "asset ETH") for c in cases)
    again = record_check(wbook, ledger_check.CHECK, ledger_check.run(wbook, now=T0), T0)
    assert again.opened == [] and sorted(again.updated) == sorted(c.id for c in cases)


def test_a_sealed_amount_changed_by_a_superuser_is_a_seal_case_naming_the_transaction(
        wbook: Engine, owner: Engine) -> None:
    assert seal_once(wbook, T0)
    with owner.begin() as conn:
        conn.execute(sa.text("SET LOCAL session_replication_role = replica"))
        txn, = conn.execute(sa.text(
            "UPDATE ledger_postings SET amount = amount * 2 WHERE id = (SELECT min(id) FROM"
            " ledger_postings) RETURNING transaction_id")).one()
    findings = ledger_check.run(wbook, now=T0)
    record_check(wbook, ledger_check.CHECK, findings, T0)
    by_type = {c.type: c for c in all_cases(wbook)}
    changed = by_type["seal_transaction_changed"]
    assert changed.subject.endswith(f":transactions:{txn}")
    assert changed.refs["ledger_transaction_ids"] == str(txn)
    assert "seal_root_mismatch" in by_type
