"""The database side of custody against the chain: the holdings report's ledger side
(``sweeps.holdings``: the same queries) and, in the same snapshot, the movements in flight by
name with their gas bounds, and how far the chain's watcher has scanned.

One read-only ``REPEATABLE READ`` transaction, opened and closed by ``read_custody_side``
before the node is called: what is named in flight is exactly what the holdings figures count.
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from config.chains import ChainConfig
from config.uow import UnitOfWork
from ledger.repository import to_int
from reconcile.chain_model import NamedMovement
from sweeps.holdings.model import LedgerSide, Line
from sweeps.holdings.repository import (
    DEPOSIT_OPEN,
    SENDING,
    WITHDRAWAL_SENDING,
    ledger_side_in,
)


@dataclass(frozen=True)
class CustodySide:
    """What the database says of one chain, in one snapshot: the holdings report's ledger side,
    the movements in flight it counts (named), and the watcher's tip (None: never scanned)."""

    ledger: LedgerSide
    movements: tuple[NamedMovement, ...]
    watcher_block: int | None


#: Each movement table: kind, sender column, destination column, token, amount column, the
#: attempts' foreign key, and whether its amount already includes its gas (a native sweep
#: sends ``available`` minus its gas: the gas is inside what leaves).
_MOVES = (
    ("sweep", "sweeps", "address", "destination", "token", "available", "sweep_id", True),
    ("gas_top_up", "gas_top_ups", "sender", "address", "NULL", "amount", "top_up_id", False),
    ("cold_transfer", "cold_transfers", "sender", "destination", "token", "amount",
     "cold_transfer_id", False),
    ("withdrawal", "withdrawals", "hot_wallet", "destination", "token", "chain_amount",
     "withdrawal_id", False),
)


def movements_in_flight(conn: Connection, chain: ChainConfig) -> list[NamedMovement]:
    """Every movement the holdings figures count as in flight or held on ``chain``, by name:
    deposits not booked yet and held ones (not those that are our own movements' arrivals:
    ``internal_transfers``), and sweeps, top-ups, cold transfers and withdrawals whose signed
    transaction may be on chain, each with the gas its dearest attempt can pay."""
    params = {"c": chain.name, "open": list(DEPOSIT_OPEN), "sending": [str(s) for s in SENDING],
              "w_sending": list(WITHDRAWAL_SENDING)}
    found: list[NamedMovement] = []
    not_ours = ("NOT EXISTS (SELECT 1 FROM internal_transfers i WHERE i.chain = d.chain "
                "AND i.tx_hash = d.tx_hash AND i.position = d.position)")
    for r in conn.execute(sa.text(
            "SELECT id, state, from_address, to_address, token, value FROM deposits d "
            f"WHERE chain = :c AND ((state = ANY(:open) AND {not_ours}) "
            "OR state = 'held_for_review') ORDER BY id"), params):
        kind = "held_deposit" if r.state == "held_for_review" else "deposit"
        found.append(NamedMovement(kind, int(r.id), str(r.state), str(r.from_address),
                                   str(r.to_address), r.token, to_int(r.value)))
    for kind, table, sender, to, token, amount, fk, gas_inside in _MOVES:
        states = ":w_sending" if kind == "withdrawal" else ":sending"
        for r in conn.execute(sa.text(
                f"SELECT m.id, m.state, m.{sender} AS sender, m.{to} AS dest, "
                f"{'m.' + token if token != 'NULL' else 'NULL'} AS token, m.{amount} AS amount, "
                "(SELECT max(a.gas_limit * a.max_fee_per_gas) FROM outgoing_attempts a "
                f" WHERE a.{fk} = m.id) AS gas_max "
                f"FROM {table} m WHERE m.chain = :c AND m.state = ANY({states}) ORDER BY m.id"),
                params):
            gas = 0 if r.gas_max is None or (gas_inside and r.token is None) else to_int(
                r.gas_max)
            found.append(NamedMovement(kind, int(r.id), str(r.state), r.sender, r.dest,
                                       r.token, to_int(r.amount), gas))
    return found


def watcher_block(conn: Connection, chain: str) -> int | None:
    """The newest block the chain's watcher has accepted (None: it has not scanned yet)."""
    recent = conn.execute(sa.text("SELECT recent FROM watcher_cursors WHERE chain = :c"),
                          {"c": chain}).scalar()
    if not recent:
        return None
    return int(recent[-1][0])


def read_custody_side(engine: Engine, chain: ChainConfig, lines: list[Line]) -> CustodySide:
    """The holdings report's ledger side of ``chain`` (as ``sweeps.holdings.repository.
    read_ledger_side`` reads it), the named movements and the watcher's tip, in one read-only
    snapshot."""
    with UnitOfWork(engine) as uow:
        uow.conn.execute(sa.text("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY"))
        return custody_side_in(uow, chain, lines)


def custody_side_in(uow: UnitOfWork, chain: ChainConfig, lines: list[Line]) -> CustodySide:
    """``read_custody_side`` inside the caller's unit of work and its snapshot (proof of
    reserves reads every chain in the snapshot of its ledger point)."""
    side = ledger_side_in(uow, chain, lines)
    movements = movements_in_flight(uow.conn, chain)
    tip = watcher_block(uow.conn, chain.name)
    return CustodySide(side, tuple(movements), tip)
