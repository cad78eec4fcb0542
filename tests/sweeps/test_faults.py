"""Faults on the way to the node (the real fault-injecting HTTP proxy between the sweeper and
anvil): the first broadcast of every movement (a native sweep, a gas top-up, a token sweep)
loses its answer (the node took the transaction) or its request (the node never saw it).
Either way each movement resolves exactly once: one attempt, one transaction on chain, final,
its transfer and its gas booked once."""

from __future__ import annotations

import pytest

from ledger.integrity import verify
from sweeps.model import Kind
from tests.support.fault_proxy import FaultProxy

from .conftest import ETH, USDC, SweepRig

pytestmark = pytest.mark.anvil


def _about_to_send(rig: SweepRig) -> bool:
    """Whether the next step signs and sends a first attempt: nothing planned yet, or a
    movement waits for its nonce."""
    sweeps = rig.rows("SELECT state FROM sweeps")
    top_ups = rig.rows("SELECT state FROM gas_top_ups")
    return not sweeps or any(r.state == "ready" for r in [*sweeps, *top_ups])


@pytest.mark.parametrize("fault", ["drop_answer", "drop_request"])
def test_a_lost_broadcast_resolves_each_movement_exactly_once(rig: SweepRig,
                                                              fault: str) -> None:
    rig.fund_treasury(ETH)
    rig.deposit_eth("e", ETH // 2)
    rig.deposit_usdc("u", 40 * USDC)
    rig.settle(sweep=False)
    custody = (rig.custody("ETH"), rig.custody("USDC"))

    faulted: list[str] = []  # Attempts whose first broadcast the proxy spoiled.
    with FaultProxy(rig.node.url) as proxy:
        ctx = rig.context(rpc_url=proxy.url)
        for _ in range(40):
            proxy.fault = fault if _about_to_send(rig) else None
            before = {a.tx_hash for a in rig.rows("SELECT tx_hash FROM outgoing_attempts")}
            rig.node.mine(1)
            rig.watch()
            rig.sweep(ctx)
            if proxy.fault is not None:
                new = [a.tx_hash for a in rig.rows("SELECT tx_hash FROM outgoing_attempts")
                       if a.tx_hash not in before]
                for tx_hash in new:  # The node took it (answer lost), or never saw it.
                    known = rig.node.rpc.get_transaction(tx_hash) is not None
                    assert known is (fault == "drop_answer"), (fault, tx_hash)
                faulted += new
            if rig.quiet() and len(rig.rows("SELECT id FROM sweeps")) == 2:
                break
        proxy.fault = None
        rig.settle(ctx=ctx)

    sweeps = rig.rows("SELECT * FROM sweeps ORDER BY id")
    [top_up] = rig.rows("SELECT * FROM gas_top_ups")
    assert sorted((s.address, s.token or "") for s in sweeps) == sorted(
        [(rig.user("e"), ""), (rig.user("u"), rig.usdc.address)])
    movements = [(Kind.SWEEP, "sweep_id", s) for s in sweeps] + [
        (Kind.GAS_TOP_UP, "top_up_id", top_up)]
    for kind, column, m in movements:
        assert m.state == "final", (kind, m.id)
        events = [e.event for e in rig.events(kind, m.id)]
        # Its first broadcast was lost; it stayed in flight (never failed) until it landed.
        assert events.count("send_unconfirmed") == 1, (kind, events)
        assert events.count("final_succeeded") == 1, (kind, events)
        assert not {"final_reverted", "consumed_elsewhere"} & set(events), (kind, events)
        [attempt] = rig.rows(f"SELECT tx_hash FROM outgoing_attempts WHERE {column} = :i",
                             i=m.id)
        assert attempt.tx_hash in faulted  # The very bytes whose broadcast was spoiled.
        assert rig.receipt_block(attempt.tx_hash) is not None
    assert len(faulted) == len(movements) and proxy.dropped_sends >= len(movements)
    # One transaction per sender, each transfer once on chain and at the hot wallet.
    assert rig.assert_nonces_exact() == {rig.hot: 1, rig.user("e"): 1, rig.user("u"): 1}
    assert rig.usdc_transfers_to(rig.hot) == {rig.user("u"): 1}
    arrived = rig.rows("SELECT from_address, value FROM deposits WHERE to_address = :h "
                       "AND state = 'internal'", h=rig.hot)
    assert sorted((r.from_address, int(r.value)) for r in arrived) == sorted(
        (s.address, int(s.swept_amount)) for s in sweeps)
    assert int(sweeps[[s.token for s in sweeps].index(rig.usdc.address)].swept_amount) == (
        40 * USDC)
    gas_keys = sorted(r.idempotency_key for r in rig.rows(
        "SELECT idempotency_key FROM ledger_transactions "
        "WHERE kind IN ('sweep_gas', 'gas_top_up_gas')"))
    assert gas_keys == sorted(f"{k.value}:{m.id}:gas" for k, _, m in movements)
    assert (rig.custody("ETH"), rig.custody("USDC")) == custody
    for asset, (on_chain, booked) in rig.holdings().items():
        assert on_chain == booked, asset
    report = verify(rig.engine)
    assert report.ok, report.discrepancies
