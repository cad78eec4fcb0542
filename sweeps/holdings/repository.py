"""The ledger side of the holdings report: what the database says of one chain, read in one
snapshot with grouped queries only (never one per address). Every function takes an open
connection or unit of work and never commits, except ``read_ledger_side``, which opens and
closes its own read-only transaction.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from config.chains import ChainConfig
from config.uow import UnitOfWork
from ledger import chart
from ledger import service as ledger
from ledger.errors import AccountNotFound, AssetNotFound
from ledger.repository import to_int
from sweeps import repository as sweeps_repo
from sweeps.holdings.model import NO_FLOWS, Flows, LedgerSide, Line
from sweeps.model import State

#: States of a sweep, top-up or cold transfer whose signed transaction may be on chain.
SENDING = (State.SIGNED, State.BROADCAST, State.UNKNOWN, State.INCLUDED)
#: The same for withdrawals (``held``: final on chain, its settlement waits for an admin).
WITHDRAWAL_SENDING = ("signed", "broadcast", "included", "unknown", "awaiting_write_off", "held")
#: Deposit states before booking (pending incoming, ``deposits.model.PENDING_STATES``).
DEPOSIT_OPEN = ("included", "unconfirmed", "final")


def _grouped(conn: Connection, sql: str, params: Mapping[str, Any]) -> list[Any]:
    return list(conn.execute(sa.text(sql), params))


def read_flows(conn: Connection, chain: ChainConfig) -> tuple[dict[tuple[str, str | None], Flows],
                                                                set[str]]:
    """The movements in flight and held deposits per (address, token), and the addresses with
    a transaction of ours in flight (the package docstring says which). Grouped queries only."""
    found: dict[tuple[str, str | None], Flows] = {}
    senders: set[str] = set()

    def add(address: str, token: str | None, **amounts: int) -> None:
        found[(address, token)] = found.get((address, token), NO_FLOWS) + Flows(**amounts)

    params = {"c": chain.name, "open": list(DEPOSIT_OPEN), "sending": [str(s) for s in SENDING],
              "w_sending": list(WITHDRAWAL_SENDING), "cold": list(chain.cold_addresses)}
    not_ours = ("NOT EXISTS (SELECT 1 FROM internal_transfers i WHERE i.chain = d.chain "
                "AND i.tx_hash = d.tx_hash AND i.position = d.position)")
    for r in _grouped(conn, "SELECT to_address, token, sum(value) AS v FROM deposits d WHERE "
                      f"chain = :c AND state = ANY(:open) AND {not_ours} GROUP BY 1, 2", params):
        add(r.to_address, r.token, incoming=to_int(r.v))
    for r in _grouped(conn, "SELECT from_address, token, sum(value) AS v FROM deposits d WHERE "
                      f"chain = :c AND state = ANY(:open) AND {not_ours} "
                      "AND from_address = ANY(:cold) GROUP BY 1, 2", params):
        add(r.from_address, r.token, outgoing=to_int(r.v))
    for r in _grouped(conn, "SELECT to_address, token, sum(value) AS v FROM deposits WHERE "
                      "chain = :c AND state = 'held_for_review' GROUP BY 1, 2", params):
        add(r.to_address, r.token, held=to_int(r.v))
    moves = [("sweeps", "address", "destination", "token", "available", ":sending"),
             ("gas_top_ups", "sender", "address", "NULL", "amount", ":sending"),
             ("cold_transfers", "sender", "destination", "token", "amount", ":sending"),
             ("withdrawals", "hot_wallet", "NULL", "token", "chain_amount", ":w_sending")]
    for table, sender, to, token, value, states in moves:
        for r in _grouped(conn, f"SELECT {sender} AS sender, {to} AS dest, {token} AS token, "
                          f"sum({value}) AS v FROM {table} WHERE chain = :c AND "
                          f"state = ANY({states}) GROUP BY 1, 2, 3", params):
            senders.add(r.sender)
            add(r.sender, r.token, outgoing=to_int(r.v))
            if r.dest is not None:  # Between our own addresses (a withdrawal leaves us).
                add(r.dest, r.token, incoming=to_int(r.v))
    return found, senders


def _ledger_balance(uow: UnitOfWork, code: str, asset: str) -> int:
    try:
        return ledger.account_balance(uow, ledger.get_account(uow, code, asset)).balance_minor
    except (AccountNotFound, AssetNotFound):
        return 0  # Nothing was ever posted there.


def read_ledger_side(engine: Engine, chain: ChainConfig, lines: Sequence[Line]) -> LedgerSide:
    """Everything the database says of ``chain``, in one read-only snapshot (REPEATABLE READ:
    every query sees the same committed state, so the ledger balances, the records and the
    movements in flight agree with each other)."""
    with UnitOfWork(engine) as uow:
        uow.conn.execute(sa.text("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY"))
        return ledger_side_in(uow, chain, lines)


def ledger_side_in(uow: UnitOfWork, chain: ChainConfig, lines: Sequence[Line]) -> LedgerSide:
    """``read_ledger_side`` inside the caller's unit of work (its snapshot: a caller that reads
    more in the same snapshot, as the custody reconciliation does, opens it REPEATABLE READ)."""
    addresses = list(uow.conn.execute(
        sa.text("SELECT address FROM deposit_addresses WHERE family = :f "
                "ORDER BY derivation_index"), {"f": chain.family}).scalars())
    records = sweeps_repo.address_records(uow.conn, chain.name)
    flows, senders = read_flows(uow.conn, chain)
    assets = list(dict.fromkeys(line.asset for line in lines))
    custody = {a: _ledger_balance(uow, chart.custody(chain.name).code, a) for a in assets}
    treasury = {a: _ledger_balance(uow, chart.treasury(chain.name).code, a) for a in assets}
    return LedgerSide(addresses, records, flows, frozenset(senders), custody, treasury)
