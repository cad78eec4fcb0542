"""The integrity checks' queries (stored vs replayed balances, unbalanced or empty
transactions, over-consumed postings) and the rebuild of the balance projection."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ledger.repository.checkpoints import REPLAY_CTE, CheckpointRecord, replay_params
from ledger.repository.common import to_int


@dataclass(frozen=True)
class AccountState:
    """One account with its stored and replayed balances (raw, debit positive)."""

    account_id: int
    code: str
    asset_code: str
    type: str
    dnec: bool
    cned: bool
    stored: int | None
    stored_version: int | None
    replayed: int
    replayed_version: int


def account_states(conn: Connection, base: CheckpointRecord | None) -> list[AccountState]:
    """Every account with its stored balance and its replay from ``base``."""
    rows = conn.execute(
        sa.text(
            f"WITH {REPLAY_CTE} SELECT a.id, a.code, s.code AS asset_code, a.type,"
            " a.debits_must_not_exceed_credits AS dnec, a.credits_must_not_exceed_debits AS cned,"
            " b.balance AS stored, b.version AS stored_version,"
            " coalesce(r.balance, 0) AS replayed, coalesce(r.version, 0) AS replayed_version"
            " FROM accounts a JOIN assets s ON s.id = a.asset_id"
            " LEFT JOIN replay r ON r.account_id = a.id"
            " LEFT JOIN account_balances b ON b.account_id = a.id ORDER BY a.id"
        ),
        replay_params(base),
    )
    return [
        AccountState(
            r.id,
            r.code,
            r.asset_code,
            r.type,
            r.dnec,
            r.cned,
            None if r.stored is None else to_int(r.stored),
            r.stored_version,
            to_int(r.replayed),
            int(r.replayed_version),
        )
        for r in rows
    ]


def unbalanced_transactions(conn: Connection, after_posting_id: int) -> list[tuple[int, str, int]]:
    """(transaction id, asset code, sum) of transactions that do not balance in an asset."""
    rows = conn.execute(
        sa.text(
            "SELECT p.transaction_id, s.code, sum(p.amount) AS total FROM ledger_postings p"
            " JOIN assets s ON s.id = p.asset_id"
            " WHERE p.transaction_id IN (SELECT transaction_id FROM ledger_postings WHERE id > :lo)"
            " GROUP BY p.transaction_id, s.code HAVING sum(p.amount) <> 0"
            " ORDER BY p.transaction_id"
        ),
        {"lo": after_posting_id},
    )
    return [(r.transaction_id, r.code, to_int(r.total)) for r in rows]


def transactions_without_postings(conn: Connection) -> list[int]:
    """Ledger transactions that have no postings at all."""
    rows = conn.execute(
        sa.text(
            "SELECT x.id FROM ledger_transactions x WHERE NOT EXISTS"
            " (SELECT 1 FROM ledger_postings p WHERE p.transaction_id = x.id) ORDER BY x.id"
        )
    )
    return [r.id for r in rows]


def over_consumed_postings(conn: Connection) -> list[tuple[str, int, int, int]]:
    """(kind, original posting id, original amount, consumed) where reversals or closings of a
    posting exceed it, or have the same sign."""
    rows = conn.execute(
        sa.text(
            "SELECT 'reversed' AS kind, o.id, o.amount, sum(p.amount) AS used"
            " FROM ledger_postings p JOIN ledger_postings o ON o.id = p.reverses_posting_id"
            " GROUP BY o.id, o.amount"
            " HAVING abs(sum(p.amount)) > abs(o.amount) OR sign(sum(p.amount)) = sign(o.amount)"
            " UNION ALL "
            "SELECT 'closed', o.id, o.amount, sum(p.amount) FROM ledger_postings p"
            " JOIN ledger_postings o ON o.id = p.closes_posting_id GROUP BY o.id, o.amount"
            " HAVING abs(sum(p.amount)) > abs(o.amount) OR sign(sum(p.amount)) = sign(o.amount)"
        )
    )
    return [(r.kind, r.id, to_int(r.amount), to_int(r.used)) for r in rows]


def account_ids(conn: Connection) -> list[int]:
    """Every account id, ascending."""
    return [r[0] for r in conn.execute(sa.text("SELECT id FROM accounts ORDER BY id"))]


def lock_balances_for_rebuild(conn: Connection, ids: Sequence[int]) -> dict[int, tuple[int, int]]:
    """Create missing balance rows of ``ids``, lock all of them in id order, return them.

    Holding these row locks means every posting of these accounts has committed (and is visible
    to the next statement) or waits for us: the replay that follows cannot miss one.
    """
    conn.execute(
        sa.text(
            "INSERT INTO account_balances (account_id, asset_id, debits_must_not_exceed_credits,"
            " credits_must_not_exceed_debits)"
            " SELECT a.id, a.asset_id, a.debits_must_not_exceed_credits,"
            " a.credits_must_not_exceed_debits FROM accounts a WHERE a.id = ANY(:ids)"
            " ON CONFLICT (account_id) DO NOTHING"
        ),
        {"ids": list(ids)},
    )
    rows = conn.execute(
        sa.text(
            "SELECT account_id, balance, version FROM account_balances"
            " WHERE account_id = ANY(:ids) ORDER BY account_id FOR UPDATE"
        ),
        {"ids": list(ids)},
    )
    return {r.account_id: (to_int(r.balance), r.version) for r in rows}


def replay_accounts(
    conn: Connection, base: CheckpointRecord | None, ids: Sequence[int]
) -> dict[int, tuple[int, int]]:
    """(balance, version) of ``ids`` replayed from ``base`` and every later posting."""
    rows = conn.execute(
        sa.text(f"WITH {REPLAY_CTE} SELECT account_id, balance, version FROM replay"),
        replay_params(base, None, ids),
    )
    found = {r.account_id: (to_int(r.balance), int(r.version)) for r in rows}
    return {a: found.get(a, (0, 0)) for a in ids}


def set_balances(conn: Connection, values: dict[int, tuple[int, int]]) -> None:
    """Overwrite stored balances (rebuild only; the rows are locked by the caller)."""
    conn.execute(
        sa.text(
            "UPDATE account_balances b SET balance = CAST(v.balance AS numeric),"
            " version = v.version, updated_at = now()"
            " FROM (SELECT unnest(CAST(:ids AS bigint[])) AS account_id,"
            " unnest(CAST(:bals AS text[])) AS balance,"
            " unnest(CAST(:vers AS bigint[])) AS version) v"
            " WHERE b.account_id = v.account_id"
        ),
        {
            "ids": list(values),
            "bals": [str(v[0]) for v in values.values()],
            "vers": [v[1] for v in values.values()],
        },
    )
