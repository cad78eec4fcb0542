"""The pure diffs of reconcile.model: verify's findings keyed by what they are about, the
histories' findings, items waiting longer than their thresholds."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from ledger.integrity import Discrepancy
from reconcile.model import (
    BookedDeposit,
    Finding,
    UnrecordedTransaction,
    Waiting,
    WaitingKind,
    aging_findings,
    distinct,
    history_findings,
    ledger_findings,
    references_case,
)

D = Discrepancy
NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
ACCOUNTS = {("user:u1:wallet", "USDC"): 11, ("custody:devnet", "USDC"): 12}


def keys(found: list[Finding]) -> list[tuple[str, str]]:
    return [f.key for f in found]


class TestLedgerFindings:
    def test_each_kind_is_keyed_by_what_it_is_about(self) -> None:
        found = ledger_findings([
            Discrepancy("balance_drift", "user:u1:wallet (USDC)", "-100 (version 2)",
                        "-95 (version 2)"),
            Discrepancy("balance_missing", "custody:devnet (USDC)", "100", "no row"),
            Discrepancy("flag_violated", "user:u1:wallet (USDC)", "within its flag", "5"),
            Discrepancy("trial_balance", "USDC postings", "0", "7"),
            Discrepancy("custody_mismatch", "USDC custody vs customer liabilities", "100",
                        "90"),
            Discrepancy("transaction_unbalanced", "transaction 5 USDC", "0", "3"),
            Discrepancy("transaction_empty", "transaction 6", ">= 2 postings", "0"),
            Discrepancy("posting_over_reversed", "posting 9", "|reversed| <= 5", "6"),
            Discrepancy("posting_over_closed", "posting 10", "|closed| <= 5", "6"),
            Discrepancy("checkpoint_digest", "checkpoint 3", "ab", "cd"),
            Discrepancy("seal_broken", "seal 4", "ab", "cd"),
        ], ACCOUNTS)
        assert keys(found) == [
            ("balance_drift", "account:11"), ("balance_missing", "account:12"),
            ("flag_violated", "account:11"), ("trial_balance", "asset:USDC:postings"),
            ("custody_mismatch", "asset:USDC"), ("transaction_unbalanced", "transaction:5:USDC"),
            ("transaction_empty", "transaction:6"), ("posting_over_reversed", "posting:9"),
            ("posting_over_closed", "posting:10"), ("checkpoint_digest", "checkpoint:3"),
            ("ledger_finding", "seal_broken:seal 4")]
        drift = found[0]
        assert drift.refs == {"account_id": "11", "account": "user:u1:wallet", "asset": "USDC"}
        assert (drift.expected, drift.observed) == ("-100", "-95")
        assert drift.evidence["expected_version"] == drift.evidence["observed_version"] == 2
        assert (found[1].expected, found[1].observed) == ("100", None)
        assert (found[2].expected, found[2].observed) == (None, "5")
        assert found[5].refs == {"ledger_transaction_id": "5", "asset": "USDC"}
        assert found[10].evidence["verify"] == {"kind": "seal_broken", "subject": "seal 4",
                                                "expected": "ab", "observed": "cd"}

    def test_a_stored_trial_balance_that_the_drift_explains_is_not_a_case(self) -> None:
        drift = Discrepancy("balance_drift", "user:u1:wallet (USDC)", "-100 (version 2)",
                            "-95 (version 2)")
        explained = ledger_findings([drift, Discrepancy("trial_balance", "USDC stored balances",
                                                        "0", "5")], ACCOUNTS)
        assert keys(explained) == [("balance_drift", "account:11")]
        more = ledger_findings([drift, Discrepancy("trial_balance", "USDC stored balances",
                                                   "0", "6")], ACCOUNTS)
        assert keys(more) == [("balance_drift", "account:11"),
                              ("trial_balance", "asset:USDC:stored")]

    def test_an_account_that_does_not_exist_any_more_is_still_a_finding(self) -> None:
        (found,) = ledger_findings([Discrepancy("balance_drift", "gone (ETH)", "1", "2")], {})
        assert found.key == ("ledger_finding", "balance_drift:gone (ETH)")


class TestHistoryFindings:
    def test_missing_extra_and_unrecorded(self) -> None:
        missing = BookedDeposit(1, "dev", "0xaa", "log:0", "credited", "USDC", 500, (7,), (40,),
                                (), 0)
        extra = BookedDeposit(2, "dev", "0xbb", "log:0", "credited", "USDC", 500, (8,), (41,),
                              (41, 42), 1000)
        stray = UnrecordedTransaction(43, "deposit:dev:0xcc:log:0", "deposit", 3, 700)
        found = history_findings([missing, extra], [stray])
        assert keys(found) == [("deposit_transaction_missing", "deposit:1"),
                               ("deposit_transaction_extra", "deposit:2"),
                               ("deposit_history_missing", "ledger_transaction:43")]
        assert (found[0].expected, found[0].observed) == ("500", "0")
        assert found[0].refs["ledger_transaction_id"] == "40"
        assert (found[1].observed, found[1].refs["ledger_transaction_ids"]) == ("1000", "41,42")
        assert found[2].refs == {"ledger_transaction_id": "43", "deposit_id": "3"}
        assert found[2].observed == "700"


class TestAgingFindings:
    THRESHOLDS = {WaitingKind.RESERVE: 100, WaitingKind.UNKNOWN_WITHDRAWAL: 50,
                  WaitingKind.HELD_WITHDRAWAL: 50, WaitingKind.REVIEW_DEPOSIT: 1000}

    def item(self, id: int, age_s: int, state: str = "broadcast") -> Waiting:
        return Waiting(id, "devnet", "USDC", 30, state, NOW - timedelta(seconds=age_s))

    def test_only_items_past_their_threshold_each_about_its_item(self) -> None:
        found = aging_findings({
            WaitingKind.RESERVE: [self.item(1, 100), self.item(2, 101),
                                  self.item(3, 500, "unknown"), self.item(4, 500, "held")],
            WaitingKind.UNKNOWN_WITHDRAWAL: [self.item(3, 500, "unknown")],
            WaitingKind.HELD_WITHDRAWAL: [self.item(4, 51, "held")],
            WaitingKind.REVIEW_DEPOSIT: [self.item(5, 999, "held_for_review"),
                                         self.item(6, 1001, "held_for_review")],
        }, self.THRESHOLDS, NOW)
        assert keys(found) == [("reserve_overdue", "withdrawal:2"),
                               ("withdrawal_unknown_aged", "withdrawal:3"),
                               ("withdrawal_held_aged", "withdrawal:4"),
                               ("deposit_review_aged", "deposit:6")]
        assert found[0].evidence["age_s"] == 101 and found[0].evidence["threshold_s"] == 100
        assert found[3].refs == {"deposit_id": "6", "chain": "devnet", "asset": "USDC"}


def test_a_fix_references_its_case_by_reference_or_key() -> None:
    assert references_case(12, "k", "case:12")
    assert references_case(12, "case:12", None) and references_case(12, "case:12:rev", None)
    assert not references_case(12, "case:123", None) and not references_case(12, "k", "case:1")


class TestPostingAndSealFindings:
    """verify's posting checks and seal chain: a case type of their own, keyed by the posting
    or the seal (and the transactions it names), so that two findings never share a key."""

    def test_an_orphan_missing_both_parents_is_two_findings(self) -> None:
        both = [D("posting_orphan", "posting 7 (transaction 9)", "transaction 9",
                  "no such transaction"),
                D("posting_orphan", "posting 7 (transaction 9)", "account 3", "no such account")]
        found = distinct(ledger_findings(both, {}))
        assert [(f.type, f.subject) for f in found] == [
            ("posting_orphan", "posting:7:transaction"), ("posting_orphan", "posting:7:account")]
        assert found[0].refs == {"posting_id": "7", "ledger_transaction_id": "9"}

    def test_a_posting_off_its_accounts_asset(self) -> None:
        (f,) = ledger_findings([D("posting_asset_mismatch",
                                  "posting 7 (transaction 9) on custody:eth (USDC)",
                                  "asset USDC", "asset ETH")], {})
        assert (f.type, f.subject, f.refs) == ("posting_asset_mismatch", "posting:7", {
            "posting_id": "7", "ledger_transaction_id": "9", "account": "custody:eth",
            "asset": "USDC"})

    def test_seal_findings_are_keyed_by_seal_and_transactions(self) -> None:
        found = distinct(ledger_findings([
            D("seal_root_mismatch", "seal 4 (transactions 10..20)", "ab", "cd"),
            D("seal_hash_mismatch", "seal 4 (transactions 10..20)", "ab", "cd"),
            D("seal_transaction_changed", "seal 4: transaction 12", "as sealed", "altered"),
            D("seal_transactions_reordered", "seal 4: transactions 13 and 14",
              "in sealed order", "contents traded ids"),
            D("checkpoint_seal_link", "checkpoint 2", "seal 4 hash ab", "hash cd")], {}))
        assert [(f.type, f.subject) for f in found] == [
            ("seal_root_mismatch", "seal:4"), ("seal_hash_mismatch", "seal:4"),
            ("seal_transaction_changed", "seal:4:transactions:12"),
            ("seal_transactions_reordered", "seal:4:transactions:13,14"),
            ("checkpoint_seal_link", "checkpoint:2:seal")]
        assert found[3].refs == {"seal_id": "4", "ledger_transaction_ids": "13,14"}
