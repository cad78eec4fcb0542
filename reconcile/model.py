"""Reconciliation's values and pure diffs: findings, cases, and what each check concludes from
plain values. No database, no clock, no settings: ``now`` and every record are passed in."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Protocol


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
    #: A posting off its account's asset; one naming a missing account or transaction.
    POSTING_ASSET_MISMATCH = "posting_asset_mismatch"
    POSTING_ORPHAN = "posting_orphan"
    # The seal chain (ledger.seals): a seal's own fields, and the transactions it names.
    SEAL_RANGE = "seal_range"
    SEAL_CHAIN_BROKEN = "seal_chain_broken"
    SEAL_HASH_MISMATCH = "seal_hash_mismatch"
    SEAL_ROOT_MISMATCH = "seal_root_mismatch"
    SEAL_COUNTS = "seal_counts"
    SEAL_DIAGNOSIS_UNAVAILABLE = "seal_diagnosis_unavailable"
    SEAL_TRANSACTION_CHANGED = "seal_transaction_changed"
    SEAL_TRANSACTION_MISSING = "seal_transaction_missing"
    SEAL_TRANSACTION_INSERTED = "seal_transaction_inserted"
    SEAL_TRANSACTIONS_REORDERED = "seal_transactions_reordered"
    CHECKPOINT_SEAL_LINK = "checkpoint_seal_link"
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
    # Proof of reserves (reserves.service).
    #: A user's posted balance below zero: the tree's builder refuses it (it would hide
    #: liabilities) and no report is published.
    RESERVES_NEGATIVE_BALANCE = "reserves_negative_balance"
    #: An asset whose on-chain holdings are below the customer liabilities.
    RESERVES_SHORTFALL = "reserves_shortfall"
    #: An asset whose chain figure differs from the ledger's with no movement in flight that
    #: explains it.
    RESERVES_DIFFERENCE_UNEXPLAINED = "reserves_difference_unexplained"


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
    """What ``record_findings`` did: the cases it opened and those it re-sighted (and the case
    of each finding, in the findings' order)."""

    opened: list[int]
    updated: list[int]
    case_ids: list[int] = field(default_factory=list)


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


def references_case(case_id: int, idempotency_key: str, reference: str | None) -> bool:
    """Whether a ledger transaction (its key and reference) references case ``case_id``: its
    reference is ``case:<id>``, or its idempotency key is ``case:<id>`` or starts with
    ``case:<id>:`` (a reversal takes its key from the caller)."""
    name = fix_reference(case_id)
    return reference == name or idempotency_key == name or idempotency_key.startswith(name + ":")


# --- ledger.integrity.verify's findings ------------------------------------------------------


class LedgerDiscrepancy(Protocol):
    """What a check needs of a ``ledger.integrity.Discrepancy`` (any object with these four
    string attributes; the ledger's type is not imported here: it lives beside SQL)."""

    @property
    def kind(self) -> str: ...
    @property
    def subject(self) -> str: ...
    @property
    def expected(self) -> str: ...
    @property
    def observed(self) -> str: ...


_ACCOUNT = re.compile(r"^(?P<code>.+) \((?P<asset>[^()\s]+)\)$")
_WITH_VERSION = re.compile(r"^(?P<amount>-?\d+) \(version (?P<version>\d+)\)$")
_MINOR = re.compile(r"^-?\d+$")
_PATTERNS: dict[str, re.Pattern[str]] = {
    CaseType.TRIAL_BALANCE: re.compile(r"^(?P<asset>\S+) (?P<side>postings|stored balances)$"),
    CaseType.CUSTODY_MISMATCH: re.compile(r"^(?P<asset>\S+) custody vs customer liabilities$"),
    CaseType.TRANSACTION_UNBALANCED: re.compile(r"^transaction (?P<tx>\d+) (?P<asset>\S+)$"),
    CaseType.TRANSACTION_EMPTY: re.compile(r"^transaction (?P<tx>\d+)$"),
    CaseType.POSTING_OVER_REVERSED: re.compile(r"^posting (?P<posting>\d+)$"),
    CaseType.POSTING_OVER_CLOSED: re.compile(r"^posting (?P<posting>\d+)$"),
    CaseType.CHECKPOINT_DIGEST: re.compile(r"^checkpoint (?P<checkpoint>\d+)$"),
}
_ACCOUNT_KINDS = frozenset({CaseType.BALANCE_DRIFT, CaseType.BALANCE_MISSING,
                            CaseType.FLAG_VIOLATED})
#: Postings: ``posting 7 (transaction 3)``, with `` on <account> (<asset>)`` for a mismatch.
_POSTING = re.compile(r"^posting (?P<posting>-?\d+) \(transaction (?P<tx>-?\d+)\)"
                      r"(?: on (?P<account>.+) \((?P<asset>[^()\s]+)\))?$")
#: Seals: ``seal 4 (transactions 10..20)``, ``seal 4``, ``seal 4: transactions 12 and 13``.
_SEAL = re.compile(r"^seal (?P<seal>\d+)(?: \(transactions \d+\.\.\d+\))?"
                   r"(?:: transactions? (?P<txs>\d+(?: and \d+)*))?$")
_SEAL_KINDS = frozenset({CaseType.SEAL_RANGE, CaseType.SEAL_CHAIN_BROKEN,
                         CaseType.SEAL_HASH_MISMATCH, CaseType.SEAL_ROOT_MISMATCH,
                         CaseType.SEAL_COUNTS, CaseType.SEAL_DIAGNOSIS_UNAVAILABLE,
                         CaseType.SEAL_TRANSACTION_CHANGED, CaseType.SEAL_TRANSACTION_MISSING,
                         CaseType.SEAL_TRANSACTION_INSERTED,
                         CaseType.SEAL_TRANSACTIONS_REORDERED})


def account_names(discrepancies: Sequence[LedgerDiscrepancy]) -> set[tuple[str, str]]:
    """The (account code, asset code) pairs that account findings name."""
    found = set()
    for d in discrepancies:
        m = _ACCOUNT.match(d.subject) if d.kind in _ACCOUNT_KINDS else None
        if m:
            found.add((m["code"], m["asset"]))
    return found


def _amount(text: str) -> tuple[str | None, int | None]:
    """(minor units, version) of a verify value: ``100``, ``100 (version 3)``; else Nones."""
    m = _WITH_VERSION.match(text)
    if m:
        return m["amount"], int(m["version"])
    return (text, None) if _MINOR.match(text) else (None, None)


def ledger_findings(discrepancies: Sequence[LedgerDiscrepancy],
                    accounts: Mapping[tuple[str, str], int]) -> list[Finding]:
    """One finding per ``verify`` discrepancy, keyed by what it is about: ``account:<id>``
    (``accounts`` maps (code, asset) to the id), ``asset:<code>`` (custody vs liabilities),
    ``asset:<code>:postings|stored`` (trial balance), ``transaction:<id>[:<asset>]``,
    ``posting:<id>``, ``checkpoint:<id>``. A kind or subject this function does not know is a
    ``ledger_finding`` keyed by kind and subject: verify may grow, no finding is dropped.

    One finding is a consequence, not a discrepancy of its own: the trial balance of an
    asset's stored balances when the drifted and missing balances of that asset account for
    all of it (one stored balance changed by hand is one case, its account's)."""
    found = [_ledger_finding(d, accounts) for d in discrepancies]
    explained = _drift_by_asset(found)
    return [f for f in found if not (
        f.type == CaseType.TRIAL_BALANCE and f.subject.endswith(":stored")
        and f.observed is not None and explained.get(f.refs["asset"]) == int(f.observed))]


def _drift_by_asset(found: Sequence[Finding]) -> dict[str, int]:
    """Per asset, stored minus replayed over the account findings (a missing row counts as a
    stored 0)."""
    total: dict[str, int] = {}
    for f in found:
        if f.type not in (CaseType.BALANCE_DRIFT, CaseType.BALANCE_MISSING) or (
                "account_id" not in f.refs or f.expected is None):
            continue
        stored = 0 if f.type == CaseType.BALANCE_MISSING or f.observed is None else int(
            f.observed)
        asset = f.refs["asset"]
        total[asset] = total.get(asset, 0) + stored - int(f.expected)
    return total


def _ledger_finding(d: LedgerDiscrepancy, accounts: Mapping[tuple[str, str], int]) -> Finding:
    raw = {"kind": d.kind, "subject": d.subject, "expected": d.expected,
           "observed": d.observed}
    expected, expected_version = _amount(d.expected)
    observed, observed_version = _amount(d.observed)
    evidence: dict[str, object] = {"verify": raw}
    if expected_version is not None or observed_version is not None:
        evidence.update(expected_version=expected_version, observed_version=observed_version)
    if d.kind in _ACCOUNT_KINDS:
        m = _ACCOUNT.match(d.subject)
        account_id = accounts.get((m["code"], m["asset"])) if m else None
        if m and account_id is not None:
            return Finding(d.kind, f"account:{account_id}", {
                "account_id": str(account_id), "account": m["code"], "asset": m["asset"]},
                expected, observed, evidence)
    # What these compare is not an amount: their expected and observed are verify's own words.
    named = _posting_or_seal(d, d.expected, d.observed, evidence)
    if named is not None:
        return named
    pattern = _PATTERNS.get(d.kind)
    m = pattern.match(d.subject) if pattern else None
    if m is None:
        return Finding(CaseType.LEDGER_FINDING, f"{d.kind}:{d.subject}", {"kind": d.kind},
                       expected, observed, evidence)
    groups = m.groupdict()
    refs = {k: v for k, v in {"asset": groups.get("asset"),
                              "ledger_transaction_id": groups.get("tx"),
                              "posting_id": groups.get("posting"),
                              "checkpoint_id": groups.get("checkpoint")}.items() if v}
    if d.kind == CaseType.TRIAL_BALANCE:
        subject = f"asset:{groups['asset']}:" + ("postings" if groups["side"] == "postings"
                                                 else "stored")
    elif d.kind == CaseType.CUSTODY_MISMATCH:
        subject = f"asset:{groups['asset']}"
    elif "tx" in groups:
        subject = f"transaction:{groups['tx']}" + (f":{groups['asset']}"
                                                   if groups.get("asset") else "")
    elif "posting" in groups:
        subject = f"posting:{groups['posting']}"
    else:
        subject = f"checkpoint:{groups['checkpoint']}"
    return Finding(d.kind, subject, refs, expected, observed, evidence)


def _posting_or_seal(d: LedgerDiscrepancy, expected: str | None, observed: str | None,
                     evidence: dict[str, object]) -> Finding | None:
    """The finding of a posting check (``posting:<id>``; an orphan also names what is missing:
    ``posting:<id>:account|transaction``) or of the seal chain (``seal:<id>``, with
    ``:transactions:<ids>`` when it names transactions); None for any other kind."""
    if d.kind in (CaseType.POSTING_ASSET_MISMATCH, CaseType.POSTING_ORPHAN):
        m = _POSTING.match(d.subject)
        if m is None:
            return None
        refs = {k: v for k, v in {"posting_id": m["posting"], "ledger_transaction_id": m["tx"],
                                  "account": m["account"], "asset": m["asset"]}.items() if v}
        subject = f"posting:{m['posting']}"
        if d.kind == CaseType.POSTING_ORPHAN:
            subject += ":transaction" if d.expected.startswith("transaction") else ":account"
        return Finding(d.kind, subject, refs, expected, observed, evidence)
    if d.kind in _SEAL_KINDS:
        m = _SEAL.match(d.subject)
        if m is None:
            return None
        refs = {"seal_id": m["seal"]}
        subject = f"seal:{m['seal']}"
        if m["txs"]:
            ids = ",".join(m["txs"].split(" and "))
            refs["ledger_transaction_ids"] = ids
            subject += f":transactions:{ids}"
        return Finding(d.kind, subject, refs, expected, observed, evidence)
    if d.kind == CaseType.CHECKPOINT_SEAL_LINK:
        m = re.match(r"^checkpoint (?P<checkpoint>\d+)$", d.subject)
        if m is None:
            return None
        return Finding(d.kind, f"checkpoint:{m['checkpoint']}:seal",
                       {"checkpoint_id": m["checkpoint"]}, expected, observed, evidence)
    return None


# --- deposit histories against the ledger ----------------------------------------------------


@dataclass(frozen=True)
class BookedDeposit:
    """A deposit our records say is booked, with the ledger transactions found for it."""

    deposit_id: int
    chain: str
    tx_hash: str
    position: str
    state: str
    asset_code: str | None
    amount_minor: int | None
    #: History rows that name a ledger transaction (ids), and the transactions they name.
    event_ids: tuple[int, ...]
    named_transaction_ids: tuple[int, ...]
    #: The deposit ledger transactions that exist for it, and what they debit in total.
    transaction_ids: tuple[int, ...]
    debited_minor: int


@dataclass(frozen=True)
class UnrecordedTransaction:
    """A deposit ledger transaction that no deposit history row names."""

    transaction_id: int
    idempotency_key: str
    kind: str
    deposit_id: int | None
    debited_minor: int


def history_findings(booked: Sequence[BookedDeposit],
                     unrecorded: Sequence[UnrecordedTransaction]) -> list[Finding]:
    """Every booked deposit has exactly one ledger transaction, and every deposit ledger
    transaction has its history row: a booked deposit with none is
    ``deposit_transaction_missing``, with more than one ``deposit_transaction_extra`` (subject
    ``deposit:<id>``); a transaction no history row names is ``deposit_history_missing``
    (subject ``ledger_transaction:<id>``)."""
    found = []
    for d in booked:
        refs = {"deposit_id": str(d.deposit_id), "chain": d.chain, "tx_hash": d.tx_hash,
                "position": d.position}
        if d.asset_code:
            refs["asset"] = d.asset_code
        evidence: dict[str, object] = {
            "state": d.state, "history_event_ids": [str(i) for i in d.event_ids],
            "history_transaction_ids": [str(i) for i in d.named_transaction_ids]}
        expected = None if d.amount_minor is None else str(d.amount_minor)
        if not d.transaction_ids:
            if d.named_transaction_ids:
                refs["ledger_transaction_id"] = str(d.named_transaction_ids[-1])
            found.append(Finding(CaseType.DEPOSIT_TRANSACTION_MISSING,
                                 f"deposit:{d.deposit_id}", refs, expected, "0", evidence))
        elif len(d.transaction_ids) > 1:
            refs["ledger_transaction_ids"] = ",".join(str(i) for i in d.transaction_ids)
            found.append(Finding(CaseType.DEPOSIT_TRANSACTION_EXTRA, f"deposit:{d.deposit_id}",
                                 refs, expected, str(d.debited_minor), evidence))
    for t in unrecorded:
        refs = {"ledger_transaction_id": str(t.transaction_id)}
        if t.deposit_id is not None:
            refs["deposit_id"] = str(t.deposit_id)
        found.append(Finding(CaseType.DEPOSIT_HISTORY_MISSING,
                             f"ledger_transaction:{t.transaction_id}", refs, None,
                             str(t.debited_minor),
                             {"idempotency_key": t.idempotency_key, "kind": t.kind}))
    return found


# --- items waiting too long ------------------------------------------------------------------


class WaitingKind(StrEnum):
    """What kind of item waits, each with its threshold and its case type."""

    RESERVE = "reserve"
    UNKNOWN_WITHDRAWAL = "unknown_withdrawal"
    HELD_WITHDRAWAL = "held_withdrawal"
    REVIEW_DEPOSIT = "review_deposit"


#: Withdrawal states aged by their own kind: their open reserve is not a second case.
AGED_ON_THEIR_OWN = frozenset({"unknown", "held"})

#: The case type of each kind of waiting item.
AGING_TYPES = {WaitingKind.RESERVE: CaseType.RESERVE_OVERDUE,
               WaitingKind.UNKNOWN_WITHDRAWAL: CaseType.WITHDRAWAL_UNKNOWN_AGED,
               WaitingKind.HELD_WITHDRAWAL: CaseType.WITHDRAWAL_HELD_AGED,
               WaitingKind.REVIEW_DEPOSIT: CaseType.DEPOSIT_REVIEW_AGED}


@dataclass(frozen=True)
class Waiting:
    """An item waiting since ``since``: a withdrawal or a deposit."""

    id: int
    chain: str
    asset_code: str | None
    amount_minor: int | None
    state: str
    since: datetime
    reason: str | None = None
    #: For an open reserve: the reserve posting.
    reserve_posting_id: int | None = None


def aging_findings(waiting: Mapping[WaitingKind, Sequence[Waiting]],
                   thresholds_s: Mapping[WaitingKind, int], now: datetime) -> list[Finding]:
    """The items that have waited longer than their kind's threshold at ``now``, one finding
    each, about the withdrawal or deposit (subject ``withdrawal:<id>`` or ``deposit:<id>``: the
    same item is the same case on every run). ``observed`` is the amount waiting (the open
    part of a reserve). The reserve of an unknown or held withdrawal is aged as that
    withdrawal, not a second time as a reserve."""
    found = []
    for kind, items in waiting.items():
        limit = thresholds_s[kind]
        noun = "deposit" if kind is WaitingKind.REVIEW_DEPOSIT else "withdrawal"
        for w in items:
            if kind is WaitingKind.RESERVE and w.state in AGED_ON_THEIR_OWN:
                continue
            age_s = int((now - w.since).total_seconds())
            if age_s <= limit:
                continue
            refs = {f"{noun}_id": str(w.id), "chain": w.chain}
            if w.asset_code:
                refs["asset"] = w.asset_code
            if w.reserve_posting_id is not None:
                refs["reserve_posting_id"] = str(w.reserve_posting_id)
            found.append(Finding(AGING_TYPES[kind], f"{noun}:{w.id}", refs, None,
                                 None if w.amount_minor is None else str(w.amount_minor),
                                 {"state": w.state, "reason": w.reason,
                                  "since": w.since.isoformat(), "age_s": age_s,
                                  "threshold_s": limit}))
    return found
