"""Balance checkpoints, the posting watermark, and the replay of balances from a checkpoint
(``REPLAY_CTE``, also read by the integrity checks and the rebuild)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ledger import tables as t
from ledger.repository.seals import newest_seal_link


@dataclass(frozen=True)
class CheckpointRecord:
    """A balance checkpoint covering every posting with id <= ``through_posting_id``."""

    id: int
    through_posting_id: int
    verified: bool
    accounts_count: int
    digest: str
    created_at: datetime


def newest_verified_checkpoint(conn: Connection) -> CheckpointRecord | None:
    """The newest checkpoint whose replay agreed with the stored balances."""
    row = conn.execute(
        sa.select(t.balance_checkpoints)
        .where(t.balance_checkpoints.c.verified)
        .order_by(
            t.balance_checkpoints.c.through_posting_id.desc(), t.balance_checkpoints.c.id.desc()
        )
        .limit(1)
    ).first()
    if row is None:
        return None
    return CheckpointRecord(
        row.id, row.through_posting_id, row.verified, row.accounts_count, row.digest, row.created_at
    )


def posting_watermark(conn: Connection) -> int:
    """The highest posting id such that no posting with a lower or equal id is still in flight.

    Takes the ledger write gate exclusively (every posting transaction holds it shared until it
    commits), so it briefly waits for writes in flight; commit right after to release it.
    """
    conn.execute(sa.text("SELECT pg_advisory_xact_lock(7301, 1)"))
    return int(
        conn.execute(sa.text("SELECT coalesce(max(id), 0) FROM ledger_postings")).scalar_one()
    )


#: Balances of every account replayed from checkpoint :cp (0 = none) plus postings in (:lo, :hi].
REPLAY_CTE = """
replay AS (
  SELECT coalesce(e.account_id, d.account_id) AS account_id,
         coalesce(e.balance, 0) + coalesce(d.total, 0) AS balance,
         coalesce(e.version, 0) + coalesce(d.txns, 0) AS version
    FROM (SELECT account_id, balance, version FROM balance_checkpoint_entries
           WHERE checkpoint_id = :cp) e
    FULL JOIN (SELECT account_id, sum(amount) AS total, count(DISTINCT transaction_id) AS txns
                 FROM ledger_postings WHERE id > :lo AND id <= :hi
                 AND (CAST(:ids AS bigint[]) IS NULL OR account_id = ANY(:ids))
                GROUP BY account_id) d
      ON d.account_id = e.account_id
   WHERE CAST(:ids AS bigint[]) IS NULL OR coalesce(e.account_id, d.account_id) = ANY(:ids)
)
"""

_DIGEST_SQL = (
    "encode(sha256(convert_to('through=' || CAST(:hi AS text) || E'\\n' || coalesce(string_agg("
    "r.account_id || ':' || r.balance || ':' || r.version, E'\\n' ORDER BY r.account_id), ''), "
    "'UTF8')), 'hex')"
)

_NO_LIMIT = 2**62

#: The lower bound (exclusive) of a replay from no checkpoint: below every bigint posting id,
#: so that the replay covers postings whose id is 0 or negative too (no writer but a superuser
#: can give a posting its id; verify must still count such a row).
BEFORE_FIRST_POSTING = -(2**63)


def replay_params(
    checkpoint: CheckpointRecord | None, hi: int | None = None, ids: Sequence[int] | None = None
) -> dict[str, Any]:
    """Parameters of the replay query for a base checkpoint and an upper posting id."""
    return {
        "cp": checkpoint.id if checkpoint else 0,
        "lo": checkpoint.through_posting_id if checkpoint else BEFORE_FIRST_POSTING,
        "hi": _NO_LIMIT if hi is None else hi,
        "ids": list(ids) if ids is not None else None,
    }


def insert_checkpoint(
    conn: Connection, base: CheckpointRecord | None, through: int
) -> CheckpointRecord:
    """Write a checkpoint through posting ``through``: base + postings in (base, through].

    Run in a REPEATABLE READ transaction: the digest, the verification and the entries are all
    computed from one snapshot. Verified means: stored balances = checkpoint + later postings.
    The row records the newest ledger seal of that snapshot (id and hash): a non-full verify
    recomputes only the seals after it.
    """
    params = replay_params(base, through)
    digest, count = conn.execute(
        sa.text(
            f"WITH {REPLAY_CTE} SELECT {_DIGEST_SQL}, count(*) FROM replay r "
            "WHERE r.balance <> 0 OR r.version <> 0"
        ),
        params,
    ).one()
    drift = conn.execute(
        sa.text(
            f"WITH {REPLAY_CTE}, later AS ("
            "  SELECT account_id, sum(amount) AS total, count(DISTINCT transaction_id) AS txns"
            "  FROM ledger_postings WHERE id > :hi GROUP BY account_id)"
            " SELECT count(*) FROM accounts a"
            " LEFT JOIN replay r ON r.account_id = a.id"
            " LEFT JOIN later l ON l.account_id = a.id"
            " LEFT JOIN account_balances b ON b.account_id = a.id"
            " WHERE b.account_id IS NULL"
            "    OR b.balance <> coalesce(r.balance, 0) + coalesce(l.total, 0)"
            "    OR b.version <> coalesce(r.version, 0) + coalesce(l.txns, 0)"
        ),
        params,
    ).scalar_one()
    seal = newest_seal_link(conn)
    row = conn.execute(
        sa.insert(t.balance_checkpoints)
        .values(
            through_posting_id=through, verified=drift == 0, accounts_count=count, digest=digest,
            seal_id=seal[0] if seal else None, seal_hash=seal[1] if seal else None,
        )
        .returning(*t.balance_checkpoints.c)
    ).one()
    conn.execute(
        sa.text(
            f"WITH {REPLAY_CTE} INSERT INTO balance_checkpoint_entries "
            "(checkpoint_id, account_id, balance, version) "
            "SELECT :new, r.account_id, r.balance, r.version FROM replay r "
            "WHERE r.balance <> 0 OR r.version <> 0"
        ),
        {**params, "new": row.id},
    )
    return CheckpointRecord(
        row.id, row.through_posting_id, row.verified, row.accounts_count, row.digest, row.created_at
    )


def checkpoint_digest(conn: Connection, checkpoint: CheckpointRecord) -> str:
    """Recompute the digest of a checkpoint's stored entries."""
    return str(
        conn.execute(
            sa.text(
                f"SELECT {_DIGEST_SQL} FROM balance_checkpoint_entries r "
                "WHERE r.checkpoint_id = :cp"
            ),
            {"cp": checkpoint.id, "hi": checkpoint.through_posting_id},
        ).scalar_one()
    )
