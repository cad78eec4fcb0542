"""All SQL of the deposit side. Functions take a connection and never commit.

Bulk writes go through ``jsonb_to_recordset`` so that a watcher step writes hundreds of
deposits with a few statements. Amounts travel as decimal strings and come back as ``int``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from config.database import driver_rows

Key = tuple[str, str, str]  # (chain, tx_hash, position)

_DEPOSIT_COLUMNS = (
    "id, chain, tx_hash, position, token, from_address, to_address, value, tx_from, tx_nonce, "
    "user_id, asset_code, amount_minor, booking, booking_reason, state, block_number, "
    "block_hash, confirmations, last_event_id, ledger_transaction_id, first_seen_at, updated_at"
)


def _int(value: Decimal | int | None) -> int | None:
    if value is None:
        return None
    assert value == int(value), f"integral amount expected, got {value}"
    return int(value)


def _json(rows: Any) -> str:
    return json.dumps(rows, separators=(",", ":"), default=str)


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


# --------------------------------------------------------------------------- addresses


def lock_address_family(conn: Connection, family: str) -> None:
    """Serialize index allocation of one family until commit.

    Prevents two concurrent assignments from taking the same next index (one would then fail
    on the unique constraint and have to start again).
    """
    conn.execute(sa.text("SELECT pg_advisory_xact_lock(7312, hashtext(:f))"), {"f": family})


def address_of_user(conn: Connection, family: str, user_id: str) -> str | None:
    """The user's deposit address in ``family``, or None."""
    return conn.execute(
        sa.text("SELECT address FROM deposit_addresses WHERE family = :f AND user_id = :u"),
        {"f": family, "u": user_id},
    ).scalar()


def next_address_index(conn: Connection, family: str) -> int:
    """The next free derivation index of ``family`` (call under ``lock_address_family``)."""
    value = conn.execute(
        sa.text("SELECT coalesce(max(derivation_index) + 1, 0) FROM deposit_addresses "
                "WHERE family = :f"), {"f": family},
    ).scalar()
    return int(value or 0)


def insert_addresses(conn: Connection, family: str, rows: Sequence[tuple[str, int, str]]) -> None:
    """Insert (address, derivation index, user id) rows of ``family``."""
    conn.execute(
        sa.text("INSERT INTO deposit_addresses (family, address, derivation_index, user_id) "
                "SELECT :f, x.address, x.idx, x.user_id FROM jsonb_to_recordset(CAST(:j AS jsonb))"
                " AS x(address text, idx int, user_id text)"),
        {"f": family, "j": _json([{"address": a.lower(), "idx": i, "user_id": u}
                                  for a, i, u in rows])},
    )


def users_of_addresses(conn: Connection, family: str, addresses: Iterable[str]) -> dict[str, str]:
    """Map those of ``addresses`` that are ours (lower-case) to their user ids."""
    wanted = sorted({a.lower() for a in addresses})
    if not wanted:
        return {}
    rows = conn.execute(
        sa.text("SELECT address, user_id FROM deposit_addresses "
                "WHERE family = :f AND address = ANY(:a)"), {"f": family, "a": wanted},
    ).all()
    return {r.address: r.user_id for r in rows}


# --------------------------------------------------------------------------- ledger accounts


@dataclass(frozen=True)
class AccountRow:
    """A ledger account as opened by :func:`open_accounts`."""

    id: int
    code: str
    asset_id: int
    type: str
    debits_must_not_exceed_credits: bool
    credits_must_not_exceed_debits: bool


def open_accounts(conn: Connection,
                  specs: Sequence[tuple[str, int, str, bool, bool]]) -> dict[tuple[str, int],
                                                                          AccountRow]:
    """Open many ledger accounts in one statement; return all of them by (code, asset id).

    ``specs``: (code, asset id, type, debits_must_not_exceed_credits,
    credits_must_not_exceed_debits). Existing accounts are left alone (the caller compares
    their type and flags); the ledger's trigger on ``accounts`` creates each balance row.
    Rows are inserted in (code, asset id) order so that two concurrent openers wait for each
    other instead of deadlocking on the unique index.
    """
    wanted = sorted(set(specs))
    if not wanted:
        return {}
    params = {"c": [s[0] for s in wanted], "a": [s[1] for s in wanted],
              "t": [s[2] for s in wanted], "d": [s[3] for s in wanted],
              "k": [s[4] for s in wanted]}
    conn.execute(
        sa.text("INSERT INTO accounts (code, asset_id, type, debits_must_not_exceed_credits, "
                "credits_must_not_exceed_debits) "
                "SELECT x.c, x.a, x.t, x.d, x.k FROM unnest(CAST(:c AS text[]), "
                " CAST(:a AS int[]), CAST(:t AS text[]), CAST(:d AS boolean[]), "
                " CAST(:k AS boolean[])) WITH ORDINALITY AS x(c, a, t, d, k, n) ORDER BY x.n "
                "ON CONFLICT (code, asset_id) DO NOTHING"), params,
    )
    rows = conn.execute(
        sa.text("SELECT a.id, a.code, a.asset_id, a.type, a.debits_must_not_exceed_credits, "
                "a.credits_must_not_exceed_debits FROM accounts a "
                "JOIN unnest(CAST(:c AS text[]), CAST(:a AS int[])) AS x(c, a) "
                " ON a.code = x.c AND a.asset_id = x.a"), params,
    ).all()
    return {(r.code, r.asset_id): AccountRow(**dict(r._mapping)) for r in rows}


# --------------------------------------------------------------------------- cursor


def lock_chain(conn: Connection, chain: str) -> bool:
    """Try to take the session-level lock that lets one watcher step run for ``chain``."""
    return bool(conn.execute(sa.text("SELECT pg_try_advisory_lock(7311, hashtext(:c))"),
                             {"c": chain}).scalar())


def unlock_chain(conn: Connection, chain: str) -> None:
    """Release the lock of ``lock_chain``."""
    conn.execute(sa.text("SELECT pg_advisory_unlock(7311, hashtext(:c))"), {"c": chain})


def get_cursor(conn: Connection, chain: str, *, for_update: bool = False) -> list[tuple[int, str]]:
    """The watcher's recent (height, hash) pairs of ``chain``, ascending (empty: none yet)."""
    lock = " FOR UPDATE" if for_update else ""
    raw = conn.execute(sa.text(f"SELECT recent FROM watcher_cursors WHERE chain = :c{lock}"),
                       {"c": chain}).scalar()
    return [(int(h), str(x)) for h, x in (raw or [])]


def save_cursor(conn: Connection, chain: str, recent: Sequence[tuple[int, str]]) -> None:
    """Store the cursor of ``chain``."""
    conn.execute(
        sa.text("INSERT INTO watcher_cursors (chain, recent) VALUES (:c, CAST(:r AS jsonb)) "
                "ON CONFLICT (chain) DO UPDATE SET recent = EXCLUDED.recent, updated_at = now()"),
        {"c": chain, "r": _json([[h, x] for h, x in recent])},
    )


# --------------------------------------------------------------------------- deposits


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


def deposits_in_states(conn: Connection, chain: str, states: Sequence[str], *,
                       limit: int) -> list[DepositRecord]:
    """Deposits of ``chain`` in ``states``, oldest first, at most ``limit``."""
    rows = conn.execute(
        sa.text(f"SELECT {_DEPOSIT_COLUMNS} FROM deposits WHERE chain = :c "
                "AND state = ANY(:s) ORDER BY id LIMIT :n"),
        {"c": chain, "s": list(states), "n": limit},
    ).all()
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


def insert_deposits(conn: Connection, rows: Sequence[Mapping[str, Any]]) -> dict[Key, int]:
    """Insert new deposits (state and block included); return their ids by key."""
    if not rows:
        return {}
    result = conn.execute(
        sa.text(
            "INSERT INTO deposits (chain, tx_hash, position, token, from_address, to_address, "
            " value, tx_from, tx_nonce, user_id, asset_code, amount_minor, booking, "
            " booking_reason, state, block_number, block_hash, confirmations, last_event_id) "
            "SELECT x.chain, x.tx_hash, x.position, x.token, x.from_address, x.to_address, "
            " CAST(x.value AS numeric), x.tx_from, x.tx_nonce, x.user_id, x.asset_code, "
            " CAST(x.amount_minor AS numeric), x.booking, x.booking_reason, x.state, "
            " x.block_number, x.block_hash, x.confirmations, 0 "
            "FROM jsonb_to_recordset(CAST(:j AS jsonb)) AS x(chain text, tx_hash text, "
            " position text, token text, from_address text, to_address text, value text, "
            " tx_from text, tx_nonce bigint, user_id text, asset_code text, amount_minor text, "
            " booking text, booking_reason text, state text, block_number bigint, "
            " block_hash text, confirmations int) "
            "RETURNING id, chain, tx_hash, position"
        ),
        {"j": _json(list(rows))},
    ).all()
    return {(r.chain, r.tx_hash, r.position): r.id for r in result}


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
                     before_id: int | None = None) -> list[DepositRecord]:
    """The user's deposits, newest first, with ids below ``before_id`` when given.

    Keyset pagination on ``deposits_user_idx (user_id, id)``: a page costs ``limit`` index
    entries whatever its depth.
    """
    rows = conn.execute(
        sa.text(f"SELECT {_DEPOSIT_COLUMNS} FROM deposits WHERE user_id = :u "
                "AND (CAST(:b AS bigint) IS NULL OR id < :b) ORDER BY id DESC LIMIT :n"),
        {"u": user_id, "b": before_id, "n": limit},
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


# --------------------------------------------------------------------------- cases, inbox


def insert_case(conn: Connection, deposit_id: int, kind: str, ledger_transaction_id: int | None,
                expected: Mapping[str, Any], observed: Mapping[str, Any]) -> int:
    """Open a case (idempotent per kind and deposit); return its id."""
    conn.execute(
        sa.text("INSERT INTO deposit_cases (kind, deposit_id, ledger_transaction_id, expected, "
                "observed) VALUES (:k, :d, :l, CAST(:e AS jsonb), CAST(:o AS jsonb)) "
                "ON CONFLICT (kind, deposit_id) DO NOTHING"),
        {"k": kind, "d": deposit_id, "l": ledger_transaction_id, "e": _json(expected),
         "o": _json(observed)},
    )
    return int(conn.execute(sa.text("SELECT id FROM deposit_cases WHERE kind = :k AND "
                                    "deposit_id = :d"), {"k": kind, "d": deposit_id}).scalar_one())


@dataclass(frozen=True)
class CaseRecord:
    """A durable case and its resolution, if any."""

    id: int
    kind: str
    deposit_id: int
    ledger_transaction_id: int | None
    expected: dict[str, Any]
    observed: dict[str, Any]
    opened_at: datetime
    resolved_by: str | None
    reversal_transaction_id: int | None


def lock_case(conn: Connection, case_id: int) -> None:
    """Serialize resolutions of one case until commit.

    Two admins resolving the same case at once would otherwise both pass the "not resolved
    yet" check; the second then waits here and re-reads the resolution.
    """
    conn.execute(sa.text("SELECT pg_advisory_xact_lock(7313, CAST(:c AS int))"), {"c": case_id})


def get_cases(conn: Connection, *, case_id: int | None = None,
              deposit_id: int | None = None) -> list[CaseRecord]:
    """Cases, optionally of one id or one deposit, with their resolutions."""
    rows = conn.execute(
        sa.text("SELECT c.id, c.kind, c.deposit_id, c.ledger_transaction_id, c.expected, "
                "c.observed, c.opened_at, r.resolved_by, r.reversal_transaction_id "
                "FROM deposit_cases c LEFT JOIN deposit_case_resolutions r ON r.case_id = c.id "
                "WHERE (CAST(:i AS bigint) IS NULL OR c.id = :i) "
                "AND (CAST(:d AS bigint) IS NULL OR c.deposit_id = :d) ORDER BY c.id"),
        {"i": case_id, "d": deposit_id},
    ).all()
    return [CaseRecord(**{**dict(r._mapping), "expected": dict(r.expected),
                          "observed": dict(r.observed)}) for r in rows]


def insert_case_resolution(conn: Connection, case_id: int, reversal_transaction_id: int | None,
                           resolved_by: str, reason: str) -> None:
    """Record how a case was resolved."""
    conn.execute(
        sa.text("INSERT INTO deposit_case_resolutions (case_id, reversal_transaction_id, "
                "resolved_by, reason) VALUES (:c, :t, :b, :r)"),
        {"c": case_id, "t": reversal_transaction_id, "b": resolved_by, "r": reason},
    )


@dataclass(frozen=True)
class InboxRecord:
    """A stored custody provider notification."""

    event_id: str
    provider: str
    chain: str
    tx_hash: str
    position: str
    status: str
    to_address: str
    asset_code: str
    amount_minor: int
    payload: dict[str, Any]
    received_at: datetime


def _inbox(row: Any) -> InboxRecord:
    data = dict(row._mapping)
    data["amount_minor"] = _int(data["amount_minor"])
    data["payload"] = dict(data["payload"])
    return InboxRecord(**data)


def insert_inbox(conn: Connection, record: Mapping[str, Any]) -> bool:
    """Store a notification; False if its event id was already stored."""
    result = conn.execute(
        sa.text("INSERT INTO provider_inbox (event_id, provider, chain, tx_hash, position, "
                "status, to_address, asset_code, amount_minor, payload) VALUES (:event_id, "
                ":provider, :chain, :tx_hash, :position, :status, :to_address, :asset_code, "
                "CAST(:amount_minor AS numeric), CAST(:payload AS jsonb)) "
                "ON CONFLICT (event_id) DO NOTHING"),
        {**record, "amount_minor": str(record["amount_minor"]),
         "payload": _json(record["payload"])},
    )
    return result.rowcount == 1


def get_inbox(conn: Connection, event_id: str) -> InboxRecord | None:
    """One stored notification."""
    row = conn.execute(sa.text("SELECT * FROM provider_inbox WHERE event_id = :e"),
                       {"e": event_id}).first()
    return None if row is None else _inbox(row)


def inbox_for(conn: Connection, keys: Iterable[Key]) -> dict[Key, list[InboxRecord]]:
    """Notifications for these deposit keys, oldest first."""
    wanted = sorted(set(keys))
    if not wanted:
        return {}
    rows = conn.execute(
        sa.text("SELECT * FROM provider_inbox WHERE (chain, tx_hash, position) IN "
                "(SELECT * FROM jsonb_to_recordset(CAST(:j AS jsonb)) "
                " AS x(chain text, tx_hash text, position text)) ORDER BY received_at, event_id"),
        {"j": _json([{"chain": c, "tx_hash": t, "position": p} for c, t, p in wanted])},
    ).all()
    found: dict[Key, list[InboxRecord]] = {}
    for r in rows:
        found.setdefault((r.chain, r.tx_hash, r.position), []).append(_inbox(r))
    return found
