"""Withdrawal rows and their history: the stored withdrawal (``WithdrawalRecord``), lookups
by id, key and state, and the transitions that set its columns and append its history row in
one statement (``record_transition``, ``list_events``)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

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


def withdrawals_of_user(conn: Connection, user_id: str, *, limit: int,
                        before_id: int | None = None, states: Sequence[str] | None = None,
                        since: datetime | None = None,
                        until: datetime | None = None) -> list[WithdrawalRecord]:
    """The user's withdrawals, newest first, with ids below ``before_id`` when given (keyset
    pagination on ``withdrawals_user_id_idx``), in ``states`` and requested in
    ``[since, until)`` when given."""
    rows = conn.execute(
        sa.text("SELECT * FROM withdrawals WHERE user_id = :u "
                "AND (CAST(:b AS bigint) IS NULL OR id < :b) "
                "AND (CAST(:s AS text[]) IS NULL OR state = ANY(:s)) "
                "AND (CAST(:since AS timestamptz) IS NULL OR requested_at >= :since) "
                "AND (CAST(:until AS timestamptz) IS NULL OR requested_at < :until) "
                "ORDER BY id DESC LIMIT :n"),
        {"u": user_id, "b": before_id, "n": limit,
         "s": None if states is None else [str(s) for s in states],
         "since": since, "until": until})
    return [_withdrawal(r) for r in rows]


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


_TRANSITION = sa.text(
    "SELECT * FROM withdrawal_transition(:id, CAST(:sets AS jsonb), :h_from, :h_to, :h_event, "
    ":h_reason, CAST(:h_evidence AS jsonb), :h_actor, CAST(:h_ledger AS bigint), "
    "CAST(:h_attempt AS bigint), CAST(:h_at AS timestamptz))")


def record_transition(conn: Connection, withdrawal_id: int, values: dict[str, Any],
                      history: HistoryRow) -> WithdrawalRecord:
    """Set columns of a withdrawal (its row locked by the caller), append its history row and
    return the updated withdrawal: one statement. ``values`` names only ``TRANSITION_COLUMNS``
    (ValueError otherwise, before anything is sent). (A reserve inserts the withdrawal in its
    reserved state instead: ``record_reserve``.)

    The application role may not UPDATE withdrawals (revision 0030_money_table_grants): the
    statement is a call of ``withdrawal_transition``, which checks again, under the row lock,
    that the withdrawal is in ``history.from_state`` and that the move is one of
    ``model.TRANSITIONS`` (check_violation otherwise).
    """
    refused = sorted(set(values) - TRANSITION_COLUMNS)
    if refused:
        # A programmer error, raised (not asserted) so that python -O keeps the check.
        raise ValueError(f"a transition cannot set {refused}; it sets only "
                         f"{sorted(TRANSITION_COLUMNS)}")
    row = conn.execute(
        _TRANSITION,
        {"id": withdrawal_id, "sets": json.dumps(values, default=str),
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


def last_event(conn: Connection, withdrawal_id: int, event: str) -> EventRecord | None:
    """The latest history row of ``event`` for a withdrawal (None if it never happened)."""
    r = conn.execute(
        sa.text("SELECT * FROM withdrawal_events WHERE withdrawal_id = :w AND event = :e "
                "ORDER BY id DESC LIMIT 1"),
        {"w": withdrawal_id, "e": event},
    ).first()
    if r is None:
        return None
    return EventRecord(r.id, r.from_state, r.to_state, r.event, r.reason, dict(r.evidence),
                       r.actor, r.ledger_transaction_id, r.attempt_id, r.occurred_at,
                       r.recorded_at)
