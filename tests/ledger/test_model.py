"""Pure functions of the ledger's model (no database)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from ledger.model import (
    Account,
    AccountType,
    Asset,
    Entry,
    Line,
    fingerprint,
    fingerprint_at,
    fingerprint_tail,
    metadata_json,
)

USDC = Asset(id=3, code="USDC", scale=6)


def account(account_id: int) -> Account:
    return Account(id=account_id, code=f"a{account_id}", asset=USDC, type=AccountType.ASSET)


def reference_fingerprint(entry: Entry) -> str:
    """The fingerprint as first written (one json.dumps of the whole canonical form): stored
    fingerprints were made so, and a replay must find the same one."""
    canonical = {
        "kind": entry.kind,
        "effective_at": entry.effective_at.astimezone(UTC).isoformat(),
        "source": entry.source,
        "reference": entry.reference,
        "reason": entry.reason,
        "reverses": entry.reverses_transaction_id,
        "out_of_period": entry.out_of_period,
        "metadata": entry.metadata,
        "lines": [[ln.account.id, str(ln.amount_minor), ln.closes_posting_id,
                   ln.reverses_posting_id] for ln in entry.lines],
    }
    blob = json.dumps(canonical, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


text = st.text(max_size=12)
json_values: st.SearchStrategy[Any] = st.recursive(
    st.none() | st.booleans() | st.integers(-2**130, 2**130) | text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
    max_leaves=8)
times = st.datetimes(min_value=datetime(1990, 1, 1), max_value=datetime(2100, 1, 1),
                     timezones=st.sampled_from([UTC, timezone(timedelta(hours=-5, minutes=-30)),
                                                timezone(timedelta(hours=9))]))
entries = st.builds(
    Entry,
    idempotency_key=text, kind=text, effective_at=times, source=text,
    lines=st.lists(st.builds(Line, st.integers(1, 10**12).map(account),
                             st.integers(-2**126, 2**126),
                             st.none() | st.integers(1, 10**9),
                             st.none() | st.integers(1, 10**9)),
                   min_size=1, max_size=4).map(tuple),
    reference=st.none() | text, reason=st.none() | text,
    reverses_transaction_id=st.none() | st.integers(1, 10**12), out_of_period=st.booleans(),
    metadata=st.dictionaries(text, json_values, max_size=4))


class TestFingerprint:
    @given(entries)
    def test_is_the_fingerprint_as_first_written(self, entry: Entry) -> None:
        assert fingerprint(entry) == reference_fingerprint(entry)

    @given(entries, times)
    def test_its_tail_completes_for_any_effective_time(self, entry: Entry,
                                                       at: datetime) -> None:
        assert fingerprint_at(fingerprint_tail(entry), at) == fingerprint(
            replace(entry, effective_at=at))

    @given(entries)
    def test_its_tail_around_serialized_metadata_is_the_same(self, entry: Entry) -> None:
        assert fingerprint_tail(entry, metadata_json=metadata_json(entry)) == \
            fingerprint_tail(entry)

    def test_a_stored_fingerprint_stays_the_same(self) -> None:
        entry = Entry(
            idempotency_key="deposit:dev:0xab:log:0", kind="deposit",
            effective_at=datetime(2026, 11, 29, tzinfo=UTC), source="watcher:dev",
            lines=(Line(account(1), 1_000_000), Line(account(2), -1_000_000)),
            reference="dev:0xab:log:0",
            metadata={"deposit_id": 7, "rule": "finalized", "user_id": "u1",
                      "evidence": {"tx_block": 5, "attestation": {"attestor": "node"}}})
        # Pinned: computed by the code before the fingerprint was split in two.
        assert fingerprint(entry) == PINNED


PINNED = "16cd59a22daf23d5aaf20d05dbe15c0b2f518099beed39e3cd0c1bc36af7c315"
