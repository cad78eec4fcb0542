"""The processor's side: hot wallet nonces, signed broadcast attempts, and the session-level
lock that lets one processor step run per chain."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ledger.repository import to_int


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


def try_lock_chain(conn: Connection, chain: str) -> bool:
    """Session-level lock: one processor step per chain across processes (released on close)."""
    return bool(conn.execute(sa.text("SELECT pg_try_advisory_lock(7322, hashtext(:c))"),
                             {"c": chain}).scalar_one())


def unlock_chain(conn: Connection, chain: str) -> None:
    """Release the processor lock of ``chain``."""
    conn.execute(sa.text("SELECT pg_advisory_unlock(7322, hashtext(:c))"), {"c": chain})
