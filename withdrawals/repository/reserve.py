"""The reserve's two SQL functions, ``withdrawal_reserve_open`` and
``withdrawal_reserve_record`` (migrations/sql/0007): one statement each, run on the unit of
work's psycopg connection directly (``_call``)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.engine import Connection

from config.database import driver_rows
from ledger.model import Account, AccountType, Asset
from ledger.repository import to_int
from withdrawals.model import State
from withdrawals.repository.withdrawals import HistoryRow, WithdrawalRecord


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
