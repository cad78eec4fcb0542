"""A devnet for withdrawal tests: a fresh anvil (automine off), a USDC-like token, a hot
wallet with a fresh key funded directly (sweeping is later work), and the processor context."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import datetime, timedelta

from eth_account import Account
from eth_utils.address import to_checksum_address
from sqlalchemy.engine import Engine

from chains.evm import TRANSFER_TOPIC
from config.chains import ChainsConfig
from config.withdrawals import WithdrawalsConfig
from devtools.anvil import DEV_ACCOUNTS, AnvilNode, Contract
from withdrawals import processor
from withdrawals.processor import ChainContext, StepReport

from .conftest import T0, config_toml, load

KEY_ENV = "CUSTODY_TEST_HOT_KEY"


@dataclass
class Devnet:
    """Everything a withdrawal test needs on chain."""

    node: AnvilNode
    token: Contract
    hot: str
    key: str
    chains: ChainsConfig
    cfg: WithdrawalsConfig
    toml: str
    clock: datetime = T0

    def context(self, rpc_url: str | None = None,
                cfg: WithdrawalsConfig | None = None) -> ChainContext:
        return processor.build_context(self.chains, cfg or self.cfg, "devnet",
                                       environ={KEY_ENV: self.key}, rpc_url=rpc_url)

    def step(self, engine: Engine, ctx: ChainContext | None = None,
             cfg: WithdrawalsConfig | None = None, advance_s: float = 1.0) -> StepReport:
        self.clock += timedelta(seconds=advance_s)
        return processor.step(engine, cfg or self.cfg, ctx or self.context(), now=self.clock)

    def remote_context(self, url: str, *, timeout_ms: int = 2_000,
                       cfg: WithdrawalsConfig | None = None) -> ChainContext:
        """A processor context whose signer is the remote service at ``url``."""
        chains, remote = load(remote_toml(self.toml, url=url, timeout_ms=timeout_ms))
        if cfg is not None:
            remote = dataclasses.replace(cfg, hot_wallets=remote.hot_wallets)
        return processor.build_context(chains, remote, "devnet", environ={})

    def token_balance(self, address: str) -> int:
        return int(self.node.call(self.token, "balanceOf", [to_checksum_address(address)]))

    def transfers_to(self, address: str) -> list[dict[str, object]]:
        topic = "0x" + "0" * 24 + address.lower()[2:]
        return self.node.rpc.get_logs(0, "latest", [self.token.address],
                                      [TRANSFER_TOPIC, None, topic])


def remote_toml(toml: str, *, url: str | None = None, url_env: str | None = None,
                timeout_ms: int = 2_000) -> str:
    """The configuration ``toml`` with the hot wallet signed by a remote service (``url`` in
    the file, or the environment variable ``url_env`` naming it)."""
    where = f'signer_url = "{url}"' if url_env is None else f'signer_url_env = "{url_env}"'
    local = f'signer = "local_key"\nkey_env = "{KEY_ENV}"'
    assert local in toml
    return toml.replace(local, f'signer = "remote"\n{where}\nsigner_timeout_ms = {timeout_ms}')


def start_devnet(*, finality: str = "confirmations:3", token_units: int = 10**15,
                 automine: bool = False) -> Devnet:
    """Start anvil, deploy the token, create and fund the hot wallet."""
    node = AnvilNode.start(slots_in_an_epoch=2, no_mining=not automine)
    try:
        token = node.deploy("TestToken", "USD Coin", "USDC", 6)
        account = Account.create()
        hot = str(account.address).lower()
        node.send_eth(DEV_ACCOUNTS[0], hot, 100 * 10**18)
        node.transact(token, "mint", [to_checksum_address(hot), token_units])
        if not automine:
            node.mine(1)
        text = config_toml(token=token.address, hot=hot, rpc_url=node.url, finality=finality)
        chains, cfg = load(text)
        return Devnet(node, token, hot, "0x" + bytes(account.key).hex(), chains, cfg, text)
    except BaseException:
        node.stop()
        raise
