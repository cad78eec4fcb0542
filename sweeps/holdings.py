"""The holdings report (``custody holdings``, ``GET /v1/admin/holdings``): per chain, address
and asset, what the chain holds at the report's block, what is moving, and what the ledger
says that address should hold. Proof of reserves is built on it (DESIGN.md sections 6a, 7).

What it reads, per chain:

- **Our addresses**: every deposit address of the chain's family (``deposit_addresses``, all
  of them: they are ours, with or without a deposit), the hot addresses and the cold addresses
  of the configuration. **Assets**: the native coin and every configured token (a *line*:
  ledger asset, token contract or None, on-chain decimals, ledger scale).
- **The block**: the newest block final under the chain's finality rule, the height the
  ledger counts from (``outgoing.chain.observe`` uses the same one): the node's ``finalized``
  block for the rule ``finalized``; ``head - N + 1`` for ``confirmations:N``. The chain is read
  at that explicit number, in JSON-RPC batches (:func:`chains.balances.read_balances`: one
  ``eth_getBalance`` and one ``balanceOf`` per token per address, the block hash checked
  before and after); a block replaced during the read is read again, at most
  ``CHAIN_READ_ATTEMPTS_MAX`` times.
- **The ledger side**, in one read-only ``REPEATABLE READ`` transaction (one snapshot), closed
  before the node is called: ``custody:{chain}`` and ``treasury:{chain}`` per asset, the
  per-address records (:func:`sweeps.repository.address_records`), the movements in flight and
  the held deposits. Every query is grouped in the database; none runs per address.

The figures (``int``, in the line's on-chain units unless named ``_minor``):

- A **deposit address** should hold ``expected = customer + treasury + suspense`` of its
  :class:`~sweeps.repository.AddressRecord`: credited deposits not swept (customer), deposits
  booked to suspense (suspense), final top-ups in minus the gas its final sweeps paid minus
  what its sweeps moved beyond the customer part (treasury; negative when customer native paid
  an earlier sweep's gas, which the ledger booked to the treasury). ``difference = on_chain -
  expected``.
- **Hot and cold addresses** have no per-address accounts in the ledger: each is listed with
  its on-chain balance and movements, and together they form the **hot+cold group**, whose
  expected figure is the ledger's residual: ``expected = (custody + treasury) - sum of the
  deposit addresses' expected``, split into ``customer = custody - sum(customer) -
  sum(suspense)`` (customer money, suspense booked at hot or cold addresses included: the
  ledger's suspense is not per chain) and ``treasury = treasury - sum(treasury)`` over the
  deposit addresses. ``custody`` and ``treasury`` are converted from ledger minor units to
  on-chain units exactly (:func:`ledger_to_chain`; a balance with digits below the token's
  unit, possible only when the ledger's scale exceeds the token's decimals, is rounded down
  and the asset says ``exact`` False).
- **Per asset**: ``on_chain`` (all our addresses), ``ledger = custody + treasury`` (also in
  ledger minor units with the scale), ``difference = on_chain - ledger``, which equals the sum
  of the deposit addresses' differences plus the group's. When nothing is in flight it is
  zero, exactly: on-chain holdings of our addresses equal custody + treasury.

**In flight** (``in_flight_in``, ``in_flight_out``) names what the engine is moving and has not
yet counted: deposits not final yet (``included``, ``unconfirmed``, ``final`` but not booked:
``value``) to the address; sweeps (``available``), gas top-ups (``amount``), cold transfers
(``amount``) and withdrawals (``chain_amount``) sent and not final (the states in which a
signed transaction may be on chain), out of their sender and, for movements between our own
addresses, into their destination (the watcher's deposit rows of those transfers are left out:
they are the same movement); and a transfer from a cold address to us that is not final (a
refill: out of the cold address). Each amount is the movement's own; the gas of transactions in
flight is not in it (booked once final), which is why a native row of an address that is
*sending* counts as having something in flight. **Held** is what came in and is held for
review (never booked until a person decides).

**Status** of a row: ``ok`` when the difference is 0; ``in_flight`` when it is not but
something in flight or held there may account for it; ``unexplained`` otherwise.

**Why a difference appears transiently, and the read order.** The ledger counts a deposit, a
sweep, a top-up or a payout only once its block is final under the rule, that is at or below
the report's block, which is chosen after the snapshot: whatever the snapshot counts is on
chain at that block. What is in flight in the snapshot may or may not be there yet, so its
difference is named (``in_flight``). What remains is what the engine did not know at the
snapshot: a deposit in a final block that the watcher has not recorded yet (positive
``unexplained`` until the watcher catches up), or a movement that was planned after the
snapshot and landed in a final block before the chain read (only on very short finality).
Reading the chain first would be worse: a deposit credited between the two reads would be in
the ledger and above the block read. A quiet system (tests settle everything first) gives a
deterministic report with every difference 0.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from chains.balances import BalanceBlockMissing, BalanceBlockReplaced, Balances, read_balances
from chains.errors import ChainError
from chains.model import Confirmations, FinalityRule, FinalizedTag, parse_finality_rule
from chains.rpc import RpcClient
from config.chains import ChainConfig, ChainsConfig
from config.errors import CustodyError
from config.uow import UnitOfWork
from ledger import chart
from ledger import service as ledger
from ledger.errors import AccountNotFound, AssetNotFound
from ledger.repository import to_int
from sweeps import repository as repo
from sweeps.model import State
from sweeps.repository import AddressRecord

AddressKind = Literal["deposit", "hot", "cold"]
Status = Literal["ok", "in_flight", "unexplained"]
#: ``on_progress(chain, addresses_done, addresses_total)`` during the chain read.
ProgressCallback = Callable[[str, int, int], None]
#: Builds the RPC client of a chain (closed by the report when done).
RpcFactory = Callable[[ChainConfig], RpcClient]

#: Times the chain is read again when the block changed during the read (a reorg).
CHAIN_READ_ATTEMPTS_MAX = 3
#: States of a sweep, top-up or cold transfer whose signed transaction may be on chain.
SENDING = (State.SIGNED, State.BROADCAST, State.UNKNOWN, State.INCLUDED)
#: The same for withdrawals (``held``: final on chain, its settlement waits for an admin).
WITHDRAWAL_SENDING = ("signed", "broadcast", "included", "unknown", "awaiting_write_off", "held")
#: Deposit states before booking (pending incoming, ``deposits.model.PENDING_STATES``).
DEPOSIT_OPEN = ("included", "unconfirmed", "final")


class HoldingsUnavailable(CustodyError):
    """The report of a chain cannot be made exactly: its node did not answer, has no final
    block, answered nonsense, or the chain maps two on-chain sources to one ledger asset.
    ``retryable`` says whether asking again later can help."""

    code = "holdings_unavailable"

    def __init__(self, message: str, *, chain: str, retryable: bool = True) -> None:
        super().__init__(message)
        self.chain = chain
        self.retryable = retryable


# --------------------------------------------------------------------------- values


@dataclass(frozen=True)
class Line:
    """One on-chain asset of a chain: the ledger ``asset``, its ``token`` contract (None: the
    native coin), the token's on-chain ``decimals`` and the ledger asset's ``scale``."""

    asset: str
    token: str | None
    decimals: int
    scale: int


@dataclass(frozen=True)
class Flows:
    """What is moving at an address (or a group of them), in on-chain units, all >= 0."""

    incoming: int = 0
    outgoing: int = 0
    held: int = 0

    def __add__(self, other: Flows) -> Flows:
        return Flows(self.incoming + other.incoming, self.outgoing + other.outgoing,
                     self.held + other.held)

    @property
    def any(self) -> bool:
        """Whether anything is in flight or held."""
        return bool(self.incoming or self.outgoing or self.held)


NO_FLOWS = Flows()


@dataclass(frozen=True)
class Parts:
    """What the ledger says an address (or the hot+cold group) should hold, by owner."""

    customer: int = 0
    treasury: int = 0
    suspense: int = 0

    @property
    def expected(self) -> int:
        """The whole: customer + treasury + suspense."""
        return self.customer + self.treasury + self.suspense

    def __add__(self, other: Parts) -> Parts:
        return Parts(self.customer + other.customer, self.treasury + other.treasury,
                     self.suspense + other.suspense)


NO_PARTS = Parts()


def status_of(difference: int, flows: Flows, sending: bool) -> Status:
    """``ok`` (no difference), ``in_flight`` (something moving or held, or a transaction of
    ours that pays gas, may account for it) or ``unexplained``."""
    if difference == 0:
        return "ok"
    return "in_flight" if flows.any or sending else "unexplained"


@dataclass(frozen=True)
class AddressHolding:
    """One of our addresses and one line. ``parts`` is None for hot and cold addresses (the
    ledger has no per-address accounts for them: see the group). ``sending``: a transaction of
    ours from this address is in flight (it pays gas in the native coin)."""

    address: str
    kind: AddressKind
    line: Line
    on_chain: int
    flows: Flows = NO_FLOWS
    sending: bool = False
    parts: Parts | None = None

    @property
    def difference(self) -> int | None:
        """``on_chain - expected`` (None for hot and cold addresses)."""
        return None if self.parts is None else self.on_chain - self.parts.expected

    @property
    def status(self) -> Status | None:
        """The row's status (None for hot and cold addresses)."""
        diff = self.difference
        return None if diff is None else status_of(
            diff, self.flows, self.sending and self.line.token is None)


@dataclass(frozen=True)
class GroupHolding:
    """The hot and cold addresses of a chain together, for one line: their on-chain sum and
    the ledger's residual (module docstring)."""

    on_chain: int
    parts: Parts
    flows: Flows = NO_FLOWS
    sending: bool = False
    exact: bool = True

    @property
    def difference(self) -> int:
        """``on_chain - parts.expected``."""
        return self.on_chain - self.parts.expected

    @property
    def status(self) -> Status:
        """The group's status."""
        return status_of(self.difference, self.flows, self.sending)


@dataclass(frozen=True)
class AssetHoldings:
    """One line of a chain in total: all our addresses against custody + treasury."""

    line: Line
    #: Every address we control, on chain at the report's block.
    on_chain: int
    #: The ledger's balances, in the asset's minor units (``line.scale``).
    custody_minor: int
    treasury_minor: int
    #: The same in on-chain units (rounded down when not exact: ``exact``).
    custody: int
    treasury: int
    #: The deposit addresses' expected figures summed.
    deposits_expected: int
    flows: Flows
    sending: bool
    group: GroupHolding
    #: How many addresses were read (deposit, hot and cold).
    addresses: int

    @property
    def ledger(self) -> int:
        """``custody + treasury`` in on-chain units."""
        return self.custody + self.treasury

    @property
    def ledger_minor(self) -> int:
        """``custody_minor + treasury_minor``."""
        return self.custody_minor + self.treasury_minor

    @property
    def exact(self) -> bool:
        """False when the ledger's figures had digits below the token's unit (rounded down)."""
        return self.group.exact

    @property
    def difference(self) -> int:
        """``on_chain - ledger``: the deposit addresses' differences plus the group's."""
        return self.on_chain - self.ledger

    @property
    def status(self) -> Status:
        """The asset's status."""
        return status_of(self.difference, self.flows,
                         self.sending and self.line.token is None)


@dataclass(frozen=True)
class ChainHoldings:
    """The report of one chain. ``addresses`` lists hot and cold addresses always and deposit
    addresses with anything non-zero (all of them with ``include_empty``): hot, cold, then
    deposit addresses by derivation index, each with its lines (native first)."""

    chain: str
    finality: str
    block_number: int
    block_hash: str
    deposit_addresses: int
    hot_addresses: int
    cold_addresses: int
    assets: tuple[AssetHoldings, ...]
    addresses: tuple[AddressHolding, ...]
    ledger_read_s: float = 0.0
    chain_read_s: float = 0.0


@dataclass(frozen=True)
class HoldingsReport:
    """The report, chain by chain (sorted by name)."""

    chains: tuple[ChainHoldings, ...]


# --------------------------------------------------------------------------- pure arithmetic


def final_height(rule: FinalityRule, head: int, finalized: int | None) -> int | None:
    """The newest block final under ``rule`` (None: none yet): the node's ``finalized`` block,
    or ``head - N + 1`` for ``confirmations:N`` (a block there has N confirmations)."""
    if isinstance(rule, Confirmations):
        height = head - rule.required + 1
        return height if height >= 0 else None
    assert isinstance(rule, FinalizedTag), rule
    return finalized


def ledger_to_chain(amount_minor: int, scale: int, decimals: int) -> tuple[int, bool]:
    """Ledger minor units as on-chain units and whether that was exact. More decimals on chain
    multiply exactly; fewer divide, rounding toward minus infinity when digits remain below the
    token's unit (then False). Unlike ``withdrawals.model.to_chain_units`` this takes any sign
    and never raises: a report shows what it finds."""
    if decimals >= scale:
        return amount_minor * 10 ** (decimals - scale), True
    quotient, remainder = divmod(amount_minor, 10 ** (scale - decimals))
    return quotient, remainder == 0


def group_parts(custody: int, treasury: int, deposits: Parts) -> Parts:
    """The hot+cold group's share of the ledger: what custody and treasury (on-chain units)
    hold beyond the deposit addresses' parts (``deposits``, summed). Suspense is customer
    money in custody; the group's customer part includes what suspense holds there."""
    return Parts(customer=custody - deposits.customer - deposits.suspense,
                 treasury=treasury - deposits.treasury)


def parts_of(record: AddressRecord | None) -> Parts:
    """A deposit address's parts from its records (all zero without any)."""
    if record is None:
        return NO_PARTS
    return Parts(record.customer, record.treasury, record.suspense)


@dataclass(frozen=True)
class LedgerSide:
    """What the database says of one chain, read in one snapshot. Keys are (address, token)
    with token None for the native coin; amounts in on-chain units except the balances."""

    deposit_addresses: Sequence[str]
    records: Mapping[tuple[str, str | None], AddressRecord]
    flows: Mapping[tuple[str, str | None], Flows]
    #: Addresses with a transaction of ours in flight.
    senders: frozenset[str]
    custody_minor: Mapping[str, int]
    treasury_minor: Mapping[str, int]


@dataclass
class _Totals:
    """Running sums of one line over some addresses (plain ints: 100,000 addresses pass)."""

    on_chain: int = 0
    customer: int = 0
    treasury: int = 0
    suspense: int = 0
    incoming: int = 0
    outgoing: int = 0
    held: int = 0
    sending: bool = False

    @property
    def parts(self) -> Parts:
        return Parts(self.customer, self.treasury, self.suspense)

    @property
    def flows(self) -> Flows:
        return Flows(self.incoming, self.outgoing, self.held)


def _line_rows(line: Line, owned: Sequence[tuple[str, AddressKind]], side: LedgerSide,
               balances: Balances, include_empty: bool,
               ) -> tuple[list[tuple[int, AddressHolding]], _Totals, _Totals]:
    """One line over every address: the listed rows (with the address's position), and the
    sums over the deposit addresses and over the hot and cold ones."""
    deposits, group = _Totals(), _Totals()
    rows: list[tuple[int, AddressHolding]] = []
    token = line.token
    for i, (address, kind) in enumerate(owned):
        key = (address, token)
        on_chain = (balances.native_minor[address] if token is None
                    else balances.tokens_minor[(address, token)])
        flows = side.flows.get(key, NO_FLOWS)
        sending = address in side.senders
        into = deposits if kind == "deposit" else group
        into.on_chain += on_chain
        if flows is not NO_FLOWS:
            into.incoming += flows.incoming
            into.outgoing += flows.outgoing
            into.held += flows.held
        into.sending = into.sending or sending
        parts: Parts | None = None
        if kind == "deposit":
            parts = parts_of(side.records.get(key))
            if parts is not NO_PARTS:
                into.customer += parts.customer
                into.treasury += parts.treasury
                into.suspense += parts.suspense
            if not (include_empty or on_chain or parts != NO_PARTS or flows.any):
                continue
        rows.append((i, AddressHolding(address, kind, line, on_chain, flows, sending, parts)))
    return rows, deposits, group


def assemble(chain: ChainConfig, lines: Sequence[Line], side: LedgerSide, balances: Balances,
             *, include_empty: bool = False) -> ChainHoldings:
    """The report of one chain from what was read (pure)."""
    owned: list[tuple[str, AddressKind]] = [
        *((a, "hot") for a in chain.hot_addresses), *((a, "cold") for a in chain.cold_addresses),
        *((a, "deposit") for a in side.deposit_addresses)]
    listed: list[tuple[int, int, AddressHolding]] = []
    assets = []
    for j, line in enumerate(lines):
        rows, d, g = _line_rows(line, owned, side, balances, include_empty)
        listed += ((i, j, h) for i, h in rows)
        custody_minor = side.custody_minor.get(line.asset, 0)
        treasury_minor = side.treasury_minor.get(line.asset, 0)
        custody, exact_c = ledger_to_chain(custody_minor, line.scale, line.decimals)
        treasury, exact_t = ledger_to_chain(treasury_minor, line.scale, line.decimals)
        hot_cold = GroupHolding(g.on_chain, group_parts(custody, treasury, d.parts), g.flows,
                                g.sending, exact_c and exact_t)
        assets.append(AssetHoldings(
            line=line, on_chain=d.on_chain + g.on_chain, custody_minor=custody_minor,
            treasury_minor=treasury_minor, custody=custody, treasury=treasury,
            deposits_expected=d.parts.expected, flows=d.flows + g.flows,
            sending=d.sending or g.sending, group=hot_cold, addresses=len(owned)))
    # Address by address (hot, cold, deposit addresses by derivation index), native first.
    listed.sort(key=lambda row: (row[0], row[1]))
    return ChainHoldings(
        chain=chain.name, finality=chain.finality, block_number=balances.block_number,
        block_hash=balances.block_hash, deposit_addresses=len(side.deposit_addresses),
        hot_addresses=len(chain.hot_addresses), cold_addresses=len(chain.cold_addresses),
        assets=tuple(assets), addresses=tuple(h for _, _, h in listed))


def chain_lines(config: ChainsConfig, chain: ChainConfig) -> list[Line]:
    """The native coin, then each configured token. A ledger asset with two on-chain sources on
    one chain (two tokens, or a token and the coin) raises HoldingsUnavailable: custody per
    asset could not be split between them exactly."""
    lines = [Line(chain.native_asset, None, chain.native_decimals,
                  config.assets[chain.native_asset].scale)]
    lines += [Line(t.asset, t.contract, t.decimals, config.assets[t.asset].scale)
              for t in chain.tokens]
    seen = [line.asset for line in lines]
    twice = sorted({a for a in seen if seen.count(a) > 1})
    if twice:
        raise HoldingsUnavailable(
            f"{chain.name}: asset {twice[0]} has more than one on-chain source; the holdings "
            "report needs one token (or the coin) per ledger asset and chain",
            chain=chain.name, retryable=False)
    return lines


# --------------------------------------------------------------------------- the ledger side


def _grouped(conn: Connection, sql: str, params: Mapping[str, Any]) -> list[Any]:
    return list(conn.execute(sa.text(sql), params))


def read_flows(conn: Connection, chain: ChainConfig) -> tuple[dict[tuple[str, str | None], Flows],
                                                                set[str]]:
    """The movements in flight and held deposits per (address, token), and the addresses with
    a transaction of ours in flight (module docstring). Grouped queries only."""
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
        addresses = list(uow.conn.execute(
            sa.text("SELECT address FROM deposit_addresses WHERE family = :f "
                    "ORDER BY derivation_index"), {"f": chain.family}).scalars())
        records = repo.address_records(uow.conn, chain.name)
        flows, senders = read_flows(uow.conn, chain)
        assets = list(dict.fromkeys(line.asset for line in lines))
        custody = {a: _ledger_balance(uow, chart.custody(chain.name).code, a) for a in assets}
        treasury = {a: _ledger_balance(uow, chart.treasury(chain.name).code, a) for a in assets}
    return LedgerSide(addresses, records, flows, frozenset(senders), custody, treasury)


# --------------------------------------------------------------------------- the chain side


def default_rpc(chain: ChainConfig) -> RpcClient:
    """An RPC client with the chain's timeout and retry budget (as the watcher's)."""
    return RpcClient(chain.rpc_url, rpc_timeout_ms=chain.rpc_timeout_ms,
                     retries_max=chain.rpc_retries_max)


def read_chain_side(rpc: RpcClient, chain: ChainConfig, addresses: Sequence[str],
                    tokens: Sequence[str], *,
                    on_progress: Callable[[int, int], None] | None = None) -> Balances:
    """Balances of ``addresses`` at the newest block final under the chain's rule (read again
    if that block is replaced during the read); HoldingsUnavailable when the node cannot
    give them."""
    rule = parse_finality_rule(chain.finality)
    for attempt in range(1, CHAIN_READ_ATTEMPTS_MAX + 1):
        try:
            head = rpc.block_number() if isinstance(rule, Confirmations) else 0
            finalized = None
            if isinstance(rule, FinalizedTag):
                header = rpc.get_block("finalized")
                finalized = None if header is None else header.number
            height = final_height(rule, head, finalized)
            if height is None:
                raise HoldingsUnavailable(f"{chain.name}: the node has no block final under "
                                          f"{rule} yet", chain=chain.name)
            return read_balances(rpc, height, addresses, tokens, on_progress=on_progress)
        except (BalanceBlockReplaced, BalanceBlockMissing) as exc:
            if attempt == CHAIN_READ_ATTEMPTS_MAX:
                raise HoldingsUnavailable(f"{chain.name}: {exc.message}",
                                          chain=chain.name) from exc
        except ChainError as exc:
            raise HoldingsUnavailable(f"{chain.name}: the node could not be read: "
                                      f"{exc.message}", chain=chain.name,
                                      retryable=exc.retryable) from exc
    raise AssertionError("unreachable")


# --------------------------------------------------------------------------- the service


def chain_holdings(engine: Engine, config: ChainsConfig, chain: ChainConfig, *,
                   rpc_factory: RpcFactory = default_rpc,
                   on_progress: ProgressCallback | None = None,
                   include_empty: bool = False) -> ChainHoldings:
    """The report of one chain: the ledger side first (one snapshot, then closed), then the
    chain at the final block (no database transaction open meanwhile)."""
    lines = chain_lines(config, chain)
    started = time.perf_counter()
    side = read_ledger_side(engine, chain, lines)
    ledger_s = time.perf_counter() - started
    owned = [*chain.hot_addresses, *chain.cold_addresses, *side.deposit_addresses]
    progress = None if on_progress is None else (
        lambda done, total: on_progress(chain.name, done, total))
    with rpc_factory(chain) as rpc:
        balances = read_chain_side(rpc, chain, owned,
                                   [line.token for line in lines if line.token is not None],
                                   on_progress=progress)
    chain_s = time.perf_counter() - started - ledger_s
    report = assemble(chain, lines, side, balances, include_empty=include_empty)
    return replace(report, ledger_read_s=ledger_s, chain_read_s=chain_s)


def holdings(engine: Engine, config: ChainsConfig, chain: str | None = None, *,
             rpc_factory: RpcFactory = default_rpc, on_progress: ProgressCallback | None = None,
             include_empty: bool = False) -> HoldingsReport:
    """The holdings report of ``chain`` (None: every configured chain, by name).

    Takes the engine, not a unit of work: each chain's ledger side is read in a snapshot of its
    own that is closed before its node is called. Raises ConfigurationInvalid for an unknown
    chain and HoldingsUnavailable when a chain's figures cannot be read exactly (the whole
    report then: proof of reserves takes every chain or none).
    """
    names = [config.chain(chain).name] if chain is not None else sorted(config.chains)
    return HoldingsReport(tuple(
        chain_holdings(engine, config, config.chain(name), rpc_factory=rpc_factory,
                       on_progress=on_progress, include_empty=include_empty)
        for name in names))


# --------------------------------------------------------------------------- JSON


def units_json(value: int, decimals: int) -> dict[str, str]:
    """An amount in on-chain units for JSON: ``{"minor": ..., "decimal": ...}``, strings (any
    size: a uint256 balance may exceed the ledger's 128-bit range)."""
    if value == 0:  # Most figures of a large report: no string arithmetic.
        return {"minor": "0", "decimal": _ZEROS.get(decimals) or _zero(decimals)}
    sign, digits = ("-" if value < 0 else ""), str(abs(value))
    if decimals == 0:
        return {"minor": str(value), "decimal": sign + digits}
    digits = digits.rjust(decimals + 1, "0")
    return {"minor": str(value), "decimal": f"{sign}{digits[:-decimals]}.{digits[-decimals:]}"}


_ZEROS: dict[int, str] = {}


def _zero(decimals: int) -> str:
    _ZEROS[decimals] = "0." + "0" * decimals if decimals else "0"
    return _ZEROS[decimals]


def _flows_json(flows: Flows, decimals: int) -> dict[str, Any]:
    return {"in_flight_in": units_json(flows.incoming, decimals),
            "in_flight_out": units_json(flows.outgoing, decimals),
            "held": units_json(flows.held, decimals)}


def _parts_json(parts: Parts, decimals: int) -> dict[str, Any]:
    return {"expected": units_json(parts.expected, decimals),
            "customer": units_json(parts.customer, decimals),
            "treasury": units_json(parts.treasury, decimals),
            "suspense": units_json(parts.suspense, decimals)}


def address_json(h: AddressHolding) -> dict[str, Any]:
    """One address row for JSON (hot and cold: the ledger figures are null)."""
    d = h.line.decimals
    parts = (dict.fromkeys(("expected", "customer", "treasury", "suspense")) if h.parts is None
             else _parts_json(h.parts, d))
    diff = h.difference
    return {"address": h.address, "kind": h.kind, "asset": h.line.asset, "token": h.line.token,
            "on_chain": units_json(h.on_chain, d), **parts,
            "difference": None if diff is None else units_json(diff, d),
            **_flows_json(h.flows, d), "sending": h.sending, "status": h.status}


def asset_json(a: AssetHoldings) -> dict[str, Any]:
    """One asset's totals for JSON: on-chain units, and the ledger's own figures (minor units of
    the asset's scale) under ``ledger``."""
    d, s, g = a.line.decimals, a.line.scale, a.group
    return {
        "asset": a.line.asset, "token": a.line.token, "decimals": d,
        "on_chain": units_json(a.on_chain, d), "custody": units_json(a.custody, d),
        "treasury": units_json(a.treasury, d),
        "custody_plus_treasury": units_json(a.ledger, d),
        "difference": units_json(a.difference, d),
        "deposits_expected": units_json(a.deposits_expected, d), **_flows_json(a.flows, d),
        "sending": a.sending, "status": a.status, "exact": a.exact, "addresses": a.addresses,
        "ledger": {"scale": s, "custody": units_json(a.custody_minor, s),
                   "treasury": units_json(a.treasury_minor, s),
                   "custody_plus_treasury": units_json(a.ledger_minor, s)},
        "hot_cold": {"on_chain": units_json(g.on_chain, d), **_parts_json(g.parts, d),
                     "difference": units_json(g.difference, d), **_flows_json(g.flows, d),
                     "sending": g.sending, "status": g.status}}


def report_json(report: HoldingsReport) -> dict[str, Any]:
    """The whole report as JSON-ready data (every amount a string; the API's schema
    ``api.schemas.Holdings`` and ``custody holdings --json`` both give this shape)."""
    return {"chains": [{
        "chain": c.chain, "finality": c.finality, "block_number": c.block_number,
        "block_hash": c.block_hash, "deposit_addresses": c.deposit_addresses,
        "hot_addresses": c.hot_addresses, "cold_addresses": c.cold_addresses,
        "ledger_read_ms": round(c.ledger_read_s * 1000), "chain_read_ms":
            round(c.chain_read_s * 1000),
        "assets": [asset_json(a) for a in c.assets],
        "addresses": [address_json(h) for h in c.addresses]} for c in report.chains]}

