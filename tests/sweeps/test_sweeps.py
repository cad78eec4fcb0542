"""Sweeps against a real anvil and a real PostgreSQL: 20 deposit addresses with ETH and USDC are
swept to the hot wallet; the hot wallet receives exactly what the records say; custody does not
change; the gas is booked; per asset, what all our addresses hold on chain equals custody +
treasury in the ledger, exactly."""

from __future__ import annotations

import pytest

from ledger.integrity import verify

from .conftest import ETH, USDC, SweepRig

pytestmark = pytest.mark.anvil


def test_twenty_addresses_are_swept_exactly(rig: SweepRig) -> None:
    rig.fund_treasury(5 * ETH)
    eth_users = [f"e{i}" for i in range(10)]
    usdc_users = [f"u{i}" for i in range(10)]
    for i, user in enumerate(eth_users):
        rig.deposit_eth(user, ETH // 2 + i)
    for i, user in enumerate(usdc_users):
        rig.deposit_usdc(user, 100 * USDC + i)
    rig.deposit_usdc("e0", 7 * USDC)  # One address with both assets: token first, then ETH.
    rig.settle(sweep=False)
    custody_eth, custody_usdc = rig.custody("ETH"), rig.custody("USDC")
    assert custody_usdc == sum(100 * USDC + i for i in range(10)) + 7 * USDC
    hot_before = rig.on_chain(rig.hot)

    rig.settle()

    sweeps = rig.rows("SELECT * FROM sweeps ORDER BY id")
    assert {s.state for s in sweeps} == {"final"}
    assert sorted(s.address for s in sweeps if s.token is None) == sorted(
        rig.user(u) for u in eth_users)
    assert len([s for s in sweeps if s.token is not None]) == 11
    # The hot wallet received exactly the swept amounts, each seen by the watcher as internal.
    hot_after = rig.on_chain(rig.hot)
    top_ups = rig.rows("SELECT * FROM gas_top_ups ORDER BY id")
    assert {t.state for t in top_ups} == {"final"} and len(top_ups) == 11
    swept_eth = sum(int(s.swept_amount) for s in sweeps if s.token is None)
    swept_usdc = sum(int(s.swept_amount) for s in sweeps if s.token is not None)
    assert swept_usdc == custody_usdc
    assert hot_after[1] - hot_before[1] == swept_usdc
    hot_gas = sum(int(t.gas_paid) for t in top_ups)
    assert hot_after[0] - hot_before[0] == swept_eth - sum(int(t.amount) for t in top_ups) - hot_gas
    incoming = rig.rows("SELECT state, value FROM deposits WHERE address_kind = 'hot' "
                        "AND from_address <> :bob", bob=rig.rows(
                            "SELECT from_address FROM deposits WHERE state = 'capital'")[0][0])
    assert {r.state for r in incoming} == {"internal"}
    assert sum(int(r.value) for r in incoming) == swept_eth + swept_usdc
    top_up_deposits = rig.rows("SELECT state FROM deposits WHERE address_kind = 'deposit' "
                               "AND from_address = :h", h=rig.hot)
    assert [r.state for r in top_up_deposits] == ["internal"] * 11  # Never credited to a user.
    # Custody unchanged; gas booked from the treasury.
    assert (rig.custody("ETH"), rig.custody("USDC")) == (custody_eth, custody_usdc)
    gas = sum(int(s.gas_paid) for s in sweeps) + hot_gas
    assert rig.balance("expense:network_fees", "ETH") == gas
    # On-chain holdings of all our addresses = custody + treasury, per asset, exactly.
    ours = [rig.hot, *rig.users.values()]
    held = [rig.on_chain(a) for a in ours]
    assert sum(w for w, _ in held) == rig.custody("ETH") + rig.treasury("ETH")
    assert sum(u for _, u in held) == rig.custody("USDC") + rig.treasury("USDC")
    assert all(u == 0 for _, u in held[1:])  # Every token swept.
    report = verify(rig.engine)
    assert report.ok, report

