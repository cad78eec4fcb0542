"""Pure types and rules of the ledger: entries, lines, validation, fingerprints, amounts.

No database, no clock, no settings: plain values in, plain values (or errors) out.
Postings are signed: a debit is positive, a credit negative. An account's balance on its normal
side is the raw sum for debit-normal types (asset, expense) and minus the raw sum otherwise.
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from ledger.errors import AmountInvalid, EntryInvalid

#: Every amount and balance satisfies |x| < AMOUNT_LIMIT (signed 128-bit, as in the database).
AMOUNT_LIMIT = 2**127
KEY_LENGTH_MAX = 200
LINES_MAX = 64


class AccountType(StrEnum):
    """The five account types; asset and expense are debit-normal."""

    ASSET = "asset"
    LIABILITY = "liability"
    EQUITY = "equity"
    REVENUE = "revenue"
    EXPENSE = "expense"

    @property
    def debit_normal(self) -> bool:
        """Whether a debit increases the balance on this type's normal side."""
        return self in (AccountType.ASSET, AccountType.EXPENSE)


@dataclass(frozen=True)
class Asset:
    """A ledger asset; ``scale`` is the number of decimals of one minor unit."""

    id: int
    code: str
    scale: int


@dataclass(frozen=True)
class Account:
    """An account of one asset. Immutable once opened."""

    id: int
    code: str
    asset: Asset
    type: AccountType
    debits_must_not_exceed_credits: bool = False
    credits_must_not_exceed_debits: bool = False

    def normal(self, raw_minor: int) -> int:
        """The balance on this account's normal side, from a raw (debit-positive) sum."""
        return raw_minor if self.type.debit_normal else -raw_minor


@dataclass(frozen=True)
class Line:
    """One posting of an entry: signed minor units (debit positive), on one account."""

    account: Account
    amount_minor: int
    closes_posting_id: int | None = None
    reverses_posting_id: int | None = None


def debit(account: Account, amount_minor: int, **refs: int | None) -> Line:
    """A debit of ``amount_minor`` (> 0) to ``account``."""
    return Line(account, check_positive(amount_minor), **refs)


def credit(account: Account, amount_minor: int, **refs: int | None) -> Line:
    """A credit of ``amount_minor`` (> 0) to ``account``."""
    return Line(account, -check_positive(amount_minor), **refs)


@dataclass(frozen=True)
class Entry:
    """A request to post one ledger transaction (one business event)."""

    idempotency_key: str
    kind: str
    effective_at: datetime
    source: str
    lines: tuple[Line, ...]
    reference: str | None = None
    reason: str | None = None
    reverses_transaction_id: int | None = None
    out_of_period: bool = False
    metadata: Mapping[str, Any] = field(default_factory=dict)


def check_amount(value: object, *, what: str = "amount") -> int:
    """Return ``value`` if it is an ``int`` with |value| < 2^127, else raise AmountInvalid.

    Floats, Decimals and bools are refused even when integral: amounts are ``int`` inside the
    engine, and conversion from text happens only at the edges
    (``config.money.parse_decimal_amount``).
    """
    if isinstance(value, bool) or not isinstance(value, int):
        raise AmountInvalid(f"{what} must be an int in minor units, got {type(value).__name__}")
    if not -AMOUNT_LIMIT < value < AMOUNT_LIMIT:
        raise AmountInvalid(f"{what} {value} is outside the signed 128-bit range")
    return value


def check_positive(value: object, *, what: str = "amount") -> int:
    """Like ``check_amount``, and the value must be > 0."""
    amount = check_amount(value, what=what)
    if amount <= 0:
        raise AmountInvalid(f"{what} must be positive, got {amount}")
    return amount


def validate_entry(entry: Entry, *, metadata_json: str | None = None) -> None:
    """Raise EntryInvalid unless ``entry`` is well formed and balanced per asset.
    ``metadata_json``: its metadata already serialized (:func:`metadata_json`), not again."""
    if not entry.idempotency_key or len(entry.idempotency_key) > KEY_LENGTH_MAX:
        raise EntryInvalid(f"idempotency key must have 1 to {KEY_LENGTH_MAX} characters")
    if not entry.kind or len(entry.kind) > 64:
        raise EntryInvalid("kind must have 1 to 64 characters")
    if not entry.source or len(entry.source) > 200:
        raise EntryInvalid("source must have 1 to 200 characters")
    if entry.effective_at.tzinfo is None or entry.effective_at.utcoffset() is None:
        raise EntryInvalid("effective_at must carry a time zone")
    if not 2 <= len(entry.lines) <= LINES_MAX:
        raise EntryInvalid(f"an entry has 2 to {LINES_MAX} lines, got {len(entry.lines)}")
    totals: dict[int, int] = defaultdict(int)
    for n, line in enumerate(entry.lines, start=1):
        amount = check_amount(line.amount_minor, what=f"line {n} amount")
        if amount == 0:
            raise AmountInvalid(f"line {n} amount is zero")
        totals[line.account.asset.id] += amount
        if line.reverses_posting_id is not None and entry.reverses_transaction_id is None:
            raise EntryInvalid(f"line {n} reverses a posting but the entry reverses nothing")
    unbalanced = {asset: total for asset, total in totals.items() if total != 0}
    if unbalanced:
        codes = {ln.account.asset.id: ln.account.asset.code for ln in entry.lines}
        detail = ", ".join(f"{codes[a]} off by {t}" for a, t in sorted(unbalanced.items()))
        raise EntryInvalid(f"entry {entry.idempotency_key} does not balance per asset: {detail}")
    if metadata_json is not None:
        return
    try:
        if entry.metadata:
            json.dumps(dict(entry.metadata))
    except (TypeError, ValueError) as exc:
        raise EntryInvalid(f"metadata must be JSON: {exc}") from exc


def metadata_json(entry: Entry) -> str:
    """The entry's metadata as JSON text with sorted keys and no spaces, as it appears in its
    fingerprint; EntryInvalid if it is not JSON. A caller that sends many entries serializes
    each metadata once (``ledger.service.prepare_batch``): its check, its column value and its
    place in the fingerprint."""
    try:
        return json.dumps(dict(entry.metadata), sort_keys=True, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        raise EntryInvalid(f"metadata must be JSON: {exc}") from exc


def _iso(at: datetime) -> str:
    return at.astimezone(UTC).isoformat()


def fingerprint(entry: Entry) -> str:
    """SHA-256 over the canonical form of everything the request asks for: the JSON of
    ``{"effective_at", "kind", "lines", "metadata", "out_of_period", "reason", "reference",
    "reverses", "source"}`` with sorted keys and no spaces (stored with every transaction: it
    never changes for the same request)."""
    return fingerprint_at(fingerprint_tail(entry), entry.effective_at)


def fingerprint_tail(entry: Entry, *, metadata_json: str | None = None) -> str:
    """The canonical form of ``entry`` after its first member, ``effective_at`` (the first of
    the sorted keys): :func:`fingerprint_at` completes it for any effective time. A batch
    prepared before its effective time is known keeps this (``ledger.service.prepare_batch``).
    ``metadata_json``: the metadata serialized by :func:`metadata_json` (then the form is
    assembled around it, member by member in key order)."""
    if metadata_json is not None and type(entry.metadata) is dict and _plain_types(entry):
        # What json.dumps writes for each member, without a json.dumps call per member (the
        # call costs more than the member): quoted ASCII strings, null, bare ints.
        lines = ",".join(
            "[" + str(ln.account.id) + "," + _quote(str(ln.amount_minor)) + ","
            + _number(ln.closes_posting_id) + "," + _number(ln.reverses_posting_id) + "]"
            for ln in entry.lines)
        return ('"kind":' + _quote(entry.kind) + ',"lines":[' + lines + '],"metadata":'
                + metadata_json + ',"out_of_period":' + ("true" if entry.out_of_period else
                                                        "false")
                + ',"reason":' + _text(entry.reason) + ',"reference":' + _text(entry.reference)
                + ',"reverses":' + _number(entry.reverses_transaction_id)
                + ',"source":' + _quote(entry.source) + "}")
    canonical = {
        "kind": entry.kind,
        "source": entry.source,
        "reference": entry.reference,
        "reason": entry.reason,
        "reverses": entry.reverses_transaction_id,
        "out_of_period": entry.out_of_period,
        "metadata": entry.metadata,
        "lines": [
            [ln.account.id, str(ln.amount_minor), ln.closes_posting_id, ln.reverses_posting_id]
            for ln in entry.lines
        ],
    }
    # '{"kind":...}' without its '{': what follows '"effective_at":<time>,' in the whole form.
    return json.dumps(canonical, sort_keys=True, separators=(",", ":"), default=str)[1:]


#: json.dumps of a str (ensure_ascii, as every dump here): the json module's own C function.
_quote = json.encoder.encode_basestring_ascii


def _text(value: str | None) -> str:
    return "null" if value is None else str(_quote(value))


def _number(value: int | None) -> str:
    return "null" if value is None else str(value)


def _plain_types(entry: Entry) -> bool:
    """Whether every member of the entry's form has the type the fast path writes (exactly
    ``str``, ``int``, ``bool``, ``None``: a subclass could serialize otherwise)."""
    return (type(entry.kind) is str and type(entry.source) is str
            and type(entry.out_of_period) is bool
            and (entry.reason is None or type(entry.reason) is str)
            and (entry.reference is None or type(entry.reference) is str)
            and (entry.reverses_transaction_id is None
                 or type(entry.reverses_transaction_id) is int)
            and all(type(ln.account.id) is int and type(ln.amount_minor) is int
                    and (ln.closes_posting_id is None or type(ln.closes_posting_id) is int)
                    and (ln.reverses_posting_id is None or type(ln.reverses_posting_id) is int)
                    for ln in entry.lines))


def fingerprint_at(tail: str, effective_at: datetime) -> str:
    """The fingerprint of the entry whose :func:`fingerprint_tail` is ``tail``, effective at
    ``effective_at``."""
    blob = '{"effective_at":' + json.dumps(_iso(effective_at)) + "," + tail
    return hashlib.sha256(blob.encode()).hexdigest()


def format_amount(amount_minor: int, scale: int) -> str:
    """Render minor units as an exact decimal string: ``format_amount(160, 2) == "1.60"``."""
    check_amount(amount_minor)
    sign = "-" if amount_minor < 0 else ""
    digits = str(abs(amount_minor))
    if scale == 0:
        return sign + digits
    digits = digits.rjust(scale + 1, "0")
    return f"{sign}{digits[:-scale]}.{digits[-scale:]}"


def amount_json(amount_minor: int, scale: int) -> dict[str, str]:
    """An amount for JSON: minor units and the decimal rendering, both as strings.

    Strings, because JavaScript clients lose precision above 2^53.
    """
    return {"minor": str(check_amount(amount_minor)), "decimal": format_amount(amount_minor, scale)}
