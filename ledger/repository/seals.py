"""Ledger seals: the sealer's watermark, the sealed facts of a range of transactions, seal rows.

Advisory lock namespace 7301 (two-int form), as in migrations/sql/revisions/0001_ledger.sql:
  (7301, 1) the ledger write gate, taken EXCLUSIVE here for the watermark (as the checkpoint
            watermark does), so that no transaction with a lower id is still in flight;
  (7301, 4) the sealer: one seal is appended at a time, after re-reading the newest one.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import Connection

from ledger.repository.common import to_int
from ledger.sealing import PostingFacts, SealContent, TransactionFacts

#: SQLSTATE of lock_timeout.
LOCK_NOT_AVAILABLE = "55P03"


@dataclass(frozen=True)
class SealRecord:
    """A stored seal (columns: migrations/sql/revisions/0020_ledger_seals.sql)."""

    id: int
    from_transaction_id: int
    through_transaction_id: int
    transactions_count: int
    postings_count: int
    merkle_root: str
    previous_hash: str
    seal_hash: str
    sealed_at: datetime
    transaction_ids: tuple[int, ...]
    leaf_prefixes: bytes


_SEAL_COLUMNS = (
    "id, from_transaction_id, through_transaction_id, transactions_count, postings_count, "
    "merkle_root, previous_hash, seal_hash, sealed_at, transaction_ids, leaf_prefixes"
)


def _record(row: sa.Row[tuple[object, ...]]) -> SealRecord:
    m = row._mapping
    return SealRecord(
        m["id"], m["from_transaction_id"], m["through_transaction_id"], m["transactions_count"],
        m["postings_count"], m["merkle_root"], m["previous_hash"], m["seal_hash"], m["sealed_at"],
        tuple(m["transaction_ids"]), bytes(m["leaf_prefixes"]),
    )


def transaction_watermark(conn: Connection, *, timeout_ms: int) -> int | None:
    """The highest ledger transaction id such that no transaction with a lower or equal id is
    still in flight, or None if the write gate could not be taken within ``timeout_ms``.

    Ids come from a sequence, so transaction 10 may commit after 11: every writer holds the
    write gate shared from before it takes an id until it commits, so once the gate is ours
    exclusively every id up to the highest visible one is settled (committed, or never will
    be). Commit right after to release the gate: writers wait while it is held.
    """
    conn.execute(sa.text(f"SET LOCAL lock_timeout = '{int(timeout_ms)}ms'"))
    try:
        with conn.begin_nested():
            conn.execute(sa.text("SELECT pg_advisory_xact_lock(7301, 1)"))
    except sa_exc.OperationalError as e:
        if getattr(e.orig, "sqlstate", None) == LOCK_NOT_AVAILABLE:
            return None
        raise
    return int(conn.execute(
        sa.text("SELECT coalesce(max(id), 0) FROM ledger_transactions")).scalar_one())


def lock_sealer(conn: Connection) -> None:
    """One sealer appends at a time (two would both read the same newest seal)."""
    conn.execute(sa.text("SELECT pg_advisory_xact_lock(7301, 4)"))


def newest_seal(conn: Connection) -> SealRecord | None:
    """The seal with the highest range, or None before the first (by its start: the unique
    index on from_transaction_id answers it whatever the number of seals)."""
    row = conn.execute(sa.text(
        f"SELECT {_SEAL_COLUMNS} FROM ledger_seals ORDER BY from_transaction_id DESC LIMIT 1"
    )).first()
    return _record(row) if row else None


def get_seal(conn: Connection, seal_id: int) -> SealRecord | None:
    """One seal by id."""
    row = conn.execute(
        sa.text(f"SELECT {_SEAL_COLUMNS} FROM ledger_seals WHERE id = :id"), {"id": seal_id}
    ).first()
    return _record(row) if row else None


def next_seal(conn: Connection, after_id: int) -> SealRecord | None:
    """The first seal with an id above ``after_id`` (verify walks the chain one seal at a time,
    so its memory is one seal's, whatever the history)."""
    row = conn.execute(sa.text(
        f"SELECT {_SEAL_COLUMNS} FROM ledger_seals WHERE id > :after ORDER BY id LIMIT 1"
    ), {"after": after_id}).first()
    return _record(row) if row else None


def seals_count(conn: Connection) -> int:
    """How many seals there are."""
    return int(conn.execute(sa.text("SELECT count(*) FROM ledger_seals")).scalar_one())


def transaction_facts(
    conn: Connection, lo: int, hi: int, *, limit: int | None = None
) -> list[TransactionFacts]:
    """The sealed fields of the transactions with ids in [lo, hi] in id order (at most
    ``limit``), each with its postings in posting-id order."""
    txs = conn.execute(sa.text(
        "SELECT id, idempotency_key, fingerprint, kind, reference, effective_at, recorded_at,"
        " reason, source, reverses_transaction_id, out_of_period"
        " FROM ledger_transactions WHERE id BETWEEN :lo AND :hi ORDER BY id LIMIT :n"
    ), {"lo": lo, "hi": hi, "n": limit}).all()
    if not txs:
        return []
    postings: dict[int, list[PostingFacts]] = {row[0]: [] for row in txs}
    for row in conn.execute(sa.text(
        "SELECT p.transaction_id, p.id, p.line_no, p.account_id, a.code, s.code, p.amount,"
        "       p.closes_posting_id, p.reverses_posting_id"
        "  FROM ledger_postings p JOIN accounts a ON a.id = p.account_id"
        "  JOIN assets s ON s.id = p.asset_id"
        " WHERE p.transaction_id BETWEEN :lo AND :hi ORDER BY p.transaction_id, p.id"
    ), {"lo": lo, "hi": txs[-1][0]}).all():
        bucket = postings.get(row[0])
        if bucket is not None:
            bucket.append(PostingFacts(row[1], row[2], row[3], row[4], row[5], to_int(row[6]),
                                       row[7], row[8]))
    return [
        TransactionFacts(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9], r[10],
                         tuple(postings[r[0]]))
        for r in txs
    ]


#: A JSON string (or null) as RFC 8785 writes it: PostgreSQL's to_json escapes exactly what JCS
#: escapes ('"', '\\', \b \f \n \r \t and \u00xx below U+0020) and keeps the rest as UTF-8.
_S = "coalesce(to_json({})::text, 'null')"
_T = "to_char({} AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')"
_N = "coalesce('\"' || {} || '\"', 'null')"

#: The canonical form of docs/sealing.md built by PostgreSQL, keys in sorted order, and its
#: leaf hash: the same bytes as ledger.sealing.canonical_transaction (a test compares them on
#: every kind of value). The sealer and verify use it because it is several times faster than
#: building the form in Python; verify recomputes in Python (``leaves="python"``) on demand and
#: always names what changed from the Python form.
_LEAVES_SQL = f"""
WITH ts AS (
  SELECT * FROM ledger_transactions WHERE id BETWEEN :lo AND :hi ORDER BY id LIMIT :n
), ps AS (
  SELECT lp.transaction_id, count(*) AS n, string_agg(
           '{{"account_code":' || {_S.format("a.code")}
           || ',"account_id":"' || lp.account_id
           || '","amount":"' || lp.amount::text
           || '","asset_code":' || {_S.format("s.code")}
           || ',"closes_posting_id":' || {_N.format("lp.closes_posting_id")}
           || ',"id":"' || lp.id
           || '","line_no":"' || lp.line_no
           || '","reverses_posting_id":' || {_N.format("lp.reverses_posting_id")} || '}}',
           ',' ORDER BY lp.id) AS items
    FROM ledger_postings lp JOIN accounts a ON a.id = lp.account_id
    JOIN assets s ON s.id = lp.asset_id
   WHERE lp.transaction_id BETWEEN :lo AND (SELECT max(id) FROM ts)
   GROUP BY lp.transaction_id
)
SELECT t.id, coalesce(p.n, 0),
       sha256('\\x00'::bytea || convert_to(
         '{{"effective_at":"' || {_T.format("t.effective_at")}
         || '","fingerprint":' || {_S.format("t.fingerprint")}
         || ',"id":"' || t.id
         || '","idempotency_key":' || {_S.format("t.idempotency_key")}
         || ',"kind":' || {_S.format("t.kind")}
         || ',"out_of_period":' || CASE WHEN t.out_of_period THEN 'true' ELSE 'false' END
         || ',"postings":[' || coalesce(p.items, '')
         || '],"reason":' || {_S.format("t.reason")}
         || ',"recorded_at":"' || {_T.format("t.recorded_at")}
         || '","reference":' || {_S.format("t.reference")}
         || ',"reverses_transaction_id":' || {_N.format("t.reverses_transaction_id")}
         || ',"source":' || {_S.format("t.source")} || '}}', 'UTF8'))
  FROM ts t LEFT JOIN ps p ON p.transaction_id = t.id
 ORDER BY t.id
"""


@dataclass(frozen=True)
class Leaves:
    """The leaves of a range as the database computed them: ids, leaf hashes, postings."""

    ids: list[int]
    leaves: list[bytes]
    postings_count: int


def transaction_leaves(conn: Connection, lo: int, hi: int, *, limit: int | None = None) -> Leaves:
    """The leaf hashes of the transactions with ids in [lo, hi] in id order (at most
    ``limit``), computed by PostgreSQL (``_LEAVES_SQL``)."""
    rows = conn.execute(sa.text(_LEAVES_SQL), {"lo": lo, "hi": hi, "n": limit}).all()
    return Leaves([r[0] for r in rows], [bytes(r[2]) for r in rows], sum(r[1] for r in rows))


def insert_seal(conn: Connection, seal: SealContent) -> SealRecord:
    """Append a seal."""
    h = seal.header
    row = conn.execute(sa.text(
        "INSERT INTO ledger_seals (from_transaction_id, through_transaction_id,"
        " transactions_count, postings_count, merkle_root, previous_hash, seal_hash, sealed_at,"
        " transaction_ids, leaf_prefixes)"
        " VALUES (:lo, :hi, :txs, :postings, :root, :prev, :hash, :at, :ids, :prefixes)"
        f" RETURNING {_SEAL_COLUMNS}"
    ), {
        "lo": h.from_transaction_id, "hi": h.through_transaction_id,
        "txs": h.transactions_count, "postings": h.postings_count, "root": h.merkle_root,
        "prev": h.previous_hash, "hash": seal.seal_hash, "at": h.sealed_at,
        "ids": list(seal.transaction_ids), "prefixes": seal.leaf_prefixes,
    }).one()
    return _record(row)


def newest_seal_link(conn: Connection) -> tuple[int, str] | None:
    """(id, hash) of the newest seal, for a checkpoint to record."""
    row = conn.execute(sa.text(
        "SELECT id, seal_hash FROM ledger_seals ORDER BY from_transaction_id DESC LIMIT 1"
    )).first()
    return (row[0], row[1]) if row else None


def checkpoint_seal_link(conn: Connection, checkpoint_id: int) -> tuple[int, str] | None:
    """(seal id, seal hash) recorded by a checkpoint, or None if it recorded none."""
    row = conn.execute(sa.text(
        "SELECT seal_id, seal_hash FROM balance_checkpoints WHERE id = :id AND seal_id IS NOT NULL"
    ), {"id": checkpoint_id}).first()
    return (row[0], row[1]) if row else None

