"""Ledger fixtures: a small book with USDC (scale 6) and ETH (scale 18) accounts."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

import pytest
from sqlalchemy.engine import Engine

from config.uow import UnitOfWork
from ledger import chart, service
from ledger.model import Account, Asset, Entry, Line

T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)


@dataclass
class Book:
    """Accounts of a test ledger, opened through the service."""

    engine: Engine
    usdc: Asset
    eth: Asset
    custody: Account  # custody:eth in USDC
    custody_eth: Account  # custody:eth in ETH
    equity: Account
    fees: Account
    suspense: Account

    def wallet(self, user: str, asset: Asset | None = None) -> Account:
        """The user's wallet (opened on first use)."""
        with UnitOfWork(self.engine) as uow:
            account = service.open_account(uow, chart.user_wallet(user), asset or self.usdc)
            uow.commit()
        return account

    def withdrawals(self, user: str, asset: Asset | None = None) -> Account:
        """The user's withdrawals account (opened on first use)."""
        with UnitOfWork(self.engine) as uow:
            account = service.open_account(uow, chart.user_withdrawals(user), asset or self.usdc)
            uow.commit()
        return account

    def deposit(self, user: str, amount: int, key: str, at: datetime = T0) -> int:
        """Credit ``amount`` to the user's USDC wallet from custody; returns the transaction id."""
        entry = transfer(key, self.custody, self.wallet(user), amount, at=at, kind="deposit")
        return service.post_entry(self.engine, entry).transaction_id


def transfer(
    key: str,
    debit: Account,
    credit: Account,
    amount: int,
    *,
    at: datetime = T0,
    kind: str = "transfer",
    reason: str | None = None,
    out_of_period: bool = False,
) -> Entry:
    """A two-line entry: debit ``debit`` and credit ``credit`` by ``amount``."""
    return Entry(
        idempotency_key=key,
        kind=kind,
        effective_at=at,
        source="tests",
        lines=(Line(debit, amount), Line(credit, -amount)),
        reason=reason,
        out_of_period=out_of_period,
    )


@pytest.fixture
def book(engine: Engine) -> Book:
    """A fresh book on this test's database."""
    with UnitOfWork(engine) as uow:
        usdc = service.open_asset(uow, "USDC", 6)
        eth = service.open_asset(uow, "ETH", 18)
        accounts = dict(
            custody=service.open_account(uow, chart.custody("eth"), usdc),
            custody_eth=service.open_account(uow, chart.custody("eth"), eth),
            equity=service.open_account(uow, chart.equity_owner(), usdc),
            fees=service.open_account(uow, chart.revenue_withdrawal_fees(), usdc),
            suspense=service.open_account(uow, chart.suspense_unattributed(), usdc),
        )
        uow.commit()
    return Book(engine=engine, usdc=usdc, eth=eth, **accounts)
