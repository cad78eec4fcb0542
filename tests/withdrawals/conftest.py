"""Withdrawal fixtures: a configuration (``devtools.config``, written as real TOML), a funded
ledger, own addresses.

The chain is ``devnet`` (chain id 31337). USDC has scale 6 in the ledger and 6 decimals on
chain; ETH has 18 and 18. Tests that need a chain start their own anvil (see test_processor).
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from config.chains import ChainsConfig
from config.uow import UnitOfWork
from config.withdrawals import WithdrawalsConfig
from devtools.config import (
    DEV_CHAIN,
    DEV_HOT_WALLET,
    DEV_TOKEN,
    NO_NODE_URL,
    dev_config,
    dev_configs,
    to_toml,
)
from ledger import chart
from ledger import service as ledger
from ledger.model import Entry, credit, debit
from withdrawals.service import Actor, WithdrawalRequest

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
CHAIN = DEV_CHAIN
FAKE_TOKEN = DEV_TOKEN
HOT = DEV_HOT_WALLET
#: The variable the tests' hot wallet key is read from.
TEST_HOT_KEY_ENV = "CUSTODY_TEST_HOT_KEY"
#: A valid EIP-55 destination (anvil's dev account 2) and its lower-case form.
DEST = "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC"
ALICE = Actor("alice", frozenset({"approver"}))
BOB = Actor("bob", frozenset({"approver"}))
CAROL = Actor("carol", frozenset({"admin"}))
DAVE = Actor("dave", frozenset({"admin"}))


def config_toml(*, token: str = FAKE_TOKEN, hot: str = HOT, rpc_url: str = NO_NODE_URL,
                finality: str = "confirmations:3") -> str:
    """The whole configuration file (chains and withdrawals) as TOML text (``devtools.config``;
    the hot wallet's key is read from ``CUSTODY_TEST_HOT_KEY``)."""
    return to_toml(dev_config(rpc_url=rpc_url, token=token, finality=finality, hot_wallet=hot,
                              hot_key_env=TEST_HOT_KEY_ENV))


def load(text: str) -> tuple[ChainsConfig, WithdrawalsConfig]:
    """Parse the TOML text into both configurations."""
    return dev_configs(tomllib.loads(text))


@dataclass
class SetOwnAddresses:
    """Own addresses from a set (the API layer wires the deposit addresses later)."""

    addresses: set[tuple[str, str]] = field(default_factory=set)

    def is_own(self, chain: str, address: str) -> bool:
        return (chain, address.lower()) in self.addresses


def open_book(engine: Engine, chain: str = CHAIN, *, eth_scale: int = 18,
              float_minor: int | None = None) -> None:
    """Assets and the company accounts; the treasury holds ``float_minor`` of ETH (default
    10 ETH; 0: an empty treasury) of gas float from equity."""
    with UnitOfWork(engine) as uow:
        usdc = ledger.open_asset(uow, "USDC", 6)
        eth = ledger.open_asset(uow, "ETH", eth_scale)
        for asset in (usdc, eth):
            for spec in (chart.custody(chain), chart.treasury(chain), chart.equity_owner(),
                         chart.revenue_withdrawal_fees(), chart.expense_network_fees(),
                         chart.suspense_unattributed()):
                ledger.open_account(uow, spec, asset)
        treasury = ledger.get_account(uow, f"treasury:{chain}", "ETH")
        equity = ledger.get_account(uow, "equity:owner", "ETH")
        if float_minor is None:
            float_minor = 10 * 10**eth_scale
        if float_minor:
            ledger.post(uow, Entry("test:treasury-float", "capital", T0, "tests",
                                   (debit(treasury, float_minor), credit(equity, float_minor))))
        uow.commit()


def fund(engine: Engine, users: Iterable[str], amount_minor: int, asset: str = "USDC",
         chain: str = CHAIN) -> None:
    """Credit users as a final deposit would: DR custody / CR user:wallet."""
    with UnitOfWork(engine) as uow:
        a = ledger.get_asset(uow, asset)
        custody = ledger.get_account(uow, f"custody:{chain}", asset)
        for user in users:
            wallet, _ = ledger.open_user_accounts(uow, user, a)
            ledger.post(uow, Entry(f"test:fund:{user}:{asset}:{amount_minor}", "deposit", T0,
                                   "tests", (debit(custody, amount_minor),
                                             credit(wallet, amount_minor))))
        uow.commit()


def balance(engine: Engine, code: str, asset: str = "USDC") -> int:
    """An account's balance on its normal side."""
    with UnitOfWork(engine) as uow:
        return ledger.account_balance(uow, ledger.get_account(uow, code, asset)).balance_minor


def req(user: str = "u1", amount: int = 30_000_000, key: str = "k1", *, asset: str = "USDC",
        destination: str = DEST, chain: str = CHAIN) -> WithdrawalRequest:
    """A withdrawal request with defaults."""
    return WithdrawalRequest(user_id=user, chain=chain, asset=asset, destination=destination,
                             amount_minor=amount, request_key=key)


@pytest.fixture
def cfg() -> WithdrawalsConfig:
    """The withdrawal configuration (no chain reachable)."""
    return load(config_toml())[1]


@pytest.fixture
def own() -> SetOwnAddresses:
    """Own addresses: one deposit address."""
    return SetOwnAddresses({(CHAIN, "0x90f79bf6eb2c4f870365e785982e1f101e93b906")})


@pytest.fixture
def wbook(engine: Engine) -> Engine:
    """The test database with the book opened and user u1 holding 150 USDC."""
    open_book(engine)
    fund(engine, ["u1"], 150_000_000)
    return engine


def write_config(tmp_path: Path, text: str) -> Path:
    """Write the configuration file and return its path."""
    path = tmp_path / "custody.toml"
    path.write_text(text)
    return path


def alert_subjects(owner: Engine, kind: str) -> list[str]:
    """The withdrawal ids of the ``alert.<kind>`` outbox events, oldest first."""
    with owner.connect() as conn:
        return list(conn.execute(sa.text(
            "SELECT payload->>'withdrawal_id' FROM outbox_events WHERE type = :t ORDER BY id"),
            {"t": f"alert.{kind}"}).scalars())
