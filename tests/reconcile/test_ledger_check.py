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
