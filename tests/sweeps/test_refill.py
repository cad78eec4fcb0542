"""Refills from cold against a real anvil and a real PostgreSQL: a hot wallet below its minimum
raises one alert per episode and gets one refill request; the transfer from the cold address
(an anvil dev account configured as cold, signed outside the engine) is matched to the request
once final and booked internal, custody and treasury unchanged; an admin's request by hand is
matched the same way, and a transfer of another amount is not matched."""

from __future__ import annotations

import logging

import pytest
from sqlalchemy.engine import Engine

from devtools.anvil import AnvilNode
from ledger.integrity import verify
from sweeps import limits, service
from sweeps.errors import AdminRequired, RefillInvalid, RequestKeyReused

from .conftest import CHAIN, ETH, SweepRig
from .test_cold import COLD, cold_rig

pytestmark = pytest.mark.anvil

CAROL = service.Actor("carol", True)


@pytest.fixture
def low(engine: Engine, node: AnvilNode, monkeypatch: pytest.MonkeyPatch) -> SweepRig:
    """The cold rig (ETH between 0.5 and 2), its hot wallet funded with 0.2 ETH (final)."""
    rig = cold_rig(engine, node, monkeypatch)
    rig.fund_treasury(ETH // 5)
    rig.settle(sweep=False)
    return rig


def test_below_minimum_alert_once_refill_requested_and_matched(
        low: SweepRig, caplog: pytest.LogCaptureFixture) -> None:
    ctx = low.context()
    with caplog.at_level(logging.WARNING, logger="custody.alerts"):
        first = limits.check_hot_limits(low.engine, ctx, low.clock)
        again = limits.check_hot_limits(low.engine, ctx, low.clock)
    (episode,) = first.episodes_started
    (refill_id,) = first.refills
    assert again.episodes_started == [] and again.refills == []
    lines = [r.getMessage() for r in caplog.records if r.name == "custody.alerts"]
    assert len([m for m in lines if "below its minimum" in m]) == 1, lines
    (open_low,) = limits.low_episodes(low.engine, CHAIN)
    assert open_low.episode.id == episode and open_low.refill is not None
    refill = open_low.refill
    # Up to halfway between the minimum (0.5) and the maximum (2): 1.25 - 0.2 held.
    assert (refill.id, refill.amount, refill.source, refill.destination, refill.state) == (
        refill_id, 105 * ETH // 100, COLD, low.hot, "open")
    assert refill.requested_by == "sweeper"

    custody, treasury = low.custody("ETH"), low.treasury("ETH")
    tx = low.node.send_eth(COLD, low.hot, refill.amount)
    low.settle(sweep=False)

    (matched,) = service.list_refills(low.engine, chain=CHAIN)
    assert (matched.state, matched.matched_tx_hash, matched.matched_position) == (
        "matched", tx, "call:0")
    (deposit,) = low.rows("SELECT state, address_kind, value FROM deposits WHERE tx_hash = :t",
                          t=tx)
    assert (deposit.state, deposit.address_kind, int(deposit.value)) == (
        "internal", "hot", refill.amount)
    assert (low.custody("ETH"), low.treasury("ETH")) == (custody, treasury)
    after = limits.check_hot_limits(low.engine, ctx, low.clock)
    assert after.episodes_ended == [episode] and limits.low_episodes(low.engine, CHAIN) == []
    report = verify(low.engine)
    assert report.ok, report


def test_refill_by_hand_matched_exactly(low: SweepRig) -> None:
    ask = service.RefillAsk(CHAIN, "ETH", ETH, None, "before the weekend")
    plan = service.plan_refill(low.chains, low.wcfg, low.cfg, ask)
    assert (plan.source, plan.destination, plan.amount) == (COLD, low.hot, ETH)
    with pytest.raises(AdminRequired):
        service.request_refill(low.engine, plan, actor=service.Actor("bob", False),
                               request_key="r1", now=low.clock)
    made, replayed = service.request_refill(low.engine, plan, actor=CAROL, request_key="r1",
                                            now=low.clock)
    again, replayed_again = service.request_refill(low.engine, plan, actor=CAROL,
                                                   request_key="r1", now=low.clock)
    assert (replayed, replayed_again, again.id) == (False, True, made.id)
    other = service.plan_refill(low.chains, low.wcfg, low.cfg, ask.__class__(
        CHAIN, "ETH", 2 * ETH, None, "before the weekend"))
    with pytest.raises(RequestKeyReused):
        service.request_refill(low.engine, other, actor=CAROL, request_key="r1", now=low.clock)
    for bad in (ask.__class__(CHAIN, "ETH", 0, None, "zero"),
                ask.__class__(CHAIN, "DOGE", 1, None, "unknown asset"),
                ask.__class__("nochain", "ETH", 1, None, "unknown chain"),
                ask.__class__(CHAIN, "ETH", 1, "0x" + "12" * 20, "not a cold address")):
        with pytest.raises(RefillInvalid):
            service.plan_refill(low.chains, low.wcfg, low.cfg, bad)

    custody = low.custody("ETH")
    wrong = low.node.send_eth(COLD, low.hot, ETH + 1)  # Not the amount asked for.
    right = low.node.send_eth(COLD, low.hot, ETH)
    low.settle(sweep=False)
    states = {r.tx_hash: r.state for r in low.rows("SELECT tx_hash, state FROM deposits "
                                                   "WHERE tx_hash IN (:a, :b)", a=wrong, b=right)}
    assert states == {right: "internal", wrong: "suspense"}
    (matched,) = service.list_refills(low.engine, state="matched")
    assert (matched.id, matched.matched_tx_hash) == (made.id, right)
    # The unexplained one is held in suspense (custody follows the chain), never credited.
    assert low.custody("ETH") == custody + ETH + 1
