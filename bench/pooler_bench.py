"""What ``CUSTODY_DATABASE_POOLER=transaction`` costs, direct and through PgBouncer.

Run ``python -m bench.pooler_bench --help`` (``make bench-pooler``). One run:

1. creates a fresh migrated database (embedded server under ``var/bench-pooler`` unless
   ``--database-url`` names another server), opens USDC with the company accounts and funds
   ``--users`` users (``bench.withdrawal_bench.setup``), makes ``custody_app`` a LOGIN role
   (every run logs in as it, so only the route and the setting differ) and starts Debian's
   PgBouncer 1.18 in transaction pooling mode in front of the server (``devtools.pgbouncer``);
2. runs each workload (``post``: ``ledger.service.post_entry`` of a two-line entry of a random
   user, one autocommit statement; ``reserve``: ``withdrawals.service.request_withdrawal``, a
   transaction of three statements and its COMMIT) in each configuration, ``--clients`` threads
   closed loop for ``--seconds`` after ``--warmup`` untimed requests each:

   - ``direct``, setting ``none``: the baseline (server-side prepared statements after 5 uses,
     statement timeout set once per connection);
   - ``direct``, setting ``transaction``: the setting's own cost (nothing prepared, the
     timeout set in each transaction);
   - ``pgbouncer``, setting ``transaction``: what a deployment behind PgBouncer gets;
   - ``pgbouncer``, setting ``none``: the misconfiguration, to show why the setting exists
     (its errors are counted, not hidden);

3. verifies the ledger (``ledger.integrity.verify``) and that every acknowledged request is
   stored exactly once; prints one table (requests/s, latency percentiles, errors). Exit 1 if a
   check fails. Clients are threads of this one process (the GIL is shared by all the runs
   alike): read the figures side by side, not as the engine's ceiling (bench/withdrawal_bench).
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import sqlalchemy as sa
from rich.console import Console
from rich.table import Table

from bench.ledger_bench import _autocommit, create_database
from bench.withdrawal_bench import (
    CONFIG,
    _accounts,
    post_or_reserve,
    setup,
)
from config.database import embedded_url, make_engine
from config.uow import UnitOfWork
from devtools.config import dev_configs
from devtools.pgbouncer import start_pgbouncer
from ledger.integrity import verify

console = Console(highlight=False, width=160)
#: (route, setting) in the order they run.
CONFIGURATIONS = (("direct", "none"), ("direct", "transaction"), ("pgbouncer", "transaction"),
                  ("pgbouncer", "none"))


@dataclass
class Run:
    """One workload in one configuration."""

    workload: str
    route: str
    setting: str
    seconds: float
    latencies_ms: list[float] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)
    acked: int = 0


def _percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def run_one(run: Run, url: str, users: int, clients: int, warmup: int, tag: str) -> None:
    """``clients`` threads on one engine: warm up, then a closed loop for the window."""
    engine = make_engine(url, pool_size=clients, pooler=run.setting)
    _, cfg = dev_configs(CONFIG)
    pairs = _accounts(url, users) if run.workload == "post" else []
    lock = threading.Lock()
    ready = threading.Barrier(clients + 1)
    go = threading.Event()
    end_at = [0.0]

    def one(rng: random.Random, key: str) -> None:
        user, amount = rng.randrange(users), rng.randrange(1_000_000, 5_000_000)
        post_or_reserve(engine, cfg, pairs, run.workload, user, amount, key, rng)

    def attempt(rng: random.Random, key: str, timed: bool) -> None:
        began = time.monotonic()
        try:
            one(rng, key)
        except Exception as exc:  # counted and reported, never hidden
            with lock:
                run.errors[type(exc).__name__] += 1
            return
        with lock:
            run.acked += 1
            if timed:
                run.latencies_ms.append((time.monotonic() - began) * 1000)

    def client(t: int) -> None:
        rng = random.Random(t)
        for i in range(warmup):
            attempt(rng, f"{tag}-w{t}-{i}", False)
        ready.wait()
        go.wait()
        n = 0
        while time.monotonic() < end_at[0]:
            attempt(rng, f"{tag}-{t}-{n}", True)
            n += 1

    threads = [threading.Thread(target=client, args=(t,)) for t in range(clients)]
    for th in threads:
        th.start()
    ready.wait()
    end_at[0] = time.monotonic() + run.seconds
    go.set()
    for th in threads:
        th.join()
    engine.dispose()


def check(url: str, expected: dict[str, int]) -> list[str]:
    """Findings (empty: all good): ledger verify, and acknowledged == stored per workload."""
    findings: list[str] = []
    engine = make_engine(url, pool_size=1)
    try:
        report = verify(engine)
        if not report.ok:
            findings += [f"ledger verify: {d}" for d in report.discrepancies]
        with UnitOfWork(engine) as uow:
            stored_posts = uow.conn.execute(sa.text(
                "SELECT count(*) FROM ledger_transactions WHERE source = 'bench' "
                "AND idempotency_key LIKE 'p%'")).scalar_one()
            stored_reserves = uow.conn.execute(sa.text(
                "SELECT count(*) FROM withdrawals")).scalar_one()
    finally:
        engine.dispose()
    for name, stored in (("post", stored_posts), ("reserve", stored_reserves)):
        if stored != expected[name]:
            findings.append(f"{name}: {expected[name]} acknowledged, {stored} stored")
    return findings


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.pooler_bench", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--database-url", help="server to use (default: embedded under --data-dir)")
    p.add_argument("--data-dir", type=Path, default=Path("var/bench-pooler"))
    p.add_argument("--users", type=int, default=200)
    p.add_argument("--clients", type=int, default=8, help="threads per run (default 8)")
    p.add_argument("--seconds", type=float, default=5.0, help="window per run (default 5)")
    p.add_argument("--warmup", type=int, default=10, help="untimed requests per client first")
    p.add_argument("--pool-size", type=int, default=8, help="PgBouncer default_pool_size")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Set up, run every workload in every configuration, check, print; exit 1 on a failed
    check."""
    args = parse_args(argv)
    server_url = args.database_url or embedded_url(args.data_dir.resolve())
    url = create_database(server_url, f"pbench_{datetime.now(UTC):%Y%m%d_%H%M%S}")
    setup(url, args.users)
    _autocommit(server_url, "ALTER ROLE custody_app LOGIN")
    bouncer = start_pgbouncer(server_url, ("custody_app",), pool_size=args.pool_size)
    urls: dict[str, str] = {
        "direct": sa.make_url(url).set(username="custody_app", password=None)
        .render_as_string(hide_password=False),
        "pgbouncer": bouncer.url(url, "custody_app")}
    console.print(f"{args.users} users, {args.clients} client threads, {args.seconds:g} s per "
                  f"run, PgBouncer default_pool_size {args.pool_size}, nproc={os.cpu_count()}, "
                  f"load {os.getloadavg()[0]:.2f}, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC")
    runs: list[Run] = []
    try:
        for workload in ("post", "reserve"):
            for route, setting in CONFIGURATIONS:
                run = Run(workload, route, setting, args.seconds)
                tag = f"{workload[0]}{len(runs)}"
                run_one(run, urls[route], args.users, args.clients, args.warmup, tag)
                runs.append(run)
                _print_row(run)
    finally:
        bouncer.stop()
    expected = {w: sum(r.acked for r in runs if r.workload == w) for w in ("post", "reserve")}
    findings = check(url, expected)
    console.print(_table(runs))
    for f in findings:
        console.print(f"[red]check failed: {f}[/red]")
    console.print(f"load {os.getloadavg()[0]:.2f}; checks: "
                  f"{'ok' if not findings else 'FAILED'}")
    return 1 if findings else 0


def _cells(r: Run) -> list[str]:
    n = len(r.latencies_ms)
    fmt: Callable[[float], str] = lambda v: f"{v:.2f}"  # noqa: E731
    errors = ", ".join(f"{k} {v}" for k, v in r.errors.most_common()) or "0"
    return [r.workload, r.route, r.setting, f"{n / r.seconds:,.0f}",
            fmt(_percentile(r.latencies_ms, 0.5)), fmt(_percentile(r.latencies_ms, 0.99)),
            errors]


def _print_row(r: Run) -> None:
    console.print("  " + " | ".join(_cells(r)))


def _table(runs: list[Run]) -> Table:
    table = Table(title="CUSTODY_DATABASE_POOLER: direct and through PgBouncer 1.18")
    for c in ("workload", "route", "setting", "req/s", "p50 ms", "p99 ms", "errors"):
        table.add_column(c, justify="right")
    for r in runs:
        table.add_row(*_cells(r))
    return table


if __name__ == "__main__":
    sys.exit(main())
