"""The processor's side of the shared outgoing mechanism (``outgoing.repository``): the
withdrawal's attempts in ``outgoing_attempts`` (kind ``withdrawal``), the hot wallet's nonces,
and the lock that lets one processor step run per chain."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy.engine import Connection

from outgoing import repository as outgoing
from outgoing.repository import Attempt, MovementKind

#: A withdrawal's signed broadcast attempt (``Attempt``; its ``movement_id`` is the withdrawal).
AttemptRecord = Attempt


def allocate_nonce(conn: Connection, chain: str, address: str, chain_nonce: int) -> int:
    """The hot wallet's next nonce (``outgoing.repository.allocate_nonce``)."""
    return outgoing.allocate_nonce(conn, chain, address, chain_nonce)


def insert_attempt(conn: Connection, *, withdrawal_id: int, attempt_no: int, chain: str,
                   hot_wallet: str, nonce: int, tx_hash: str, raw_tx: str, max_fee_per_gas: int,
                   max_priority_fee_per_gas: int, gas_limit: int, at: datetime,
                   purpose: str = "payout") -> Attempt:
    """Record a signed attempt of a withdrawal (before it is sent)."""
    return outgoing.insert_attempt(
        conn, kind=MovementKind.WITHDRAWAL, movement_id=withdrawal_id, attempt_no=attempt_no,
        chain=chain, sender=hot_wallet, nonce=nonce, tx_hash=tx_hash, raw_tx=raw_tx,
        max_fee_per_gas=max_fee_per_gas, max_priority_fee_per_gas=max_priority_fee_per_gas,
        gas_limit=gas_limit, at=at, purpose=purpose)


def list_attempts(conn: Connection, withdrawal_id: int) -> list[Attempt]:
    """Attempts of a withdrawal, first first."""
    return outgoing.list_attempts(conn, MovementKind.WITHDRAWAL, withdrawal_id)


def withdrawal_of_tx_hash(conn: Connection, tx_hash: str) -> int | None:
    """The withdrawal one of whose attempts has ``tx_hash`` (lower case), if any."""
    return outgoing.movement_of_tx_hash(conn, MovementKind.WITHDRAWAL, tx_hash)


def try_lock_chain(conn: Connection, chain: str) -> bool:
    """One processor step per chain across processes: a lock held until ``conn``'s transaction
    ends (``outgoing.repository.try_lock``)."""
    return outgoing.try_lock(conn, chain)
