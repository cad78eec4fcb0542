"""Deposit fixtures: a real anvil per test, a fresh migrated database, tokens and users.

Deposit addresses come from anvil's dev mnemonic at BIP-44 account 1 (not the funded dev
accounts of account 0, which send the deposits). ``finalized`` trails ``latest`` by 4 blocks
(``slots_in_an_epoch=2``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from chains.addresses import MnemonicAddressSource
from config.chains import ChainsConfig, parse_chains_config
from config.uow import UnitOfWork
from deposits import service
from deposits.attestors import Attestor
from deposits.watcher import StepReport, Watcher
from devtools.anvil import DEV_ACCOUNTS, DEV_MNEMONIC, AnvilNode, Contract
from devtools.config import dev_config
from ledger import chart
from ledger import service as ledger

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
SLOTS_IN_AN_EPOCH = 2
ALICE, BOB, CAROL, DAVE, EVE = DEV_ACCOUNTS


@dataclass
class Tokens:
    """Test tokens on the rig's node."""

    usdc: Contract  # 6 decimals -> USDC (scale 6), minimum 1.00
    usdc18: Contract  # 18 decimals -> USDC (scale 6): exact or held
    dai: Contract  # 18 decimals -> DAI (scale 18)
    fake: Contract  # symbol USDC, not listed
    shib: Contract  # not listed


@dataclass
class Rig:
    """A chain, a database and the helpers the deposit tests share."""

    engine: Engine
    node: AnvilNode
    tokens: Tokens
    finality: str = "confirmations:3"
    attestor: str = "node"
    chain: str = "dev"
    users: dict[str, str] = field(default_factory=dict)
    #: Further keys of the chain's table (``finality_by_amount``, ``cursor_keep``,
    #: ``trace_internal``, ...).
    chain_options: dict[str, Any] = field(default_factory=dict)
    _watcher: Watcher | None = None

    @property
    def config(self) -> ChainsConfig:
        """The chain configuration of this rig."""
        t = self.tokens
        doc = dev_config(rpc_url=self.node.url, token=t.usdc.address, chain=self.chain,
                         finality=self.finality, hot_wallet=None, chain_options={
                             "native_minimum": "0.001", "attestor": self.attestor,
                             "scan_blocks_max": 50, "rpc_timeout_ms": 5000,
                             "rpc_retries_max": 2, **self.chain_options})
        # Beyond the development configuration: a second USDC contract with 18 decimals, DAI.
        doc["assets"]["DAI"] = {"scale": 18}
        doc["chains"][self.chain]["tokens"] += [
            {"contract": t.usdc18.address, "symbol": "USDC18", "asset": "USDC", "decimals": 18,
             "minimum": "0"},
            {"contract": t.dai.address, "symbol": "DAI", "asset": "DAI", "decimals": 18,
             "minimum": "0"},
        ]
        return parse_chains_config(doc)

    def watcher(self, attestor: Attestor | None = None) -> Watcher:
        """A watcher of the rig's chain (a new one: caches start empty)."""
        self._watcher = Watcher(self.engine, self.config, self.chain, attestor=attestor)
        return self._watcher

    def step(self, times: int = 1) -> StepReport:
        """Run watcher steps (the same watcher across calls); return the last report."""
        watcher = self._watcher or self.watcher()
        report = watcher.step(now=NOW)
        for _ in range(times - 1):
            report = watcher.step(now=NOW)
        return report

    def user(self, user_id: str) -> str:
        """The user's deposit address (assigned on first use)."""
        if user_id not in self.users:
            source = MnemonicAddressSource(DEV_MNEMONIC, account=1)
            with UnitOfWork(self.engine) as uow:
                self.users[user_id] = service.assign_address(uow, "evm", user_id, source)
                uow.commit()
        return self.users[user_id]

    def deposits(self, tx_hash: str) -> dict[str, Any]:
        """position -> current state of the deposits of a transaction."""
        with UnitOfWork(self.engine) as uow:
            rows = uow.conn.execute(sa.text(
                "SELECT position, state FROM deposits WHERE tx_hash = :t"), {"t": tx_hash}).all()
        return {r.position: r.state for r in rows}

    def events(self, tx_hash: str, position: str) -> list[str]:
        """The history of one deposit, as event names."""
        with UnitOfWork(self.engine) as uow:
            return list(uow.conn.execute(sa.text(
                "SELECT event FROM deposit_events WHERE tx_hash = :t AND position = :p "
                "ORDER BY id"), {"t": tx_hash, "p": position}).scalars())

    def balance(self, code: str, asset: str) -> int:
        """The normal-side balance of an account (0 if it does not exist)."""
        with UnitOfWork(self.engine) as uow:
            try:
                account = ledger.get_account(uow, code, asset)
            except Exception:  # noqa: BLE001 - AccountNotFound: nothing posted yet
                return 0
            return ledger.account_balance(uow, account).balance_minor

    def wallet(self, user_id: str, asset: str) -> int:
        """The user's wallet balance in ``asset``."""
        return self.balance(chart.user_wallet(user_id).code, asset)

    def deposit_postings(self) -> int:
        """Number of ledger transactions keyed by a deposit."""
        with UnitOfWork(self.engine) as uow:
            return int(uow.conn.execute(sa.text(
                "SELECT count(*) FROM ledger_transactions WHERE idempotency_key LIKE "
                "'deposit:%'")).scalar_one())

    def mine_to(self, height: int) -> None:
        """Mine until the head is ``height``."""
        head = self.node.head()
        if height > head:
            self.node.mine(height - head)


def deploy_tokens(node: AnvilNode) -> Tokens:
    """Deploy the test tokens and mint to the senders."""
    tokens = Tokens(
        usdc=node.deploy("TestToken", "USD Coin", "USDC", 6),
        usdc18=node.deploy("TestToken", "USD Coin 18", "USDC18", 18),
        dai=node.deploy("TestToken", "Dai", "DAI", 18),
        fake=node.deploy("TestToken", "USD Coin", "USDC", 6),
        shib=node.deploy("TestToken", "Shiba", "SHIB", 18),
    )
    for token in (tokens.usdc, tokens.usdc18, tokens.dai, tokens.fake, tokens.shib):
        for sender in (ALICE, BOB):
            node.transact(token, "mint", [sender, 2**200])
    return tokens


@pytest.fixture
def node() -> Iterator[AnvilNode]:
    """A fresh anvil for one test (automine on)."""
    with AnvilNode.start(slots_in_an_epoch=SLOTS_IN_AN_EPOCH) as n:
        yield n


@pytest.fixture
def rig(engine: Engine, node: AnvilNode) -> Rig:
    """Tokens deployed, automine OFF afterwards: tests mine their own blocks."""
    tokens = deploy_tokens(node)
    node.set_automine(False)
    return Rig(engine=engine, node=node, tokens=tokens)
