"""The holdings report's use case: per chain, the ledger side first (one snapshot, closed), then
the chain at the newest block final under its rule (one batched read, no database transaction
open meanwhile), then the pure assembly (``sweeps.holdings.model``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import replace

from sqlalchemy.engine import Engine

from chains.balances import BalanceBlockMissing, BalanceBlockReplaced, Balances, read_balances
from chains.errors import ChainError
from chains.model import Confirmations, FinalizedTag, parse_finality_rule
from chains.rpc import RpcClient
from config.chains import ChainConfig, ChainsConfig
from sweeps.holdings.errors import HoldingsUnavailable
from sweeps.holdings.model import ChainHoldings, HoldingsReport, assemble, chain_lines, final_height
from sweeps.holdings.repository import read_ledger_side

#: ``on_progress(chain, addresses_done, addresses_total)`` during the chain read.
ProgressCallback = Callable[[str, int, int], None]
#: Builds the RPC client of a chain (closed by the report when done).
RpcFactory = Callable[[ChainConfig], RpcClient]
#: Times the chain is read again when the block changed during the read (a reorg).
CHAIN_READ_ATTEMPTS_MAX = 3


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
