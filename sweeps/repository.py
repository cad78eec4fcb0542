"""The movements' tables: one row and one append-only history per movement (``sweeps`` /
``sweep_events``, ``gas_top_ups`` / ``gas_top_up_events``, ``cold_transfers`` /
``cold_transfer_events``), cold-transfer approvals, refill requests, and the per-address
records that say what each deposit address should hold.

Every function takes an open connection and never commits. Amounts are ``int`` in the chain's
smallest unit (``numeric(78,0)`` columns).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ledger.repository import to_int
from sweeps.model import Kind, State


@dataclass(frozen=True)
class Table:
    """Where a kind lives: its table, its history table, and the column naming it there and in
    ``outgoing_attempts``."""

    table: str
    events: str
    ref: str


TABLES = {Kind.SWEEP: Table("sweeps", "sweep_events", "sweep_id"),
          Kind.GAS_TOP_UP: Table("gas_top_ups", "gas_top_up_events", "top_up_id"),
          Kind.COLD_TRANSFER: Table("cold_transfers", "cold_transfer_events", "cold_transfer_id")}
#: Columns a transition may set besides the state (anything else is refused).
TRANSITION_COLUMNS = frozenset({"state_reason", "nonce", "landed_attempt_id", "gas_paid",
                                "swept_amount", "top_up_id"})
_AMOUNTS = ("amount", "available", "customer_amount", "swept_amount", "gas_paid")


@dataclass(frozen=True)
class Movement:
    """A stored movement of any kind (its current row); ``data`` holds every column, amounts
    as ``int``."""

    kind: Kind
    data: dict[str, Any]

    @property
    def id(self) -> int:
        """Its id within its kind."""
        return int(self.data["id"])

    @property
    def chain(self) -> str:
        """Its chain."""
        return str(self.data["chain"])

    @property
    def state(self) -> State:
        """Its state."""
        return State(self.data["state"])

    @property
    def sender(self) -> str:
        """The address it is sent from (a sweep: the deposit address)."""
        return str(self.data["address"] if self.kind is Kind.SWEEP else self.data["sender"])

    @property
    def nonce(self) -> int | None:
        """Its nonce, once assigned."""
        return None if self.data["nonce"] is None else int(self.data["nonce"])

    @property
    def gas_limit(self) -> int:
        """The gas limit of its attempts."""
        return int(self.data["gas_limit"])

    def amount(self, name: str) -> int:
        """An amount column (``amount``, ``available``, ...) as ``int`` (0 when NULL)."""
        value = self.data.get(name)
        return 0 if value is None else int(value)


def _movement(kind: Kind, row: Any) -> Movement:
    data = dict(row._mapping)
    for name in _AMOUNTS:
        if name in data and data[name] is not None:
            data[name] = to_int(data[name])
    return Movement(kind, data)


def get(conn: Connection, kind: Kind, movement_id: int, *,
        for_update: bool = False) -> Movement | None:
    """One movement, row-locked with ``for_update``."""
    lock = " FOR UPDATE" if for_update else ""
    row = conn.execute(sa.text(f"SELECT * FROM {TABLES[kind].table} WHERE id = :i{lock}"),
                       {"i": movement_id}).first()
    return None if row is None else _movement(kind, row)


def ids_in_states(conn: Connection, kind: Kind, chain: str, states: Iterable[State],
                  limit: int) -> list[int]:
    """Ids of ``chain``'s movements of ``kind`` in ``states``, oldest first."""
    return [int(i) for i in conn.execute(
        sa.text(f"SELECT id FROM {TABLES[kind].table} WHERE chain = :c "
                "AND state = ANY(:s) ORDER BY id LIMIT :n"),
        {"c": chain, "s": [str(s) for s in states], "n": limit}).scalars()]


def list_movements(conn: Connection, kind: Kind, *, chain: str | None = None,
                   states: Sequence[State] | None = None, limit: int = 200,
                   before_id: int | None = None, since: datetime | None = None,
                   until: datetime | None = None) -> list[Movement]:
    """Movements of ``kind``, newest first, optionally of one chain and some states, with ids
    below ``before_id`` and created in ``[since, until)``."""
    where: list[str] = ["true"]
    params: dict[str, Any] = {"n": limit}
    if before_id is not None:
        where.append("id < :b")
        params["b"] = before_id
    if since is not None:
        where.append("created_at >= :since")
        params["since"] = since
    if until is not None:
        where.append("created_at < :until")
        params["until"] = until
    if chain is not None:
        where.append("chain = :c")
        params["c"] = chain
    if states is not None:
        where.append("state = ANY(:s)")
        params["s"] = [str(s) for s in states]
    rows = conn.execute(sa.text(f"SELECT * FROM {TABLES[kind].table} WHERE "
                                f"{' AND '.join(where)} ORDER BY id DESC LIMIT :n"), params)
    return [_movement(kind, r) for r in rows]


def record(conn: Connection, m: Movement, *, to_state: State, event: str, actor: str,
           at: datetime, reason: str | None = None, evidence: dict[str, Any] | None = None,
           attempt_id: int | None = None, ledger_transaction_id: int | None = None,
           **columns: Any) -> Movement:
    """Move ``m`` (row locked by the caller) to ``to_state``, setting ``columns`` (only
    ``TRANSITION_COLUMNS``), and append its history row; returns the updated movement."""
    unknown = set(columns) - TRANSITION_COLUMNS
    if unknown:
        raise ValueError(f"not a transition column: {sorted(unknown)}")
    t = TABLES[m.kind]
    values = {c: (str(v) if isinstance(v, int) and c in _AMOUNTS else v)
              for c, v in columns.items()}
    # The application role may not UPDATE the movement tables (revision
    # 0030_money_table_grants): movement_transition checks the move against the kind's machine
    # under the row lock, sets the columns and appends the history row.
    conn.execute(
        sa.text("SELECT movement_transition(:k, :id, CAST(:sets AS jsonb), :f, :t, :e, :r, "
                "CAST(:ev AS jsonb), :a, CAST(:l AS bigint), CAST(:att AS bigint), "
                "CAST(:at AS timestamptz))"),
        {"k": str(m.kind), "id": m.id, "sets": json.dumps(values, default=str),
         "f": str(m.state), "t": str(to_state), "e": event, "r": reason,
         "ev": json.dumps(evidence or {}, default=str), "a": actor,
         "l": ledger_transaction_id, "att": attempt_id, "at": at})
    row = conn.execute(sa.text(f"SELECT * FROM {t.table} WHERE id = :id"), {"id": m.id}).first()
    assert row is not None, f"{m.kind} {m.id} exists"
    return _movement(m.kind, row)


def _insert(conn: Connection, kind: str, row: dict[str, Any], *, skip_taken: bool,
            actor: str, at: datetime, reason: str | None,
            evidence: dict[str, Any] | None) -> int | None:
    """Insert a movement (or refill request) with its first history row through
    ``movement_insert``: the application role may not INSERT into these tables (revision
    0030_money_table_grants), and the function refuses a row not in a starting state of its
    machine. None when ``skip_taken`` and a unique key is taken."""
    value = conn.execute(
        sa.text("SELECT movement_insert(:k, CAST(:row AS jsonb), :skip, :a, :r, "
                "CAST(:ev AS jsonb), CAST(:at AS timestamptz))"),
        {"k": kind, "row": json.dumps(row, default=str), "skip": skip_taken, "a": actor,
         "r": reason, "ev": json.dumps(evidence or {}, default=str), "at": at}).scalar()
    return None if value is None else int(value)


def insert_sweep(conn: Connection, *, chain: str, address: str, derivation_index: int,
                 destination: str, asset: str, token: str | None, available: int,
                 customer_amount: int, state: State, gas_limit: int, actor: str, at: datetime,
                 reason: str, evidence: dict[str, Any]) -> int | None:
    """Plan a sweep of ``address``; None if the address already has an open sweep (one at a
    time per address: the partial unique index decides, so two planners cannot both win)."""
    return _insert(
        conn, "sweep",
        {"chain": chain, "address": address, "derivation_index": derivation_index,
         "destination": destination, "asset": asset, "token": token,
         "available": str(available), "customer_amount": str(customer_amount),
         "state": str(state), "gas_limit": gas_limit, "created_at": at, "updated_at": at},
        skip_taken=True, actor=actor, at=at, reason=reason, evidence=evidence)


def insert_top_up(conn: Connection, *, chain: str, sender: str, address: str, amount: int,
                  gas_limit: int, actor: str, at: datetime, reason: str,
                  evidence: dict[str, Any]) -> int:
    """Plan a gas top-up of ``address`` from the hot wallet ``sender``."""
    top_up_id = _insert(
        conn, "gas_top_up",
        {"chain": chain, "sender": sender, "address": address, "amount": str(amount),
         "state": "ready", "gas_limit": gas_limit, "created_at": at, "updated_at": at},
        skip_taken=False, actor=actor, at=at, reason=reason, evidence=evidence)
    assert top_up_id is not None
    return top_up_id


def insert_cold_transfer(conn: Connection, *, chain: str, asset: str, token: str | None,
                         sender: str, destination: str, amount: int, approvals_required: int,
                         proposed_by: str, reason: str, gas_limit: int, at: datetime,
                         evidence: dict[str, Any]) -> int:
    """Propose a transfer from the hot wallet to cold (signed only once approved)."""
    cold_id = _insert(
        conn, "cold_transfer",
        {"chain": chain, "asset": asset, "token": token, "sender": sender,
         "destination": destination, "amount": str(amount),
         "approvals_required": approvals_required, "proposed_by": proposed_by,
         "reason": reason, "state": "proposed", "gas_limit": gas_limit, "created_at": at,
         "updated_at": at},
        skip_taken=False, actor=proposed_by, at=at, reason=reason, evidence=evidence)
    assert cold_id is not None
    return cold_id


def cold_decisions(conn: Connection, cold_transfer_id: int) -> dict[str, str]:
    """Admin -> decision (``approve`` or ``reject``) recorded on a cold transfer."""
    return {r.approver: r.decision for r in conn.execute(
        sa.text("SELECT approver, decision FROM cold_transfer_approvals "
                "WHERE cold_transfer_id = :i"), {"i": cold_transfer_id})}


def insert_cold_decision(conn: Connection, cold_transfer_id: int, approver: str, decision: str,
                         reason: str | None, at: datetime) -> None:
    """One admin's decision (the primary key refuses a second one by the same admin)."""
    conn.execute(
        sa.text("INSERT INTO cold_transfer_approvals (cold_transfer_id, approver, decision, "
                "reason, decided_at) VALUES (:i, :a, :d, :r, :at)"),
        {"i": cold_transfer_id, "a": approver, "d": decision, "r": reason, "at": at})


@dataclass(frozen=True)
class EventRecord:
    """One row of a movement's history."""

    id: int
    from_state: str | None
    to_state: str
    event: str
    reason: str | None
    evidence: dict[str, Any]
    actor: str
    ledger_transaction_id: int | None
    attempt_id: int | None
    occurred_at: datetime
    recorded_at: datetime


def list_events(conn: Connection, kind: Kind, movement_id: int) -> list[EventRecord]:
    """The history of a movement, oldest first."""
    t = TABLES[kind]
    rows = conn.execute(sa.text(f"SELECT * FROM {t.events} WHERE {t.ref} = :m ORDER BY id"),
                        {"m": movement_id})
    return [EventRecord(r.id, r.from_state, r.to_state, r.event, r.reason, r.evidence, r.actor,
                        r.ledger_transaction_id, r.attempt_id, r.occurred_at, r.recorded_at)
            for r in rows]


def last_event(conn: Connection, kind: Kind, movement_id: int,
               event: str) -> EventRecord | None:
    """The latest history row of ``event`` for a movement."""
    found = [e for e in list_events(conn, kind, movement_id) if e.event == event]
    return found[-1] if found else None


def last_events(conn: Connection, kind: Kind, movement_ids: Sequence[int],
                event: str) -> dict[int, EventRecord]:
    """The latest history row of ``event`` of each movement (one query)."""
    t = TABLES[kind]
    rows = conn.execute(
        sa.text(f"SELECT DISTINCT ON ({t.ref}) * FROM {t.events} WHERE {t.ref} = ANY(:m) "
                f"AND event = :e ORDER BY {t.ref}, id DESC"),
        {"m": list(movement_ids), "e": event})
    return {int(getattr(r, t.ref)): EventRecord(
        r.id, r.from_state, r.to_state, r.event, r.reason, r.evidence, r.actor,
        r.ledger_transaction_id, r.attempt_id, r.occurred_at, r.recorded_at) for r in rows}


# --------------------------------------------------------------------------- address records


@dataclass(frozen=True)
class AddressRecord:
    """What the engine's records say one deposit address holds of one asset (``token`` None:
    native), in the chain's smallest unit, counting only what is final: credited deposits,
    deposits booked to suspense, final top-ups in, final sweeps out, the gas its own final
    transactions paid."""

    address: str
    token: str | None
    credited: int = 0
    suspense: int = 0
    top_ups: int = 0
    swept: int = 0
    swept_customer: int = 0
    gas_paid: int = 0

    @property
    def expected(self) -> int:
        """What the address should hold on chain."""
        return (self.credited + self.suspense + self.top_ups - self.swept
                - self.gas_paid)

    @property
    def customer(self) -> int:
        """The customer part: credited and not swept."""
        return self.credited - self.swept_customer

    @property
    def treasury(self) -> int:
        """The treasury part (native dust of top-ups; may be negative when customer native paid
        the gas of an earlier sweep, which the ledger booked to the treasury)."""
        return self.expected - self.customer - self.suspense


def address_records(conn: Connection, chain: str,
                    addresses: Sequence[str] | None = None) -> dict[tuple[str, str | None],
                                                                    AddressRecord]:
    """Per (deposit address, token) of ``chain`` (only ``addresses`` if given): the records
    (``AddressRecord``). One query per source, grouped in the database."""
    only = "" if addresses is None else " AND {col} = ANY(:addrs)"
    params: dict[str, Any] = {"c": chain, "addrs": list(addresses or [])}
    found: dict[tuple[str, str | None], dict[str, int]] = {}

    def add(sql: str, field: str) -> None:
        for r in conn.execute(sa.text(sql), params):
            found.setdefault((r.address, r.token), {})[field] = to_int(r.total)

    add("SELECT to_address AS address, token, sum(value) AS total FROM deposits "
        "WHERE chain = :c AND address_kind = 'deposit' AND state = 'credited'"
        + only.format(col="to_address") + " GROUP BY 1, 2", "credited")
    add("SELECT to_address AS address, token, sum(value) AS total FROM deposits "
        "WHERE chain = :c AND address_kind = 'deposit' AND state = 'suspense'"
        + only.format(col="to_address") + " GROUP BY 1, 2", "suspense")
    add("SELECT address, NULL AS token, sum(amount) AS total FROM gas_top_ups "
        "WHERE chain = :c AND state = 'final'" + only.format(col="address") + " GROUP BY 1",
        "top_ups")
    add("SELECT address, token, sum(swept_amount) AS total FROM sweeps "
        "WHERE chain = :c AND state = 'final'" + only.format(col="address") + " GROUP BY 1, 2",
        "swept")
    add("SELECT address, token, sum(LEAST(customer_amount, swept_amount)) AS total FROM sweeps "
        "WHERE chain = :c AND state = 'final'" + only.format(col="address") + " GROUP BY 1, 2",
        "swept_customer")
    add("SELECT address, NULL AS token, sum(gas_paid) AS total FROM sweeps "
        "WHERE chain = :c AND state IN ('final', 'reverted')" + only.format(col="address")
        + " GROUP BY 1", "gas_paid")
    return {key: AddressRecord(key[0], key[1], **fields) for key, fields in found.items()}


def derivation_indexes(conn: Connection, family: str, addresses: Sequence[str]) -> dict[str, int]:
    """The derivation index of each deposit address of ``family``."""
    return {r.address: int(r.derivation_index) for r in conn.execute(
        sa.text("SELECT address, derivation_index FROM deposit_addresses WHERE family = :f "
                "AND address = ANY(:a)"), {"f": family, "a": list(addresses)})}


def open_sweep_addresses(conn: Connection, chain: str) -> set[str]:
    """Deposit addresses of ``chain`` with a sweep in flight (one at a time per address)."""
    return set(conn.execute(
        sa.text("SELECT address FROM sweeps WHERE chain = :c AND state NOT IN "
                "('final', 'reverted', 'dropped')"), {"c": chain}).scalars())


def sweep_waiting_on(conn: Connection, top_up_id: int) -> int | None:
    """The sweep that waits for a top-up, if any."""
    value = conn.execute(sa.text("SELECT id FROM sweeps WHERE top_up_id = :t AND state = "
                                 "'waiting_gas'"), {"t": top_up_id}).scalar()
    return None if value is None else int(value)


# --------------------------------------------------------------------------- hot/cold limits

#: States of a cold transfer still in flight (the partial unique index
#: ``cold_transfers_one_open`` allows one per chain and asset).
_COLD_OPEN = ("proposed", "approved", "signing", "signed", "broadcast", "unknown", "included")


def propose_cold(conn: Connection, *, chain: str, asset: str, token: str | None, sender: str,
                 destination: str, amount: int, approvals_required: int, proposed_by: str,
                 reason: str, gas_limit: int, request_key: str | None, at: datetime,
                 evidence: dict[str, Any]) -> int | None:
    """Propose a transfer from the hot wallet to cold, with its history row; None when another
    cold transfer of (chain, asset) is in flight or ``request_key`` was used before (the unique
    indexes decide, so two proposers cannot both win)."""
    return _insert(
        conn, "cold_transfer",
        {"chain": chain, "asset": asset, "token": token, "sender": sender,
         "destination": destination, "amount": str(amount),
         "approvals_required": approvals_required, "proposed_by": proposed_by,
         "reason": reason, "state": "proposed", "gas_limit": gas_limit,
         "request_key": request_key, "created_at": at, "updated_at": at},
        skip_taken=True, actor=proposed_by, at=at, reason=reason, evidence=evidence)


def cold_by_request_key(conn: Connection, request_key: str) -> Movement | None:
    """The cold transfer proposed under ``request_key``."""
    row = conn.execute(sa.text("SELECT * FROM cold_transfers WHERE request_key = :k"),
                       {"k": request_key}).first()
    return None if row is None else _movement(Kind.COLD_TRANSFER, row)


def open_cold_transfer(conn: Connection, chain: str, asset: str) -> Movement | None:
    """The cold transfer of (chain, asset) in flight, if any."""
    row = conn.execute(sa.text("SELECT * FROM cold_transfers WHERE chain = :c AND asset = :a "
                               "AND state = ANY(:s)"),
                       {"c": chain, "a": asset, "s": list(_COLD_OPEN)}).first()
    return None if row is None else _movement(Kind.COLD_TRANSFER, row)


def rejected_proposal_since(conn: Connection, chain: str, asset: str, proposed_by: str,
                            since: datetime) -> int | None:
    """The newest cold transfer of (chain, asset) proposed by ``proposed_by`` at or after
    ``since`` that was rejected, if any."""
    value = conn.execute(
        sa.text("SELECT max(id) FROM cold_transfers WHERE chain = :c AND asset = :a "
                "AND proposed_by = :p AND created_at >= :t AND state = 'rejected'"),
        {"c": chain, "a": asset, "p": proposed_by, "t": since}).scalar()
    return None if value is None else int(value)


@dataclass(frozen=True)
class ColdDecisionRecord:
    """One admin's decision on a cold transfer."""

    approver: str
    decision: str
    reason: str | None
    decided_at: datetime


def list_cold_decisions(conn: Connection, cold_transfer_id: int) -> list[ColdDecisionRecord]:
    """The decisions on a cold transfer, oldest first."""
    return [ColdDecisionRecord(r.approver, r.decision, r.reason, r.decided_at)
            for r in conn.execute(
                sa.text("SELECT approver, decision, reason, decided_at FROM "
                        "cold_transfer_approvals WHERE cold_transfer_id = :i "
                        "ORDER BY decided_at, approver"), {"i": cold_transfer_id})]


def pending_outflows(conn: Connection, chain: str, hot_wallet: str, token: str | None) -> int:
    """What the hot wallet of ``chain`` is committed to send of ``token`` (None: the native
    coin) and has no receipt for yet, in the chain's smallest unit: withdrawals from request to
    an undetermined outcome, gas top-ups not included yet, cold transfers approved and not
    included yet. What is included is already out of the balance at the latest block (the
    caller takes the smaller of the finalized and the latest balance). A cold transfer still
    waiting for its approvals is not counted: until an admin approves it, the excess it would
    move is still there (and the check does not propose it again)."""
    total = to_int(conn.execute(
        sa.text("SELECT coalesce(sum(chain_amount), 0) FROM withdrawals WHERE chain = :c "
                "AND token IS NOT DISTINCT FROM :t AND state IN ('requested', "
                "'pending_approval', 'reserved', 'signing', 'signed', 'broadcast', 'unknown', "
                "'awaiting_write_off')"), {"c": chain, "t": token}).scalar_one())
    total += to_int(conn.execute(
        sa.text("SELECT coalesce(sum(amount), 0) FROM cold_transfers WHERE chain = :c "
                "AND sender = :s AND token IS NOT DISTINCT FROM :t AND state IN ('approved', "
                "'signing', 'signed', 'broadcast', 'unknown')"),
        {"c": chain, "s": hot_wallet, "t": token}).scalar_one())
    if token is None:
        total += to_int(conn.execute(
            sa.text("SELECT coalesce(sum(amount), 0) FROM gas_top_ups WHERE chain = :c "
                    "AND sender = :s AND state IN ('ready', 'signing', 'signed', 'broadcast', "
                    "'unknown')"), {"c": chain, "s": hot_wallet}).scalar_one())
    return total


@dataclass(frozen=True)
class RefillRecord:
    """A request to refill the hot wallet from a cold address (amount in the chain's smallest
    unit); ``matched_*`` name the incoming transfer that fulfilled it."""

    id: int
    chain: str
    asset: str
    token: str | None
    source: str
    destination: str
    amount: int
    requested_by: str
    reason: str
    state: str
    matched_tx_hash: str | None
    matched_position: str | None
    request_key: str | None
    created_at: datetime
    updated_at: datetime


def _refill(row: Any) -> RefillRecord:
    data = dict(row._mapping)
    data["amount"] = to_int(data["amount"])
    return RefillRecord(**data)


def insert_refill(conn: Connection, *, chain: str, asset: str, token: str | None, source: str,
                  destination: str, amount: int, requested_by: str, reason: str,
                  request_key: str | None, at: datetime) -> int | None:
    """Open a refill request; None when ``request_key`` was used before."""
    return _insert(
        conn, "refill_request",
        {"chain": chain, "asset": asset, "token": token, "source": source,
         "destination": destination, "amount": str(amount), "requested_by": requested_by,
         "reason": reason, "state": "open", "request_key": request_key, "created_at": at,
         "updated_at": at},
        skip_taken=True, actor=requested_by, at=at, reason=reason, evidence=None)


def get_refill(conn: Connection, refill_id: int) -> RefillRecord | None:
    """One refill request."""
    row = conn.execute(sa.text("SELECT * FROM refill_requests WHERE id = :i"),
                       {"i": refill_id}).first()
    return None if row is None else _refill(row)


def refill_by_request_key(conn: Connection, request_key: str) -> RefillRecord | None:
    """The refill request opened under ``request_key``."""
    row = conn.execute(sa.text("SELECT * FROM refill_requests WHERE request_key = :k"),
                       {"k": request_key}).first()
    return None if row is None else _refill(row)


def list_refills(conn: Connection, *, chain: str | None = None, state: str | None = None,
                 limit: int = 200, before_id: int | None = None,
                 since: datetime | None = None,
                 until: datetime | None = None) -> list[RefillRecord]:
    """Refill requests, newest first, optionally of one chain and one state, with ids below
    ``before_id`` and created in ``[since, until)``."""
    rows = conn.execute(
        sa.text("SELECT * FROM refill_requests WHERE (CAST(:c AS text) IS NULL OR chain = :c) "
                "AND (CAST(:s AS text) IS NULL OR state = :s) "
                "AND (CAST(:b AS bigint) IS NULL OR id < :b) "
                "AND (CAST(:since AS timestamptz) IS NULL OR created_at >= :since) "
                "AND (CAST(:until AS timestamptz) IS NULL OR created_at < :until) "
                "ORDER BY id DESC LIMIT :n"),
        {"c": chain, "s": state, "n": limit, "b": before_id, "since": since, "until": until})
    return [_refill(r) for r in rows]


def open_refill(conn: Connection, chain: str, asset: str, destination: str) -> int | None:
    """The oldest open refill request of (chain, asset) to ``destination``, if any."""
    value = conn.execute(
        sa.text("SELECT min(id) FROM refill_requests WHERE chain = :c AND asset = :a "
                "AND destination = :d AND state = 'open'"),
        {"c": chain, "a": asset, "d": destination}).scalar()
    return None if value is None else int(value)


@dataclass(frozen=True)
class EpisodeRecord:
    """A stretch of time with the hot wallet's holding outside one limit (chain units)."""

    id: int
    chain: str
    asset: str
    side: str
    hot_wallet: str
    limit_amount: int
    holding: int
    finalized_block: int
    refill_request_id: int | None
    started_at: datetime
    ended_at: datetime | None
    ended_holding: int | None


def _episode(row: Any) -> EpisodeRecord:
    data = dict(row._mapping)
    for name in ("limit_amount", "holding", "ended_holding"):
        if data[name] is not None:
            data[name] = to_int(data[name])
    return EpisodeRecord(**data)


def open_episode(conn: Connection, chain: str, asset: str, side: str, *,
                 for_update: bool = False) -> EpisodeRecord | None:
    """The open episode of (chain, asset) on ``side``, row-locked with ``for_update``."""
    lock = " FOR UPDATE" if for_update else ""
    row = conn.execute(sa.text("SELECT * FROM hot_limit_episodes WHERE chain = :c AND asset = :a "
                               f"AND side = :s AND ended_at IS NULL{lock}"),
                       {"c": chain, "a": asset, "s": side}).first()
    return None if row is None else _episode(row)


def open_episodes(conn: Connection, chain: str, side: str) -> list[EpisodeRecord]:
    """The open episodes of ``chain`` on ``side``, oldest first."""
    rows = conn.execute(sa.text("SELECT * FROM hot_limit_episodes WHERE chain = :c "
                                "AND side = :s AND ended_at IS NULL ORDER BY id"),
                        {"c": chain, "s": side})
    return [_episode(r) for r in rows]


def start_episode(conn: Connection, *, chain: str, asset: str, side: str, hot_wallet: str,
                  limit_amount: int, holding: int, finalized_block: int,
                  at: datetime) -> EpisodeRecord | None:
    """Open an episode; None when one is open already (the partial unique index decides)."""
    row = conn.execute(
        sa.text("INSERT INTO hot_limit_episodes (chain, asset, side, hot_wallet, limit_amount, "
                "holding, finalized_block, started_at) VALUES (:c, :a, :s, :h, :l, :v, :b, :at) "
                "ON CONFLICT DO NOTHING RETURNING *"),
        {"c": chain, "a": asset, "s": side, "h": hot_wallet, "l": str(limit_amount),
         "v": str(holding), "b": finalized_block, "at": at}).first()
    return None if row is None else _episode(row)


def end_episode(conn: Connection, episode_id: int, holding: int, at: datetime) -> None:
    """Close an episode: the holding is back within the limit."""
    conn.execute(sa.text("UPDATE hot_limit_episodes SET ended_at = :at, ended_holding = :v "
                         "WHERE id = :i AND ended_at IS NULL"),
                 {"at": at, "v": str(holding), "i": episode_id})


def set_episode_refill(conn: Connection, episode_id: int, refill_id: int) -> None:
    """Name the refill request created for a low episode."""
    conn.execute(sa.text("UPDATE hot_limit_episodes SET refill_request_id = :r WHERE id = :i"),
                 {"r": refill_id, "i": episode_id})
