"""Our own addresses' side tables: internal transfers, treasury fundings and their matches, the
votes of two-admin case resolutions, and the deposit addresses a reserve check reads."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from deposits.repository.common import Key, _int


@dataclass(frozen=True)
class InternalTransfer:
    """An outgoing movement we made, by the deposit key of the transfer it produces."""

    chain: str
    tx_hash: str
    position: str
    kind: str
    reference: str
    recorded_at: datetime


def insert_internal_transfer(conn: Connection, key: Key, kind: str, reference: str) -> None:
    """Record a movement between our own addresses before it is sent (idempotent per key)."""
    conn.execute(
        sa.text("INSERT INTO internal_transfers (chain, tx_hash, position, kind, reference) "
                "VALUES (:c, :t, :p, :k, :r) ON CONFLICT DO NOTHING"),
        {"c": key[0], "t": key[1].lower(), "p": key[2], "k": kind, "r": reference},
    )


def internal_transfer_keys(conn: Connection, keys: Sequence[Key]) -> set[Key]:
    """Which of ``keys`` are recorded movements of ours (one query)."""
    rows = conn.execute(
        sa.text("SELECT i.chain, i.tx_hash, i.position FROM internal_transfers i JOIN "
                "unnest(CAST(:c AS text[]), CAST(:t AS text[]), CAST(:p AS text[])) "
                "AS k(chain, tx_hash, position) USING (chain, tx_hash, position)"),
        {"c": [k[0] for k in keys], "t": [k[1].lower() for k in keys], "p": [k[2] for k in keys]})
    return {(r.chain, r.tx_hash, r.position) for r in rows}


def match_refill(conn: Connection, key: Key, token: str | None, source: str, destination: str,
                 value: int, at: datetime) -> int | None:
    """Match a final transfer from a cold address to the hot wallet with the oldest open refill
    request of the same chain, token, source, destination and exact amount (locked; matched at
    most once). The id of the request it matched, or None."""
    row = conn.execute(
        sa.text("SELECT id FROM refill_requests WHERE chain = :c AND state = 'open' "
                "AND token IS NOT DISTINCT FROM :t AND source = :s AND destination = :d "
                "AND amount = :v ORDER BY id LIMIT 1 FOR UPDATE"),
        {"c": key[0], "t": token, "s": source, "d": destination, "v": str(value)}).first()
    if row is None:
        return None
    # The application role may not UPDATE refill_requests (revision 0030_money_table_grants):
    # movement_transition checks open -> matched under the row lock.
    conn.execute(
        sa.text("SELECT movement_transition('refill_request', :i, CAST(:sets AS jsonb), 'open', "
                "'matched', 'matched', NULL, NULL, :a, NULL, NULL, CAST(:at AS timestamptz))"),
        {"i": row.id, "sets": json.dumps({"matched_tx_hash": key[1], "matched_position": key[2]}),
         "a": "deposit-processor", "at": at})
    return int(row.id)


def internal_transfer(conn: Connection, key: Key) -> InternalTransfer | None:
    """The recorded movement with this key, or None."""
    row = conn.execute(
        sa.text("SELECT * FROM internal_transfers WHERE chain = :c AND tx_hash = :t "
                "AND position = :p"), {"c": key[0], "t": key[1], "p": key[2]},
    ).first()
    return None if row is None else InternalTransfer(**dict(row._mapping))


@dataclass(frozen=True)
class FundingRecord:
    """A declared treasury funding and, once matched, the transfer that brought it."""

    id: int
    chain: str
    asset_code: str
    amount_minor: int
    from_address: str
    reason: str
    declared_by: str
    idempotency_key: str
    fingerprint: str
    declared_at: datetime
    deposit_id: int | None
    ledger_transaction_id: int | None
    matched_at: datetime | None


_FUNDING = ("SELECT f.*, m.deposit_id, m.ledger_transaction_id, m.matched_at "
            "FROM treasury_fundings f LEFT JOIN treasury_funding_matches m ON m.funding_id = f.id ")


def _funding(row: Any) -> FundingRecord:
    data = dict(row._mapping)
    data["amount_minor"] = _int(data["amount_minor"])
    return FundingRecord(**data)


def insert_funding(conn: Connection, record: Mapping[str, Any]) -> int | None:
    """Store a declared funding; None when its idempotency key is taken already."""
    return conn.execute(
        sa.text("INSERT INTO treasury_fundings (chain, asset_code, amount_minor, from_address, "
                "reason, declared_by, idempotency_key, fingerprint) VALUES (:chain, :asset_code,"
                " CAST(:amount_minor AS numeric), :from_address, :reason, :declared_by, "
                ":idempotency_key, :fingerprint) ON CONFLICT (idempotency_key) DO NOTHING "
                "RETURNING id"), {**record, "amount_minor": str(record["amount_minor"])},
    ).scalar()


def funding_by_key(conn: Connection, idempotency_key: str) -> FundingRecord | None:
    """The funding declared under this key, or None."""
    row = conn.execute(sa.text(_FUNDING + "WHERE f.idempotency_key = :k"),
                       {"k": idempotency_key}).first()
    return None if row is None else _funding(row)


def fundings(conn: Connection, *, chain: str | None = None, limit: int,
             before_id: int | None = None, since: datetime | None = None,
             until: datetime | None = None) -> list[FundingRecord]:
    """Declared fundings, newest first, at most ``limit``: ids below ``before_id`` and
    declared in ``[since, until)`` when given."""
    rows = conn.execute(
        sa.text(_FUNDING + "WHERE (CAST(:c AS text) IS NULL OR f.chain = :c) "
                "AND (CAST(:b AS bigint) IS NULL OR f.id < :b) "
                "AND (CAST(:since AS timestamptz) IS NULL OR f.declared_at >= :since) "
                "AND (CAST(:until AS timestamptz) IS NULL OR f.declared_at < :until) "
                "ORDER BY f.id DESC LIMIT :n"),
        {"c": chain, "n": limit, "b": before_id, "since": since, "until": until},
    ).all()
    return [_funding(r) for r in rows]


def lock_unmatched_funding(conn: Connection, chain: str, asset_code: str, from_address: str,
                           amount_minor: int, exclude: list[int]) -> int | None:
    """The oldest unmatched funding of exactly these facts (not in ``exclude``: taken by the
    caller's transaction already), locked FOR UPDATE, or None.

    The lock makes two settlers (another process's watcher step) wait for each other; the
    second re-reads after the first committed its match and moves to the next funding.
    """
    return conn.execute(
        sa.text("SELECT f.id FROM treasury_fundings f WHERE f.chain = :c AND f.asset_code = :a "
                "AND f.from_address = :f AND f.amount_minor = CAST(:m AS numeric) "
                "AND NOT EXISTS (SELECT 1 FROM treasury_funding_matches m "
                " WHERE m.funding_id = f.id) AND NOT (f.id = ANY(CAST(:x AS bigint[]))) "
                "ORDER BY f.id LIMIT 1 FOR UPDATE OF f"),
        {"c": chain, "a": asset_code, "f": from_address.lower(), "m": str(amount_minor),
         "x": exclude},
    ).scalar()


def insert_funding_match(conn: Connection, funding_id: int, deposit_id: int,
                         ledger_transaction_id: int) -> None:
    """Record the transfer that brought a funding (once per funding and per deposit)."""
    conn.execute(
        sa.text("INSERT INTO treasury_funding_matches (funding_id, deposit_id, "
                "ledger_transaction_id) VALUES (:f, :d, :l)"),
        {"f": funding_id, "d": deposit_id, "l": ledger_transaction_id},
    )


@dataclass(frozen=True)
class VoteRecord:
    """A proposal or an approval of a case resolution."""

    id: int
    case_id: int
    role: str
    outcome: str
    withdrawal_id: int | None
    reason: str
    voted_by: str
    voted_at: datetime


def lock_case_votes(conn: Connection, case_id: int) -> None:
    """Serialize votes on one case until commit (two admins voting at once queue here). Case
    ids are bigint and the two-key lock takes int keys: ids that agree modulo 2^31 - 1 share a
    lock, which only makes their votes queue behind each other."""
    conn.execute(sa.text("SELECT pg_advisory_xact_lock(7314, CAST(:c % 2147483647 AS int))"),
                 {"c": case_id})


def case_votes(conn: Connection, case_id: int) -> dict[str, VoteRecord]:
    """The case's votes by role (``proposal``, ``approval``)."""
    rows = conn.execute(sa.text("SELECT * FROM deposit_case_votes WHERE case_id = :c"),
                        {"c": case_id}).all()
    return {r.role: VoteRecord(**dict(r._mapping)) for r in rows}


def insert_case_vote(conn: Connection, case_id: int, role: str, outcome: str,
                     withdrawal_id: int | None, reason: str, voted_by: str) -> None:
    """Append a vote (the table's trigger refuses an approval by the proposer)."""
    conn.execute(
        sa.text("INSERT INTO deposit_case_votes (case_id, role, outcome, withdrawal_id, reason, "
                "voted_by) VALUES (:c, :r, :o, :w, :why, :b)"),
        {"c": case_id, "r": role, "o": outcome, "w": withdrawal_id, "why": reason,
         "b": voted_by},
    )


def deposit_addresses(conn: Connection, family: str, *, limit: int) -> list[str]:
    """The deposit addresses of ``family``, by derivation index, at most ``limit``."""
    return list(conn.execute(
        sa.text("SELECT address FROM deposit_addresses WHERE family = :f "
                "ORDER BY derivation_index LIMIT :n"), {"f": family, "n": limit},
    ).scalars())
