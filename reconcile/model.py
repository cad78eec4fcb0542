"""Reconciliation's values and pure diffs: findings, cases, and what each check concludes from
plain values. No database, no clock, no settings: ``now`` and every record are passed in."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum


class CaseType(StrEnum):
    """Every kind of case (the CHECK of ``cases.type``, migration 0021)."""

    # ledger.integrity.verify: one type per kind of finding.
    BALANCE_DRIFT = "balance_drift"
    BALANCE_MISSING = "balance_missing"
    FLAG_VIOLATED = "flag_violated"
    TRIAL_BALANCE = "trial_balance"
    CUSTODY_MISMATCH = "custody_mismatch"
    TRANSACTION_UNBALANCED = "transaction_unbalanced"
    TRANSACTION_EMPTY = "transaction_empty"
    POSTING_OVER_REVERSED = "posting_over_reversed"
    POSTING_OVER_CLOSED = "posting_over_closed"
    CHECKPOINT_DIGEST = "checkpoint_digest"
    #: A kind of verify finding this list does not know yet (its kind is in the evidence).
    LEDGER_FINDING = "ledger_finding"
    # Deposit histories against the ledger.
    #: A credited deposit without its ledger transaction.
    DEPOSIT_TRANSACTION_MISSING = "deposit_transaction_missing"
    #: A credited deposit with more than one ledger transaction.
    DEPOSIT_TRANSACTION_EXTRA = "deposit_transaction_extra"
    #: A deposit's ledger transaction without its credited history row.
    DEPOSIT_HISTORY_MISSING = "deposit_history_missing"
    # Items waiting too long.
    RESERVE_OVERDUE = "reserve_overdue"
    WITHDRAWAL_UNKNOWN_AGED = "withdrawal_unknown_aged"
    WITHDRAWAL_HELD_AGED = "withdrawal_held_aged"
    DEPOSIT_REVIEW_AGED = "deposit_review_aged"
    # Custody against the chain; custody provider statements.
    CUSTODY_CHAIN_MISMATCH = "custody_chain_mismatch"
    PROVIDER_AMOUNT_MISMATCH = "provider_amount_mismatch"
    PROVIDER_MISSING_IN_LEDGER = "provider_missing_in_ledger"
    PROVIDER_MISSING_AT_PROVIDER = "provider_missing_at_provider"
    # The deposit watcher's and the withdrawal processor's cases.
    DEEP_REORG = "deep_reorg"
    UNATTRIBUTED_OWN_ADDRESS = "unattributed_own_address"
    SETTLEMENT_MISMATCH = "settlement_mismatch"
    LEDGER_REFUSED = "ledger_refused"
    INVARIANT_BROKEN = "invariant_broken"


class CaseStatus(StrEnum):
    """A case is open until it is resolved, once."""

    OPEN = "open"
    RESOLVED = "resolved"


@dataclass(frozen=True)
class Finding:
    """One discrepancy a check found.

    ``subject`` is its stable key (``account:42``, ``deposit:17``,
    ``custody:devnet:0xabc...:ETH``, ``provider:acme:REF123``): the same discrepancy seen again
    has the same type and subject, and so is the same open case. ``refs`` name what it is about
    (ids as strings); ``expected`` is what our records say and ``observed`` what the check saw
    (decimal strings of minor units where they are amounts); ``evidence`` is anything else the
    check saw (JSON values).
    """

    type: str
    subject: str
    refs: Mapping[str, str]
    expected: str | None
    observed: str | None
    evidence: Mapping[str, object] = field(default_factory=dict)

    @property
    def key(self) -> tuple[str, str]:
        """(type, subject): at most one open case per key."""
        return (self.type, self.subject)


@dataclass(frozen=True)
class Case:
    """A case as stored."""

    id: int
    type: str
    subject: str
    refs: dict[str, str]
    expected: str | None
    observed: str | None
    evidence: dict[str, object]
    status: str
    first_seen_at: datetime
    last_seen_at: datetime
    seen_count: int
    opened_by: str
    resolution: str | None
    resolved_by: str | None
    resolved_at: datetime | None
    resolution_transaction_id: int | None

    @property
    def open(self) -> bool:
        """Whether nobody resolved it yet."""
        return self.status == CaseStatus.OPEN

    @property
    def origin(self) -> str | None:
        """``deposit_cases`` or ``withdrawal_cases`` for a case their code opened (resolved by
        its own procedure), None for a case a check opened."""
        if "deposit_case_id" in self.refs:
            return "deposit_cases"
        if "withdrawal_case_id" in self.refs:
            return "withdrawal_cases"
        return None

    @property
    def needs_fix_transaction(self) -> bool:
        """Whether its resolution must name the ledger transaction that fixed it: the case is
        about a ledger transaction (a posting the checks found wrong or missing)."""
        return any(k == "ledger_transaction_id" or k.endswith("_transaction_id")
                   for k in self.refs)


@dataclass(frozen=True)
class Recorded:
    """What ``record_findings`` did: the cases it opened and those it re-sighted."""

    opened: list[int]
    updated: list[int]


_TYPES = frozenset(t.value for t in CaseType)


def distinct(findings: Sequence[Finding]) -> list[Finding]:
    """The findings with one per (type, subject): a check that reports the same key twice in
    one run is a bug (the key would not be stable); refuse it loudly."""
    seen: dict[tuple[str, str], Finding] = {}
    for f in findings:
        if f.type not in _TYPES:
            raise ValueError(f"unknown case type {f.type!r} (reconcile.model.CaseType)")
        if f.key in seen:
            raise ValueError(f"two findings with the same type and subject {f.key}")
        seen[f.key] = f
    return list(seen.values())


def fix_reference(case_id: int) -> str:
    """The ``reference`` a ledger transaction that fixes case ``case_id`` carries."""
    return f"case:{case_id}"
