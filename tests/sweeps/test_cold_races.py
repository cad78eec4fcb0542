"""The locking claims of cold transfers, with several real connections at once: many admins
proposing for one chain and asset leave exactly one cold transfer in flight (the partial unique
index decides); two admins approving at once both count, and the transfer is approved once
(the row lock serializes the decisions); one admin deciding twice at once is recorded once."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime
from functools import partial
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from config.sweeps import parse_sweeps_config
from devtools.anvil import DEV_ACCOUNTS
from devtools.config import dev_config, dev_configs
from sweeps import service
from sweeps.errors import ColdDecisionRefused, ColdTransferOpen
from sweeps.model import Kind, State

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
COLD = DEV_ACCOUNTS[3]


def plan(amount_minor: int = 30 * 10**18) -> service.ColdPlan:
    """A proposal of ETH on devnet (two admins above 20 ETH)."""
    doc = dev_config(cold_addresses=(COLD,))
    doc["sweeps"] = {"assets": [{"chain": "devnet", "asset": "ETH", "hot_max": "50",
                                 "cold_dual_approval_above": "20"}]}
    chains, wcfg = dev_configs(doc)
    return service.plan_cold_transfer(chains, wcfg, parse_sweeps_config(doc, chains, wcfg),
                                      service.ColdProposal("devnet", "ETH", amount_minor, "x"))


def at_once(calls: list[Callable[[], Any]]) -> list[Any]:
    """Run ``calls`` in threads released together; each one's result or exception."""
    barrier = threading.Barrier(len(calls))
    results: list[Any] = [None] * len(calls)

    def run(i: int) -> None:
        barrier.wait()
        try:
            results[i] = calls[i]()
        except Exception as exc:  # noqa: BLE001 - collected for the assertions
            results[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    return results


def test_concurrent_proposals_leave_one_in_flight(engine: Engine) -> None:
    p = plan()
    results = at_once([partial(service.propose_cold_transfer, engine, p,
                               actor=service.Actor(f"admin{i}", True), request_key=f"k{i}",
                               now=NOW) for i in range(8)])
    won = [r for r in results if isinstance(r, service.Proposed)]
    assert len(won) == 1, results
    assert all(isinstance(r, ColdTransferOpen) for r in results if r not in won), results
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM cold_transfers")).scalar_one() == 1
        assert conn.execute(sa.text("SELECT count(*) FROM cold_transfer_events")).scalar_one() \
            == 1


@pytest.mark.parametrize("round_", range(3))
def test_two_admins_approving_at_once_both_count(engine: Engine, round_: int) -> None:
    cold = service.propose_cold_transfer(engine, plan(), actor=service.Actor("carol", True),
                                         request_key=f"p{round_}", now=NOW).movement
    results = at_once([partial(service.decide_cold_transfer, engine, cold.id,
                               actor=service.Actor(who, True), decision="approve", reason=None,
                               now=NOW) for who in ("dave", "erin")])
    assert sorted(str(r.state) for r in results) == ["approved", "proposed"], results
    final = service.timeline(engine, Kind.COLD_TRANSFER, cold.id)
    assert final.movement.state is State.APPROVED
    assert sorted(d.approver for d in final.decisions) == ["dave", "erin"]
    assert [e.event for e in final.events] == ["planned", "approval_recorded", "approved"]


def test_one_admin_deciding_twice_at_once_is_recorded_once(engine: Engine) -> None:
    cold = service.propose_cold_transfer(engine, plan(), actor=service.Actor("carol", True),
                                         request_key="p", now=NOW).movement
    results = at_once([lambda: service.decide_cold_transfer(
        engine, cold.id, actor=service.Actor("dave", True), decision="approve", reason=None,
        now=NOW) for _ in range(4)])
    refused = [r for r in results if isinstance(r, ColdDecisionRefused)]
    assert len(refused) == 3, results
    final = service.timeline(engine, Kind.COLD_TRANSFER, cold.id)
    assert [d.approver for d in final.decisions] == ["dave"]
    assert final.movement.state is State.PROPOSED
