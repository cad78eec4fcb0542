"""The mechanism's tables: the next nonce of every address we send from (``sender_nonces``) and
the signed attempts of every movement (``outgoing_attempts``), each naming its one movement
(``MovementKind``) by a real foreign key."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from config.database import KEEP_LOCK_IDLE
from ledger.repository import to_int


class MovementKind(StrEnum):
    """What an attempt belongs to, and the column of ``outgoing_attempts`` that names it."""

    WITHDRAWAL = "withdrawal"
    SWEEP = "sweep"
    GAS_TOP_UP = "gas_top_up"
    COLD_TRANSFER = "cold_transfer"

    @property
    def column(self) -> str:
        """The foreign-key column of this kind in ``outgoing_attempts``."""
        return _COLUMNS[self]


_COLUMNS = {MovementKind.WITHDRAWAL: "withdrawal_id", MovementKind.SWEEP: "sweep_id",
            MovementKind.GAS_TOP_UP: "top_up_id", MovementKind.COLD_TRANSFER: "cold_transfer_id"}


def allocate_nonce(conn: Connection, chain: str, address: str, chain_nonce: int) -> int:
    """Hand out the sender's next nonce: max(stored next, the chain's pending nonce).

    The row lock serializes allocations of one sender (race prevented: two signers taking the
    same nonce, which would make one movement replace another). ``chain_nonce`` (read before
    the transaction) covers transactions sent from the address outside the engine.
    """
    conn.execute(
        sa.text("INSERT INTO sender_nonces (chain, address, next_nonce) VALUES (:c, :a, :n) "
                "ON CONFLICT (chain, address) DO NOTHING"),
        {"c": chain, "a": address, "n": chain_nonce},
    )
    stored = conn.execute(
        sa.text("SELECT next_nonce FROM sender_nonces WHERE chain = :c AND address = :a "
                "FOR UPDATE"),
        {"c": chain, "a": address},
    ).scalar_one()
    nonce = max(int(stored), chain_nonce)
    conn.execute(
        sa.text("UPDATE sender_nonces SET next_nonce = :n, updated_at = now() "
                "WHERE chain = :c AND address = :a"),
        {"c": chain, "a": address, "n": nonce + 1},
    )
    return nonce


@dataclass(frozen=True)
class Attempt:
    """A signed attempt of one movement, recorded before it was sent."""

    id: int
    kind: MovementKind
    movement_id: int
    attempt_no: int
    chain: str
    sender: str
    nonce: int
    tx_hash: str
    raw_tx: str
    max_fee_per_gas: int
    max_priority_fee_per_gas: int
    gas_limit: int
    created_at: datetime
    #: ``payout`` (the movement's own transfer) or ``cancel`` (zero-value self-transfer, same
    #: nonce, that closes the nonce of a written-off withdrawal).
    purpose: str = "payout"


def insert_attempt(conn: Connection, *, kind: MovementKind, movement_id: int, attempt_no: int,
                   chain: str, sender: str, nonce: int, tx_hash: str, raw_tx: str,
                   max_fee_per_gas: int, max_priority_fee_per_gas: int, gas_limit: int,
                   at: datetime, purpose: str = "payout") -> Attempt:
    """Record a signed attempt (before it is sent); the caller holds the movement's row lock."""
    attempt_id = int(conn.execute(
        sa.text(
            f"INSERT INTO outgoing_attempts (movement_kind, {kind.column}, attempt_no, chain, "
            " sender, nonce, tx_hash, raw_tx, max_fee_per_gas, max_priority_fee_per_gas,"
            " gas_limit, created_at, purpose)"
            " VALUES (:k, :m, :n, :c, :s, :nonce, :tx, :raw, :mf, :mp, :g, :at, :p) RETURNING id"
        ),
        {"k": kind.value, "m": movement_id, "n": attempt_no, "c": chain, "s": sender,
         "nonce": nonce, "tx": tx_hash, "raw": raw_tx, "mf": str(max_fee_per_gas),
         "mp": str(max_priority_fee_per_gas), "g": gas_limit, "at": at, "p": purpose},
    ).scalar_one())
    return Attempt(attempt_id, kind, movement_id, attempt_no, chain, sender, nonce, tx_hash,
                   raw_tx, max_fee_per_gas, max_priority_fee_per_gas, gas_limit, at, purpose)


def _attempt(kind: MovementKind, r: sa.Row[Any]) -> Attempt:
    return Attempt(r.id, kind, int(getattr(r, kind.column)), r.attempt_no, r.chain, r.sender,
                   r.nonce, r.tx_hash, r.raw_tx, to_int(r.max_fee_per_gas),
                   to_int(r.max_priority_fee_per_gas), r.gas_limit, r.created_at, r.purpose)


def list_attempts(conn: Connection, kind: MovementKind, movement_id: int) -> list[Attempt]:
    """Attempts of one movement, first first."""
    rows = conn.execute(
        sa.text(f"SELECT * FROM outgoing_attempts WHERE {kind.column} = :m ORDER BY attempt_no"),
        {"m": movement_id},
    )
    return [_attempt(kind, r) for r in rows]


def list_attempts_many(conn: Connection, kind: MovementKind,
                       movement_ids: Sequence[int]) -> dict[int, list[Attempt]]:
    """Attempts of many movements of one kind in one query, each list first first."""
    found: dict[int, list[Attempt]] = {i: [] for i in movement_ids}
    rows = conn.execute(
        sa.text(f"SELECT * FROM outgoing_attempts WHERE {kind.column} = ANY(:m) "
                f"ORDER BY {kind.column}, attempt_no"), {"m": list(movement_ids)})
    for r in rows:
        attempt = _attempt(kind, r)
        found[attempt.movement_id].append(attempt)
    return found


def movement_of_tx_hash(conn: Connection, kind: MovementKind, tx_hash: str) -> int | None:
    """The movement of ``kind`` one of whose attempts has ``tx_hash``, if any."""
    found = conn.execute(
        sa.text(f"SELECT {kind.column} FROM outgoing_attempts WHERE tx_hash = :h "
                "AND movement_kind = :k"), {"h": tx_hash, "k": kind.value}).scalar_one_or_none()
    return None if found is None else int(found)


def try_lock(conn: Connection, key: str) -> bool:
    """Lock ``key`` in ``conn``'s transaction, held until it ends (one step of one job per chain
    across processes; a killed process's transaction ends with its connection). Not a
    session-level lock: see ``api.repository.jobs``."""
    return bool(conn.execute(sa.text(
        "SELECT pg_try_advisory_xact_lock(7322, hashtext(:k))" + KEEP_LOCK_IDLE),
        {"k": key}).scalar_one())
