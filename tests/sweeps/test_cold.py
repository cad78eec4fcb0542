"""Hot/cold limits against a real anvil and a real PostgreSQL: a hot wallet above its maximum
gets a cold transfer proposed, which is not signed before the admins approve it (no attempt, no
nonce), is approved by two different admins, sent once (exactly one attempt's transfer reaches
the cold address; custody unchanged; the gas booked); the proposer and a second decision of the
same admin are refused; a rejection ends a transfer and is not proposed again in the same
episode; one cold transfer in flight per chain and asset, enforced by the database."""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from config.uow import UnitOfWork
from devtools.anvil import DEV_ACCOUNTS, AnvilNode
from ledger.integrity import verify
from sweeps import limits, service
from sweeps import repository as repo
from sweeps.errors import AdminRequired, ColdDecisionRefused, ColdTransferOpen
from sweeps.model import Kind, State

from .conftest import CHAIN, ETH, USDC, SweepRig, make_rig, sweeps_section

pytestmark = pytest.mark.anvil

COLD = DEV_ACCOUNTS[3]
CAROL, DAVE = service.Actor("carol", True), service.Actor("dave", True)


def cold_rig(engine: Engine, node: AnvilNode, monkeypatch: pytest.MonkeyPatch,
             **eth: Any) -> SweepRig:
    """A rig whose ETH has a hot maximum of 2 and a minimum of 0.5, the cold address ``COLD``
    (an anvil dev account, watched), and two admins above 1 ETH."""
    limits_eth = {"hot_min": "0.5", "hot_max": "2", "cold_dual_approval_above": "1", **eth}
    rig = make_rig(engine, node, monkeypatch, sweeps=sweeps_section(ETH=limits_eth))
    rig.doc["chains"][CHAIN]["cold_addresses"] = [COLD]
    return rig


@pytest.fixture
def rig(engine: Engine, node: AnvilNode, monkeypatch: pytest.MonkeyPatch) -> SweepRig:
    """The cold rig, its hot wallet funded with 5 ETH of company capital (final)."""
    made = cold_rig(engine, node, monkeypatch)
    made.fund_treasury(5 * ETH)
    made.settle(sweep=False)
    return made


def count(rig: SweepRig, sql: str, **params: Any) -> int:
    """The single number a query returns."""
    return int(rig.rows(sql, **params)[0][0])


def check(rig: SweepRig) -> limits.LimitsReport:
    """One hot-limit check at the rig's clock."""
    return limits.check_hot_limits(rig.engine, rig.context(), rig.clock)


def test_above_maximum_proposed_approved_by_two_admins_sent_once(rig: SweepRig) -> None:
    report = check(rig)
    (cold_id,) = report.proposed
    (holding,) = report.holdings
    assert holding.amount == 5 * ETH and holding.pending_out == 0
    ctx = rig.context()
    reserve = ctx.hot.gas_limit_native * ctx.hot.max_fee_per_gas_cap_wei
    cold = service.get_movement(rig.engine, Kind.COLD_TRANSFER, cold_id)
    assert cold.amount("amount") == 3 * ETH  # 5 held - the maximum of 2 (above the reserve)
    assert reserve < 2 * ETH
    assert (cold.state, cold.data["destination"], cold.data["sender"]) == (
        State.PROPOSED, COLD, rig.hot)
    assert (cold.data["approvals_required"], cold.data["proposed_by"]) == (2, "sweeper")
    # A second check proposes nothing: one in flight per chain and asset.
    assert check(rig).proposed == []

    # Not approved: never signed, however often the sweeper steps.
    for _ in range(3):
        rig.sweep()
    assert count(rig, "SELECT count(*) FROM outgoing_attempts WHERE cold_transfer_id = :i",
                 i=cold_id) == 0
    assert count(rig, "SELECT count(*) FROM sender_nonces WHERE address = :h", h=rig.hot) == 0
    assert service.get_movement(rig.engine, Kind.COLD_TRANSFER, cold_id).nonce is None

    # One admin of two: still proposed; the same admin again, or a non-admin: refused.
    first = service.decide_cold_transfer(rig.engine, cold_id, actor=CAROL, decision="approve",
                                         reason=None, now=rig.clock)
    assert first.state is State.PROPOSED
    with pytest.raises(ColdDecisionRefused, match="already decided"):
        service.decide_cold_transfer(rig.engine, cold_id, actor=CAROL, decision="approve",
                                     reason=None, now=rig.clock)
    with pytest.raises(AdminRequired):
        service.decide_cold_transfer(rig.engine, cold_id, actor=service.Actor("bob", False),
                                     decision="approve", reason=None, now=rig.clock)
    rig.sweep()
    assert count(rig, "SELECT count(*) FROM outgoing_attempts WHERE cold_transfer_id = :i",
                 i=cold_id) == 0
    second = service.decide_cold_transfer(rig.engine, cold_id, actor=DAVE, decision="approve",
                                          reason="excess of the day", now=rig.clock)
    assert second.state is State.APPROVED
    with pytest.raises(ColdDecisionRefused, match="no longer waits"):
        service.decide_cold_transfer(rig.engine, cold_id, actor=service.Actor("erin", True),
                                     decision="approve", reason=None, now=rig.clock)

    custody_before = rig.custody("ETH")
    cold_before = rig.on_chain(COLD)[0]
    rig.settle()

    done = service.timeline(rig.engine, Kind.COLD_TRANSFER, cold_id)
    assert done.movement.state is State.FINAL
    assert [d.approver for d in done.decisions] == ["carol", "dave"]
    assert [e.event for e in done.events][:4] == ["planned", "approval_recorded", "approved",
                                                  "nonce_assigned"]
    assert len(done.attempts) == 1
    landed = done.movement.data["landed_attempt_id"]
    assert landed == done.attempts[0].id
    # Exactly the amount reached the cold address, seen by the watcher as our own movement.
    assert rig.on_chain(COLD)[0] - cold_before == 3 * ETH
    incoming = rig.rows("SELECT state, value, tx_hash FROM deposits WHERE to_address = :c",
                        c=COLD)
    assert [(r.state, int(r.value), r.tx_hash) for r in incoming] == [
        ("internal", 3 * ETH, done.attempts[0].tx_hash)]
    # Custody unchanged; the gas booked from the treasury, exactly what the receipt paid.
    assert rig.custody("ETH") == custody_before
    gas = int(done.movement.data["gas_paid"])
    assert gas > 0 and rig.balance("expense:network_fees", "ETH") == gas
    assert rig.treasury("ETH") == 5 * ETH - gas  # Moving it to cold moved no money.
    # What the hot wallet holds and what reached cold (the dev account held coins of its own
    # before) are custody + treasury, exactly.
    held = rig.on_chain(rig.hot)[0] + rig.on_chain(COLD)[0] - cold_before
    assert held == rig.custody("ETH") + rig.treasury("ETH")
    verified = verify(rig.engine)
    assert verified.ok, verified
    # Back within the maximum: the episode ends, nothing more is proposed.
    after = check(rig)
    assert after.proposed == [] and after.episodes_ended


def test_self_approval_refused_and_a_rejection_ends_it(rig: SweepRig) -> None:
    plan = service.plan_cold_transfer(rig.chains, rig.wcfg, rig.cfg, service.ColdProposal(
        CHAIN, "ETH", ETH // 2, "by hand"))
    proposed = service.propose_cold_transfer(rig.engine, plan, actor=CAROL, request_key="k1",
                                             now=rig.clock)
    assert not proposed.replayed and proposed.movement.data["approvals_required"] == 1
    cold_id = proposed.movement.id
    again = service.propose_cold_transfer(rig.engine, plan, actor=CAROL, request_key="k1",
                                          now=rig.clock)
    assert again.replayed and again.movement.id == cold_id
    with pytest.raises(ColdTransferOpen):
        service.propose_cold_transfer(rig.engine, plan, actor=DAVE, request_key="k2",
                                      now=rig.clock)
    # The hot-limit check proposes nothing while this one is in flight.
    assert check(rig).proposed == []
    with pytest.raises(ColdDecisionRefused, match="proposed"):
        service.decide_cold_transfer(rig.engine, cold_id, actor=CAROL, decision="approve",
                                     reason=None, now=rig.clock)
    with pytest.raises(ColdDecisionRefused, match="reason"):
        service.decide_cold_transfer(rig.engine, cold_id, actor=DAVE, decision="reject",
                                     reason=None, now=rig.clock)
    assert count(rig, "SELECT count(*) FROM cold_transfer_approvals") == 0
    rejected = service.decide_cold_transfer(rig.engine, cold_id, actor=DAVE, decision="reject",
                                            reason="not today", now=rig.clock)
    assert (rejected.state, rejected.data["state_reason"]) == (State.REJECTED, "not today")
    rig.settle()
    assert count(rig, "SELECT count(*) FROM outgoing_attempts WHERE cold_transfer_id = :i",
                 i=cold_id) == 0

    # Now the check proposes the excess; rejected, it is not proposed again in this episode.
    (auto,) = check(rig).proposed
    service.decide_cold_transfer(rig.engine, auto, actor=DAVE, decision="reject",
                                 reason="keep it hot for now", now=rig.clock)
    assert check(rig).proposed == []
    assert count(rig, "SELECT count(*) FROM hot_limit_episodes") == 1


def test_the_database_allows_one_cold_transfer_in_flight_per_asset(rig: SweepRig) -> None:
    (cold_id,) = check(rig).proposed
    with UnitOfWork(rig.engine) as uow:
        second = repo.propose_cold(
            uow.conn, chain=CHAIN, asset="ETH", token=None, sender=rig.hot, destination=COLD,
            amount=1, approvals_required=1, proposed_by="carol", reason="twice",
            gas_limit=21_000, request_key=None, at=rig.clock, evidence={})
        assert second is None
        with pytest.raises(sa.exc.IntegrityError, match="cold_transfers_one_open"):
            repo.insert_cold_transfer(
                uow.conn, chain=CHAIN, asset="ETH", token=None, sender=rig.hot,
                destination=COLD, amount=1, approvals_required=1, proposed_by="carol",
                reason="twice", gas_limit=21_000, at=rig.clock, evidence={})
    assert count(rig, "SELECT count(*) FROM cold_transfers") == 1
    assert cold_id


def test_a_token_excess_goes_to_cold_with_one_approval(
        engine: Engine, node: AnvilNode, monkeypatch: pytest.MonkeyPatch) -> None:
    rig = make_rig(engine, node, monkeypatch, sweeps=sweeps_section(
        USDC={"hot_max": "100", "cold_address": COLD}))
    rig.doc["chains"][CHAIN]["cold_addresses"] = [COLD]
    rig.fund_treasury(ETH)
    for user in ("a", "b"):
        rig.deposit_usdc(user, 90 * USDC)
    rig.settle()  # Swept to the hot wallet: 180 USDC there, 80 above the maximum.
    assert rig.on_chain(rig.hot)[1] == 180 * USDC
    (cold_id,) = check(rig).proposed
    cold = service.get_movement(rig.engine, Kind.COLD_TRANSFER, cold_id)
    assert (cold.amount("amount"), cold.data["token"], cold.data["approvals_required"]) == (
        80 * USDC, rig.usdc.address.lower(), 1)
    custody = rig.custody("USDC")
    service.decide_cold_transfer(rig.engine, cold_id, actor=CAROL, decision="approve",
                                 reason=None, now=rig.clock)
    rig.settle()
    assert service.get_movement(rig.engine, Kind.COLD_TRANSFER, cold_id).state is State.FINAL
    assert (rig.on_chain(rig.hot)[1], rig.on_chain(COLD)[1]) == (100 * USDC, 80 * USDC)
    (arrived,) = rig.rows("SELECT state, position FROM deposits WHERE to_address = :c", c=COLD)
    assert (arrived.state, arrived.position) == ("internal", "log:0")
    assert rig.custody("USDC") == custody == 180 * USDC
    assert check(rig).proposed == []
