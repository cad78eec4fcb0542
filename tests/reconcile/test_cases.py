"""The cases table (migration 0021) and ``reconcile.service``: a finding opens a case, the same
finding again re-sights it, a case is resolved once (with the fix that references it when it is
about a ledger transaction), the table refuses every other change; the deposit watcher's and the
withdrawal processor's cases are rows of it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import Engine

from api.cases import record_and_alert
from config.uow import UnitOfWork
from config.withdrawals import WithdrawalsConfig
from deposits import repository as deposit_repo
from ledger import service as ledger
from ledger.model import Entry, credit, debit
from reconcile import service
from reconcile.errors import (
    CaseAlreadyResolved,
    CaseNotFound,
    CaseResolutionInvalid,
    CaseResolvedElsewhere,
)
from reconcile.model import CaseType, Finding, Recorded
from tests.api.test_treasury import seed_final_own
from tests.reconcile.conftest import alerts, all_cases
from tests.withdrawals.conftest import SetOwnAddresses, open_book, req
from withdrawals import service as withdrawals
from withdrawals.repository import holds

T0 = datetime(2026, 12, 2, 6, 0, tzinfo=UTC)
DRIFT = Finding(CaseType.BALANCE_DRIFT, "account:7", {"account_id": "7"}, "100", "90",
                {"version": 3})


def record(engine: Engine, *findings: Finding, now: datetime = T0,
           by: str = "tests") -> Recorded:
    with UnitOfWork(engine) as uow:
        recorded = record_and_alert(uow, by, findings, now)
        uow.commit()
    return recorded


class TestRecordFindings:
    def test_a_finding_opens_a_case_and_one_alert(self, engine: Engine) -> None:
        recorded = record(engine, DRIFT)
        (case,) = all_cases(engine)
        assert recorded.opened == [case.id] and recorded.updated == []
        assert (case.type, case.subject, case.refs, case.expected, case.observed) == (
            "balance_drift", "account:7", {"account_id": "7"}, "100", "90")
        assert (case.status, case.seen_count, case.opened_by) == ("open", 1, "tests")
        assert case.first_seen_at == case.last_seen_at == T0
        (alert,) = alerts(engine)
        assert (alert["case_id"], alert["type"], alert["subject"]) == (
            str(case.id), "balance_drift", "account:7")
        assert f"custody cases resolve {case.id}" in alert["next"]

    def test_the_same_finding_again_updates_its_case(self, engine: Engine) -> None:
        (first,) = record(engine, DRIFT).opened
        later = T0 + timedelta(minutes=5)
        seen = Finding(DRIFT.type, DRIFT.subject, DRIFT.refs, "100", "80", {"version": 4})
        recorded = record(engine, seen, now=later)
        assert recorded.opened == [] and recorded.updated == [first]
        (case,) = all_cases(engine)
        assert (case.seen_count, case.first_seen_at, case.last_seen_at) == (2, T0, later)
        assert (case.observed, case.evidence, case.expected) == ("80", {"version": 4}, "100")
        assert len(alerts(engine)) == 1

    def test_another_subject_or_type_is_another_case(self, engine: Engine) -> None:
        other_subject = Finding(DRIFT.type, "account:8", {"account_id": "8"}, "1", "2")
        other_type = Finding(CaseType.BALANCE_MISSING, "account:7", {"account_id": "7"}, "1",
                             None)
        recorded = record(engine, DRIFT, other_subject, other_type)
        assert len(recorded.opened) == 3 and recorded.updated == []
        assert [c.subject for c in all_cases(engine)] == ["account:7", "account:8", "account:7"]
        with UnitOfWork(engine) as uow:
            assert service.count_open_by_type(uow) == {"balance_drift": 2, "balance_missing": 1}
            assert [c.subject for c in service.open_cases(uow, type="balance_missing")] == [
                "account:7"]

    def test_a_resolved_case_seen_again_opens_a_new_one(self, engine: Engine) -> None:
        (first,) = record(engine, DRIFT).opened
        with UnitOfWork(engine) as uow:
            service.resolve_case(uow, first, "ann", "rebuilt the balances", now=T0)
            uow.commit()
        (second,) = record(engine, DRIFT, now=T0 + timedelta(hours=1)).opened
        assert second != first
        assert [(c.id, c.status) for c in all_cases(engine)] == [(first, "resolved"),
                                                                (second, "open")]

    def test_a_check_naming_one_key_twice_or_an_unknown_type_is_refused(
            self, engine: Engine) -> None:
        with pytest.raises(ValueError, match="same type and subject"):
            record(engine, DRIFT, DRIFT)
        with pytest.raises(ValueError, match="unknown case type"):
            record(engine, Finding("made_up", "x:1", {}, None, None))
        assert all_cases(engine) == [] and alerts(engine) == []

    def test_types_are_exactly_the_tables_check(self, owner: Engine) -> None:
        with owner.connect() as conn:
            check = conn.execute(sa.text(
                "SELECT pg_get_constraintdef(oid) FROM pg_constraint "
                "WHERE conname = 'cases_type_check'")).scalar_one()
        assert set(CaseType) == set(check.split("ARRAY[")[1].split("]")[0]
                                    .replace("'", "").replace("::text", "").split(", "))


class TestResolve:
    def test_a_case_about_a_transaction_needs_a_fix_that_references_it(
            self, wbook: Engine) -> None:
        finding = Finding(CaseType.TRANSACTION_UNBALANCED, "transaction:5:USDC",
                          {"ledger_transaction_id": "5"}, "0", "3")
        (case_id,) = record(wbook, finding).opened
        with UnitOfWork(wbook) as uow:
            custody = ledger.get_account(uow, "custody:devnet", "USDC")
            fees = ledger.get_account(uow, "revenue:withdrawal_fees", "USDC")
            unrelated = ledger.post(uow, Entry("t:unrelated", "adjustment", T0, "tests",
                                               (debit(custody, 3), credit(fees, 3)))).transaction_id
            fix = ledger.post(uow, Entry("t:fix", "adjustment", T0, "tests",
                                         (debit(fees, 3), credit(custody, 3)),
                                         reference=f"case:{case_id}")).transaction_id
            uow.commit()
        with UnitOfWork(wbook) as uow:
            with pytest.raises(CaseResolutionInvalid, match="name the new transaction"):
                service.resolve_case(uow, case_id, "ann", "fixed", now=T0)
            with pytest.raises(CaseResolutionInvalid, match="does not reference case"):
                service.resolve_case(uow, case_id, "ann", "fixed", unrelated, now=T0)
            with pytest.raises(CaseResolutionInvalid, match="no ledger transaction"):
                service.resolve_case(uow, case_id, "ann", "fixed", 10**9, now=T0)
            resolved = service.resolve_case(uow, case_id, "ann", "posted the fix", fix, now=T0)
            uow.commit()
        assert (resolved.status, resolved.resolved_by, resolved.resolution,
                resolved.resolution_transaction_id, resolved.resolved_at) == (
            "resolved", "ann", "posted the fix", fix, T0)
        with UnitOfWork(wbook) as uow, pytest.raises(CaseAlreadyResolved):
            service.resolve_case(uow, case_id, "bob", "again", fix, now=T0)

    def test_unknown_case_and_empty_resolution(self, engine: Engine) -> None:
        (case_id,) = record(engine, DRIFT).opened
        with UnitOfWork(engine) as uow:
            with pytest.raises(CaseNotFound):
                service.resolve_case(uow, case_id + 1, "ann", "x", now=T0)
            with pytest.raises(CaseResolutionInvalid):
                service.resolve_case(uow, case_id, "ann", "  ", now=T0)
        assert all_cases(engine)[0].open


class TestGuard:
    def test_the_table_refuses_every_other_change(self, owner: Engine, engine: Engine) -> None:
        (case_id,) = record(engine, DRIFT).opened
        refused = [
            "UPDATE cases SET subject = 'account:9' WHERE id = :i",
            "UPDATE cases SET expected = '1' WHERE id = :i",
            "UPDATE cases SET seen_count = seen_count + 2 WHERE id = :i",
            "UPDATE cases SET seen_count = seen_count + 1, "
            "last_seen_at = last_seen_at - interval '1 s' WHERE id = :i",
            "UPDATE cases SET status = 'resolved', resolution = 'x', resolved_by = 'y', "
            "resolved_at = now(), observed = '0' WHERE id = :i",
            "DELETE FROM cases WHERE id = :i",
            "TRUNCATE cases CASCADE",
            "INSERT INTO cases (type, subject, refs, evidence, status, first_seen_at, "
            "last_seen_at, opened_by, resolution, resolved_by, resolved_at) VALUES "
            "('balance_drift', 'account:1', '{}', '{}', 'resolved', now(), now(), 'x', 'y', "
            "'z', now())",
        ]
        for statement in refused:
            with owner.begin() as conn, pytest.raises(sa_exc.DBAPIError):
                conn.execute(sa.text(statement), {"i": case_id})
        with owner.begin() as conn:  # The one-time resolution, then nothing more.
            conn.execute(sa.text("UPDATE cases SET status = 'resolved', resolution = 'x', "
                                 "resolved_by = 'y', resolved_at = now() WHERE id = :i"),
                         {"i": case_id})
        for statement in ("UPDATE cases SET resolution = 'other' WHERE id = :i",
                          "UPDATE cases SET status = 'open', resolution = NULL, "
                          "resolved_by = NULL, resolved_at = NULL WHERE id = :i"):
            with owner.begin() as conn, pytest.raises(sa_exc.DBAPIError):
                conn.execute(sa.text(statement), {"i": case_id})

    def test_the_application_role_may_not_touch_what_a_case_is_about(
            self, engine: Engine) -> None:
        (case_id,) = record(engine, DRIFT).opened
        with engine.begin() as conn, pytest.raises(sa_exc.ProgrammingError) as refused:
            conn.execute(sa.text("UPDATE cases SET type = 'trial_balance' WHERE id = :i"),
                         {"i": case_id})
        assert getattr(refused.value.orig, "sqlstate", None) == "42501"


class TestExistingCasesJoin:
    def test_a_deposit_case_is_a_case_with_the_same_id_resolved_with_it(
            self, engine: Engine) -> None:
        open_book(engine)
        seed_final_own(engine)
        with UnitOfWork(engine) as uow:
            (dc,) = deposit_repo.get_cases(uow.conn)
            case_of = uow.conn.execute(sa.text("SELECT case_id FROM deposit_cases")).scalar_one()
        (case,) = all_cases(engine)
        assert case.id == dc.id == case_of
        assert (case.type, case.subject, case.status, case.opened_by) == (
            "unattributed_own_address", f"deposit:{dc.deposit_id}", "open", "deposits.watcher")
        assert case.refs["deposit_id"] == str(dc.deposit_id)
        assert case.refs["deposit_case_id"] == str(dc.id) and case.expected == "4000000"
        # The watcher opening the same case again re-sights it: no second row anywhere.
        with UnitOfWork(engine) as uow:
            again = deposit_repo.insert_case(uow.conn, dc.deposit_id, dc.kind, None, {}, {})
            uow.commit()
        assert again == dc.id
        (case,) = all_cases(engine)
        assert case.seen_count == 2
        with UnitOfWork(engine) as uow, pytest.raises(CaseResolvedElsewhere, match="two admins"):
            service.resolve_case(uow, case.id, "ann", "x", now=T0)
        with UnitOfWork(engine) as uow:
            deposit_repo.insert_case_resolution(uow.conn, dc.id, None, "carol", "owner top-up",
                                                outcome="capital", approved_by="dave")
            uow.commit()
        (case,) = all_cases(engine)
        assert (case.status, case.resolved_by, case.resolution) == (
            "resolved", "carol", "capital: owner top-up (approved by dave)")

    def test_a_withdrawal_case_is_a_case_resolved_with_it(
            self, wbook: Engine, cfg: WithdrawalsConfig, own: SetOwnAddresses) -> None:
        w = withdrawals.request_withdrawal(wbook, cfg, own, req(), now=T0).withdrawal
        with UnitOfWork(wbook) as uow:
            wc = holds.insert_case(uow.conn, withdrawal_id=w.id, kind="ledger_refused",
                                   reason="insufficient funds", evidence={"tx": "0xab"},
                                   opened_by="withdrawals.processor", at=T0)
            uow.commit()
        (case,) = all_cases(wbook)
        assert case.id == wc
        assert (case.type, case.subject, case.first_seen_at, case.opened_by) == (
            "ledger_refused", f"withdrawal:{w.id}", T0, "withdrawals.processor")
        assert case.refs == {"withdrawal_id": str(w.id), "withdrawal_case_id": str(wc),
                             "chain": "devnet"}
        assert case.evidence == {"tx": "0xab", "reason": "insufficient funds"}
        with UnitOfWork(wbook) as uow:
            holds.resolve_case(uow.conn, wc, resolved_by="carol", reason="fixed the account",
                               at=T0 + timedelta(hours=1))
            uow.commit()
        (case,) = all_cases(wbook)
        assert (case.status, case.resolved_by, case.resolution, case.resolved_at) == (
            "resolved", "carol", "fixed the account", T0 + timedelta(hours=1))
