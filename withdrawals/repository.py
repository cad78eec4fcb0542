"""All SQL of withdrawals. Functions take a Connection inside an open transaction.

Amounts leave the database as ``Decimal`` and become ``int`` here (``ledger.repository.to_int``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from config.database import driver_rows
from ledger.model import Account, AccountType, Asset
from ledger.repository import to_int
from withdrawals.model import State


@dataclass(frozen=True)
class WithdrawalRecord:
    """A stored withdrawal (current state)."""

    id: int
    user_id: str
    request_key: str
    fingerprint: str
    requested_by: str
    chain: str
    asset_code: str
    token: str | None
    destination: str
    amount_minor: int
    fee_minor: int
    fee_max_minor: int
    chain_amount: int
    approvals_required: int
    state: State
    state_reason: str | None
    hot_wallet: str | None
    nonce: int | None
    reserve_transaction_id: int | None
    reserve_posting_id: int | None
    closing_transaction_id: int | None
    landed_attempt_id: int | None
    requested_at: datetime
    state_changed_at: datetime
    unknown_since: datetime | None
    nonce_closed_at: datetime | None = None

    @property
    def reserved_minor(self) -> int:
        """What the reserve holds: amount + the most the fee can be."""
        return self.amount_minor + self.fee_max_minor


def _withdrawal(row: Any) -> WithdrawalRecord:
    return WithdrawalRecord(
        id=row.id, user_id=row.user_id, request_key=row.request_key, fingerprint=row.fingerprint,
        requested_by=row.requested_by, chain=row.chain, asset_code=row.asset_code,
        token=row.token, destination=row.destination, amount_minor=to_int(row.amount_minor),
        fee_minor=to_int(row.fee_minor), fee_max_minor=to_int(row.fee_max_minor),
        chain_amount=to_int(row.chain_amount), approvals_required=row.approvals_required,
        state=State(row.state), state_reason=row.state_reason, hot_wallet=row.hot_wallet,
        nonce=row.nonce, reserve_transaction_id=row.reserve_transaction_id,
        reserve_posting_id=row.reserve_posting_id,
        closing_transaction_id=row.closing_transaction_id,
        landed_attempt_id=row.landed_attempt_id, requested_at=row.requested_at,
        state_changed_at=row.state_changed_at, unknown_since=row.unknown_since,
        nonce_closed_at=row.nonce_closed_at,
    )


def _call(conn: Connection, statement: str, params: tuple[Any, ...]) -> Any:
    """Run ``statement`` on the unit of work's psycopg connection, in its transaction, and
    return its one row (``config.database.driver_rows``: the reserve's hot statements)."""
    rows = driver_rows(conn, statement, params)
    assert len(rows) == 1, statement
    return rows[0]


@dataclass(frozen=True)
class ReserveOpened:
    """What the first statement of a reserve read under the (user, asset) daily-limit lock:
    the withdrawal already stored under the request key (``existing_id``), else a new
    ``withdrawal_id``; the amount requested in the window that counts toward the limit; the
    ledger asset (None if the ledger has no such asset) and those of the user's two accounts
    that exist in it, by code."""

    existing_id: int | None
    withdrawal_id: int | None
    used_minor: int
    asset: Asset | None
    accounts: dict[str, Account]


_OPEN_RESERVE_SQL = "SELECT * FROM withdrawal_reserve_open(%s, %s, %s, %s, %s, %s)"


def open_reserve(conn: Connection, user_id: str, asset_code: str, request_key: str,
                 since: datetime, wallet_code: str, withdrawals_code: str) -> ReserveOpened:
    """Take the (user, asset) daily-limit lock until commit and read, under it, what a reserve
    needs (``withdrawal_reserve_open``, migrations/sql/0007): one statement, writes nothing.

    Races prevented by the lock: two concurrent requests of one user and asset together passing
    the daily limit (each would miss the other's amount), and two requests with one key and
    asset both creating a withdrawal (the second waits here, then finds the first's row). The
    reads run after the lock was granted, with a fresh snapshot.
    """
    row = _call(conn, _OPEN_RESERVE_SQL,
                (user_id, asset_code, request_key, since, wallet_code, withdrawals_code))
    existing_id, withdrawal_id, used_minor, asset_id, asset_scale = row[:5]
    asset = (None if asset_id is None
             else Asset(id=asset_id, code=asset_code, scale=asset_scale))
    accounts = {}
    if asset is not None:
        for code, (account_id, account_type, dnec, cned) in (
                (wallet_code, row[5:9]), (withdrawals_code, row[9:13])):
            if account_id is not None:
                accounts[code] = Account(id=account_id, code=code, asset=asset,
                                         type=AccountType(account_type),
                                         debits_must_not_exceed_credits=dnec,
                                         credits_must_not_exceed_debits=cned)
    return ReserveOpened(existing_id, withdrawal_id, to_int(used_minor), asset, accounts)


_RECORD_RESERVE_SQL = ("SELECT withdrawal_reserve_record(" + ", ".join(["%s"] * 22) + ")")


def record_reserve(conn: Connection, w: WithdrawalRecord, history: HistoryRow,
                   withdrawals_account_id: int) -> int:
    """Insert the requested withdrawal ``w`` in its reserved state (``history.to_state``, with
    ``history.reason`` as its state reason) and its history row (``requested`` ->
    ``history.to_state``), after its reserve (``history.ledger_transaction_id``) was posted in
    this transaction, with that row's outbox event: one statement (``withdrawal_reserve_record``,
    migrations/sql/0007, run as ``custody_withdrawal_writer``, which writes the outbox row the
    trigger writes for other writers).
    Returns the reserve posting id, the posting on ``withdrawals_account_id`` that the settle
    or release closes.

    The database refuses (IntegrityError, check_violation) a reserve transaction that is not
    this withdrawal's (key ``withdrawal:{id}:reserve``, ``amount + fee_max`` credited to the
    user's withdrawals account), and raises 40001 if another transaction committed the same
    (user, key) meanwhile: the unit of work is then retried and finds it.
    """
    assert w.state is State.REQUESTED and history.ledger_transaction_id is not None
    (posting_id,) = _call(conn, _RECORD_RESERVE_SQL, (
        w.id, w.user_id, w.request_key, w.fingerprint, w.requested_by, w.chain, w.asset_code,
        w.token, w.destination, w.amount_minor, w.fee_max_minor, w.fee_minor, w.chain_amount,
        w.approvals_required, str(history.to_state), history.event, history.reason,
        json.dumps(history.evidence, default=str), history.actor, history.occurred_at,
        history.ledger_transaction_id, withdrawals_account_id))
    return int(posting_id)


def find_accounts(conn: Connection, asset_code: str,
                  codes: Sequence[str]) -> tuple[Asset | None, dict[str, Account]]:
    """The ledger asset ``asset_code`` (None if missing) and those of ``codes`` that exist in
    it, in one statement. Accounts are immutable once opened, so what this returns stays true."""
    rows = conn.execute(
        sa.text(
            "SELECT s.id AS asset_id, s.scale, a.id, a.code, a.type, "
            "a.debits_must_not_exceed_credits AS dnec, a.credits_must_not_exceed_debits AS cned "
            "FROM assets s LEFT JOIN accounts a ON a.asset_id = s.id "
            "AND a.code = ANY(CAST(:codes AS text[])) WHERE s.code = :asset"
        ),
        {"asset": asset_code, "codes": list(codes)},
    ).all()
    if not rows:
        return None, {}
    asset = Asset(id=rows[0].asset_id, code=asset_code, scale=rows[0].scale)
    return asset, {r.code: Account(id=r.id, code=r.code, asset=asset, type=AccountType(r.type),
                                   debits_must_not_exceed_credits=r.dnec,
                                   credits_must_not_exceed_debits=r.cned)
                   for r in rows if r.id is not None}


def get_withdrawal(conn: Connection, withdrawal_id: int, *,
                   for_update: bool = False) -> WithdrawalRecord | None:
    """A withdrawal by id; ``for_update`` locks its row until commit."""
    lock = " FOR UPDATE" if for_update else ""
    row = conn.execute(sa.text(f"SELECT * FROM withdrawals WHERE id = :id{lock}"),
                       {"id": withdrawal_id}).first()
    return _withdrawal(row) if row else None


def find_by_key(conn: Connection, user_id: str, request_key: str) -> WithdrawalRecord | None:
    """The withdrawal created under the caller's key."""
    row = conn.execute(
        sa.text("SELECT * FROM withdrawals WHERE user_id = :u AND request_key = :k"),
        {"u": user_id, "k": request_key},
    ).first()
    return _withdrawal(row) if row else None


def list_ids_in_states(conn: Connection, chain: str, states: Sequence[State],
                       limit: int) -> list[int]:
    """Ids of withdrawals of ``chain`` in ``states``, oldest first."""
    rows = conn.execute(
        sa.text("SELECT id FROM withdrawals WHERE chain = :c AND state = ANY(:s) "
                "ORDER BY id LIMIT :n"),
        {"c": chain, "s": [str(s) for s in states], "n": limit},
    )
    return [r.id for r in rows]


def list_ids_with_open_nonce(conn: Connection, chain: str, limit: int) -> list[int]:
    """Written-off withdrawals of ``chain`` whose nonce is not yet seen consumed and final."""
    rows = conn.execute(
        sa.text("SELECT id FROM withdrawals WHERE chain = :c AND state = 'written_off' "
                "AND nonce IS NOT NULL AND nonce_closed_at IS NULL ORDER BY id LIMIT :n"),
        {"c": chain, "n": limit},
    )
    return [r.id for r in rows]


@dataclass(frozen=True)
class HistoryRow:
    """What a transition appends to ``withdrawal_events``."""

    from_state: State | None
    to_state: State
    event: str
    reason: str | None
    evidence: dict[str, Any]
    actor: str
    occurred_at: datetime
    ledger_transaction_id: int | None = None
    attempt_id: int | None = None


#: The columns a transition may set: the state with its reason and time, the hot wallet and
#: nonce a first signature takes, the attempt that landed, when the nonce closed and the ledger
#: transaction that closed the withdrawal. Everything else (user, amounts, destination, reserve)
#: is fixed when the withdrawal is reserved. The names become SQL text, so they are checked
#: against this set before any statement is built.
TRANSITION_COLUMNS = frozenset({
    "state", "state_reason", "state_changed_at", "unknown_since", "hot_wallet", "nonce",
    "landed_attempt_id", "nonce_closed_at", "closing_transaction_id",
})


@lru_cache(maxsize=64)
def _transition_statement(columns: tuple[str, ...]) -> sa.TextClause:
    refused = sorted(set(columns) - TRANSITION_COLUMNS)
    if refused:
        # A programmer error, raised (not asserted) so that python -O keeps the check.
        raise ValueError(f"a transition cannot set {refused}; it sets only "
                         f"{sorted(TRANSITION_COLUMNS)}")
    sets = [f"{k} = :{k}" for k in columns]
    return sa.text(
        f"WITH u AS (UPDATE withdrawals SET {', '.join(sets)} WHERE id = :id RETURNING *), "
        "e AS (INSERT INTO withdrawal_events (withdrawal_id, from_state, to_state, event, "
        "reason, evidence, actor, ledger_transaction_id, attempt_id, occurred_at) "
        "SELECT u.id, CAST(:h_from AS text), CAST(:h_to AS text), CAST(:h_event AS text), "
        "CAST(:h_reason AS text), CAST(:h_evidence AS jsonb), CAST(:h_actor AS text), "
        "CAST(:h_ledger AS bigint), CAST(:h_attempt AS bigint), "
        "CAST(:h_at AS timestamptz) FROM u) "
        "SELECT * FROM u"
    )


def record_transition(conn: Connection, withdrawal_id: int, values: dict[str, Any],
                      history: HistoryRow) -> WithdrawalRecord:
    """Set columns of a withdrawal (its row locked by the caller), append its history row and
    return the updated withdrawal: one statement. ``values`` names only ``TRANSITION_COLUMNS``
    (ValueError otherwise, before anything is sent). (A reserve inserts the withdrawal in its
    reserved state instead: ``record_reserve``.)
    """
    row = conn.execute(
        _transition_statement(tuple(values)),
        {**values, "id": withdrawal_id,
         "h_from": history.from_state and str(history.from_state),
         "h_to": str(history.to_state), "h_event": history.event, "h_reason": history.reason,
         "h_evidence": json.dumps(history.evidence, default=str), "h_actor": history.actor,
         "h_ledger": history.ledger_transaction_id, "h_attempt": history.attempt_id,
         "h_at": history.occurred_at},
    ).first()
    assert row is not None, f"withdrawal {withdrawal_id} exists"
    return _withdrawal(row)


@dataclass(frozen=True)
class EventRecord:
    """One row of a withdrawal's history."""

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


def list_events(conn: Connection, withdrawal_id: int) -> list[EventRecord]:
    """The history of a withdrawal, oldest first."""
    rows = conn.execute(
        sa.text("SELECT * FROM withdrawal_events WHERE withdrawal_id = :w ORDER BY id"),
        {"w": withdrawal_id},
    )
    return [EventRecord(r.id, r.from_state, r.to_state, r.event, r.reason, dict(r.evidence),
                        r.actor, r.ledger_transaction_id, r.attempt_id, r.occurred_at,
                        r.recorded_at) for r in rows]


# --- policy ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class DecisionRecord:
    """An approval or a write-off vote."""

    id: int
    kind: str
    decision: str
    actor: str
    reason: str | None
    decided_at: datetime


def insert_decision(conn: Connection, withdrawal_id: int, kind: str, decision: str, actor: str,
                    reason: str | None, at: datetime) -> bool:
    """Record a vote; False if this person already voted on this kind (UNIQUE)."""
    new_id = conn.execute(
        sa.text(
            "INSERT INTO withdrawal_decisions (withdrawal_id, kind, decision, actor, reason, "
            "decided_at) VALUES (:w, :k, :d, :a, :r, :t) "
            "ON CONFLICT (withdrawal_id, kind, actor) DO NOTHING RETURNING id"
        ),
        {"w": withdrawal_id, "k": kind, "d": decision, "a": actor, "r": reason, "t": at},
    ).scalar()
    return new_id is not None


def list_decisions(conn: Connection, withdrawal_id: int,
                   kind: str | None = None) -> list[DecisionRecord]:
    """Votes on a withdrawal, oldest first."""
    rows = conn.execute(
        sa.text("SELECT * FROM withdrawal_decisions WHERE withdrawal_id = :w "
                "AND (CAST(:k AS text) IS NULL OR kind = :k) ORDER BY id"),
        {"w": withdrawal_id, "k": kind},
    )
    return [DecisionRecord(r.id, r.kind, r.decision, r.actor, r.reason, r.decided_at)
            for r in rows]


# --- nonces and attempts --------------------------------------------------------------------


def allocate_nonce(conn: Connection, chain: str, address: str, chain_nonce: int) -> int:
    """Hand out the hot wallet's next nonce: max(stored next, the chain's pending nonce).

    The row lock serializes allocations of one hot wallet (race prevented: two signers taking
    the same nonce, which would make one payout replace another). ``chain_nonce`` (read before
    the transaction) covers transactions sent from the wallet outside the engine.
    """
    conn.execute(
        sa.text("INSERT INTO hot_wallet_nonces (chain, address, next_nonce) VALUES (:c, :a, :n) "
                "ON CONFLICT (chain, address) DO NOTHING"),
        {"c": chain, "a": address, "n": chain_nonce},
    )
    stored = conn.execute(
        sa.text("SELECT next_nonce FROM hot_wallet_nonces WHERE chain = :c AND address = :a "
                "FOR UPDATE"),
        {"c": chain, "a": address},
    ).scalar_one()
    nonce = max(int(stored), chain_nonce)
    conn.execute(
        sa.text("UPDATE hot_wallet_nonces SET next_nonce = :n, updated_at = now() "
                "WHERE chain = :c AND address = :a"),
        {"c": chain, "a": address, "n": nonce + 1},
    )
    return nonce


@dataclass(frozen=True)
class AttemptRecord:
    """A signed broadcast attempt."""

    id: int
    withdrawal_id: int
    attempt_no: int
    chain: str
    hot_wallet: str
    nonce: int
    tx_hash: str
    raw_tx: str
    max_fee_per_gas: int
    max_priority_fee_per_gas: int
    gas_limit: int
    created_at: datetime
    #: ``payout`` (pays the destination) or ``cancel`` (zero-value self-transfer, same nonce).
    purpose: str = "payout"


def insert_attempt(conn: Connection, *, withdrawal_id: int, attempt_no: int, chain: str,
                   hot_wallet: str, nonce: int, tx_hash: str, raw_tx: str, max_fee_per_gas: int,
                   max_priority_fee_per_gas: int, gas_limit: int, at: datetime,
                   purpose: str = "payout") -> int:
    """Record a signed attempt (before it is sent)."""
    return int(conn.execute(
        sa.text(
            "INSERT INTO withdrawal_attempts (withdrawal_id, attempt_no, chain, hot_wallet, nonce,"
            " tx_hash, raw_tx, max_fee_per_gas, max_priority_fee_per_gas, gas_limit, created_at,"
            " purpose) VALUES (:w, :n, :c, :h, :nonce, :tx, :raw, :mf, :mp, :g, :at, :p)"
            " RETURNING id"
        ),
        {"w": withdrawal_id, "n": attempt_no, "c": chain, "h": hot_wallet, "nonce": nonce,
         "tx": tx_hash, "raw": raw_tx, "mf": str(max_fee_per_gas),
         "mp": str(max_priority_fee_per_gas), "g": gas_limit, "at": at, "p": purpose},
    ).scalar_one())


def list_attempts(conn: Connection, withdrawal_id: int) -> list[AttemptRecord]:
    """Attempts of a withdrawal, first first."""
    rows = conn.execute(
        sa.text("SELECT * FROM withdrawal_attempts WHERE withdrawal_id = :w ORDER BY attempt_no"),
        {"w": withdrawal_id},
    )
    return [AttemptRecord(r.id, r.withdrawal_id, r.attempt_no, r.chain, r.hot_wallet, r.nonce,
                          r.tx_hash, r.raw_tx, to_int(r.max_fee_per_gas),
                          to_int(r.max_priority_fee_per_gas), r.gas_limit, r.created_at,
                          r.purpose)
            for r in rows]


# --- open items and returns -----------------------------------------------------------------


@dataclass(frozen=True)
class OpenItemRow:
    """A reserve posting not fully closed yet."""

    withdrawal_id: int
    user_id: str
    chain: str
    asset_code: str
    state: str
    state_reason: str | None
    reserve_posting_id: int
    reserved_minor: int
    open_minor: int
    requested_at: datetime
    reserved_at: datetime


def open_reserves(conn: Connection, reserved_before: datetime) -> list[OpenItemRow]:
    """Reserves recorded before ``reserved_before`` whose closings do not cover them yet."""
    rows = conn.execute(
        sa.text(
            "SELECT w.id, w.user_id, w.chain, w.asset_code, w.state, w.state_reason, "
            " w.reserve_posting_id, w.requested_at, x.recorded_at AS reserved_at, "
            " -p.amount AS reserved, -p.amount - coalesce(c.closed, 0) AS open "
            "FROM withdrawals w "
            "JOIN ledger_postings p ON p.id = w.reserve_posting_id "
            "JOIN ledger_transactions x ON x.id = p.transaction_id "
            "LEFT JOIN LATERAL (SELECT sum(q.amount) AS closed FROM ledger_postings q "
            "  WHERE q.closes_posting_id = p.id) c ON true "
            "WHERE x.recorded_at < :before AND -p.amount - coalesce(c.closed, 0) > 0 "
            "ORDER BY x.recorded_at, w.id"
        ),
        {"before": reserved_before},
    )
    return [OpenItemRow(r.id, r.user_id, r.chain, r.asset_code, r.state, r.state_reason,
                        r.reserve_posting_id, to_int(r.reserved), to_int(r.open),
                        r.requested_at, r.reserved_at) for r in rows]


def insert_return(conn: Connection, *, withdrawal_id: int, chain: str, tx_hash: str,
                  position: str, amount_minor: int, arrived_at: datetime, booked_to: str,
                  ledger_transaction_id: int | None, linked_by: str, reason: str) -> int | None:
    """Record a returned payout; None if that incoming transfer is linked already."""
    return conn.execute(
        sa.text(
            "INSERT INTO withdrawal_returns (withdrawal_id, chain, tx_hash, position, amount_minor,"
            " arrived_at, booked_to, ledger_transaction_id, linked_by, reason) VALUES "
            "(:w, :c, :h, :p, :m, :at, :b, :l, :by, :r) "
            "ON CONFLICT (chain, tx_hash, position) DO NOTHING RETURNING id"
        ),
        {"w": withdrawal_id, "c": chain, "h": tx_hash, "p": position, "m": str(amount_minor),
         "at": arrived_at, "b": booked_to, "l": ledger_transaction_id, "by": linked_by,
         "r": reason},
    ).scalar()


@dataclass(frozen=True)
class ReturnRecord:
    """A returned payout linked to its withdrawal."""

    id: int
    withdrawal_id: int
    chain: str
    tx_hash: str
    position: str
    amount_minor: int
    arrived_at: datetime
    booked_to: str
    ledger_transaction_id: int | None
    linked_by: str


def list_returns(conn: Connection, withdrawal_id: int) -> list[ReturnRecord]:
    """Returns linked to a withdrawal."""
    rows = conn.execute(
        sa.text("SELECT * FROM withdrawal_returns WHERE withdrawal_id = :w ORDER BY id"),
        {"w": withdrawal_id},
    )
    return [ReturnRecord(r.id, r.withdrawal_id, r.chain, r.tx_hash, r.position,
                         to_int(r.amount_minor), r.arrived_at, r.booked_to,
                         r.ledger_transaction_id, r.linked_by) for r in rows]


def find_return(conn: Connection, chain: str, tx_hash: str, position: str) -> ReturnRecord | None:
    """The link of an incoming transfer, if any."""
    r = conn.execute(
        sa.text("SELECT * FROM withdrawal_returns WHERE chain = :c AND tx_hash = :h "
                "AND position = :p"),
        {"c": chain, "h": tx_hash, "p": position},
    ).first()
    if r is None:
        return None
    return ReturnRecord(r.id, r.withdrawal_id, r.chain, r.tx_hash, r.position,
                        to_int(r.amount_minor), r.arrived_at, r.booked_to,
                        r.ledger_transaction_id, r.linked_by)


def ledger_transaction_ids(conn: Connection, withdrawal_id: int) -> list[int]:
    """Ledger transactions referencing ``withdrawal:{id}`` (reserve, settle, gas, return...)."""
    rows = conn.execute(
        sa.text("SELECT id FROM ledger_transactions WHERE reference = :r ORDER BY id"),
        {"r": f"withdrawal:{withdrawal_id}"},
    )
    return [r.id for r in rows]


def try_lock_chain(conn: Connection, chain: str) -> bool:
    """Session-level lock: one processor step per chain across processes (released on close)."""
    return bool(conn.execute(sa.text("SELECT pg_try_advisory_lock(7322, hashtext(:c))"),
                             {"c": chain}).scalar_one())


def unlock_chain(conn: Connection, chain: str) -> None:
    """Release the processor lock of ``chain``."""
    conn.execute(sa.text("SELECT pg_advisory_unlock(7322, hashtext(:c))"), {"c": chain})
