"""Failover under load: SIGKILL the primary's postmaster, then (second round) Patroni itself,
while threads post to the ledger and reserve withdrawals, deposits arrive on anvil for the
watcher to credit, and the processor pays the withdrawals out.

Patroni promotes the synchronous standby each time and the engine carries on through the
cluster's multi-host URL. Afterwards every operation the engine acknowledged is on the new
primary exactly once (counted by key); every one that raised is in doubt, and is resolved by
repeating it with its key, after which it too is there once; every deposit is credited once and
no withdrawal was paid twice on chain; ``custody verify`` passes on the cluster. Each round
prints how long writes were unavailable: the longest stretch without an acknowledged write from
the SIGKILL until the old primary is back as the synchronous standby (after a postmaster's
death: from the SIGKILL to the first write acknowledged after it).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import sqlalchemy as sa
from eth_account import Account
from eth_utils.address import to_checksum_address
from sqlalchemy.engine import Engine

from chains.addresses import MnemonicAddressSource
from chains.evm import TRANSFER_TOPIC
from config.database import owner_engine
from config.uow import UnitOfWork
from deposits import service as deposits
from devtools.anvil import DEV_ACCOUNTS, DEV_MNEMONIC
from devtools.cluster import Cluster, Node, wait_for
from ledger import service as ledger
from ledger.model import Account as LedgerAccount
from ledger.model import Entry, credit, debit
from tests.withdrawals.chainkit import KEY_ENV, Devnet, start_devnet
from tests.withdrawals.conftest import T0, SetOwnAddresses, fund, open_book, req, write_config
from withdrawals import service
from withdrawals.model import State

from .conftest import DATABASE, cluster_engine

pytestmark = [pytest.mark.anvil, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]
USERS = [f"u{i}" for i in range(6)]
WRITERS = 3
RESERVES_MAX = 30
#: Acknowledged writes wanted before each kill and after each failover.
ACKS_AROUND_KILL = 15
SENDER = DEV_ACCOUNTS[0]


@dataclass
class Op:
    """One write through the engine's services, and what the engine answered."""

    kind: str  # "post" (a ledger post) or "reserve" (a withdrawal request: its reserve)
    key: str
    user: str
    amount_minor: int
    destination: str = ""
    started_at: float = 0.0
    acked_at: float | None = None
    #: The error it raised: the write is in doubt (it may or may not have committed).
    error: str | None = None


class Load:
    """Writer threads calling the engine's services with fresh idempotency keys until stopped."""

    def __init__(self, engine: Engine, net: Devnet) -> None:
        self.engine, self.net = engine, net
        self.own = SetOwnAddresses()
        self.ops: list[Op] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._reserves = 0
        with UnitOfWork(engine) as uow:
            self.custody = ledger.get_account(uow, "custody:devnet", "USDC")
            self.wallets: dict[str, LedgerAccount] = {
                u: ledger.get_account(uow, f"user:{u}:wallet", "USDC") for u in USERS}
        self.threads = [threading.Thread(target=self._run, args=(n,), daemon=True)
                        for n in range(WRITERS)]

    def start(self) -> None:
        for thread in self.threads:
            thread.start()

    def stop(self) -> None:
        self._stop.set()
        for thread in self.threads:
            thread.join(timeout=120)
            assert not thread.is_alive(), "a writer thread hangs"

    def _next(self, writer: int, i: int) -> Op:
        with self._lock:
            reserve = i % 3 == 0 and self._reserves < RESERVES_MAX
            self._reserves += reserve
        user = USERS[(writer * 7 + i) % len(USERS)]
        if reserve:
            return Op("reserve", f"w{writer}-{i}", user, 1_000_000 + i,
                      str(Account.create().address))
        return Op("post", f"cluster:post:{writer}:{i}", user, 1_000 + i)

    def _run(self, writer: int) -> None:
        i = 0
        while not self._stop.is_set():
            op = self._next(writer, i)
            i += 1
            op.started_at = time.monotonic()
            try:
                self.perform(op)
                op.acked_at = time.monotonic()
            except Exception as exc:  # noqa: BLE001 - any error leaves the write in doubt
                op.error = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
                time.sleep(0.05)
            with self._lock:
                self.ops.append(op)

    def perform(self, op: Op) -> None:
        """The write, through the engine's public services (safe to repeat: same key)."""
        if op.kind == "post":
            ledger.post_entry(self.engine, Entry(
                op.key, "deposit", T0, "cluster-test",
                (debit(self.custody, op.amount_minor),
                 credit(self.wallets[op.user], op.amount_minor))))
        else:
            service.request_withdrawal(self.engine, self.net.cfg, self.own,
                                       req(op.user, op.amount_minor, op.key,
                                           destination=op.destination), now=self.net.clock)

    def acked_after(self, t: float) -> list[Op]:
        """The writes started after ``t`` and acknowledged."""
        with self._lock:
            return [o for o in self.ops if o.started_at > t and o.acked_at is not None]

    def unavailable_s(self, t: float, until: float) -> float:
        """The longest stretch without an acknowledged write from ``t`` (the SIGKILL) until
        ``until``: from ``t`` to the first write acknowledged after it when the kill stopped
        writes at once, the outage in the middle when the old primary went on for a while."""
        with self._lock:
            acks = sorted(o.acked_at for o in self.ops if o.acked_at is not None
                          and t < o.acked_at <= until)
        edges = [t, *acks]
        return max((b - a for a, b in zip(edges, edges[1:], strict=False)), default=until - t)


class Service:
    """An engine process (``python -m ...``) on the cluster's URL, started again when it exits
    (as its service manager would); ``restarts`` counts those."""

    def __init__(self, argv: list[str], env: dict[str, str], log: Path) -> None:
        self.argv, self.env, self.log = argv, env, log
        self.restarts = 0
        self._stop = threading.Event()
        self.proc = self._spawn()
        self.thread = threading.Thread(target=self._supervise, daemon=True)
        self.thread.start()

    def _spawn(self) -> subprocess.Popen[bytes]:
        with self.log.open("ab") as out:
            return subprocess.Popen([sys.executable, "-m", *self.argv], cwd=ROOT, env=self.env,
                                    stdout=out, stderr=out)

    def _supervise(self) -> None:
        while not self._stop.wait(0.5):
            if self.proc.poll() is not None:
                self.restarts += 1
                self.proc = self._spawn()

    def stop(self) -> None:
        self._stop.set()
        self.thread.join(timeout=10)
        self.proc.kill()
        self.proc.wait(timeout=10)


class Deposits:
    """Sends a token deposit to a user's deposit address every ``interval_s`` and mines, until
    stopped; the watcher credits them once final."""

    def __init__(self, engine: Engine, net: Devnet, interval_s: float = 0.3) -> None:
        self.net, self.interval_s = net, interval_s
        self.sent: list[str] = []
        self._stop = threading.Event()
        net.node.transact(net.token, "mint", [to_checksum_address(SENDER), 10**15])
        source = MnemonicAddressSource(DEV_MNEMONIC, account=1)
        with UnitOfWork(engine) as uow:
            self.addresses = [to_checksum_address(
                deposits.assign_address(uow, "evm", u, source)) for u in USERS]
            uow.commit()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        i = 0
        while not self._stop.wait(self.interval_s):
            to = self.addresses[i % len(self.addresses)]
            self.sent.append(self.net.node.transact(self.net.token, "transfer",
                                                    [to, 1_000_000 + i], SENDER))
            self.net.node.mine(1)  # Blocks for the finality of deposits and payouts.
            i += 1

    def stop(self) -> None:
        self._stop.set()
        self.thread.join(timeout=30)


def _counts(cluster: Cluster, ops: list[Op]) -> Counter[str]:
    """How many times each op's key is on the primary: ledger transactions for posts,
    withdrawals for reserves (each withdrawal holds its one reserve transaction)."""
    eng = owner_engine(cluster.node_url(cluster.wait_primary(), DATABASE))
    try:
        with eng.connect() as conn:
            posts = conn.execute(sa.text(
                "SELECT idempotency_key, count(*) FROM ledger_transactions "
                "WHERE idempotency_key = ANY(:k) GROUP BY 1"),
                {"k": [o.key for o in ops if o.kind == "post"]}).all()
            reserves = conn.execute(sa.text(
                "SELECT request_key, count(*) FROM withdrawals "
                "WHERE request_key = ANY(:k) AND reserve_transaction_id IS NOT NULL GROUP BY 1"),
                {"k": [o.key for o in ops if o.kind == "reserve"]}).all()
    finally:
        eng.dispose()
    return Counter({k: int(n) for k, n in [*posts, *reserves]})


@dataclass
class Round:
    """The figures of one failover, in seconds from the SIGKILL."""

    kill: str
    promoted_s: float  # until the synchronous standby ran as the primary
    whole_s: float  # until the old primary was back as its synchronous standby
    unavailable_s: float  # the longest stretch without an acknowledged write

    def __str__(self) -> str:
        return (f"SIGKILL of the primary's {self.kill}: writes unavailable "
                f"{self.unavailable_s:.1f} s, standby promoted after {self.promoted_s:.1f} s, "
                f"old primary back as synchronous standby after {self.whole_s:.1f} s")


def _failover(cluster: Cluster, load: Load, kill: str) -> Round:
    """Kill the primary's postmaster or its Patroni; wait for the synchronous standby to take
    over, for writes to go through again and for the old primary to follow as the synchronous
    standby."""
    primary, standby = cluster.wait_primary(), cluster.wait_sync_standby()
    before = time.monotonic()
    wait_for("writes before the kill", lambda: len(load.acked_after(before)) >= ACKS_AROUND_KILL,
             120)
    killed_at = time.monotonic()
    if kill == "postmaster":
        primary.kill_postmaster()
    else:
        primary.kill_patroni()
    promoted: Node = cluster.wait_primary(other_than=primary, timeout_s=120)
    promoted_s = time.monotonic() - killed_at
    assert promoted is standby, "Patroni promoted a node that was not the synchronous standby"
    if kill == "patroni":
        # Its server still runs as a primary; Patroni, started again, demotes it and rejoins.
        cluster.restart_patroni(primary)
    assert cluster.wait_sync_standby(timeout_s=180) is primary
    whole_s = time.monotonic() - killed_at
    wait_for("writes after the failover",
             lambda: len(load.acked_after(killed_at)) >= ACKS_AROUND_KILL, 180)
    return Round(kill, promoted_s, whole_s, load.unavailable_s(killed_at, time.monotonic()))


def test_failover_under_load_loses_no_acknowledged_write(
        cluster: Cluster, cluster_url: str, tmp_path: Path,
        record_property: Callable[[str, object], None]) -> None:
    net = start_devnet(finality="confirmations:2", automine=True)
    engine = cluster_engine(cluster_url, pool_size=WRITERS)
    services: list[Service] = []
    try:
        open_book(engine)
        fund(engine, USERS, 10**12)
        env = {**os.environ, "CUSTODY_DATABASE_URL": cluster_url, KEY_ENV: net.key,
               "CUSTODY_CONFIG": str(write_config(tmp_path, net.toml))}
        sent = Deposits(engine, net)
        services = [
            Service(["withdrawals.processor", "devnet", "--interval-s", "0.1"], env,
                    tmp_path / "processor.log"),
            Service(["api.cli", "watch", "--chain", "devnet", "--poll-interval-s", "0.1"], env,
                    tmp_path / "watcher.log")]
        load = Load(engine, net)
        load.start()
        sent.thread.start()
        rounds = [_failover(cluster, load, kill) for kill in ("postmaster", "patroni")]
        load.stop()
        sent.stop()
        figures = "\n".join([*map(str, rounds), (
            f"{len(load.ops)} writes, {sum(o.error is not None for o in load.ops)} in doubt, "
            f"{len(sent.sent)} deposits; processor and watcher restarted "
            f"{services[0].restarts} and {services[1].restarts} times")])
        print(figures)
        record_property("figures", figures)  # Printed after the run (tests/conftest.py).

        acked = [o for o in load.ops if o.acked_at is not None]
        doubt = [o for o in load.ops if o.error is not None]
        counts = _counts(cluster, load.ops)
        assert {o.key: counts[o.key] for o in acked} == {o.key: 1 for o in acked}
        assert all(counts[o.key] <= 1 for o in doubt)
        # In doubt: the engine's answer is lost, not the write's fate. Repeating the write with
        # its key resolves it: it commits once, or returns the first commit.
        for op in doubt:
            load.perform(op)
        counts = _counts(cluster, load.ops)
        assert {o.key: counts[o.key] for o in load.ops} == {o.key: 1 for o in load.ops}

        ids = _withdrawal_ids(engine, [o.key for o in load.ops if o.kind == "reserve"])
        wait_for("every withdrawal settled and every deposit credited",
                 lambda: _all_done(engine, net, ids, sent.sent), 240, interval_s=0.3)
        _check_paid_once(engine, net, ids)
        verified = subprocess.run([sys.executable, "-m", "api.cli", "verify"], env=env, cwd=ROOT,
                                  capture_output=True, text=True, timeout=180, check=False)
        assert verified.returncode == 0, verified.stdout + verified.stderr
        # The processor and the watcher carried on through both failovers by themselves: no
        # process had to be started again (a lost connection ends a step, not the process;
        # one starting meanwhile waits for a primary).
        assert [s.restarts for s in services] == [0, 0], [s.log.read_text()[-3000:]
                                                          for s in services]
    except BaseException:
        print(cluster.logs())
        raise
    finally:
        for service_ in services:
            service_.stop()
        engine.dispose()
        net.node.stop()


def _withdrawal_ids(engine: Engine, keys: list[str]) -> list[int]:
    with UnitOfWork(engine) as uow:
        return list(uow.conn.execute(sa.text(
            "SELECT id FROM withdrawals WHERE request_key = ANY(:k)"), {"k": keys}).scalars())


def _credits(engine: Engine, tx_hashes: list[str]) -> Counter[str]:
    """Ledger transactions per deposit transaction (one transfer each: key
    ``deposit:devnet:<tx>:<position>``)."""
    with UnitOfWork(engine) as uow:
        keys = uow.conn.execute(sa.text(
            "SELECT idempotency_key FROM ledger_transactions WHERE idempotency_key = ANY("
            "SELECT 'deposit:devnet:' || tx_hash || ':' || position FROM deposits "
            "WHERE tx_hash = ANY(:t))"), {"t": tx_hashes}).scalars()
        return Counter(key.split(":")[2] for key in keys)


def _all_done(engine: Engine, net: Devnet, ids: list[int], deposits_sent: list[str]) -> bool:
    net.node.mine(1)
    credits = _credits(engine, deposits_sent)
    assert max(credits.values(), default=0) <= 1, "a deposit was credited twice"
    return (all(service.get_withdrawal(engine, i).state.terminal for i in ids)
            and set(credits) == set(deposits_sent))


def _check_paid_once(engine: Engine, net: Devnet, ids: list[int]) -> None:
    """One transfer per settled withdrawal, none for the others, none twice."""
    logs = net.node.rpc.get_logs(0, "latest", [net.token.address], [TRANSFER_TOPIC])
    hot_topic = "0x" + "0" * 24 + net.hot[2:]
    paid = Counter("0x" + log["topics"][2][-40:] for log in logs if log["topics"][1] == hot_topic)
    assert paid and max(paid.values()) == 1, "a withdrawal was paid twice"
    states: Counter[State] = Counter()
    for withdrawal_id in ids:
        w = service.get_withdrawal(engine, withdrawal_id)
        states[w.state] += 1
        assert paid[w.destination.lower()] == (1 if w.state is State.SETTLED else 0)
    assert states[State.SETTLED] == len(ids) == sum(paid.values()), states
