"""The integrity checks' queries (stored vs replayed balances, unbalanced or empty
transactions, over-consumed postings, postings off their account's asset or naming a missing
account or transaction) and the rebuild of the balance projection."""

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
    """(transaction id, asset code, sum) of transactions that do not balance in an asset, among
    those with a posting after ``after_posting_id`` (all of their postings are summed). A
    posting's asset that no asset row has (written with the checks off) is named ``#<id>``."""
    rows = conn.execute(
        sa.text(
            "SELECT p.transaction_id, coalesce(s.code, '#' || p.asset_id) AS code,"
            " sum(p.amount) AS total FROM ledger_postings p"
            " LEFT JOIN assets s ON s.id = p.asset_id"
            " WHERE p.transaction_id IN (SELECT transaction_id FROM ledger_postings WHERE id > :lo)"
            " GROUP BY p.transaction_id, p.asset_id, s.code HAVING sum(p.amount) <> 0"
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


@dataclass(frozen=True)
class PostingFault:
    """A posting that the insert check (``ledger_postings_account_and_transaction``) would have
    refused: its account is missing or in another asset, or its ledger transaction is missing.
    Such a row was written before that check existed or by a superuser with triggers off."""

    posting_id: int
    transaction_id: int
    account_id: int
    #: The account's code and asset code; None when no account has the posting's account id.
    account_code: str | None
    account_asset: str | None
    #: The posting's asset code (``#<id>`` when no asset has its asset id).
    posting_asset: str
    #: Whether the account exists and is in the posting's asset.
    asset_matches: bool
    #: Whether a ledger transaction has the posting's transaction id.
    transaction_exists: bool


def posting_faults(conn: Connection, after_posting_id: int) -> list[PostingFault]:
    """Postings with id > ``after_posting_id`` on a missing account, on an account of another
    asset, or naming a missing ledger transaction, in posting-id order."""
    rows = conn.execute(
        sa.text(
            "SELECT p.id, p.transaction_id, p.account_id, a.code AS account_code,"
            " sa.code AS account_asset, coalesce(sp.code, '#' || p.asset_id) AS posting_asset,"
            " coalesce(a.asset_id = p.asset_id, false) AS asset_matches,"
            " t.id IS NOT NULL AS transaction_exists"
            " FROM ledger_postings p"
            " LEFT JOIN accounts a ON a.id = p.account_id"
            " LEFT JOIN assets sa ON sa.id = a.asset_id"
            " LEFT JOIN assets sp ON sp.id = p.asset_id"
            " LEFT JOIN ledger_transactions t ON t.id = p.transaction_id"
            " WHERE p.id > :lo AND (a.id IS NULL OR a.asset_id <> p.asset_id OR t.id IS NULL)"
            " ORDER BY p.id"
        ),
        {"lo": after_posting_id},
    )
    return [
        PostingFault(r.id, r.transaction_id, r.account_id, r.account_code, r.account_asset,
                     r.posting_asset, r.asset_matches, r.transaction_exists)
        for r in rows
    ]


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
