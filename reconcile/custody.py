"""Custody against the chain (``custody reconcile custody``, job ``reconcile.custody:<chain>``):
per chain, holder and asset, the on-chain holdings of all our addresses at the final block
against ``custody + treasury``, allowing only for the movements in flight that the engine can
name (``reconcile.chain_model`` says how).

It is the holdings report (``sweeps.holdings``) judged: the same ledger side (read here in one
snapshot together with the named movements and the watcher's tip), the same chain read
(``read_chain_side``: the newest final block, batched, the block hash checked), the same
assembly. Holders: each deposit address (the ledger has its parts), and the hot and cold
addresses together (the ledger's residual: it has no per-address accounts for them); a chain
whose only hot or cold address is one address judges it under that address.

A finding per unexplained position, type ``custody_chain_mismatch``, subject
``custody:<chain>:<holder>:<asset>``, expected (the ledger's figure) and observed (the chain's),
in on-chain units. Nothing is written here: the caller records the findings as cases.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from sqlalchemy.engine import Engine

from config.chains import ChainConfig, ChainsConfig
from reconcile.chain_model import NamedMovement, Position, Verdict, evidence, holder_of, verdicts
from reconcile.model import Finding
from reconcile.repository.custody import read_custody_side
from sweeps.holdings import ChainHoldings, RpcFactory, assemble, chain_lines, default_rpc
from sweeps.holdings import read_chain_side as read_chain

#: The case type of every finding of this check.
FINDING_TYPE = "custody_chain_mismatch"


@dataclass(frozen=True)
class CustodyCheck:
    """One chain checked: the report's block, the watcher's tip, every position judged."""

    chain: str
    finality: str
    block_number: int
    block_hash: str
    watcher_block: int | None
    verdicts: tuple[Verdict, ...]
    #: Each hot and cold address's own balance per asset (the group is judged as a whole: the
    #: ledger has no per-address accounts for them; these say which address moved).
    group_on_chain: Mapping[tuple[str, str], int] = field(default_factory=dict)

    @property
    def incoming_known(self) -> bool:
        """Whether the watcher had scanned up to the report's block."""
        return self.watcher_block is not None and self.watcher_block >= self.block_number

    @property
    def findings(self) -> list[Finding]:
        """One finding per unexplained position."""
        context = {"check": "custody", "block_number": self.block_number,
                   "block_hash": self.block_hash, "finality": self.finality,
                   "watcher_block": self.watcher_block}
        return [Finding(type=FINDING_TYPE, subject=v.position.subject,
                        refs={"chain": self.chain, "holder": v.position.holder,
                              "asset": v.position.asset},
                        expected=str(v.position.expected), observed=str(v.position.on_chain),
                        evidence={**evidence(v, context), **self._by_address(v.position)})
                for v in self.verdicts if not v.explained]

    def _by_address(self, p: Position) -> dict[str, object]:
        if len(p.addresses) < 2:
            return {}
        return {"on_chain_by_address": {a: str(self.group_on_chain.get((a, p.asset), 0))
                                        for a in p.addresses}}


def positions(report: ChainHoldings, chain: ChainConfig,
              movements: Sequence[NamedMovement]) -> list[Position]:
    """Every deposit address listed by the report (those with anything on chain, in the
    ledger or moving) and the hot+cold group, per line, with each holder's gas bound (the sum
    over its movements in flight; the native line only)."""
    gas: dict[str, int] = {}
    for m in movements:
        if m.sender is not None and m.gas_max:
            gas[m.sender] = gas.get(m.sender, 0) + m.gas_max
    group = (*chain.hot_addresses, *chain.cold_addresses)
    found = []
    for h in report.addresses:
        if h.kind != "deposit" or h.parts is None:
            continue
        found.append(Position(
            chain.name, h.address, (h.address,), h.line.asset, h.line.token, h.line.decimals,
            h.on_chain, h.parts.expected, h.flows.incoming, h.flows.outgoing, h.flows.held,
            gas.get(h.address, 0) if h.line.token is None else 0))
    holder = holder_of(group[0], group) if group else "hot+cold"
    for a in report.assets:
        g = a.group
        found.append(Position(
            chain.name, holder, group, a.line.asset, a.line.token, a.line.decimals, g.on_chain,
            g.parts.expected, g.flows.incoming, g.flows.outgoing, g.flows.held,
            sum(gas.get(x, 0) for x in group) if a.line.token is None else 0))
    return found


def check(engine: Engine, config: ChainsConfig, chain_name: str, *,
          rpc_factory: RpcFactory = default_rpc) -> CustodyCheck:
    """Judge one chain: the database side first (one snapshot, closed), then the chain at the
    newest final block (no database transaction open meanwhile), then the pure judgement.
    Raises ConfigurationInvalid for an unknown chain and HoldingsUnavailable when the node
    cannot give exact figures (nothing is judged then)."""
    chain = config.chain(chain_name)
    lines = chain_lines(config, chain)
    side = read_custody_side(engine, chain, lines)
    owned = [*chain.hot_addresses, *chain.cold_addresses, *side.ledger.deposit_addresses]
    with rpc_factory(chain) as rpc:
        balances = read_chain(rpc, chain, owned,
                              [line.token for line in lines if line.token is not None])
    report = assemble(chain, lines, side.ledger, balances)
    height = report.block_number
    incoming_known = side.watcher_block is not None and side.watcher_block >= height
    judged = verdicts(positions(report, chain, side.movements), side.movements,
                      incoming_known=incoming_known)
    group = {(h.address, h.line.asset): h.on_chain for h in report.addresses
             if h.kind != "deposit"}
    return CustodyCheck(chain.name, chain.finality, height, report.block_hash,
                        side.watcher_block, tuple(judged), group)


def run(engine: Engine, config: ChainsConfig, chain_name: str, *,
        rpc_factory: RpcFactory = default_rpc) -> list[Finding]:
    """The findings of one chain (``check(...).findings``)."""
    return check(engine, config, chain_name, rpc_factory=rpc_factory).findings
