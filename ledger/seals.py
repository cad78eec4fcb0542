"""Seals, the service: append seals over newly committed transactions, verify the chain.

``seal_once`` reads the transaction watermark under the ledger write gate (every id up to it is
settled: a transaction with a lower id that is still open holds the gate, so the watermark
waits for it or, past ``gate_timeout_ms``, this step seals nothing and the next one tries
again), then appends seals of at most ``max_transactions`` each, contiguous in id, until it
reaches the watermark or ``seals_max``. Every committed transaction is in exactly one seal: the
next seal starts right after the newest one, under the sealer's lock, and the table refuses
two seals with the same start or the same predecessor.

Both hash the canonical form as PostgreSQL builds it (``repository.seals.transaction_leaves``,
the same bytes as ``ledger.sealing``, tested); ``verify_seals(leaves="python")`` recomputes it
in Python from the plain columns instead.

``verify_seals`` walks the chain from an anchor (the seal a checkpoint recorded, whose stored
hash must match the checkpoint's; or the first seal) and recomputes each seal from the rows
now in its range: the range follows the previous seal, the previous hash links, the seal hash
matches its header, and the root and counts match the transactions. A root mismatch is named
per transaction from the seal's diagnostic lists (changed, missing, inserted, reordered).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.engine import Connection, Engine

from config.uow import UnitOfWork
from ledger import sealing
from ledger.integrity import Discrepancy
from ledger.repository import seals as repo
from ledger.repository.checkpoints import CheckpointRecord


def seal_once(
    engine: Engine, now: datetime, *, max_transactions: int = 10_000, seals_max: int = 100,
    gate_timeout_ms: int = 2_000,
) -> list[repo.SealRecord]:
    """Seal the transactions committed since the newest seal, up to the watermark; returns the
    new seals (none if nothing is new or the write gate stayed busy)."""
    assert max_transactions >= 1 and seals_max >= 1
    with UnitOfWork(engine) as uow:
        watermark = repo.transaction_watermark(uow.conn, timeout_ms=gate_timeout_ms)
        uow.commit()  # releases the write gate at once
    if watermark is None:
        return []
    made: list[repo.SealRecord] = []
    for _ in range(seals_max):
        with UnitOfWork(engine) as uow:
            repo.lock_sealer(uow.conn)
            newest = repo.newest_seal(uow.conn)
            start = newest.through_transaction_id + 1 if newest else 1
            got = repo.transaction_leaves(uow.conn, start, watermark, limit=max_transactions)
            if not got.ids:
                break
            previous = newest.seal_hash if newest else sealing.GENESIS_HASH
            made.append(repo.insert_seal(uow.conn, sealing.seal_of_leaves(
                previous, start, got.ids, got.leaves, got.postings_count, now)))
            uow.commit()
    return made


def newest_seal(engine: Engine) -> repo.SealRecord | None:
    """The newest seal (what ``custody seal export`` prints for anchoring)."""
    with UnitOfWork(engine) as uow:
        return repo.newest_seal(uow.conn)


@dataclass(frozen=True)
class SealsVerified:
    """Result of ``verify_seals``: the findings, how many seals were recomputed, and the seal
    the walk started after (None: from the first seal)."""

    discrepancies: list[Discrepancy]
    seals_checked: int
    anchor_seal_id: int | None


def verify_seals(
    conn: Connection, checkpoint: CheckpointRecord | None = None, *, leaves: str = "sql"
) -> SealsVerified:
    """Recompute the chain after the seal ``checkpoint`` recorded (or from the first seal when
    ``checkpoint`` is None or recorded none); see the module docstring. ``leaves``: "sql" has
    PostgreSQL build the canonical form and hash it (fast), "python" builds it here with
    ``ledger.sealing`` from the plain columns (independent of any SQL the database runs)."""
    assert leaves in ("sql", "python")
    found: list[Discrepancy] = []
    after_id, previous, through = 0, sealing.GENESIS_HASH, 0
    anchor_id: int | None = None
    link = repo.checkpoint_seal_link(conn, checkpoint.id) if checkpoint else None
    if link is not None:
        anchor = repo.get_seal(conn, link[0])
        if anchor is not None and anchor.seal_hash == link[1]:
            after_id, previous, through = anchor.id, anchor.seal_hash, anchor.through_transaction_id
            anchor_id = anchor.id
        else:
            # The checkpoint's anchor was altered: start from the first seal instead.
            found.append(Discrepancy(
                "checkpoint_seal_link", f"checkpoint {checkpoint.id if checkpoint else '?'}",
                f"seal {link[0]} hash {link[1]}",
                "no such seal" if anchor is None else f"hash {anchor.seal_hash}"))
    checked = 0
    while (seal := repo.next_seal(conn, after_id)) is not None:
        found += _check_seal(conn, seal, previous, through, leaves)
        checked += 1
        after_id, previous, through = seal.id, seal.seal_hash, seal.through_transaction_id
    return SealsVerified(found, checked, anchor_id)


def _check_seal(
    conn: Connection, seal: repo.SealRecord, previous: str, through: int, leaves: str
) -> list[Discrepancy]:
    subject = f"seal {seal.id} (transactions {seal.from_transaction_id}.." \
              f"{seal.through_transaction_id})"
    found = []
    if seal.from_transaction_id != through + 1:
        found.append(Discrepancy("seal_range", subject, f"starts at {through + 1}",
                                 f"starts at {seal.from_transaction_id}"))
    if seal.previous_hash != previous:
        found.append(Discrepancy("seal_chain_broken", subject, f"previous {previous}",
                                 f"previous {seal.previous_hash}"))
    stored = sealing.SealHeader(
        seal.previous_hash, seal.from_transaction_id, seal.through_transaction_id,
        seal.transactions_count, seal.postings_count, seal.merkle_root, seal.sealed_at)
    if sealing.seal_hash(stored) != seal.seal_hash:
        found.append(Discrepancy("seal_hash_mismatch", subject, seal.seal_hash,
                                 sealing.seal_hash(stored)))
    lo, hi = seal.from_transaction_id, seal.through_transaction_id
    if leaves == "sql":
        got = repo.transaction_leaves(conn, lo, hi)
        now = sealing.seal_of_leaves(seal.previous_hash, lo, got.ids, got.leaves,
                                     got.postings_count, seal.sealed_at) if got.ids else None
    else:
        txs = repo.transaction_facts(conn, lo, hi)
        now = sealing.compute_seal(seal.previous_hash, lo, txs, seal.sealed_at) if txs else None
    if now is None:
        return [*found, Discrepancy("seal_root_mismatch", subject, seal.merkle_root,
                                    "no transactions in the range")]
    h = now.header
    if (h.transactions_count, h.postings_count) != (seal.transactions_count, seal.postings_count):
        found.append(Discrepancy(
            "seal_counts", subject,
            f"{seal.transactions_count} transactions, {seal.postings_count} postings",
            f"{h.transactions_count} transactions, {h.postings_count} postings"))
    if h.merkle_root != seal.merkle_root:
        found.append(Discrepancy("seal_root_mismatch", subject, seal.merkle_root, h.merkle_root))
        # Named from the Python form of the rows (rare: only where a root no longer matches).
        found += _named(seal, repo.transaction_facts(conn, lo, hi))
    return found


def _named(seal: repo.SealRecord, txs: list[sealing.TransactionFacts]) -> list[Discrepancy]:
    findings = sealing.diagnose(seal.transaction_ids, seal.leaf_prefixes, txs)
    if findings is None:
        return [Discrepancy("seal_diagnosis_unavailable", f"seal {seal.id}",
                            "diagnostic lists of equal length", "lists altered")]
    words = {
        "changed": ("seal_transaction_changed", "as sealed", "altered"),
        "missing": ("seal_transaction_missing", "present", "absent"),
        "inserted": ("seal_transaction_inserted", "absent", "present"),
        "reordered": ("seal_transactions_reordered", "in sealed order", "contents traded ids"),
    }
    out = []
    for f in findings:
        kind, expected, observed = words[f.kind]
        ids = " and ".join(str(i) for i in f.transaction_ids)
        noun = "transactions" if len(f.transaction_ids) > 1 else "transaction"
        out.append(Discrepancy(kind, f"seal {seal.id}: {noun} {ids}", expected, observed))
    return out
