"""Seals, the pure part: the canonical form of a ledger transaction, leaf hashes, the Merkle root,
the seal hash that chains seals, and the diagnosis of a seal whose root no longer matches.

No database, no clock: plain values in, plain values out. ``docs/sealing.md`` specifies every
byte computed here, with a worked example that ``tests/ledger/test_sealing.py`` recomputes with
``hashlib`` and ``json`` alone.

- Canonical form: a JSON object per transaction (its postings nested, in posting-id order),
  serialized as RFC 8785 (JCS) JSON: keys sorted, no whitespace, UTF-8. Every value is a string,
  ``null``, a boolean or a list of such objects (numbers are decimal strings), so the JCS number
  rules never apply and ``json.dumps(sort_keys=True, separators=(",", ":"),
  ensure_ascii=False)`` produces exactly JCS.
- Leaf: ``SHA-256(0x00 || canonical bytes)``. Node: ``SHA-256(0x01 || left || right)``. An odd
  node at the end of a level is carried up unchanged (never paired with itself, which would
  let two different leaf lists share a root). The root of one leaf is that leaf.
- Seal hash: ``SHA-256(0x02 || JCS(header))`` where the header holds the previous seal's hash
  (64 zeros for the first seal), the id range, the counts, the root and ``sealed_at``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import NamedTuple

LEAF_PREFIX = b"\x00"
NODE_PREFIX = b"\x01"
SEAL_PREFIX = b"\x02"
#: The previous hash of the first seal.
GENESIS_HASH = "0" * 64
#: Bytes of each leaf hash kept in a seal row to name what changed (diagnostic only).
LEAF_PREFIX_BYTES = 8


class PostingFacts(NamedTuple):
    """The sealed fields of one posting (``amount_minor``: signed minor units). A named tuple:
    the sealer builds one per posting, and a frozen dataclass costs several times more."""

    id: int
    line_no: int
    account_id: int
    account_code: str
    asset_code: str
    amount_minor: int
    closes_posting_id: int | None
    reverses_posting_id: int | None


class TransactionFacts(NamedTuple):
    """The sealed fields of one ledger transaction and its postings (in posting-id order)."""

    id: int
    idempotency_key: str
    fingerprint: str
    kind: str
    reference: str | None
    effective_at: datetime
    recorded_at: datetime
    reason: str | None
    source: str
    reverses_transaction_id: int | None
    out_of_period: bool
    postings: tuple[PostingFacts, ...]


@dataclass(frozen=True)
class SealHeader:
    """What the seal hash covers."""

    previous_hash: str
    from_transaction_id: int
    through_transaction_id: int
    transactions_count: int
    postings_count: int
    merkle_root: str
    sealed_at: datetime


def format_time(at: datetime) -> str:
    """A time in UTC with microseconds: ``2026-11-01T12:00:00.000000Z`` (aware times only)."""
    assert at.tzinfo is not None, "sealed times must be timezone-aware"
    return at.astimezone(UTC).replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"


def _opt(value: int | None) -> str | None:
    return None if value is None else str(value)


# Exactly RFC 8785 for objects whose values are strings, null, booleans and lists of such
# objects: sorted keys, no whitespace, only '"', '\\' and control characters escaped. One
# encoder for every call (json.dumps would build one each time).
_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _jcs(obj: object) -> bytes:
    return _ENCODER.encode(obj).encode()


def canonical_transaction(tx: TransactionFacts) -> bytes:
    """The canonical bytes of a transaction (docs/sealing.md, "Canonical form")."""
    return _jcs({
        "id": str(tx.id),
        "idempotency_key": tx.idempotency_key,
        "fingerprint": tx.fingerprint,
        "kind": tx.kind,
        "reference": tx.reference,
        "effective_at": format_time(tx.effective_at),
        "recorded_at": format_time(tx.recorded_at),
        "reason": tx.reason,
        "source": tx.source,
        "reverses_transaction_id": _opt(tx.reverses_transaction_id),
        "out_of_period": tx.out_of_period,
        "postings": [
            {
                "id": str(p.id),
                "line_no": str(p.line_no),
                "account_id": str(p.account_id),
                "account_code": p.account_code,
                "asset_code": p.asset_code,
                "amount": str(p.amount_minor),
                "closes_posting_id": _opt(p.closes_posting_id),
                "reverses_posting_id": _opt(p.reverses_posting_id),
            }
            for p in tx.postings
        ],
    })


def leaf_hash(tx: TransactionFacts) -> bytes:
    """SHA-256(0x00 || canonical form)."""
    return hashlib.sha256(LEAF_PREFIX + canonical_transaction(tx)).digest()


def merkle_root(leaves: Sequence[bytes]) -> bytes:
    """The Merkle root of the leaves in order: pairs hashed as SHA-256(0x01 || left || right),
    an odd last node carried up unchanged. At least one leaf."""
    assert leaves, "a Merkle root needs at least one leaf"
    level = list(leaves)
    sha = hashlib.sha256
    while len(level) > 1:
        paired = [sha(NODE_PREFIX + level[i] + level[i + 1]).digest()
                  for i in range(0, len(level) - 1, 2)]
        if len(level) % 2:
            paired.append(level[-1])
        level = paired
    return level[0]


def seal_hash(header: SealHeader) -> str:
    """SHA-256(0x02 || JCS(header)), hex (docs/sealing.md, "Seal hash")."""
    body = _jcs({
        "previous_hash": header.previous_hash,
        "from_transaction_id": str(header.from_transaction_id),
        "through_transaction_id": str(header.through_transaction_id),
        "transactions_count": str(header.transactions_count),
        "postings_count": str(header.postings_count),
        "merkle_root": header.merkle_root,
        "sealed_at": format_time(header.sealed_at),
    })
    return hashlib.sha256(SEAL_PREFIX + body).hexdigest()


@dataclass(frozen=True)
class SealContent:
    """A seal computed over transactions: its header (without a previous hash decided yet),
    the diagnostic lists and the hash."""

    header: SealHeader
    seal_hash: str
    transaction_ids: tuple[int, ...]
    leaf_prefixes: bytes


def compute_seal(
    previous_hash: str, from_transaction_id: int, txs: Sequence[TransactionFacts],
    sealed_at: datetime,
) -> SealContent:
    """The seal of ``txs`` (in id order, at least one) following the seal ``previous_hash``."""
    return seal_of_leaves(previous_hash, from_transaction_id, [tx.id for tx in txs],
                          [leaf_hash(tx) for tx in txs], sum(len(tx.postings) for tx in txs),
                          sealed_at)


def seal_of_leaves(
    previous_hash: str, from_transaction_id: int, ids: Sequence[int], leaves: Sequence[bytes],
    postings_count: int, sealed_at: datetime,
) -> SealContent:
    """The seal of transactions given by their ids and leaf hashes (in id order, at least one)."""
    assert ids and len(ids) == len(leaves), "a seal covers at least one transaction"
    header = SealHeader(
        previous_hash=previous_hash,
        from_transaction_id=from_transaction_id,
        through_transaction_id=ids[-1],
        transactions_count=len(ids),
        postings_count=postings_count,
        merkle_root=merkle_root(leaves).hex(),
        sealed_at=sealed_at,
    )
    return SealContent(header, seal_hash(header), tuple(ids),
                       b"".join(leaf[:LEAF_PREFIX_BYTES] for leaf in leaves))


@dataclass(frozen=True)
class SealFinding:
    """What changed in a sealed range: ``kind`` is ``changed``, ``missing``, ``inserted`` or
    ``reordered``; ``transaction_ids`` names the transactions (two for ``reordered``)."""

    kind: str
    transaction_ids: tuple[int, ...]


def diagnose(
    stored_ids: Sequence[int], stored_prefixes: bytes, current: Sequence[TransactionFacts]
) -> list[SealFinding] | None:
    """Name the transactions that differ between a seal's stored diagnostic lists and the
    transactions now in its range. None when the stored lists are unusable (their lengths
    disagree: the seal row itself was altered); [] when every leaf still matches."""
    n = LEAF_PREFIX_BYTES
    if len(stored_prefixes) != n * len(stored_ids):
        return None
    stored = {tid: stored_prefixes[i * n:(i + 1) * n] for i, tid in enumerate(stored_ids)}
    now = {tx.id: tx for tx in current}
    found = [SealFinding("missing", (tid,)) for tid in stored_ids if tid not in now]
    found += [SealFinding("inserted", (tx.id,)) for tx in current if tx.id not in stored]
    changed = [tx for tx in current if tx.id in stored and leaf_hash(tx)[:n] != stored[tx.id]]
    # A reorder: two transactions traded ids, so each one's content under the other's id
    # matches what was sealed there.
    paired: set[int] = set()
    for a in changed:
        for b in changed:
            if a.id < b.id and not {a.id, b.id} & paired \
                    and leaf_hash(a._replace(id=b.id))[:n] == stored[b.id] \
                    and leaf_hash(b._replace(id=a.id))[:n] == stored[a.id]:
                found.append(SealFinding("reordered", (a.id, b.id)))
                paired |= {a.id, b.id}
    found += [SealFinding("changed", (tx.id,)) for tx in changed if tx.id not in paired]
    return found
