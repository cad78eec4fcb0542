"""Two sweepers at once never reuse a nonce and never sweep one address twice (real anvil, real
PostgreSQL, several real connections).

- Two ``python -m sweeps`` processes run side by side until every address is swept: both held
  the chain's advisory lock in turn (seen in ``pg_locks``), and the outcome is exact.
- Without the lock's protection: the planner and every sending phase are called directly from
  two threads at once, phase by phase (both threads enter each phase together), so only the
  partial unique index on ``sweeps`` and the row locks stand between them; the outcome is the
  same: one sweep per address, one nonce, one attempt and one gas booking per movement.
- The index itself: a planner that meets another's uncommitted sweep of the same address waits
  for it and then plans nothing (no second sweep, no top-up).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from functools import partial
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from config.uow import UnitOfWork
from ledger.integrity import verify
from sweeps import planner, sending
from sweeps import repository as repo
from sweeps.model import Kind, State
from sweeps.runner import KINDS
from sweeps.sending import StepReport, SweepContext

from .conftest import CHAIN, ETH, USDC, SweeperProcess, SweepRig

pytestmark = pytest.mark.anvil
LOCK_HOLDERS = sa.text(
    "SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
    "WHERE l.locktype = 'advisory' AND l.classid = 7322 AND l.granted "
    "AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())")


def _deposit_all(rig: SweepRig) -> dict[tuple[str, str | None], int]:
    """Deposits to 14 addresses (one of them with both assets), credited; (address, token) ->
    the amount each sweep must move."""
    rig.fund_treasury(ETH)
    due: dict[tuple[str, str | None], int] = {}
    for i in range(8):
        rig.deposit_eth(f"e{i}", ETH // 5 + i)
        due[(rig.user(f"e{i}"), None)] = ETH // 5 + i
    for i in range(6):
        rig.deposit_usdc(f"u{i}", 10 * USDC + i)
        due[(rig.user(f"u{i}"), rig.usdc.address)] = 10 * USDC + i
    rig.deposit_usdc("e0", 3 * USDC)  # Token first, then its native sweep.
    due[(rig.user("e0"), rig.usdc.address)] = 3 * USDC
    rig.settle(sweep=False)
    return due


def _assert_each_swept_once(rig: SweepRig, due: dict[tuple[str, str | None], int]) -> None:
    """One final sweep per (address, token) moving what it should, one top-up per token sweep,
    per movement one nonce, one attempt, one internal transfer and one gas booking; nonces
    exact per sender; the transfers on chain once each; holdings add up; the ledger verifies."""
    sweeps = rig.rows("SELECT * FROM sweeps ORDER BY id")
    top_ups = rig.rows("SELECT * FROM gas_top_ups ORDER BY id")
    assert {s.state for s in sweeps} | {t.state for t in top_ups} == {"final"}
    assert sorted((s.address, s.token or "") for s in sweeps) == sorted(
        (a, t or "") for a, t in due)
    assert sorted(t.address for t in top_ups) == sorted(a for a, t in due if t is not None)
    for s in sweeps:
        assert int(s.customer_amount) == due[(s.address, s.token)]
    movements = [(Kind.SWEEP, "sweep_id", s.id) for s in sweeps] + [
        (Kind.GAS_TOP_UP, "top_up_id", t.id) for t in top_ups]
    for kind, column, movement_id in movements:
        events = [e.event for e in rig.events(kind, movement_id)]
        for once in ("nonce_assigned", "attempt_signed", "final_succeeded"):
            assert events.count(once) == 1, (kind, movement_id, events)
        attempts = rig.rows(f"SELECT tx_hash FROM outgoing_attempts WHERE {column} = :i",
                            i=movement_id)
        assert len(attempts) == 1, (kind, movement_id)
        internal = rig.rows("SELECT reference FROM internal_transfers WHERE tx_hash = :h",
                            h=attempts[0].tx_hash)
        assert [r.reference for r in internal] == [f"{kind.value}:{movement_id}"]
    gas_keys = [r.idempotency_key for r in rig.rows(
        "SELECT idempotency_key FROM ledger_transactions "
        "WHERE kind IN ('sweep_gas', 'gas_top_up_gas')")]
    assert sorted(gas_keys) == sorted(f"{k.value}:{i}:gas" for k, _, i in movements)
    used = rig.assert_nonces_exact()
    per_address: dict[str, int] = {}
    for address, _ in due:
        per_address[address] = per_address.get(address, 0) + 1
    assert used == {rig.hot: len(top_ups), **per_address}
    assert rig.usdc_transfers_to(rig.hot) == {a: 1 for a, t in due if t is not None}
    arrived = rig.rows("SELECT from_address, token, value FROM deposits WHERE to_address = :h "
                       "AND state = 'internal'", h=rig.hot)
    assert sorted((r.from_address, r.token or "", int(r.value)) for r in arrived) == sorted(
        (s.address, s.token or "", int(s.swept_amount)) for s in sweeps)
    for asset, (on_chain, booked) in rig.holdings().items():
        assert on_chain == booked, asset
    report = verify(rig.engine)
    assert report.ok, report.discrepancies


def _named(database_url: str, name: str) -> str:
    """The database URL with an ``application_name`` (to tell the processes apart)."""
    url = sa.make_url(database_url)
    return url.update_query_dict({"application_name": name}).render_as_string(
        hide_password=False)


def test_two_sweeper_processes_take_turns_and_sweep_each_address_once(
        rig: SweepRig, database_url: str, owner: Engine, tmp_path: Path) -> None:
    due = _deposit_all(rig)
    config = rig.write_config(tmp_path / "custody.toml")
    names = ("sweeper-a", "sweeper-b")
    sweepers: list[SweeperProcess] = []
    holders: set[str] = set()
    try:
        for name in names:
            sweepers.append(SweeperProcess({**rig.process_env(database_url, config),
                                            "CUSTODY_DATABASE_URL": _named(database_url, name)},
                                           interval_s=0.02))
        for sweeper in sweepers:
            sweeper.wait_ready()
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            rig.node.mine(1)
            rig.watch()
            with owner.connect() as conn:
                holders.update(conn.execute(LOCK_HOLDERS).scalars())
            done = rig.rows("SELECT count(*) AS n FROM sweeps WHERE state = 'final'")[0].n
            if done == len(due) and rig.quiet() and holders == set(names):
                break
            time.sleep(0.02)
    finally:
        for sweeper in sweepers:
            sweeper.kill()
    rig.node.mine(4)
    rig.watch(2)

    assert holders == set(names)  # Both processes stepped, one at a time.
    _assert_each_swept_once(rig, due)


def _together(*calls: Callable[[], object], timeout_s: float = 60.0) -> None:
    """Run the calls in threads of their own that start at the same moment; re-raise the
    first error."""
    barrier = threading.Barrier(len(calls))
    errors: list[BaseException] = []

    def run(call: Callable[[], object]) -> None:
        try:
            barrier.wait(timeout_s)
            call()
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(c,)) for c in calls]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout_s)
    assert not any(t.is_alive() for t in threads), "a phase did not finish (a deadlock?)"
    if errors:
        raise errors[0]


#: What ``runner.step`` does under its lock, phase by phase: (phase, kind).
PHASES: list[tuple[str, Kind | None]] = [
    ("plan", None), *((p, k) for k in KINDS for p in ("assign", "sign", "send")),
    *((p, k) for k in KINDS for p in ("track", "send"))]


def _run_phase(phase: str, kind: Kind | None, engine: Engine, ctx: SweepContext,
               now: datetime, report: StepReport) -> None:
    """One phase of a sweeper step, called directly (no advisory lock)."""
    if kind is None:
        planner.plan(engine, ctx, now=now, report=report)
    elif phase == "assign":
        sending.assign(engine, ctx, kind, now=now)
    else:
        {"sign": sending.sign, "send": sending.send, "track": sending.track}[phase](
            engine, ctx, kind, now=now, report=report)


def test_unlocked_phases_from_two_threads_sweep_each_address_once(rig: SweepRig) -> None:
    due = _deposit_all(rig)
    contexts = (rig.context(), rig.context())
    reports = (StepReport(), StepReport())
    for _ in range(40):
        rig.clock += timedelta(seconds=1)
        for phase, kind in PHASES:
            _together(*(partial(_run_phase, phase, kind, rig.engine, c, rig.clock, r)
                        for c, r in zip(contexts, reports, strict=True)))
        rig.node.mine(1)
        rig.watch()
        if rig.quiet() and len(rig.rows("SELECT id FROM sweeps")) == len(due):
            break
    rig.settle(sweep=False)

    # Each sweep was planned, and each first attempt recorded, by exactly one of the two.
    assert sum(r.planned for r in reports) == len(due)
    assert sum(r.signed for r in reports) == len(due) + sum(1 for _, t in due if t)
    _assert_each_swept_once(rig, due)


def test_a_planner_waits_for_another_planners_sweep_of_the_address_and_plans_nothing(
        rig: SweepRig, owner: Engine) -> None:
    rig.fund_treasury(ETH)
    rig.deposit_usdc("u", 10 * USDC)
    rig.settle(sweep=False)
    address = rig.user("u")
    ctx = rig.context()
    report = StepReport()
    with UnitOfWork(rig.engine) as other:  # Another planner's sweep, not committed yet.
        [index] = repo.derivation_indexes(other.conn, "evm", [address]).values()
        other_id = repo.insert_sweep(
            other.conn, chain=CHAIN, address=address, derivation_index=index,
            destination=rig.hot, asset="USDC", token=rig.usdc.address, available=10 * USDC,
            customer_amount=10 * USDC, state=State.PROPOSED, gas_limit=100_000,
            actor="other planner", at=rig.clock, reason="the other planner", evidence={})
        assert other_id is not None
        planning = threading.Thread(target=planner.plan, args=(rig.engine, ctx),
                                    kwargs={"now": rig.clock, "report": report})
        planning.start()
        waited = _wait_until_blocked(owner, planning)
        other.commit()
    planning.join(30)
    assert not planning.is_alive()

    assert waited  # The planner's insert waited for the other's transaction.
    assert (report.planned, report.top_ups_planned) == (0, 0)
    assert [(s.id, s.address) for s in rig.rows("SELECT id, address FROM sweeps")] == [
        (other_id, address)]
    assert rig.rows("SELECT count(*) AS n FROM gas_top_ups")[0].n == 0
    assert [e.actor for e in rig.events(Kind.SWEEP, other_id)] == ["other planner"]


def _wait_until_blocked(owner: Engine, thread: threading.Thread, timeout_s: float = 20.0
                        ) -> bool:
    """Whether a session of this database waited on a lock (the planner's insert behind the
    uncommitted one) before ``thread`` finished."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and thread.is_alive():
        with owner.connect() as conn:
            waiting = conn.execute(sa.text(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND wait_event_type = 'Lock' "
                # The planner inserts through movement_insert (revision 0030).
                "AND query LIKE 'SELECT movement_insert(%'")).scalar()
        if waiting:
            return True
        time.sleep(0.01)
    return False
