"""Pure core of the holdings report: its values and its arithmetic (the parts a deposit address
should hold, the hot+cold group as the ledger's residual, the per-asset totals, the statuses),
from plain values read elsewhere. No database, no node, no clock: the package docstring
(``sweeps.holdings``) defines every figure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from chains.model import Confirmations, FinalityRule, FinalizedTag
from config.chains import ChainConfig, ChainsConfig
from sweeps.holdings.errors import HoldingsUnavailable

if TYPE_CHECKING:
    from chains.balances import Balances
    from sweeps.repository import AddressRecord

AddressKind = Literal["deposit", "hot", "cold"]
Status = Literal["ok", "in_flight", "unexplained"]


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
