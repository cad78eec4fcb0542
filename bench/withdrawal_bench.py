"""Withdrawal reserve throughput and latency, against the ledger's plain ``post`` in the same run.

Run ``python -m bench.withdrawal_bench --help``. One run:

1. creates a fresh migrated database (embedded server under ``var/bench-withdrawals`` unless
   ``--database-url`` names another server), opens USDC and ETH with the company accounts, and
   funds ``--users`` users (1,000) through the ledger service;
2. for each mode, runs ``--clients`` concurrent clients (100: ``--procs`` processes x threads)
   for ``--seconds``, each client first sending ``--warmup`` untimed requests (3) on the pooled
   connection the window then uses (a running service's pool is warm: without this, every
   window also measured 100 backends starting, loading their caches and planning every
   statement of the post function and the triggers); then first closed-loop (each client sends
   its next request when the previous one answered: the most the system takes), then paced
   at ``--rate`` requests/s in total (500: latency is measured from each request's scheduled
   time, so a backlog counts):

   - ``post``: the baseline, ``ledger.service.post_entry`` of the reserve's own entry
     (``DR user:wallet`` / ``CR user:withdrawals``) for a random user;
   - ``reserve``: ``withdrawals.service.request_withdrawal`` for a random user: validation,
     the withdrawal row, the daily-limit lock and sum, the reserve posting, the history row,
     committed (request to committed reserve);

3. measures, per run, requests/s, latency percentiles, the CPU of this PostgreSQL server's
   processes, the clients' CPU and what the rest of the machine used ("other"; 100% = one
   core), and, for ``reserve``, where the time goes: SQL statements per request and the
   time spent waiting on each kind of statement (from SQLAlchemy's cursor events);
4. verifies the ledger (``ledger.integrity.verify``) and that every acknowledged request is
   stored exactly once; prints the tables and the verdict against the target (p99 < 50 ms at
   500 requests/s). Exit 1 if a check fails.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import random
import re
import resource
import sys
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path
from typing import Any

import psycopg
import sqlalchemy as sa
from rich.console import Console
from rich.table import Table
from sqlalchemy import event

from bench.ledger_bench import (
    _autocommit,
    _postmaster,
    create_database,
    libpq_url,
    server_cpu_s,
    system_busy_s,
)
from config.database import embedded_url, make_engine
from config.uow import UnitOfWork
from devtools.config import dev_config, dev_configs
from ledger import chart
from ledger import service as ledger
from ledger.integrity import verify
from ledger.model import Account, Entry, credit, debit

CHAIN = "devnet"
TOKEN = "0x5fbdb2315678afecb367f032d93f642f64180aa3"
FUNDING_MINOR = 10**13  # 10 million USDC each: never the limit
TARGET_P99_MS = 50.0
TARGET_RATE = 500.0
EFFECTIVE_AT = datetime(2026, 11, 29, tzinfo=UTC)
console = Console(highlight=False, width=160)

#: The development configuration; large limits: the bench measures the path, not the policy.
CONFIG = dev_config(chain=CHAIN, token=TOKEN, hot_key_env="UNUSED_IN_THIS_BENCH",
                    usdc_daily_limit="100000000")


class NoOwnAddresses:
    """The bench pays to fresh addresses only."""

    def is_own(self, chain: str, address: str) -> bool:
        return False


_NO_OWN = NoOwnAddresses()


def post_or_reserve(engine: Any, cfg: Any, pairs: Sequence[tuple[Account, Account]],
                    mode: str, user: int, amount: int, key: str,
                    rng: random.Random) -> None:
    """One measured operation under idempotency key ``key``: ``post`` puts ``amount`` from the
    user's wallet to its withdrawals account (``pairs[user]``) in one ledger post; ``reserve``
    requests a withdrawal of ``amount`` to a fresh random address."""
    from withdrawals.service import WithdrawalRequest, request_withdrawal

    if mode == "post":
        wallet, withdrawals = pairs[user]
        ledger.post_entry(engine, Entry(key, "withdrawal_reserve", EFFECTIVE_AT, "bench",
                                        (debit(wallet, amount), credit(withdrawals, amount))))
    else:
        request_withdrawal(engine, cfg, _NO_OWN, WithdrawalRequest(
            f"u{user}", CHAIN, "USDC", "0x" + rng.randbytes(20).hex(), amount, key),
            now=datetime.now(UTC))


@dataclass(frozen=True)
class Spec:
    """One measured run."""

    mode: str  # post | reserve
    rate: float  # 0: closed loop
    seconds: float
    clients: int
    procs: int
    run_no: int
    warmup: int = 0  # untimed requests per client before the window

    @property
    def label(self) -> str:
        return f"{self.mode} {'closed' if not self.rate else f'@{self.rate:.0f}/s'}"


@dataclass
class WorkerResult:
    """What one client process reports."""

    latencies_ms: list[float] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)
    warmed: int = 0  # warm-up requests acknowledged (stored, not timed)
    last_done_at: float = 0.0  # monotonic time of the last answer in the window
    cpu_s: float = 0.0
    statements: int = 0
    sql_wait_s: dict[str, float] = field(default_factory=dict)
    sql_count: dict[str, int] = field(default_factory=dict)


@dataclass
class RunResult:
    """One run, summarized."""

    spec: Spec
    done: int
    warmed: int
    errors: Counter[str]
    wall_s: float
    p50: float
    p90: float
    p99: float
    pmax: float
    server_cpu_pct: float | None
    client_cpu_pct: float
    other_cpu_pct: float | None
    statements_per_req: float
    sql_wait_ms_per_req: dict[str, float]
    load1: float  # 1-minute load average when the window started
    span_s: float  # window start to the last answer

    @property
    def rps(self) -> float:
        """Answers per second from the window's start to its last answer (not to when the
        parent collected the results: that added up to a second of polling and teardown, so a
        paced run that kept up showed ~450/s for 500/s offered)."""
        return self.done / self.span_s if self.span_s else 0.0


# --- the clients ----------------------------------------------------------------------------

_KIND = re.compile(r"^\s*(\w+)\s+(?:\w+\s+)??(?:FROM\s+|INTO\s+)?(\w+)", re.IGNORECASE)


@lru_cache(maxsize=256)
def _kind(statement: str) -> str:
    text = " ".join(statement.split())
    if text.upper().startswith("WITH "):
        # One statement doing several things (data-modifying CTEs): name them all.
        parts = ["lock"] if "pg_advisory_xact_lock" in text else []
        parts += [f"{m.group(1).upper()} {m.group(2)}" for m in re.finditer(
            r"\b(INSERT INTO|UPDATE)\s+(\w+)", text, re.IGNORECASE)]
        return "WITH " + " + ".join(parts)
    text = text[:160]
    for function in ("ledger_post_one", "ledger_post_arrays"):
        if function in text:
            return f"SELECT {function}(...)"
    if "pg_advisory_xact_lock" in text:
        return "SELECT pg_advisory_xact_lock"
    call = re.match(r"SELECT\s+(\w+)\s*\(", text, re.IGNORECASE)
    if call and not re.search(r"\bFROM\b", text, re.IGNORECASE):
        return f"SELECT {call.group(1)}(...)"
    match = re.search(r"\b(FROM|INTO|UPDATE)\s+(\w+)", text, re.IGNORECASE)
    verb = text.split(" ", 1)[0].upper()
    return f"{verb} {match.group(2)}" if match else verb


def _instrument(engine: sa.Engine, result: WorkerResult, lock: threading.Lock) -> None:
    local = threading.local()

    @event.listens_for(engine, "before_cursor_execute")
    def before(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        local.t = time.perf_counter()

    @event.listens_for(engine, "after_cursor_execute")
    def after(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        took = time.perf_counter() - local.t
        kind = _kind(statement)
        with lock:
            result.statements += 1
            result.sql_wait_s[kind] = result.sql_wait_s.get(kind, 0.0) + took
            result.sql_count[kind] = result.sql_count.get(kind, 0) + 1


def _accounts(url: str, users: int) -> list[tuple[Account, Account]]:
    engine = make_engine(url, pool_size=1)
    try:
        with UnitOfWork(engine) as uow:
            asset = ledger.get_asset(uow, "USDC")
            return [ledger.open_user_accounts(uow, f"u{i}", asset) for i in range(users)]
    finally:
        engine.dispose()


def client_main(url: str, spec: Spec, proc_no: int, users: int, counter: Any, ready: Any,
                go: Any, start_value: Any, queue: Any, release: Any) -> None:
    """One client process: ``spec.clients / spec.procs`` threads for the run's window.

    Each thread first sends ``spec.warmup`` untimed requests (its pooled connection opened,
    the server backend's caches and plans warm, as in a running service), then the process
    reports ready and waits for the common start time set by the parent."""
    threads_n = spec.clients // spec.procs
    chains, cfg = dev_configs(CONFIG)
    engine = make_engine(url, pool_size=threads_n)
    pairs = _accounts(url, users) if spec.mode == "post" else []
    result = WorkerResult()
    lock = threading.Lock()
    if spec.mode == "reserve":
        _instrument(engine, result, lock)
    interval = spec.clients / spec.rate if spec.rate else 0.0
    warmed = threading.Barrier(threads_n + 1)
    started = threading.Event()
    start_at = end_at = 0.0

    def one(rng: random.Random, n: int) -> None:
        user = rng.randrange(users)
        key = f"r{spec.run_no}-{proc_no}-{n}"
        amount = rng.randrange(1_000_000, 5_000_000)
        post_or_reserve(engine, cfg, pairs, spec.mode, user, amount, key, rng)

    def client(t: int) -> None:
        rng = random.Random(proc_no * 1000 + t + spec.run_no * 10**6)
        for i in range(spec.warmup):
            try:
                one(rng, 10**9 + t * 1000 + i)
                with lock:
                    result.warmed += 1
            except Exception as exc:  # counted and reported, never hidden
                with lock:
                    result.errors[f"warm-up {type(exc).__name__}"] += 1
        warmed.wait()
        started.wait()
        slot = proc_no * threads_n + t
        scheduled = start_at + (slot * interval / spec.clients if interval else 0.0)
        n = 0
        while True:
            if interval:
                delay = scheduled - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                began = scheduled
            else:
                began = time.monotonic()
            if began >= end_at:
                return
            try:
                one(rng, t * 10**7 + n)
                finished = time.monotonic()
                with lock:
                    result.latencies_ms.append((finished - began) * 1000)
                    result.last_done_at = max(result.last_done_at, finished)
                with counter.get_lock():
                    counter.value += 1
            except Exception as exc:  # counted and reported, never hidden
                with lock:
                    result.errors[type(exc).__name__] += 1
            n += 1
            scheduled += interval

    workers = [threading.Thread(target=client, args=(t,)) for t in range(threads_n)]
    for w in workers:
        w.start()
    warmed.wait()
    # Statements of the warm-up are not the window's.
    with lock:
        result.statements = 0
        result.sql_wait_s.clear()
        result.sql_count.clear()
    with ready.get_lock():
        ready.value += 1
    go.wait(600)
    start_at = start_value.value
    end_at = start_at + spec.seconds
    while time.monotonic() < start_at:
        time.sleep(0.001)
    cpu0 = resource.getrusage(resource.RUSAGE_SELF)
    started.set()
    for w in workers:
        w.join()
    cpu1 = resource.getrusage(resource.RUSAGE_SELF)
    result.cpu_s = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    queue.put(result)
    # Keep the connections (their backends' CPU counters) until the server CPU is read.
    release.wait(120)
    engine.dispose()


# --- one run --------------------------------------------------------------------------------


def _percentile(values: Sequence[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def measure(url: str, spec: Spec, users: int, postmaster: Any) -> RunResult:
    """Start the client processes, show progress each second, collect and summarize."""
    ctx = mp.get_context("fork")
    counter = ctx.Value("q", 0)
    ready = ctx.Value("i", 0)
    start_value = ctx.Value("d", 0.0)
    go = ctx.Event()
    queue = ctx.Queue()
    release = ctx.Event()
    procs = [ctx.Process(target=client_main, args=(url, spec, p, users, counter, ready, go,
                                                       start_value, queue, release))
             for p in range(spec.procs)]
    began = time.monotonic()
    for p in procs:
        p.start()
    # Every process connected and warmed up (bounded: a stuck warm-up fails the run below).
    while ready.value < spec.procs and time.monotonic() - began < 300:
        time.sleep(0.05)
    warm_s = time.monotonic() - began
    start_at = time.monotonic() + 0.5
    start_value.value = start_at
    go.set()
    console.print(f"  {spec.label:>16}: warm-up {spec.warmup} request(s) per client, "
                  f"{warm_s:.1f}s")
    while time.monotonic() < start_at:
        time.sleep(0.01)
    server0, busy0, t0 = server_cpu_s(postmaster), system_busy_s(), time.monotonic()
    load1 = os.getloadavg()[0]
    last = 0
    while any(p.is_alive() for p in procs) and queue.qsize() < spec.procs:
        time.sleep(1.0)
        now_done = counter.value
        elapsed = time.monotonic() - t0
        console.print(f"  {spec.label:>16}: {elapsed:5.1f}s  {now_done:7,} done "
                      f"({now_done - last:5,}/s)", end="\r")
        last = now_done
        if elapsed > spec.seconds + 60:
            break
    results = [queue.get(timeout=120) for _ in procs]
    wall = time.monotonic() - t0
    server1, busy1 = server_cpu_s(postmaster), system_busy_s()
    release.set()
    for p in procs:
        p.join(timeout=30)
    console.print()
    lat = [x for r in results for x in r.latencies_ms]
    errors: Counter[str] = Counter()
    for r in results:
        errors.update(r.errors)
    client_cpu = sum(r.cpu_s for r in results)
    server_cpu = None if server0 is None or server1 is None else server1 - server0
    other = None if server_cpu is None else (busy1 - busy0) - server_cpu - client_cpu
    done = len(lat)
    waits: dict[str, float] = defaultdict(float)
    for r in results:
        for k, v in r.sql_wait_s.items():
            waits[k] += v * 1000 / max(done, 1)
    return RunResult(
        spec, done, sum(r.warmed for r in results), errors, wall, _percentile(lat, 0.50),
        _percentile(lat, 0.90),
        _percentile(lat, 0.99), max(lat) if lat else float("nan"),
        None if server_cpu is None else 100 * server_cpu / wall, 100 * client_cpu / wall,
        None if other is None else 100 * max(other, 0.0) / wall,
        sum(r.statements for r in results) / max(done, 1), dict(waits), load1,
        max((r.last_done_at for r in results), default=start_at) - start_at)


# --- setup and checks -----------------------------------------------------------------------


def setup(url: str, users: int) -> None:
    """Assets, company accounts, and ``users`` funded wallets (through the ledger service)."""
    engine = make_engine(url, pool_size=2)
    try:
        with UnitOfWork(engine) as uow:
            usdc = ledger.open_asset(uow, "USDC", 6)
            eth = ledger.open_asset(uow, "ETH", 18)
            for asset in (usdc, eth):
                for spec in (chart.custody(CHAIN), chart.treasury(CHAIN), chart.equity_owner(),
                             chart.revenue_withdrawal_fees(), chart.expense_network_fees(),
                             chart.suspense_unattributed()):
                    ledger.open_account(uow, spec, asset)
            custody = ledger.get_account(uow, f"custody:{CHAIN}", "USDC")
            entries = []
            for i in range(users):
                wallet, _ = ledger.open_user_accounts(uow, f"u{i}", usdc)
                entries.append(Entry(f"fund:u{i}", "deposit", EFFECTIVE_AT, "bench",
                                     (debit(custody, FUNDING_MINOR),
                                      credit(wallet, FUNDING_MINOR))))
            for chunk in range(0, len(entries), 200):
                outcomes = ledger.post_batch(uow, entries[chunk:chunk + 200])
                assert all(o.ok for o in outcomes)
            uow.commit()
    finally:
        engine.dispose()


def check(url: str, acked: dict[str, int]) -> list[str]:
    """Findings (empty: all good): ledger verify, and acknowledged == stored per mode."""
    findings = []
    engine = make_engine(url, pool_size=1)
    try:
        report = verify(engine)
        if not report.ok:
            findings += [f"verify: {d}" for d in report.discrepancies]
    finally:
        engine.dispose()
    with psycopg.connect(libpq_url(url)) as conn:
        reserves = conn.execute("SELECT count(*) FROM ledger_transactions "
                                "WHERE kind = 'withdrawal_reserve'").fetchone()
        rows = conn.execute("SELECT count(*), count(*) FILTER (WHERE state = 'reserved') "
                            "FROM withdrawals").fetchone()
    assert reserves is not None and rows is not None
    if reserves[0] != acked["post"] + acked["reserve"]:
        findings.append(f"reserve transactions {reserves[0]} != acknowledged "
                        f"{acked['post'] + acked['reserve']}")
    if rows[0] != acked["reserve"] or rows[1] != acked["reserve"]:
        findings.append(f"withdrawals {rows[0]} (reserved {rows[1]}) != acknowledged "
                        f"{acked['reserve']}")
    return findings


# --- output ---------------------------------------------------------------------------------


def _pct(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.0f}%"


COLUMNS = ("run", "requests", "req/s", "p50 ms", "p90 ms", "p99 ms", "max ms", "errors",
           "PG CPU", "client CPU", "other CPU")


def _row(r: RunResult) -> list[str]:
    return [r.spec.label, f"{r.done:,}", f"{r.rps:,.0f}", f"{r.p50:.1f}", f"{r.p90:.1f}",
            f"{r.p99:.1f}", f"{r.pmax:.0f}", str(sum(r.errors.values())),
            _pct(r.server_cpu_pct), _pct(r.client_cpu_pct), _pct(r.other_cpu_pct)]


def markdown(results: list[RunResult]) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(_row(r)) + " |" for r in results]
    return "\n".join(lines)


def breakdown(r: RunResult) -> list[str]:
    """CPU per request and, for a reserve, where its time goes (from the cursor events;
    ``post_entry`` bypasses them)."""
    cpu = (f"client CPU {(r.client_cpu_pct / 100) * r.wall_s * 1000 / max(r.done, 1):.2f} "
           f"ms/request, PG CPU "
           f"{((r.server_cpu_pct or 0) / 100) * r.wall_s * 1000 / max(r.done, 1):.2f} ms/request "
           f"(load {r.load1:.1f} at the start)")
    if r.spec.mode != "reserve":
        return [f"{r.spec.label}: {cpu}"]
    total = sum(r.sql_wait_ms_per_req.values())
    lines = [f"{r.spec.label}: {r.statements_per_req:.1f} SQL statements per request; "
             f"{total:.2f} ms of {r.p50:.2f} ms (p50) waiting on them; {cpu}"]
    for kind, ms in sorted(r.sql_wait_ms_per_req.items(), key=lambda kv: -kv[1])[:10]:
        lines.append(f"  {ms:6.2f} ms/request  {kind}")
    return lines


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.withdrawal_bench", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--users", type=int, default=1_000, help="funded users (1000)")
    p.add_argument("--clients", type=int, default=100, help="concurrent clients (100)")
    p.add_argument("--procs", type=int, default=4, help="client processes (4)")
    p.add_argument("--seconds", type=float, default=10.0, help="window per run (10)")
    p.add_argument("--warmup", type=int, default=3,
                   help="untimed requests per client before each window, on the connection "
                        "the window then uses (3; 0: cold connections, as before 2026-11-30)")
    p.add_argument("--rate", type=float, default=TARGET_RATE,
                   help="paced runs: total requests/s (500; 0 skips the paced runs)")
    p.add_argument("--database-url", help="server to use (default: embedded under --data-dir)")
    p.add_argument("--data-dir", type=Path, default=Path("var/bench-withdrawals"))
    p.add_argument("--markdown", type=Path, help="also write the tables as Markdown here")
    p.add_argument("--keep", action="store_true", help="keep the database afterwards")
    args = p.parse_args(argv)
    if args.clients % args.procs:
        p.error("--clients must be a multiple of --procs")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Set up, run post then reserve (closed loop, then paced), check, print; exit 1 on a
    failed check."""
    args = parse_args(argv)
    began = time.monotonic()
    server_url = args.database_url or embedded_url(args.data_dir)
    name = f"wbench_{datetime.now(UTC):%Y%m%d_%H%M%S}"
    url = create_database(server_url, name)
    setup(url, args.users)
    postmaster = _postmaster(url)
    console.print(f"setup {time.monotonic() - began:.1f}s: {args.users:,} funded users, "
                  f"{args.clients} clients in {args.procs} processes, nproc={os.cpu_count()}, "
                  f"load {os.getloadavg()[0]:.2f}")
    specs: list[Spec] = []
    for mode in ("post", "reserve"):
        specs.append(Spec(mode, 0.0, args.seconds, args.clients, args.procs, len(specs),
                          args.warmup))
        if args.rate:
            specs.append(Spec(mode, args.rate, args.seconds, args.clients, args.procs,
                              len(specs), args.warmup))
    results = [measure(url, s, args.users, postmaster) for s in specs]
    acked = {m: sum(r.done + r.warmed for r in results if r.spec.mode == m)
             for m in ("post", "reserve")}
    console.print("checks: ledger verify, acknowledged = stored ...")
    findings = check(url, acked)
    table = Table(title=f"Reserve vs ledger post ({args.clients} clients, {args.users:,} users)")
    for c in COLUMNS:
        table.add_column(c, justify="right")
    for r in results:
        table.add_row(*_row(r))
    console.print(table)
    notes = []
    for r in results:
        notes += breakdown(r)
    paced = [r for r in results if r.spec.mode == "reserve" and r.spec.rate]
    for r in paced:
        met = r.p99 < TARGET_P99_MS and r.rps >= 0.98 * r.spec.rate
        notes.append(f"target p99 < {TARGET_P99_MS:.0f} ms at {r.spec.rate:.0f} requests/s: "
                     f"{'MET' if met else 'NOT MET'} (p99 {r.p99:.1f} ms at {r.rps:.0f}/s)")
    notes.append(f"checks: {'OK' if not findings else 'FAILED'} (verify; acknowledged "
                 f"{acked['post'] + acked['reserve']:,} reserves = stored)")
    notes += [f"  {f}" for f in findings]
    for line in notes:
        console.print(line)
    if args.markdown:
        args.markdown.write_text(markdown(results) + "\n\n" + "\n".join(
            f"- {n}" if not n.startswith("  ") else f"  - {n.strip()}" for n in notes) + "\n")
    if not args.keep:
        _autocommit(server_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    console.print(f"total {time.monotonic() - began:.0f}s")
    return 0 if not findings and not any(r.errors for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
