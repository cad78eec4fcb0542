"""Crash safety: SIGKILL a real processor subprocess at random moments across 100 withdrawals.

Afterwards no payout was sent twice (transfers counted on chain, one destination per
withdrawal), every reserve is closed or still open with a reason, and the ledger verifies.
"""

from __future__ import annotations

import os
import random
import select
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from eth_account import Account
from sqlalchemy.engine import Engine

from chains.evm import TRANSFER_TOPIC
from ledger.integrity import verify
from withdrawals import service
from withdrawals.model import State

from .chainkit import KEY_ENV, start_devnet
from .conftest import SetOwnAddresses, fund, open_book, req, write_config

pytestmark = [pytest.mark.anvil, pytest.mark.slow]
WITHDRAWALS = 100
KILLS = 55
ROOT = Path(__file__).resolve().parents[2]


def spawn(env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "withdrawals.processor", "devnet", "--interval-s", "0.01"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)


def stop(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    assert proc.stdout is not None
    proc.stdout.close()


def wait_ready(proc: subprocess.Popen[str], timeout_s: float = 20.0) -> None:
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], timeout_s)
    assert ready and proc.stdout.readline().strip() == "ready", "processor did not start"


def test_sigkill_at_random_moments_never_pays_twice(engine: Engine, database_url: str,
                                                    tmp_path: Path) -> None:
    rng = random.Random(20261130)
    net = start_devnet(finality="confirmations:2", automine=True)
    try:
        toml = net.toml.replace("bump_after_s = 3600", "bump_after_s = 3600\nbatch_max = 4")
        config = write_config(tmp_path, toml)
        env = {**os.environ, "CUSTODY_DATABASE_URL": database_url, "CUSTODY_CONFIG": str(config),
               KEY_ENV: net.key}
        open_book(engine)
        users = [f"u{i}" for i in range(10)]
        fund(engine, users, 1_000_000_000)
        destinations = [str(Account.create().address) for _ in range(WITHDRAWALS)]
        ids: list[int] = []
        own = SetOwnAddresses()
        per_kill = -(-WITHDRAWALS // KILLS)
        for _cycle in range(KILLS):
            for _ in range(per_kill):
                n = len(ids)
                if n < WITHDRAWALS:
                    ids.append(service.request_withdrawal(
                        engine, net.cfg, own,
                        req(users[n % 10], 5_000_000 + n, f"c{n}",
                            destination=destinations[n]), now=net.clock).withdrawal.id)
            proc = spawn(env)
            wait_ready(proc)
            time.sleep(rng.uniform(0.0, 0.35))
            stop(proc)
            net.node.mine(1)
        # Let a last processor finish the work, mining blocks for finality meanwhile.
        proc = spawn(env)
        try:
            wait_ready(proc)
            deadline = time.monotonic() + 90
            while time.monotonic() < deadline:
                states = {service.get_withdrawal(engine, i).state for i in ids}
                if all(s.terminal for s in states):
                    break
                net.node.mine(1)
                time.sleep(0.2)
        finally:
            stop(proc)

        logs = net.node.rpc.get_logs(0, "latest", [net.token.address], [TRANSFER_TOPIC])
        hot_topic = "0x" + "0" * 24 + net.hot[2:]
        paid = Counter("0x" + log["topics"][2][-40:] for log in logs
                       if log["topics"][1] == hot_topic)
        assert max(paid.values()) == 1, "a payout was sent twice"
        by_state: Counter[str] = Counter()
        for withdrawal_id, destination in zip(ids, destinations, strict=True):
            w = service.get_withdrawal(engine, withdrawal_id)
            by_state[w.state] += 1
            if w.state is State.SETTLED:
                assert paid[destination.lower()] == 1
            elif w.state.terminal:
                assert paid[destination.lower()] == 0
            else:
                assert w.state_reason, f"withdrawal {w.id} open without a reason"
        open_ids = {i.row.withdrawal_id for i in service.open_items(
            engine, net.cfg, older_than=__import__("datetime").timedelta(0), now=net.clock)}
        assert open_ids == {i for i in ids if not service.get_withdrawal(engine, i).state.terminal}
        assert by_state[State.SETTLED] == sum(paid.values())
        assert net.node.rpc.get_transaction_count(net.hot) == sum(paid.values())
        assert by_state[State.SETTLED] == WITHDRAWALS, by_state
        report = verify(engine)
        assert report.ok, report.discrepancies
    finally:
        net.node.stop()


@pytest.mark.anvil
def test_processor_started_alone_refuses_a_chain_id_its_node_does_not_have(
        database_url: str, tmp_path: Path) -> None:
    net = start_devnet(finality="confirmations:2", automine=True)
    try:
        assert "chain_id = 31337" in net.toml
        config = write_config(tmp_path, net.toml.replace("chain_id = 31337", "chain_id = 1"))
        env = {**os.environ, "CUSTODY_DATABASE_URL": database_url, "CUSTODY_CONFIG": str(config),
               KEY_ENV: net.key}
        done = subprocess.run(
            [sys.executable, "-m", "withdrawals.processor", "devnet", "--interval-s", "0.01"],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 2
        assert done.stdout == ""  # never ready: nothing was signed
        assert done.stderr.strip().splitlines()[-1] == (
            "error [config_mismatch]: chain devnet: chain_id is 1 in the configuration, the "
            "node says 31337")
    finally:
        net.node.stop()
