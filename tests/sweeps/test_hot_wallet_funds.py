"""A gas top-up the hot wallet cannot pay is never given a nonce: the node would refuse it, and a
nonce handed to a refused transaction would block every later transaction of the hot wallet,
withdrawals included. It waits, unsigned, and goes on by itself once the wallet is funded."""

from __future__ import annotations

import pytest

from ledger.integrity import verify

from .conftest import ETH, USDC, SweepRig

pytestmark = pytest.mark.anvil


def test_a_top_up_waits_for_the_hot_wallet_to_hold_what_it_costs(rig: SweepRig) -> None:
    rig.deposit_usdc("u", 25 * USDC)
    rig.settle(sweep=False)
    assert rig.on_chain(rig.hot)[0] == 0
    for _ in range(3):
        rig.sweep()
        rig.node.mine(1)
    [top_up] = rig.rows("SELECT state, nonce FROM gas_top_ups")
    assert (top_up.state, top_up.nonce) == ("ready", None)
    assert rig.rows("SELECT count(*) AS n FROM outgoing_attempts")[0].n == 0
    assert rig.rows("SELECT count(*) AS n FROM sender_nonces WHERE address = :h",
                    h=rig.hot)[0].n == 0
    assert [r.state for r in rig.rows("SELECT state FROM sweeps")] == ["waiting_gas"]

    rig.fund_treasury(ETH)
    rig.settle()

    assert [r.state for r in rig.rows("SELECT state FROM gas_top_ups")] == ["final"]
    assert [r.state for r in rig.rows("SELECT state FROM sweeps")] == ["final"]
    assert rig.rows("SELECT nonce FROM outgoing_attempts WHERE sender = :h",
                    h=rig.hot)[0].nonce == 0  # The wallet's first nonce, taken only now.
    assert rig.on_chain(rig.hot)[1] == 25 * USDC
    assert verify(rig.engine).ok
