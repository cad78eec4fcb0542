"""Crash safety: SIGKILL the watcher process at random moments while deposits and reorgs flow.

Afterwards every deposit whose transaction is final on the chain is credited exactly once,
nothing else is, the ledger's ``verify`` (and ``custody verify``) passes, and the history is
consistent with the current states.
"""

from __future__ import annotations

import contextlib
import os
import random
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import sqlalchemy as sa

from config.chains import load_chains_config
from config.database import make_engine
from config.uow import UnitOfWork
from deposits.errors import WatcherBusy
from deposits.jobs import run_watch
from deposits.watcher import Watcher
from devtools.config import dev_config, to_toml
from ledger.integrity import verify
from tests.deposits.conftest import NOW, Rig

pytestmark = [pytest.mark.anvil, pytest.mark.slow]
KILLS = int(os.environ.get("CRASH_KILLS", "55"))
CONFIRMATIONS = 3


def _config_file(rig: Rig, path: Path) -> Path:
    doc = dev_config(rpc_url=rig.node.url, token=rig.tokens.usdc.address, chain=rig.chain,
                     finality=f"confirmations:{CONFIRMATIONS}", token_minimum="0",
                     hot_wallet=None, chain_options={
                         "native_minimum": "0", "scan_blocks_max": 4, "poll_interval_s": 0.05,
                         "rpc_timeout_ms": 3000, "rpc_retries_max": 1})
    path.write_text(to_toml(doc))
    return path


class Driver:
    """Sends deposits, mines blocks and reorgs the chain while the watcher runs."""

    def __init__(self, rig: Rig, users: list[str], seed: int) -> None:
        self.rig, self.node = rig, rig.node
        self.users = users
        self.random = random.Random(seed)
        self.senders = self.node.accounts[:8]
        self.sent: dict[str, str] = {}  # tx hash -> raw bytes
        self.recent: list[list[str]] = []  # tx hashes of the last few rounds
        self.reorgs = 0

    def round(self) -> None:
        """A few deposits (native, token, several in one receipt), one block, maybe a reorg."""
        r, node, usdc = self.random, self.node, self.rig.tokens.usdc
        self.recent = [*self.recent[-3:], []]
        for sender in r.sample(self.senders, 3):
            to = r.choice(self.users)
            kind = r.random()
            if kind < 0.3:
                tx = node.send_eth(sender, to, r.randint(1, 10**18))
            elif kind < 0.7:
                tx = node.transact(usdc, "transfer", [to, r.randint(1, 10**9)], sender)
            else:
                targets = [r.choice(self.users) for _ in range(3)]
                tx = node.transact(usdc, "batchTransfer",
                                   [targets, [r.randint(1, 10**9) for _ in targets]], sender,
                                   gas=300_000)
            self.sent[tx] = node.raw_transaction(tx)
            self.recent[-1].append(tx)
        node.mine(1)
        time.sleep(0.02)  # Leave the watcher some CPU on a 2-core machine.
        if r.random() < 0.15:
            self.reorg()

    def reorg(self) -> None:
        """Replace the last 1-2 blocks; re-send most dropped transactions at once."""
        depth = self.random.choice([1, 2])
        head = self.node.head()
        dropped = [h for txs in self.recent for h in txs
                   if (rc := self.node.rpc.get_receipt(h)) is not None
                   and int(rc["blockNumber"], 16) > head - depth]
        self.node.reorg(depth)
        self.reorgs += 1
        for tx in dropped:
            # Re-sent ones land again with the same hash; the others' nonces get reused by
            # later sends, which proves them gone (failed).
            if self.random.random() < 0.8:
                # A nonce already reused makes the node refuse it: it stays dropped.
                with contextlib.suppress(Exception):
                    self.node.send_raw(self.sent[tx])


def _watcher(database_url: str, config: Path) -> int:
    """Fork a watcher process (its own engine and node client) running ``run_watch``; returns
    once the child holds a database connection.

    Forked rather than spawned so that the kills land in the watcher's work, not in Python's
    start-up; the child never returns and dies only by the signal. The kill moment is counted
    from the child's first connection, so that a loaded machine's slow connect does not eat
    the window (the test asserts that most kills land after the watcher wrote something).
    """
    ready_r, ready_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            os.close(ready_r)
            engine = make_engine(database_url, pool_size=2)
            with engine.connect():
                pass  # The pool keeps it: run_watch's first step reuses it.
            os.write(ready_w, b"r")
            os.close(ready_w)
            run_watch(engine, load_chains_config(config), poll_interval_s=0.05)
        finally:
            os._exit(3)
    os.close(ready_w)
    try:
        readable, _, _ = select.select([ready_r], [], [], 60)
        assert readable and os.read(ready_r, 1) == b"r", "the watcher never connected"
    finally:
        os.close(ready_r)
    return pid


def test_sigkill_at_random_moments_credits_every_final_deposit_once(
    rig: Rig, database_url: str, tmp_path: Path
) -> None:
    users = [rig.user(f"u{i}") for i in range(12)]
    config = _config_file(rig, tmp_path / "chains.toml")
    env = {**os.environ, "CUSTODY_DATABASE_URL": database_url, "CUSTODY_POOL_SIZE": "2"}
    driver = Driver(rig, users, seed=int(os.environ.get("CRASH_SEED", "7")))
    rng = random.Random(11)
    progressed = 0  # Runs killed after the watcher had written something (not at import).
    for _ in range(KILLS):
        before = _progress(rig)
        pid = _watcher(database_url, config)
        deadline = time.monotonic() + rng.uniform(0.05, 1.0)
        while time.monotonic() < deadline:
            driver.round()
        os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
        assert os.WIFSIGNALED(status), "the watcher died before it was killed"
        progressed += _progress(rig) != before
    assert progressed >= KILLS * 3 // 4, f"only {progressed} runs did any work"
    # Let everything settle: finality for what is on chain, then a watcher nobody kills.
    rig.node.mine(CONFIRMATIONS + 1)
    watcher = Watcher(rig.engine, load_chains_config(config), "dev")
    busy_until = time.monotonic() + 30
    steps = 0
    while steps < 200:
        try:
            report = watcher.step(now=NOW)
        except WatcherBusy:
            # The last killed watcher's backend may still hold the chain's session lock until
            # the server notices its client is gone (it was mid-statement): wait for it.
            assert time.monotonic() < busy_until, "the killed watcher's lock was never released"
            time.sleep(0.05)
            continue
        steps += 1
        if report.caught_up and not (report.new_deposits or report.finals or report.credited
                                     or report.failed):
            break
    _check(rig, driver)
    verified = subprocess.run([sys.executable, "-m", "api.cli", "verify"], env=env,
                              capture_output=True, text=True, timeout=120, check=False)
    assert verified.returncode == 0, verified.stdout + verified.stderr


def _progress(rig: Rig) -> tuple[int, int]:
    with UnitOfWork(rig.engine) as uow:
        row = uow.conn.execute(sa.text(
            "SELECT (SELECT coalesce(max(id), 0) FROM deposit_events), "
            "(SELECT count(*) FROM watcher_cursors)")).one()
    return (int(row[0]), int(row[1]))


def _check(rig: Rig, driver: Driver) -> None:
    head = rig.node.head()
    receipts = dict(zip(driver.sent, rig.node.rpc.get_receipts(list(driver.sent)), strict=True))
    with UnitOfWork(rig.engine) as uow:
        rows = uow.conn.execute(sa.text(
            "SELECT d.tx_hash, d.position, d.state, d.amount_minor, d.block_hash, "
            "d.ledger_transaction_id, (SELECT count(*) FROM ledger_transactions t "
            " WHERE t.idempotency_key = 'deposit:dev:' || d.tx_hash || ':' || d.position) AS n, "
            "(SELECT state FROM deposit_events e WHERE e.id = d.last_event_id) AS last_state "
            "FROM deposits d")).all()
        posted = uow.conn.execute(sa.text(
            "SELECT count(*) FROM ledger_transactions WHERE kind = 'deposit'")).scalar_one()
    assert len(rows) >= 300, f"only {len(rows)} deposits: the run was too short"
    credited = 0
    for row in rows:
        receipt = receipts.get(row.tx_hash)
        assert row.last_state == row.state  # The projection agrees with the history.
        final_on_chain = (receipt is not None
                          and head - int(receipt["blockNumber"], 16) + 1 >= CONFIRMATIONS)
        if final_on_chain:
            assert receipt is not None
            assert row.state == "credited", (row.tx_hash, row.state)
            assert row.block_hash == receipt["blockHash"]
        else:
            assert row.state in ("unconfirmed", "failed", "included"), (row.tx_hash, row.state)
        assert row.n == (1 if row.state == "credited" else 0)
        credited += row.state == "credited"
    assert posted == credited
    states = {r.state for r in rows}
    assert driver.reorgs >= 5 and "credited" in states
    with UnitOfWork(rig.engine) as uow:
        reincluded = uow.conn.execute(sa.text(
            "SELECT count(*) FROM deposit_events WHERE event = 'transfer_reincluded'")).scalar()
    assert reincluded, "no transaction landed again after a reorg: the run tested too little"
    assert verify(rig.engine).ok
