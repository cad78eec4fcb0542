"""Crash safety of the sweeper: SIGKILL it at random moments while 100 deposit addresses (60 with
ETH, 40 with USDC and so a gas top-up each) are swept, the test meanwhile depositing, mining
blocks and running the watcher.

Afterwards: every address was swept exactly once (one final sweep per address and asset, one
transfer on chain, one internal deposit at the hot wallet), per sender the attempts' nonces
are exactly 0..n-1, each consumed on chain by exactly one attempt and the chain's nonce is n,
no funds were lost (every address holds what the records say, custody unchanged), per asset
the holdings of all our addresses equal custody + treasury, and the ledger verifies.

The killed sweepers run ``sweeps.runner.main`` (what ``python -m sweeps dev --interval-s 0.05``
runs) in a process forked from the test, so that the kills land in the sweeper's work rather
than in the interpreter's start-up (about 2.5 s of imports here, mostly eth_account); the
first one and the one that finishes the work are real ``python -m sweeps`` processes.
"""

from __future__ import annotations

import os
import random
import time
from collections import Counter
from pathlib import Path

import pytest

from config.uow import UnitOfWork
from ledger.integrity import verify
from sweeps.model import Kind
from sweeps.repository import address_records

from .conftest import CHAIN, ETH, USDC, SweeperProcess, SweepRig

pytestmark = [pytest.mark.anvil, pytest.mark.slow]
ETH_ADDRESSES, USDC_ADDRESSES = 60, 40
KILLS = 55


def _deposits(rig: SweepRig, rng: random.Random) -> list[tuple[str, str | None, int]]:
    """(user, token, value) of the 100 deposits, in a random order."""
    plan: list[tuple[str, str | None, int]] = [
        (f"e{i}", None, ETH // 10 + rng.randrange(ETH // 10)) for i in range(ETH_ADDRESSES)]
    plan += [(f"u{i}", rig.usdc.address, 2 * USDC + rng.randrange(1_000 * USDC))
             for i in range(USDC_ADDRESSES)]
    rng.shuffle(plan)
    return plan


def _run_until_killed(rig: SweepRig, sweeper: SweeperProcess, rng: random.Random) -> None:
    """Mine and watch while the sweeper works, then kill it at a random moment."""
    try:
        sweeper.wait_ready()
        deadline = time.monotonic() + rng.uniform(0.0, 1.8)
        while time.monotonic() < deadline:
            rig.node.mine(1)
            rig.watch()
            time.sleep(0.01)
    finally:
        sweeper.kill()


def _in_flight(rig: SweepRig) -> Counter[str]:
    """``<kind>:<state>`` of the movements not yet final (where a kill left them)."""
    return Counter(f"{r.kind}:{r.state}" for r in rig.rows(
        "SELECT 'sweep' AS kind, state FROM sweeps WHERE state <> 'final' UNION ALL "
        "SELECT 'top_up', state FROM gas_top_ups WHERE state <> 'final'"))


def _finish(rig: SweepRig, env: dict[str, str], expected: int) -> None:
    """A last sweeper finishes the work while blocks are mined and the watcher runs."""
    sweeper = SweeperProcess(env, real=True)
    try:
        sweeper.wait_ready()
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            rig.node.mine(1)
            rig.watch()
            done = rig.rows("SELECT count(*) AS n FROM sweeps WHERE state = 'final'")[0].n
            if done == expected and rig.quiet():
                break
            time.sleep(0.05)
    finally:
        sweeper.kill()
    rig.node.mine(4)
    rig.watch(2)
    assert rig.quiet(), rig.open_movements()


def test_sigkill_at_random_moments_sweeps_every_address_exactly_once(
        rig: SweepRig, database_url: str, tmp_path: Path) -> None:
    seed = int(os.environ.get("CUSTODY_CRASH_SEED") or random.SystemRandom().randrange(2**32))
    print(f"sweeper crash test: seed {seed} (CUSTODY_CRASH_SEED={seed} repeats it)")
    rng = random.Random(seed)
    # Small batches: every step reaches every phase before the next kill.
    rig.doc["sweeps"]["batch_max"] = 5
    env = rig.process_env(database_url, rig.write_config(tmp_path / "custody.toml"))
    rig.fund_treasury(ETH)
    rig.settle(sweep=False)
    plan = _deposits(rig, rng)
    per_kill = -(-len(plan) // (KILLS - 5))  # All deposited well before the last kill.
    sent = 0
    at_kill: Counter[str] = Counter()
    for kill in range(KILLS):
        for user, token, value in plan[sent:sent + per_kill]:
            (rig.deposit_eth if token is None else rig.deposit_usdc)(user, value)
        sent += per_kill
        rig.node.mine(1)
        rig.watch()
        _run_until_killed(rig, SweeperProcess(env, real=kill == 0), rng)
        at_kill.update(_in_flight(rig))
    print(f"movements in flight at the kills: {dict(at_kill)}; "
          f"after the last: {dict(_in_flight(rig))}")
    custody = {"ETH": sum(v for _, t, v in plan if t is None),
               "USDC": sum(v for _, t, v in plan if t is not None)}
    _finish(rig, env, len(plan))

    # One final sweep per address and asset, nothing else.
    deposited = {(rig.user(u), t): v for u, t, v in plan}
    expected = sorted(deposited)
    sweeps = rig.rows("SELECT * FROM sweeps ORDER BY id")
    assert {s.state for s in sweeps} == {"final"}
    assert sorted((s.address, s.token) for s in sweeps) == expected
    top_ups = rig.rows("SELECT * FROM gas_top_ups ORDER BY id")
    assert {t.state for t in top_ups} == {"final"}
    assert sorted(t.address for t in top_ups) == sorted(
        rig.user(u) for u, t, _ in plan if t is not None)
    # On chain: one token transfer per USDC address to the hot wallet, one internal deposit
    # per address and asset at the hot wallet, each for what its sweep says it moved.
    assert rig.usdc_transfers_to(rig.hot) == Counter(
        {rig.user(u): 1 for u, t, _ in plan if t is not None})
    arrived = rig.rows("SELECT from_address, token, value, state FROM deposits "
                       "WHERE to_address = :h AND from_address <> :bob", h=rig.hot,
                       bob=rig.rows("SELECT from_address FROM deposits "
                                    "WHERE state = 'capital'")[0].from_address)
    assert {r.state for r in arrived} == {"internal"}
    assert sorted((r.from_address, r.token, int(r.value)) for r in arrived) == sorted(
        (s.address, s.token, int(s.swept_amount)) for s in sweeps)
    # Nonces: 0..n-1 per sender, each consumed once on chain; one transaction per address.
    used = rig.assert_nonces_exact()
    assert used == {rig.hot: len(top_ups), **{rig.user(u): 1 for u, _, _ in plan}}
    stored = {r.address: int(r.next_nonce)
              for r in rig.rows("SELECT address, next_nonce FROM sender_nonces")}
    assert stored == used
    for s in sweeps:
        assert [e.event for e in rig.events(Kind.SWEEP, s.id)].count("nonce_assigned") == 1
    # No funds lost: every address holds exactly what the records say (a native sweep leaves
    # the unused part of its gas reservation, a token sweep nothing), custody is unchanged and
    # every USDC unit is at the hot wallet.
    with UnitOfWork(rig.engine) as uow:
        records = address_records(uow.conn, CHAIN)
    for address in rig.users.values():
        usdc = records.get((address, rig.usdc.address))
        assert rig.on_chain(address) == (records[(address, None)].expected,
                                         0 if usdc is None else usdc.expected)
        assert usdc is None or usdc.expected == 0
    for s in sweeps:
        [attempt] = rig.rows("SELECT max_fee_per_gas FROM outgoing_attempts WHERE sweep_id = :i",
                             i=s.id)
        reserved = 0 if s.token else s.gas_limit * int(attempt.max_fee_per_gas)
        assert int(s.swept_amount) + reserved == int(s.available) == int(s.customer_amount)
        assert int(s.customer_amount) == deposited[(s.address, s.token)]
    assert (rig.custody("ETH"), rig.custody("USDC")) == (custody["ETH"], custody["USDC"])
    assert rig.on_chain(rig.hot)[1] == custody["USDC"]
    for asset, (on_chain, booked) in rig.holdings().items():
        assert on_chain == booked, asset
    report = verify(rig.engine)
    assert report.ok, report.discrepancies
