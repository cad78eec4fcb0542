"""Custody provider statements, pure: parsing a statement file (CSV or JSON,
``docs/provider-statements.md``) into plain records, and matching the provider's records with
ours, by reference only (never by amount: two transfers of the same amount must not explain
each other).

No database, no clock, no settings: the repository reads our records, the service stores the
statement and records the findings.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any, Literal

Direction = Literal["in", "out"]
Format = Literal["csv", "json"]

#: Columns of a CSV statement (``chain`` and ``tx_hash`` may be left empty or left out).
CSV_REQUIRED = ("provider", "reference", "direction", "asset", "amount_minor", "occurred_at")
CSV_OPTIONAL = ("chain", "tx_hash")
#: Bounds on what one statement may hold (a statement is read whole into memory).
RECORDS_MAX = 200_000
REFERENCE_MAX = 200
#: |amount| < 2^127: the ledger's money128 domain.
AMOUNT_LIMIT = 2**127

_PROVIDER = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
_ASSET = re.compile(r"^[A-Z0-9][A-Z0-9._-]{0,31}$")
_DIGITS = re.compile(r"^[0-9]+$")
_TX_HASH = re.compile(r"^0x[0-9a-f]{64}$")


class StatementInvalid(ValueError):
    """A statement file that cannot be imported; ``str()`` is one line naming where and why."""


@dataclass(frozen=True)
class StatementRecord:
    """One transfer as the provider reports it. ``amount_minor`` > 0 in the asset's ledger
    minor units; ``direction`` says which way it moved (``in``: to our custody)."""

    provider: str
    reference: str
    direction: Direction
    asset: str
    amount_minor: int
    occurred_at: datetime
    chain: str | None = None
    tx_hash: str | None = None

    @property
    def signed_minor(self) -> int:
        """The amount as it changes our custody: positive in, negative out."""
        return self.amount_minor if self.direction == "in" else -self.amount_minor

    def to_json(self) -> dict[str, object]:
        """The record as stored and shown (amount as a decimal string)."""
        return {"provider": self.provider, "reference": self.reference,
                "direction": self.direction, "asset": self.asset,
                "amount_minor": str(self.amount_minor),
                "occurred_at": self.occurred_at.isoformat(), "chain": self.chain,
                "tx_hash": self.tx_hash}


@dataclass(frozen=True)
class Statement:
    """A parsed statement: one provider, the period it covers ``[period_start, period_end)``,
    its records (references unique)."""

    provider: str
    format: Format
    period_start: datetime
    period_end: datetime
    records: tuple[StatementRecord, ...]


@dataclass(frozen=True)
class OurRecord:
    """One transfer as our ledger has it, under the reference the provider knows it by.
    ``net_minor`` is what it moved in our custody (positive in); ``transaction_ids`` are the
    ledger transactions behind it (the posting and any fix or reversal)."""

    reference: str
    asset: str
    net_minor: int
    occurred_at: datetime
    transaction_ids: tuple[int, ...] = ()
    source: str | None = None

    @property
    def direction(self) -> Direction:
        """``in`` when it added to custody."""
        return "in" if self.net_minor > 0 else "out"


class Outcome(StrEnum):
    """What matching says of one reference."""

    MATCHED = "matched"
    AMOUNT_MISMATCH = "amount_mismatch"  # same reference, another amount, asset or direction
    MISSING_IN_LEDGER = "missing_in_ledger"  # the provider has it, our ledger does not
    MISSING_AT_PROVIDER = "missing_at_provider"  # ours, expected at the provider, not there


@dataclass(frozen=True)
class Match:
    """The outcome of one reference, with both sides as found."""

    outcome: Outcome
    reference: str
    theirs: StatementRecord | None
    ours: OurRecord | None
    #: For a mismatch: which fields differ (``amount``, ``asset``, ``direction``).
    fields: tuple[str, ...] = ()

    @property
    def difference_minor(self) -> int:
        """What the provider says minus what we booked, in our custody's direction (0 when
        matched; only meaningful per asset: see ``remainder``)."""
        theirs = 0 if self.theirs is None else self.theirs.signed_minor
        ours = 0 if self.ours is None else self.ours.net_minor
        return theirs - ours


@dataclass(frozen=True)
class Remainder:
    """Per asset: what the clearing account holds (booked there, not yet attributed), what the
    statement and our ledger disagree on and nobody has booked, and their sum, the clearing
    account's unexplained remainder (zero when everything is explained)."""

    asset: str
    clearing_minor: int
    unbooked_minor: int

    @property
    def remainder_minor(self) -> int:
        """``clearing_minor + unbooked_minor``."""
        return self.clearing_minor + self.unbooked_minor


@dataclass(frozen=True)
class Reconciliation:
    """Every reference's outcome (by reference) and the remainders (by asset)."""

    matches: tuple[Match, ...]
    remainders: tuple[Remainder, ...] = field(default=())

    def count(self, outcome: Outcome) -> int:
        """How many references had ``outcome``."""
        return sum(1 for m in self.matches if m.outcome is outcome)


# ------------------------------------------------------------------------------------ parsing


def parse_statement(text: str, fmt: Format) -> Statement:
    """Parse a statement file's text (``csv`` or ``json``); StatementInvalid with one line
    naming the first problem (and its line or record number)."""
    if fmt == "csv":
        provider, records, period = _parse_csv(text)
    elif fmt == "json":
        provider, records, period = _parse_json(text)
    else:  # pragma: no cover - the CLI offers only the two
        raise StatementInvalid(f"unknown statement format {fmt!r}")
    if not records:
        raise StatementInvalid("the statement has no records")
    seen: dict[str, int] = {}
    for i, r in enumerate(records, start=1):
        if r.reference in seen:
            raise StatementInvalid(f"record {i}: reference {r.reference!r} appears twice "
                                   f"(first in record {seen[r.reference]})")
        seen[r.reference] = i
    start, end = period if period is not None else whole_days(records)
    outside = [r for r in records if not start <= r.occurred_at < end]
    if outside:
        raise StatementInvalid(f"reference {outside[0].reference!r}: occurred_at "
                               f"{outside[0].occurred_at.isoformat()} is outside the period "
                               f"[{start.isoformat()}, {end.isoformat()})")
    return Statement(provider, fmt, start, end, tuple(records))


def whole_days(records: Sequence[StatementRecord]) -> tuple[datetime, datetime]:
    """The whole UTC days the records span: the first one's midnight to the midnight after the
    last one."""
    first = min(r.occurred_at for r in records).astimezone(UTC)
    last = max(r.occurred_at for r in records).astimezone(UTC)
    start = first.replace(hour=0, minute=0, second=0, microsecond=0)
    end = last.replace(hour=0, minute=0, second=0, microsecond=0) + timedelta(days=1)
    return start, end


def _parse_csv(text: str) -> tuple[str, list[StatementRecord], None]:
    reader = csv.DictReader(io.StringIO(text, newline=""), strict=True)
    try:
        header = reader.fieldnames
    except csv.Error as exc:
        raise StatementInvalid(f"line 1: not CSV: {exc}") from exc
    if not header:
        raise StatementInvalid("line 1: no header row")
    missing = [c for c in CSV_REQUIRED if c not in header]
    unknown = [c for c in header if c not in CSV_REQUIRED + CSV_OPTIONAL]
    if missing or unknown:
        raise StatementInvalid(
            "line 1: header " + ", ".join(
                ([f"misses {', '.join(missing)}"] if missing else [])
                + ([f"has unknown columns {', '.join(unknown)}"] if unknown else [])))
    records: list[StatementRecord] = []
    provider: str | None = None
    try:
        for row in reader:
            where = f"line {reader.line_num}"
            if None in row or any(v is None for v in row.values()):
                raise StatementInvalid(f"{where}: {len(header)} fields expected")
            record = _record(row, where, provider)
            provider = record.provider
            records.append(record)
            if len(records) > RECORDS_MAX:
                raise StatementInvalid(f"{where}: more than {RECORDS_MAX} records")
    except csv.Error as exc:
        raise StatementInvalid(f"line {reader.line_num}: not CSV: {exc}") from exc
    if provider is None:
        raise StatementInvalid("the statement has no records")
    return provider, records, None


def _parse_json(text: str) -> tuple[str, list[StatementRecord],
                                      tuple[datetime, datetime] | None]:
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise StatementInvalid(f"line {exc.lineno}: not JSON: {exc.msg}") from exc
    if not isinstance(doc, dict):
        raise StatementInvalid("the JSON statement must be an object with provider and records")
    unknown = sorted(set(doc) - {"provider", "period_start", "period_end", "records"})
    if unknown:
        raise StatementInvalid(f"unknown statement fields: {', '.join(unknown)}")
    provider = _provider(doc.get("provider"), "statement")
    items = doc.get("records")
    if not isinstance(items, list):
        raise StatementInvalid("statement: records must be a list")
    if len(items) > RECORDS_MAX:
        raise StatementInvalid(f"statement: more than {RECORDS_MAX} records")
    period = None
    if "period_start" in doc or "period_end" in doc:
        start = _time(doc.get("period_start"), "statement", "period_start")
        end = _time(doc.get("period_end"), "statement", "period_end")
        if end <= start:
            raise StatementInvalid("statement: period_end must be after period_start")
        period = (start, end)
    records = []
    for i, item in enumerate(items, start=1):
        where = f"record {i}"
        if not isinstance(item, dict):
            raise StatementInvalid(f"{where}: must be an object")
        extra = sorted(set(item) - set(CSV_REQUIRED + CSV_OPTIONAL))
        if extra:
            raise StatementInvalid(f"{where}: unknown fields {', '.join(extra)}")
        records.append(_record({"provider": provider, **item}, where, provider))
    return provider, records, period


def _record(row: Mapping[str, Any], where: str, provider: str | None) -> StatementRecord:
    """One record from its fields (strings; JSON numbers are refused for amounts)."""
    name = _provider(row.get("provider"), where)
    if provider is not None and name != provider:
        raise StatementInvalid(f"{where}: provider {name!r} differs from {provider!r} "
                               "(one provider per statement)")
    reference = _text(row.get("reference"), where, "reference")
    if len(reference) > REFERENCE_MAX:
        raise StatementInvalid(f"{where}: reference longer than {REFERENCE_MAX} characters")
    direction = _text(row.get("direction"), where, "direction")
    if direction not in ("in", "out"):
        raise StatementInvalid(f"{where}: direction must be in or out, not {direction!r}")
    asset = _text(row.get("asset"), where, "asset")
    if not _ASSET.match(asset):
        raise StatementInvalid(f"{where}: asset {asset!r} is not an asset code")
    amount = row.get("amount_minor")
    if not isinstance(amount, str):
        raise StatementInvalid(f"{where}: amount_minor must be a string of digits (minor "
                               "units), not " + type(amount).__name__)
    if not _DIGITS.match(amount.strip()):
        raise StatementInvalid(f"{where}: amount_minor {amount!r} is not a whole number of "
                               "minor units")
    amount_minor = int(amount.strip())
    if not 0 < amount_minor < AMOUNT_LIMIT:
        raise StatementInvalid(f"{where}: amount_minor must be above 0 and below 2^127")
    chain = _optional(row.get("chain"), where, "chain")
    tx_hash = _optional(row.get("tx_hash"), where, "tx_hash")
    if tx_hash is not None:
        tx_hash = tx_hash.lower()
        if not _TX_HASH.match(tx_hash):
            raise StatementInvalid(f"{where}: tx_hash {tx_hash!r} is not a transaction hash")
    return StatementRecord(name, reference, "in" if direction == "in" else "out", asset,
                           amount_minor, _time(row.get("occurred_at"), where, "occurred_at"),
                           chain, tx_hash)


def _provider(value: object, where: str) -> str:
    name = _text(value, where, "provider")
    if not _PROVIDER.match(name):
        raise StatementInvalid(f"{where}: provider {name!r} must be lower-case letters, digits, "
                               "'.', '_' or '-' (at most 64)")
    return name


def _text(value: object, where: str, name: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise StatementInvalid(f"{where}: {name} is missing")
    return value.strip()


def _optional(value: object, where: str, name: str) -> str | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    return _text(value, where, name)


def _time(value: object, where: str, name: str) -> datetime:
    text = _text(value, where, name)
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as exc:
        raise StatementInvalid(f"{where}: {name} {text!r} is not an ISO 8601 time") from exc
    if parsed.tzinfo is None:
        raise StatementInvalid(f"{where}: {name} {text!r} has no time zone")
    return parsed


# ----------------------------------------------------------------------------------- matching


def match(theirs: Sequence[StatementRecord], ours: Sequence[OurRecord]) -> tuple[Match, ...]:
    """Each reference's outcome, by reference only: the provider's records against ours (both
    for one provider and period; ours with a zero net, such as a reversed deposit, count as
    absent). Sorted by reference."""
    by_ref: dict[str, list[OurRecord]] = {}
    for o in ours:
        if o.net_minor != 0:
            by_ref.setdefault(o.reference, []).append(o)
    found: list[Match] = []
    for t in theirs:
        candidates = by_ref.pop(t.reference, [])
        if not candidates:
            found.append(Match(Outcome.MISSING_IN_LEDGER, t.reference, t, None))
            continue
        # One reference with two assets on our side: compare with the one of the same asset,
        # and the other is ours alone.
        same = [o for o in candidates if o.asset == t.asset]
        mine = same[0] if same else candidates[0]
        for other in candidates:
            if other is not mine:
                found.append(Match(Outcome.MISSING_AT_PROVIDER, t.reference, None, other))
        fields = tuple(name for name, differs in (
            ("asset", mine.asset != t.asset), ("direction", mine.direction != t.direction),
            ("amount", abs(mine.net_minor) != t.amount_minor)) if differs)
        found.append(Match(Outcome.AMOUNT_MISMATCH if fields else Outcome.MATCHED,
                           t.reference, t, mine, fields))
    for reference, left in by_ref.items():
        found += [Match(Outcome.MISSING_AT_PROVIDER, reference, None, o) for o in left]
    return tuple(sorted(found, key=lambda m: (m.reference, m.outcome.value)))


def remainders(matches: Sequence[Match], clearing_minor: Mapping[str, int]) -> tuple[
        Remainder, ...]:
    """Per asset (every asset of the matches or of the clearing account, sorted): the clearing
    balance and what the unmatched references leave unbooked (theirs minus ours, each side in
    its own asset)."""
    unbooked: dict[str, int] = {}
    for m in matches:
        if m.outcome is Outcome.MATCHED:
            continue
        if m.theirs is not None:
            unbooked[m.theirs.asset] = unbooked.get(m.theirs.asset, 0) + m.theirs.signed_minor
        if m.ours is not None:
            unbooked[m.ours.asset] = unbooked.get(m.ours.asset, 0) - m.ours.net_minor
    assets = sorted(set(unbooked) | set(clearing_minor))
    return tuple(Remainder(a, clearing_minor.get(a, 0), unbooked.get(a, 0)) for a in assets)


def reconcile(theirs: Sequence[StatementRecord], ours: Sequence[OurRecord],
              clearing_minor: Mapping[str, int]) -> Reconciliation:
    """``match`` and ``remainders`` together."""
    matches = match(theirs, ours)
    return Reconciliation(matches, remainders(matches, clearing_minor))
