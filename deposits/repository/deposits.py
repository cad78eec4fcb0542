"""Deposits and their history: the rows of ``deposits`` (``DepositRecord``) and of
``deposit_events`` (``EventRecord``), bulk inserts, the one statement that appends history rows
and moves each deposit's current state with them (``append_events``), and the reads by key,
state, user and transaction (``pending_incoming`` among them, on the hot balance read)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from config.database import DriverResult, driver_rows, driver_send
from deposits.repository.common import Key, _int, _json

_DEPOSIT_COLUMNS = (
    "id, chain, tx_hash, position, token, from_address, to_address, value, tx_from, tx_nonce, "
    "user_id, asset_code, amount_minor, booking, booking_reason, state, block_number, "
    "block_hash, confirmations, last_event_id, ledger_transaction_id, first_seen_at, updated_at, "
    "address_kind"
)


@dataclass(frozen=True)
class DepositRecord:
    """A deposit's facts and current state (a row of ``deposits``)."""

    id: int
    chain: str
    tx_hash: str
    position: str
    token: str | None
    from_address: str
    to_address: str
    value: int
    tx_from: str | None
    tx_nonce: int | None
    user_id: str | None
    asset_code: str | None
    amount_minor: int | None
    booking: str
    booking_reason: str | None
    state: str
    block_number: int | None
    block_hash: str | None
    confirmations: int | None
    last_event_id: int
    ledger_transaction_id: int | None
    first_seen_at: datetime
    updated_at: datetime
    #: ``deposit`` (a user's deposit address), ``hot`` or ``cold`` (our own addresses).
    address_kind: str = "deposit"

    @property
    def key(self) -> Key:
        """(chain, tx_hash, position)."""
        return (self.chain, self.tx_hash, self.position)


def _deposit(row: Any) -> DepositRecord:
    data = dict(row._mapping)
    data["value"] = _int(data["value"])
    data["amount_minor"] = _int(data["amount_minor"])
    return DepositRecord(**data)


@dataclass(frozen=True)
class EventRecord:
    """A row of ``deposit_events``."""

    id: int
    deposit_id: int
    chain: str
    tx_hash: str
    position: str
    event: str
    state: str
    block_number: int | None
    block_hash: str | None
    confirmations: int | None
    rule: str | None
    evidence: dict[str, Any]
    reason: str | None
    ledger_transaction_id: int | None
    inbox_event_id: str | None
    observed_at: datetime
    recorded_at: datetime


def lock_deposits(conn: Connection, keys: Iterable[Key]) -> dict[Key, DepositRecord]:
    """The deposits with these keys, locked FOR UPDATE in id order (absent keys left out).

    Locking prevents two writers from appending conflicting moves to the same deposit (for
    example a provider notification and the watcher's credit).
    """
    wanted = sorted(set(keys))
    if not wanted:
        return {}
    rows = conn.execute(
        sa.text(f"SELECT {_DEPOSIT_COLUMNS} FROM deposits WHERE (chain, tx_hash, position) IN "
                "(SELECT * FROM jsonb_to_recordset(CAST(:j AS jsonb)) "
                " AS x(chain text, tx_hash text, position text)) ORDER BY id FOR UPDATE"),
        {"j": _json([{"chain": c, "tx_hash": t, "position": p} for c, t, p in wanted])},
    ).all()
    return {(r.chain, r.tx_hash, r.position): _deposit(r) for r in rows}


def deposit_by_id(conn: Connection, deposit_id: int) -> DepositRecord:
    """One deposit, locked FOR UPDATE (it exists: cases and matches reference it)."""
    row = conn.execute(sa.text(f"SELECT {_DEPOSIT_COLUMNS} FROM deposits WHERE id = :i "
                               "FOR UPDATE"), {"i": deposit_id}).one()
    return _deposit(row)


def deposits_in_states(conn: Connection, chain: str, states: Sequence[str], *,
                       limit: int) -> list[DepositRecord]:
    """Deposits of ``chain`` in ``states``, oldest first, at most ``limit``."""
    rows = conn.execute(
        sa.text(f"SELECT {_DEPOSIT_COLUMNS} FROM deposits WHERE chain = :c "
                "AND state = ANY(:s) ORDER BY id LIMIT :n"),
        {"c": chain, "s": list(states), "n": limit},
    ).all()
    return [_deposit(r) for r in rows]


def deposits_waiting(conn: Connection, chain: str,
                     limits: Mapping[str, int]) -> list[DepositRecord]:
    """Deposits of ``chain`` in each state of ``limits``, oldest first and at most its limit
    per state, in one statement."""
    if not limits:
        return []
    parts = [f"(SELECT {_DEPOSIT_COLUMNS} FROM deposits WHERE chain = :c AND state = :s{i} "
             f"ORDER BY id LIMIT :n{i})" for i in range(len(limits))]
    params: dict[str, Any] = {"c": chain}
    for i, (state, limit) in enumerate(limits.items()):
        params[f"s{i}"], params[f"n{i}"] = state, limit
    rows = conn.execute(sa.text(" UNION ALL ".join(parts)), params).all()
    return [_deposit(r) for r in rows]


def deposits_above(conn: Connection, chain: str, block_number: int,
                   states: Sequence[str]) -> list[DepositRecord]:
    """Deposits of ``chain`` in ``states`` whose block is above ``block_number``, locked."""
    rows = conn.execute(
        sa.text(f"SELECT {_DEPOSIT_COLUMNS} FROM deposits WHERE chain = :c "
                "AND block_number > :b AND state = ANY(:s) ORDER BY id FOR UPDATE"),
        {"c": chain, "b": block_number, "s": list(states)},
    ).all()
    return [_deposit(r) for r in rows]


def deposits_to_recheck(conn: Connection, chain: str, states: Sequence[str], *,
                        min_block: int | None, since: datetime | None, after_id: int,
                        limit: int) -> list[DepositRecord]:
    """Deposits of ``chain`` in ``states`` with an id above ``after_id``, whose block is at or
    above ``min_block`` or whose state moved at or after ``since`` (None: that bound is
    off), in id order, at most ``limit``; not locked."""
    if min_block is None and since is None:
        return []
    rows = conn.execute(
        sa.text(f"SELECT {_DEPOSIT_COLUMNS} FROM deposits WHERE chain = :c "
                "AND state = ANY(:s) AND id > :a AND block_number IS NOT NULL "
                "AND ((CAST(:b AS bigint) IS NOT NULL AND block_number >= :b) "
                " OR (CAST(:t AS timestamptz) IS NOT NULL AND updated_at >= :t)) "
                "ORDER BY id LIMIT :n"),
        {"c": chain, "s": list(states), "a": after_id, "b": min_block, "t": since,
         "n": limit},
    ).all()
    return [_deposit(r) for r in rows]


def insert_deposits(conn: Connection, rows: Sequence[Mapping[str, Any]]) -> dict[Key, int]:
    """Insert new deposits (state, block and address kind included); return their ids by
    key."""
    if not rows:
        return {}
    result = conn.execute(
        sa.text(
            "INSERT INTO deposits (chain, tx_hash, position, token, from_address, to_address, "
            " value, tx_from, tx_nonce, user_id, asset_code, amount_minor, booking, "
            " booking_reason, state, block_number, block_hash, confirmations, last_event_id, "
            " address_kind) "
            "SELECT x.chain, x.tx_hash, x.position, x.token, x.from_address, x.to_address, "
            " CAST(x.value AS numeric), x.tx_from, x.tx_nonce, x.user_id, x.asset_code, "
            " CAST(x.amount_minor AS numeric), x.booking, x.booking_reason, x.state, "
            " x.block_number, x.block_hash, x.confirmations, 0, "
            " coalesce(x.address_kind, 'deposit') "
            "FROM jsonb_to_recordset(CAST(:j AS jsonb)) AS x(chain text, tx_hash text, "
            " position text, token text, from_address text, to_address text, value text, "
            " tx_from text, tx_nonce bigint, user_id text, asset_code text, amount_minor text, "
            " booking text, booking_reason text, state text, block_number bigint, "
            " block_hash text, confirmations int, address_kind text) "
            "RETURNING id, chain, tx_hash, position"
        ),
        {"j": _json(list(rows))},
    ).all()
    return {(r.chain, r.tx_hash, r.position): r.id for r in result}


def reserve_ids(conn: Connection, deposits: int, events: int) -> tuple[list[int], list[int]]:
    """``deposits`` new deposit ids and ``events`` new history row ids, each ascending, from
    their sequences (one round trip): :func:`insert_with_history` writes rows under them."""
    row = conn.execute(sa.text(
        "SELECT ARRAY(SELECT nextval('deposits_id_seq') FROM generate_series(1, :d)) AS d, "
        " ARRAY(SELECT nextval('deposit_events_id_seq') FROM generate_series(1, :e)) AS e"),
        {"d": deposits, "e": events}).one()
    return sorted(row.d), sorted(row.e)


def insert_with_history(conn: Connection, rows: str, events: str, *,
                        credit_keys: Sequence[str], credit_fingerprints: Sequence[str],
                        observed_at: datetime) -> DriverResult:
    """Insert new deposits already in the state their history leaves them in, and that history,
    in one statement: no row is written twice.

    ``rows``: the JSON array of the new deposits under ids from :func:`reserve_ids` (``id``),
    with their current state, block, confirmations and ``last_event_id`` (the id of the last of
    their ``events``). ``events``: the JSON array of their history rows, each with its reserved
    ``id`` (ascending in history order). A row or history row that names a credit by its place
    in ``credit_keys`` (``credit``, from 1) gets the ledger transaction stored under that
    idempotency key with that place's fingerprint of ``credit_fingerprints`` (written earlier
    in the same transaction; none when the ledger refused the credit or holds another request
    under the key, and then ``deposits_posted_check`` fails the statement); every history row
    is observed at ``observed_at``. What ``append_events`` writes for existing deposits, written
    for new ones without the update. Sent with ``driver_send`` (it may be queued in a pipeline
    after the post that writes those transactions); a deposit that exists already fails it
    (23505).
    """
    return driver_send(conn, _INSERT_WITH_HISTORY_SQL, {
        "j": rows, "e": events, "k": list(credit_keys), "f": list(credit_fingerprints),
        "at": observed_at})


_INSERT_WITH_HISTORY_SQL = (
    "WITH k AS MATERIALIZED (SELECT k.n, t.id FROM unnest(CAST(%(k)s AS text[]), "
    "  CAST(%(f)s AS text[])) WITH ORDINALITY AS k(key, fingerprint, n) "
    "  JOIN LATERAL (SELECT t.id FROM ledger_transactions t WHERE t.idempotency_key = k.key "
    "  AND t.fingerprint = k.fingerprint OFFSET 0) t ON true), "
    "d AS (INSERT INTO deposits (id, chain, tx_hash, position, token, "
    "  from_address, to_address, value, tx_from, tx_nonce, user_id, asset_code, "
    "  amount_minor, booking, booking_reason, state, block_number, block_hash, "
    "  confirmations, last_event_id, ledger_transaction_id, address_kind) "
    " SELECT x.id, x.chain, x.tx_hash, x.position, x.token, x.from_address, "
    "  x.to_address, CAST(x.value AS numeric), x.tx_from, x.tx_nonce, x.user_id, "
    "  x.asset_code, CAST(x.amount_minor AS numeric), x.booking, x.booking_reason, "
    "  x.state, x.block_number, x.block_hash, x.confirmations, x.last_event_id, "
    "  k.id, coalesce(x.address_kind, 'deposit') "
    " FROM jsonb_to_recordset(CAST(%(j)s AS jsonb)) AS x(id bigint, chain text, "
    "  tx_hash text, position text, token text, from_address text, to_address text, "
    "  value text, tx_from text, tx_nonce bigint, user_id text, asset_code text, "
    "  amount_minor text, booking text, booking_reason text, state text, "
    "  block_number bigint, block_hash text, confirmations int, last_event_id bigint, "
    "  credit int, address_kind text) "
    " LEFT JOIN k ON k.n = x.credit "
    " RETURNING id) "
    "INSERT INTO deposit_events (id, deposit_id, chain, tx_hash, position, event, "
    " state, block_number, block_hash, confirmations, rule, evidence, reason, "
    " ledger_transaction_id, inbox_event_id, observed_at) "
    "SELECT x.id, x.deposit_id, x.chain, x.tx_hash, x.position, x.event, x.state, "
    " x.block_number, x.block_hash, x.confirmations, x.rule, "
    " coalesce(x.evidence, '{}'::jsonb), x.reason, k.id, "
    " x.inbox_event_id, CAST(%(at)s AS timestamptz) "
    "FROM jsonb_to_recordset(CAST(%(e)s AS jsonb)) AS x(id bigint, deposit_id bigint, "
    " chain text, tx_hash text, position text, event text, state text, "
    " block_number bigint, block_hash text, confirmations int, rule text, "
    " evidence jsonb, reason text, credit int, inbox_event_id text) "
    "LEFT JOIN k ON k.n = x.credit ORDER BY x.id"
)


def append_events(conn: Connection, events: Sequence[Mapping[str, Any]],
                  states: Sequence[Mapping[str, Any]]) -> None:
    """Append history rows and move each deposit's current state in one statement.

    ``events``: rows of ``deposit_events`` (several per deposit allowed, in order);
    ``states``: one row per deposit touched with its state after the last of its events
    (``state``, ``block_number``, ``block_hash``, ``confirmations``, ``ledger_transaction_id``).
    """
    if not events:
        return
    conn.execute(
        sa.text(
            "WITH ev AS (INSERT INTO deposit_events (deposit_id, chain, tx_hash, position, "
            "  event, state, block_number, block_hash, confirmations, rule, evidence, reason, "
            "  ledger_transaction_id, inbox_event_id, observed_at) "
            " SELECT x.deposit_id, x.chain, x.tx_hash, x.position, x.event, x.state, "
            "  x.block_number, x.block_hash, x.confirmations, x.rule, "
            "  coalesce(x.evidence, '{}'::jsonb), x.reason, x.ledger_transaction_id, "
            "  x.inbox_event_id, x.observed_at "
            " FROM jsonb_to_recordset(CAST(:e AS jsonb)) AS x(deposit_id bigint,"
            "  chain text, tx_hash text, position text, event text, state text, "
            "  block_number bigint, block_hash text, confirmations int, rule text, "
            "  evidence jsonb, reason text, ledger_transaction_id bigint, inbox_event_id text, "
            "  observed_at timestamptz, ord bigint) ORDER BY x.ord "
            " RETURNING id, deposit_id), "
            "last AS (SELECT deposit_id, max(id) AS id FROM ev GROUP BY deposit_id) "
            "UPDATE deposits d SET state = s.state, block_number = s.block_number, "
            " block_hash = s.block_hash, confirmations = s.confirmations, "
            " ledger_transaction_id = coalesce(s.ledger_transaction_id, d.ledger_transaction_id),"
            " last_event_id = last.id, updated_at = now() "
            "FROM last JOIN jsonb_to_recordset(CAST(:s AS jsonb)) AS s(deposit_id bigint, "
            " state text, block_number bigint, block_hash text, confirmations int, "
            " ledger_transaction_id bigint) ON s.deposit_id = last.deposit_id "
            "WHERE d.id = last.deposit_id"
        ),
        {"e": _json([{**e, "ord": i} for i, e in enumerate(events)]),
         "s": _json(list(states))},
    )


def finality_evidence(conn: Connection, deposit_ids: Sequence[int]) -> dict[int, dict[str, Any]]:
    """The evidence of each deposit's latest ``finality_reached`` row."""
    if not deposit_ids:
        return {}
    rows = conn.execute(
        sa.text("SELECT DISTINCT ON (deposit_id) deposit_id, rule, evidence FROM deposit_events "
                "WHERE deposit_id = ANY(:d) AND event = 'finality_reached' "
                "ORDER BY deposit_id, id DESC"), {"d": list(deposit_ids)},
    ).all()
    return {r.deposit_id: {"rule": r.rule, **dict(r.evidence)} for r in rows}


def pending_incoming(conn: Connection, user_id: str, states: Sequence[str]) -> dict[str, int]:
    """Sum of the ledger amounts of the user's deposits in ``states``, by asset code.

    Part of the hot read of a user's balances: it runs on ``conn``'s psycopg connection directly
    (same connection, same transaction), as a statement prepared at its first call, because
    SQLAlchemy's execution layer cost more client CPU than the statement itself (bench/RESULTS.md,
    "HTTP API"). Errors are re-raised as SQLAlchemy's ``DBAPIError`` subclasses.
    """
    params = {"u": user_id, "s": list(states)}
    rows = driver_rows(conn, _PENDING_INCOMING_SQL, params, prepare=True)
    return {code: int(total) for code, total in rows}


_PENDING_INCOMING_SQL = (
    "SELECT asset_code, sum(amount_minor) AS total FROM deposits "
    "WHERE user_id = %(u)s AND booking = 'user' AND state = ANY(%(s)s) "
    "AND amount_minor IS NOT NULL GROUP BY asset_code ORDER BY asset_code")


def deposits_of_user(conn: Connection, user_id: str, *, limit: int,
                     before_id: int | None = None, since: datetime | None = None,
                     until: datetime | None = None) -> list[DepositRecord]:
    """The user's deposits, newest first, with ids below ``before_id`` when given, first seen
    in ``[since, until)`` when given.

    Keyset pagination on ``deposits_user_idx (user_id, id)``: a page costs ``limit`` index
    entries whatever its depth.
    """
    rows = conn.execute(
        sa.text(f"SELECT {_DEPOSIT_COLUMNS} FROM deposits WHERE user_id = :u "
                "AND (CAST(:b AS bigint) IS NULL OR id < :b) "
                "AND (CAST(:since AS timestamptz) IS NULL OR first_seen_at >= :since) "
                "AND (CAST(:until AS timestamptz) IS NULL OR first_seen_at < :until) "
                "ORDER BY id DESC LIMIT :n"),
        {"u": user_id, "b": before_id, "n": limit, "since": since, "until": until},
    ).all()
    return [_deposit(r) for r in rows]


def deposits_of_transaction(conn: Connection, chain: str, tx_hash: str) -> list[DepositRecord]:
    """Every deposit of one transaction, by position."""
    rows = conn.execute(
        sa.text(f"SELECT {_DEPOSIT_COLUMNS} FROM deposits WHERE chain = :c AND tx_hash = :t "
                "ORDER BY position"), {"c": chain, "t": tx_hash.lower()},
    ).all()
    return [_deposit(r) for r in rows]


def events_of(conn: Connection, deposit_id: int) -> list[EventRecord]:
    """The history of one deposit, oldest first."""
    rows = conn.execute(
        sa.text("SELECT * FROM deposit_events WHERE deposit_id = :d ORDER BY id"),
        {"d": deposit_id},
    ).all()
    return [EventRecord(**{**dict(r._mapping), "evidence": dict(r.evidence)}) for r in rows]
