"""What every phase of a step shares: the chain's context (``ChainContext``: its configuration,
hot wallet, node client, signer and finality rule), how it is built from the configuration
(``build_context``) and checked against its node before anything is signed
(``check_configuration``), the counts of one step (``StepReport``), the loggers, the actor the
processor writes history rows as, the states it tracks, and the read of one phase's batch of
withdrawal ids (``_ids``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.engine import Engine

from chains.model import FinalityRule, parse_finality_rule
from chains.rpc import RpcClient
from config.chains import ChainConfig
from config.uow import UnitOfWork
from config.withdrawals import HotWalletConfig, WithdrawalsConfig
from outgoing.chain import FeePolicy
from outgoing.signer import Signer
from withdrawals import repository as repo
from withdrawals.errors import SignerUnavailable
from withdrawals.model import State

log = logging.getLogger("withdrawals.processor")
#: What operations page on: a payout that waits for the treasury, a withdrawal held.
alerts = logging.getLogger("custody.alerts")
ACTOR = "processor"
TRACKED = (State.BROADCAST, State.INCLUDED, State.UNKNOWN, State.AWAITING_WRITE_OFF)


@dataclass
class ChainContext:
    """What a processor needs for one chain."""

    chain: ChainConfig
    hot: HotWalletConfig
    rpc: RpcClient
    signer: Signer
    rule: FinalityRule = field(init=False)
    fees: FeePolicy = field(init=False)

    def __post_init__(self) -> None:
        self.rule = parse_finality_rule(self.chain.finality)
        self.fees = FeePolicy(self.hot.priority_fee_wei, self.hot.max_fee_per_gas_cap_wei)
        if self.signer.address != self.hot.address:
            raise SignerUnavailable(f"signer key is for {self.signer.address}, "
                                    f"not the hot wallet {self.hot.address}")


@dataclass
class StepReport:
    """Counts of what one step did."""

    signed: int = 0
    sent: int = 0
    tracked: int = 0
    settled: int = 0
    released: int = 0
    cancels_signed: int = 0
    nonces_closed: int = 0
    gas_waiting: int = 0
    held: int = 0
    skipped_locked: bool = False


def _ids(engine: Engine, cfg: WithdrawalsConfig, chain: str,
         states: tuple[State, ...]) -> list[int]:
    with UnitOfWork(engine) as uow:
        return repo.list_ids_in_states(uow.conn, chain, states, cfg.batch_max)


def build_context(chains: Any, cfg: WithdrawalsConfig, chain_name: str, *,
                  environ: dict[str, str] | None = None,
                  rpc_url: str | None = None) -> ChainContext:
    """The context of one chain from the configuration, with the signer its hot wallet names
    (``outgoing.signer.signer_for``: a local key or a remote signing service; the key or a
    secret URL comes from ``environ``, which defaults to ``os.environ``)."""
    from outgoing.signer import signer_for

    chain = chains.chain(chain_name)
    hot = cfg.hot_wallet(chain_name)
    rpc = RpcClient(rpc_url or chain.rpc_url, rpc_timeout_ms=chain.rpc_timeout_ms,
                    retries_max=chain.rpc_retries_max, backoff_ms=20, backoff_max_ms=200)
    return ChainContext(chain, hot, rpc, signer_for(hot, environ=environ))


def check_configuration(ctx: ChainContext) -> list[str]:
    """The chain's configuration against its node before anything is signed (``chains.probe``:
    ``eth_chainId`` and each listed token's ``decimals()``): one line per mismatch, empty when
    they agree. The scheduler runs the same check in ``api.jobs.ChainGate``; this is for the
    processor started on its own (``python -m withdrawals.processor``)."""
    from chains.probe import ChainExpected, TokenExpected, probe

    expected = ChainExpected(ctx.chain.name, ctx.chain.chain_id, tuple(
        TokenExpected(t.contract, t.decimals, t.symbol) for t in ctx.chain.tokens))
    return [f.line() for f in probe(ctx.rpc, expected).mismatches]
