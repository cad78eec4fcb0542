"""Sweep fixtures: a real anvil, a fresh migrated database, deposit addresses from the
development mnemonic (BIP-44 account 1, so the sweeper can sign for them), a hot wallet with a
fresh key funded through a declared treasury funding (company capital, as in production), and
the sweeper's context.

Automine stays on (every transaction lands in its own block); ``settle`` mines the blocks that
finality (``confirmations:3``) needs and runs the watcher and the sweeper until nothing moves.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from eth_account import Account
from eth_utils.address import to_checksum_address
from sqlalchemy.engine import Engine

from chains.addresses import MnemonicAddressSource
from chains.evm import TRANSFER_TOPIC
from config.chains import ChainsConfig
from config.sweeps import SweepsConfig, parse_sweeps_config
from config.uow import UnitOfWork
from config.withdrawals import WithdrawalsConfig
from deposits import own
from deposits import service as deposits
from deposits.watcher import Watcher
from devtools.anvil import DEV_ACCOUNTS, DEV_MNEMONIC, AnvilNode, Contract
from devtools.config import dev_config, dev_configs, to_toml
from ledger import chart
from ledger import service as ledger
from sweeps import repository as sweeps_repo
from sweeps import runner
from sweeps.model import TERMINAL, Kind, State
from sweeps.sending import StepReport, SweepContext

T0 = datetime(2026, 12, 2, 9, 0, tzinfo=UTC)
CHAIN = "dev"
ROOT = Path(__file__).resolve().parents[2]
MNEMONIC_ENV = "CUSTODY_TEST_DEPOSIT_MNEMONIC"
HOT_KEY_ENV = "CUSTODY_TEST_SWEEP_HOT_KEY"
ALICE, BOB = DEV_ACCOUNTS[0], DEV_ACCOUNTS[1]
ETH, USDC = 10**18, 10**6


def sweeps_section(**assets: dict[str, Any]) -> dict[str, Any]:
    """A ``[sweeps]`` section: ETH and USDC swept above small thresholds, unless overridden."""
    eth = {"chain": CHAIN, "asset": "ETH", "threshold": "0.01", **assets.get("ETH", {})}
    usdc = {"chain": CHAIN, "asset": "USDC", "threshold": "1", **assets.get("USDC", {})}
    return {"dust_gas_share_percent": 10, "bump_after_s": 600, "assets": [eth, usdc]}


@dataclass
class SweepRig:
    """A chain, a database, the configuration, and the helpers sweep tests share."""

    engine: Engine
    node: AnvilNode
    usdc: Contract
    hot: str
    hot_key: str
    doc: dict[str, Any]
    clock: datetime = T0
    users: dict[str, str] = field(default_factory=dict)
    _watcher: Watcher | None = None

    @property
    def chains(self) -> ChainsConfig:
        """The chain configuration."""
        return dev_configs(self.doc)[0]

    @property
    def wcfg(self) -> WithdrawalsConfig:
        """The withdrawal configuration (the hot wallet and its gas settings)."""
        return dev_configs(self.doc)[1]

    @property
    def cfg(self) -> SweepsConfig:
        """The sweep configuration."""
        chains, wcfg = dev_configs(self.doc)
        return parse_sweeps_config(self.doc, chains, wcfg)

    def context(self, rpc_url: str | None = None) -> SweepContext:
        """A sweeper context (the hot key from the test's environment)."""
        chains, wcfg = dev_configs(self.doc)
        return runner.build_context(chains, wcfg, parse_sweeps_config(self.doc, chains, wcfg),
                                    CHAIN, environ={**os.environ, HOT_KEY_ENV: self.hot_key},
                                    rpc_url=rpc_url)

    def sweep(self, ctx: SweepContext | None = None, advance_s: float = 1.0) -> StepReport:
        """One sweeper step at the rig's clock (advanced first)."""
        self.clock += timedelta(seconds=advance_s)
        return runner.step(self.engine, ctx or self.context(), now=self.clock)

    def watch(self, times: int = 1) -> None:
        """Watcher steps."""
        if self._watcher is None:
            self._watcher = Watcher(self.engine, self.chains, CHAIN)
        for _ in range(times):
            self._watcher.step(now=self.clock)

    def user(self, user_id: str) -> str:
        """The user's deposit address (assigned on first use)."""
        if user_id not in self.users:
            source = MnemonicAddressSource(DEV_MNEMONIC, account=1)
            with UnitOfWork(self.engine) as uow:
                self.users[user_id] = deposits.assign_address(uow, "evm", user_id, source)
                uow.commit()
        return self.users[user_id]

    def deposit_eth(self, user_id: str, value: int) -> str:
        """Send ``value`` wei to the user's deposit address (mined: automine)."""
        return self.node.send_eth(ALICE, self.user(user_id), value)

    def deposit_usdc(self, user_id: str, value: int) -> str:
        """Send ``value`` USDC units to the user's deposit address."""
        return self.node.transact(self.usdc, "transfer",
                                  [to_checksum_address(self.user(user_id)), value],
                                  sender=ALICE)

    def fund_treasury(self, wei: int, key: str = "seed") -> None:
        """Declare company capital and send it to the hot wallet (booked at finality)."""
        with UnitOfWork(self.engine) as uow:
            own.declare_funding(uow, self.chains, own.FundingRequest(
                CHAIN, "ETH", str(wei), BOB, "gas float for sweeps"), declared_by="carol",
                idempotency_key=key)
            uow.commit()
        self.node.send_eth(BOB, self.hot, wei)

    def settle(self, rounds: int = 60, *, sweep: bool = True,
               ctx: SweepContext | None = None) -> None:
        """Mine, watch and sweep (with ``ctx`` if given) until every movement is terminal and
        nothing is waiting."""
        for _ in range(rounds):
            self.node.mine(1)
            self.watch()
            if sweep:
                self.sweep(ctx)
            if self.quiet():
                # Quiet once more after further blocks and a step that may plan what the last
                # one made due (an address's native sweep after its token sweep is final).
                self.node.mine(4)
                self.watch(2)
                if sweep:
                    self.sweep()
                if self.quiet():
                    return
        raise AssertionError(f"not settled after {rounds} rounds: {self.open_movements()}")

    def open_movements(self) -> list[tuple[str, int, str]]:
        """(kind, id, state) of every movement that is not terminal."""
        found = []
        with UnitOfWork(self.engine) as uow:
            for kind, table in ((Kind.SWEEP, "sweeps"), (Kind.GAS_TOP_UP, "gas_top_ups"),
                                (Kind.COLD_TRANSFER, "cold_transfers")):
                for r in uow.conn.execute(sa.text(f"SELECT id, state FROM {table}")):
                    if State(r.state) not in TERMINAL and r.state != "proposed":
                        found.append((kind.value, int(r.id), str(r.state)))
        return found

    def quiet(self) -> bool:
        """No movement in flight and no deposit waiting for finality."""
        with UnitOfWork(self.engine) as uow:
            waiting = uow.conn.execute(sa.text(
                "SELECT count(*) FROM deposits WHERE state IN ('included', 'unconfirmed', "
                "'final')")).scalar_one()
        return not self.open_movements() and waiting == 0

    def balance(self, code: str, asset: str) -> int:
        """The normal-side balance of an account (0 if it does not exist)."""
        with UnitOfWork(self.engine) as uow:
            try:
                account = ledger.get_account(uow, code, asset)
            except Exception:  # noqa: BLE001 - AccountNotFound: nothing posted yet
                return 0
            return ledger.account_balance(uow, account).balance_minor

    def custody(self, asset: str) -> int:
        """custody:dev in ``asset``."""
        return self.balance(chart.custody(CHAIN).code, asset)

    def treasury(self, asset: str) -> int:
        """treasury:dev in ``asset``."""
        return self.balance(chart.treasury(CHAIN).code, asset)

    def on_chain(self, address: str) -> tuple[int, int]:
        """(wei, USDC units) held by ``address`` at the latest block."""
        wei = self.node.rpc.get_balance(address, "latest")
        units = int(self.node.call(self.usdc, "balanceOf", [to_checksum_address(address)]))
        return wei, units

    def rows(self, sql: str, **params: Any) -> list[Any]:
        """Rows of a query."""
        with UnitOfWork(self.engine) as uow:
            return list(uow.conn.execute(sa.text(sql), params))

    def events(self, kind: Kind, movement_id: int) -> list[sweeps_repo.EventRecord]:
        """A movement's history, oldest first."""
        with UnitOfWork(self.engine) as uow:
            return sweeps_repo.list_events(uow.conn, kind, movement_id)

    def receipt_block(self, tx_hash: str) -> int | None:
        """The block number of a transaction's receipt (None: no receipt)."""
        receipt = self.node.rpc.get_receipt(tx_hash)
        return None if receipt is None else int(receipt["blockNumber"], 16)

    def holdings(self) -> dict[str, tuple[int, int]]:
        """Per asset: (what the hot wallet and every deposit address hold at the latest block,
        custody + treasury in the ledger)."""
        held = [self.on_chain(a) for a in [self.hot, *self.users.values()]]
        return {"ETH": (sum(w for w, _ in held), self.custody("ETH") + self.treasury("ETH")),
                "USDC": (sum(u for _, u in held),
                         self.custody("USDC") + self.treasury("USDC"))}

    def usdc_transfers_to(self, address: str) -> Counter[str]:
        """Sender -> number of USDC ``Transfer`` logs to ``address`` on the whole chain."""
        topic = "0x" + "0" * 24 + address[2:]
        logs = self.node.rpc.get_logs(0, "latest", [self.usdc.address],
                                      [TRANSFER_TOPIC, None, topic])
        return Counter("0x" + log["topics"][1][-40:] for log in logs)

    def write_config(self, path: Path) -> Path:
        """The rig's configuration as a ``CUSTODY_CONFIG`` file (for a sweeper process)."""
        path.write_text(to_toml(self.doc))
        return path

    def process_env(self, database_url: str, config: Path) -> dict[str, str]:
        """The environment of a sweeper process: its configuration, database and keys."""
        return {**os.environ, "CUSTODY_CONFIG": str(config),
                "CUSTODY_DATABASE_URL": database_url, MNEMONIC_ENV: DEV_MNEMONIC,
                HOT_KEY_ENV: self.hot_key}

    def assert_nonces_exact(self) -> dict[str, int]:
        """Per sender of any attempt: its attempts' nonces are exactly 0..n-1, each nonce
        belongs to one movement, exactly one attempt per nonce has a receipt on chain, and the
        sender's nonce on chain is n (nothing else was sent from it). Returns sender -> n."""
        attempts = self.rows("SELECT sender, nonce, tx_hash, movement_kind, "
                             "coalesce(sweep_id, top_up_id, cold_transfer_id) AS movement "
                             "FROM outgoing_attempts ORDER BY id")
        by_sender: dict[str, dict[int, set[tuple[str, int]]]] = {}
        landed: Counter[tuple[str, int]] = Counter()
        for a in attempts:
            by_sender.setdefault(a.sender, {}).setdefault(int(a.nonce), set()).add(
                (a.movement_kind, int(a.movement)))
            if self.node.rpc.get_receipt(a.tx_hash) is not None:
                landed[(a.sender, int(a.nonce))] += 1
        for sender, nonces in by_sender.items():
            assert sorted(nonces) == list(range(len(nonces))), (sender, sorted(nonces))
            reused = {n: m for n, m in nonces.items() if len(m) > 1}
            assert not reused, f"{sender}: nonces given to two movements: {reused}"
            assert self.node.rpc.get_transaction_count(sender, "latest") == len(nonces), sender
            for nonce in nonces:
                assert landed[(sender, nonce)] == 1, (sender, nonce, landed[(sender, nonce)])
        return {sender: len(nonces) for sender, nonces in by_sender.items()}


@pytest.fixture
def node() -> Iterator[AnvilNode]:
    """A fresh anvil (automine on, finalized 4 blocks behind)."""
    with AnvilNode.start(slots_in_an_epoch=2) as n:
        yield n


def make_rig(engine: Engine, node: AnvilNode, monkeypatch: pytest.MonkeyPatch, *,
             sweeps: dict[str, Any] | None = None, xpub: bool = False) -> SweepRig:
    """The rig: USDC deployed and minted to Alice, a fresh hot wallet, the configuration."""
    usdc = node.deploy("TestToken", "USD Coin", "USDC", 6)
    node.transact(usdc, "mint", [to_checksum_address(ALICE), 10**15])
    account = Account.create()
    hot = str(account.address).lower()
    doc = dev_config(rpc_url=node.url, token=usdc.address, chain=CHAIN, hot_wallet=hot,
                     hot_key_env=HOT_KEY_ENV, xpub=xpub,
                     chain_options={"native_minimum": "0.001", "scan_blocks_max": 50,
                                    "rpc_timeout_ms": 5000, "rpc_retries_max": 2})
    if not xpub:
        doc["address_sources"] = {"evm": {"kind": "mnemonic", "mnemonic_env": MNEMONIC_ENV,
                                          "account": 1}}
    doc["sweeps"] = sweeps or sweeps_section()
    monkeypatch.setenv(MNEMONIC_ENV, DEV_MNEMONIC)
    monkeypatch.setenv(HOT_KEY_ENV, "0x" + bytes(account.key).hex())
    return SweepRig(engine, node, usdc, hot, "0x" + bytes(account.key).hex(), doc)


@pytest.fixture
def rig(engine: Engine, node: AnvilNode, monkeypatch: pytest.MonkeyPatch) -> SweepRig:
    """The default rig."""
    return make_rig(engine, node, monkeypatch)


class SweeperProcess:
    """One sweeper process: a real ``python -m sweeps CHAIN --interval-s S`` (``real``), or a
    process forked from the test that runs what it runs (``sweeps.runner.main``) without the
    interpreter's start-up, so that a kill lands in the sweeper's work."""

    def __init__(self, env: dict[str, str], *, real: bool = True,
                 interval_s: float = 0.05) -> None:
        args = [CHAIN, "--interval-s", str(interval_s)]
        self.proc: subprocess.Popen[str] | None = None
        if real:
            self.proc = subprocess.Popen([sys.executable, "-m", "sweeps", *args], cwd=ROOT,
                                         env=env, stdout=subprocess.PIPE,
                                         stderr=subprocess.DEVNULL, text=True)
            assert self.proc.stdout is not None
            self.pid, self.out = self.proc.pid, self.proc.stdout.fileno()
            return
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child, which only a signal ends
            try:
                os.close(read)
                sys.stdout = os.fdopen(write, "w", buffering=1)
                os.environ.clear()
                os.environ.update(env)
                from config.settings import get_settings
                from sweeps.runner import main

                get_settings.cache_clear()  # The child's settings come from its environment.
                main(args)
            finally:
                os._exit(3)
        os.close(write)
        self.pid, self.out = pid, read

    def wait_ready(self, timeout_s: float = 30.0) -> None:
        """Until the sweeper printed ``ready`` (its context is built, it starts stepping)."""
        ready, _, _ = select.select([self.out], [], [], timeout_s)
        assert ready and os.read(self.out, 64).decode().strip() == "ready", "no sweeper"

    def kill(self) -> None:
        """SIGKILL, then reap it (once)."""
        if self.out < 0:
            return
        os.kill(self.pid, signal.SIGKILL)
        if self.proc is not None:
            self.proc.wait(timeout=10)
            assert self.proc.stdout is not None
            self.proc.stdout.close()
        else:
            os.waitpid(self.pid, 0)
            os.close(self.out)
        self.out = -1
