"""HTTP throughput and latency of ``GET balances`` and ``POST withdrawals`` beside the same
operations called in-process (the overhead of the HTTP layer).

Run ``python -m bench.http_bench --help``. One run:

1. creates a fresh migrated database (embedded server under ``var/bench-http`` unless
   ``--database-url`` names another server), opens USDC and ETH with the company accounts,
   creates ``--users`` users (1,000) owned by one API client, funds each with 100,000 USDC and
   runs ANALYZE (a database in service has statistics);
2. starts the API (``api.app.create_app``, the real routes, auth, rate limits and idempotency)
   under uvicorn (httptools, uvloop) in a process of its own (``--server-workers`` processes);
3. for each operation, ``--clients`` (50) concurrent keep-alive connections in one load
   process against random users, for ``--seconds``:
   - closed loop (saturation): each connection sends its next request when the previous one
     answered; latency from write to full response;
   - paced (open loop, balances only): ``--rate`` (1,000) requests/s in total, each connection
     one request every ``clients / rate`` s, staggered; latency counts from each request's
     scheduled send time, so a backlog shows in the latencies (no coordinated omission);
4. runs the same operation in-process with ``--clients`` threads (no HTTP, no auth, no rate
   limit, no idempotency record: ``ledger.service.user_balances`` + pending deposits, and
   ``withdrawals.service.request_withdrawal``);
5. prints, per mode, requests/s, p50, p99, errors, the CPU each party spent per request
   (server processes, PostgreSQL's postmaster and backends, the load generator; from /proc)
   and the load average at start and end, then the verdict: balances meet the target when the
   paced run answered every request without error with p99 < 30 ms and the closed loop
   sustains at least ``--rate``. Progress is printed every second.

The load generator is a minimal HTTP/1.1 client on asyncio streams and uvloop (no
httpx/aiohttp overhead: on 2 cores the client shares the machine with the server and
PostgreSQL); its CPU per request is in the table, to show that it is not the bottleneck.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import random
import sys
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

console = Console()
DEST = "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC"
FUND_MINOR = 100_000 * 10**6


def configs() -> tuple[Any, Any]:
    """The chains and withdrawals configuration (no node needed: reserves only)."""
    from devtools.config import dev_config, dev_configs

    # Large limits: the bench measures the path, not the policy refusing it.
    return dev_configs(dev_config(xpub=True, usdc_daily_limit="100000000",
                                  withdrawal_options={"batch_max": 50}))


# --- setup -----------------------------------------------------------------------------------


def setup(server_url: str, users: int) -> tuple[str, str, list[str]]:
    """Fresh database, book, users and funding; returns (url, API key, user ids)."""
    import sqlalchemy as sa

    from api.auth import create_key, create_user
    from bench.ledger_bench import create_database
    from config.database import make_engine
    from config.uow import UnitOfWork
    from devtools.e2e import open_company_book
    from ledger import service as ledger
    from ledger.model import Entry, credit, debit

    url = create_database(server_url, "bench_http")
    engine = make_engine(url)
    chains, _ = configs()
    open_company_book(engine, chains)
    key = create_key(engine, "bench", "client")
    ids: list[str] = []  # user ids
    with UnitOfWork(engine) as uow:
        client_id = uow.conn.execute(sa.text("SELECT id FROM api_clients WHERE name = 'bench'")
                                     ).scalar_one()
        for i in range(users):
            record, _ = create_user(uow, client_id, f"u{i}")
            ids.append(record.id)
        uow.commit()
    with UnitOfWork(engine) as uow:
        usdc = ledger.get_asset(uow, "USDC")
        custody = ledger.get_account(uow, "custody:devnet", "USDC")
        for user in ids:
            wallet, _ = ledger.open_user_accounts(uow, user, usdc)
            ledger.post(uow, Entry(f"bench:fund:{user}", "deposit", datetime.now(UTC), "bench",
                                   (debit(custody, FUND_MINOR), credit(wallet, FUND_MINOR))))
        uow.commit()
    engine.dispose()
    # Statistics, as a database in service has them (autovacuum would get there later): without
    # them the planner guesses and the hot statements' generic plans scan whole tables.
    from config.database import owner_engine

    owner = owner_engine(url)
    with owner.connect() as conn:
        conn.exec_driver_sql("ANALYZE")
        conn.commit()
    owner.dispose()
    return url, key.key, ids


# --- the server ------------------------------------------------------------------------------


def serve(url: str, port: int, workers: int) -> None:
    """The API on ``url`` (uvicorn, ``workers`` processes); run in a child process."""
    import uvicorn

    os.environ["CUSTODY_BENCH_URL"] = url
    uvicorn.run("bench.http_bench:app_factory", factory=True, host="127.0.0.1", port=port,
                workers=workers, log_level="warning", access_log=False, ws="none")


def app_factory() -> Any:
    """The app of one server process (rate limits high enough not to refuse the load)."""
    from api.app import create_app
    from api.ratelimit import RateLimit, RateLimits
    from config.database import make_engine
    from config.runtime import keep_startup_out_of_gc

    chains, wcfg = configs()
    engine = make_engine(os.environ["CUSTODY_BENCH_URL"], pool_size=40)
    limits = RateLimits(by_scope={"client": RateLimit(10**9)})
    app = create_app(engine, chains, wcfg, rate_limits=limits)
    keep_startup_out_of_gc()  # as `custody api` does
    return app


# --- HTTP load -------------------------------------------------------------------------------


@dataclass
class Result:
    """One measured mode: counts, latencies and the CPU each party spent on it."""

    name: str
    requests: int
    errors: int
    seconds: float
    latencies_ms: list[float]
    offered_rps: float | None = None  # paced: the rate offered; None: closed loop
    cpu_s: dict[str, float] = field(default_factory=dict)  # party -> CPU seconds
    load_avg: tuple[float, float] = (0.0, 0.0)  # 1-minute load average at start and end

    @property
    def rps(self) -> float:
        return self.requests / self.seconds

    def pct(self, q: float) -> float:
        if not self.latencies_ms:
            return float("nan")
        ordered = sorted(self.latencies_ms)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    def cpu_us(self, party: str) -> float | None:
        """CPU microseconds ``party`` spent per request."""
        spent = self.cpu_s.get(party)
        return None if spent is None or not self.requests else spent / self.requests * 1e6


async def _connection(port: int, make: Callable[[], bytes], start: float, seconds: float,
                      pace: tuple[float, float] | None, latencies: list[float],
                      errors: list[int]) -> None:
    """One keep-alive connection. Closed loop (``pace`` None): the next request as soon as the
    previous one answered, latency from write to full response. Paced ((offset, interval)): the
    k-th request is due at ``start + offset + k * interval`` and its latency counts from then,
    so a late answer also delays (and is charged to) the requests queued behind it."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    until = start + seconds
    sent = 0
    try:
        while True:
            now = time.perf_counter()
            if pace is None:
                if now >= until:
                    break
                due = now
            else:
                due = start + pace[0] + sent * pace[1]
                if due >= until:
                    break
                if due > now:
                    await asyncio.sleep(due - now)
            writer.write(make())
            sent += 1
            head = await reader.readuntil(b"\r\n\r\n")
            status = int(head[9:12])
            length = 0
            for line in head.split(b"\r\n"):
                if line[:15].lower() == b"content-length:":
                    length = int(line[15:])
            if length:
                await reader.readexactly(length)
            latencies.append((time.perf_counter() - due) * 1000)
            if status >= 300:
                errors.append(status)
    finally:
        writer.close()


def _requests(op: str, key: str, users: Sequence[str], seed: int) -> Callable[[], bytes]:
    rng = random.Random(seed)
    auth = f"Authorization: Bearer {key}\r\n"

    def balances() -> bytes:
        user = rng.choice(users)
        return (f"GET /v1/users/{user}/balances HTTP/1.1\r\nHost: bench\r\n{auth}\r\n").encode()

    def withdraw() -> bytes:
        user = rng.choice(users)
        body = json.dumps({"asset": "USDC", "chain": "devnet", "to": DEST,
                           "amount": "1000000"}).encode()
        return (f"POST /v1/users/{user}/withdrawals HTTP/1.1\r\nHost: bench\r\n{auth}"
                f"Idempotency-Key: {uuid.uuid4().hex}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\n\r\n").encode() + body

    return balances if op == "balances" else withdraw


def http_load(op: str, port: int, key: str, users: Sequence[str], clients: int,
              seconds: float, rate: float | None = None, *, progress: bool = False) -> Result:
    """``clients`` keep-alive connections for ``seconds``: closed loop, or paced at ``rate``
    requests/s in total (each connection one request every ``clients / rate`` s, staggered)."""
    latencies: list[float] = []
    errors: list[int] = []
    name = f"HTTP {op}" + (f" paced {rate:,.0f}/s" if rate else " closed")

    async def report(start: float) -> None:
        while True:
            await asyncio.sleep(1.0)
            print(f"  {name}: {time.perf_counter() - start:4.0f} s, {len(latencies):,} answers, "
                  f"{len(errors)} errors", flush=True)

    async def main() -> float:
        start = time.perf_counter() + 0.05
        reporter = asyncio.create_task(report(start)) if progress else None
        paces = [None if rate is None else (i / rate, clients / rate) for i in range(clients)]
        await asyncio.gather(*(_connection(port, _requests(op, key, users, i), start, seconds,
                                           paces[i], latencies, errors)
                               for i in range(clients)))
        if reporter is not None:
            reporter.cancel()
        return time.perf_counter() - start

    cpu = time.process_time()
    try:
        import uvloop  # the load generator's own CPU: measured and reported per request

        elapsed = uvloop.run(main())
    except ImportError:
        elapsed = asyncio.run(main())
    return Result(name, len(latencies), len(errors), elapsed, latencies, rate,
                  {"load": time.process_time() - cpu})


def _http_child(op: str, port: int, key: str, users: list[str], clients: int, seconds: float,
                rate: float | None, queue: Any) -> None:
    # The load generator's own full garbage collections would stall every connection at once
    # and be counted as the server's latency (from each request's scheduled send time).
    import gc

    gc.collect()
    gc.freeze()
    r = http_load(op, port, key, users, clients, seconds, rate, progress=True)
    queue.put((r.name, r.requests, r.errors, r.seconds, r.latencies_ms, r.offered_rps, r.cpu_s))


def http_load_in_child(op: str, port: int, key: str, users: list[str], clients: int,
                       seconds: float, rate: float | None, parties: dict[str, Callable[[], float]]
                       ) -> Result:
    """The load generator in a process of its own (not sharing this one's GIL); ``parties``
    read the CPU seconds of the server and of PostgreSQL before and after."""
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=_http_child,
                       args=(op, port, key, users, clients, seconds, rate, queue))
    load_start = os.getloadavg()[0]
    before = {p: read() for p, read in parties.items()}
    proc.start()
    got = queue.get(timeout=seconds + 120)
    proc.join(timeout=30)
    result = Result(*got)
    result.cpu_s.update({p: read() - before[p] for p, read in parties.items()})
    result.load_avg = (load_start, os.getloadavg()[0])
    return result


# --- CPU accounting (Linux /proc) ----------------------------------------------------------------

_TICK_S = 1 / os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 0.01


def _tree(root: int) -> list[int]:
    """``root`` and its descendants."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, ()))
    return found


def tree_cpu_s(root: int) -> float:
    """CPU seconds (user + system) spent so far by ``root`` and its live descendants."""
    total = 0.0
    for pid in _tree(root):
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) * _TICK_S
    return total


def postmaster_pid(data_dir: Path) -> int | None:
    """The embedded PostgreSQL's postmaster, from its ``postmaster.pid``."""
    for found in data_dir.rglob("postmaster.pid"):
        return int(found.read_text().split()[0])
    return None


# --- in-process ------------------------------------------------------------------------------


def in_process(op: str, url: str, users: Sequence[str], clients: int, seconds: float,
               parties: dict[str, Callable[[], float]]) -> Result:
    """The same operation without HTTP: ``clients`` threads calling the services (this
    process's CPU is reported as the server's)."""
    from api.ratelimit import RateLimits
    from api.routes.deps import ApiContext
    from config.database import make_engine
    from config.uow import UnitOfWork
    from deposits import service as deposits
    from ledger import service as ledger
    from withdrawals import service as withdrawals

    chains, wcfg = configs()
    engine = make_engine(url, pool_size=clients)
    own = ApiContext(engine=engine, chains=chains, withdrawals=wcfg, rate_limits=RateLimits(),
                     clock=lambda: datetime.now(UTC), idempotency_stale_s=300)
    latencies: list[float] = []
    errors: list[int] = []
    until = time.perf_counter() + seconds

    def one(rng: random.Random) -> None:
        user = rng.choice(users)
        if op == "balances":
            with UnitOfWork(engine) as uow:
                pending = deposits.pending_incoming(uow, user)
                ledger.user_balances(uow, user, pending_incoming=pending)
        else:
            req = withdrawals.WithdrawalRequest(
                user_id=user, chain="devnet", asset="USDC", destination=DEST,
                amount_minor=1_000_000, request_key=uuid.uuid4().hex, requested_by="bench")
            withdrawals.request_withdrawal(engine, wcfg, own, req, now=datetime.now(UTC))

    def worker(seed: int) -> None:
        rng = random.Random(seed)
        while time.perf_counter() < until:
            started = time.perf_counter()
            try:
                one(rng)
            except Exception:  # noqa: BLE001 - counted, the bench reports it
                errors.append(1)
            latencies.append((time.perf_counter() - started) * 1000)

    load_start = os.getloadavg()[0]
    before = {p: read() for p, read in parties.items()}
    cpu = time.process_time()
    start = time.perf_counter()
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - start
    spent = {"server": time.process_time() - cpu,
             **{p: read() - before[p] for p, read in parties.items()}}
    engine.dispose()
    return Result(f"in-process {op} ({clients} threads)", len(latencies), len(errors), elapsed,
                  latencies, None, spent, (load_start, os.getloadavg()[0]))


# --- main ------------------------------------------------------------------------------------


def _wait_port(port: int, timeout_s: float = 60) -> None:
    import socket

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise RuntimeError("the API server did not start")


COLUMNS = ("mode", "offered/s", "answers", "errors", "req/s", "p50 ms", "p99 ms",
           "CPU µs/req server", "PostgreSQL", "load gen", "load avg")


def _row(r: Result) -> list[str]:
    def us(party: str) -> str:
        v = r.cpu_us(party)
        return "-" if v is None else f"{v:,.0f}"

    return [r.name, "closed" if r.offered_rps is None else f"{r.offered_rps:,.0f}",
            f"{r.requests:,}", str(r.errors), f"{r.rps:,.0f}", f"{r.pct(0.5):.1f}",
            f"{r.pct(0.99):.1f}", us("server"), us("postgres"), us("load"),
            f"{r.load_avg[0]:.1f}-{r.load_avg[1]:.1f}"]


def table(results: Sequence[Result]) -> Table:
    t = Table(title="HTTP vs in-process")
    for col in COLUMNS:
        t.add_column(col, justify="left" if col == "mode" else "right")
    for r in results:
        t.add_row(*_row(r))
    return t


def markdown(results: Sequence[Result]) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " |", "|---|" + "---:|" * (len(COLUMNS) - 1)]
    lines += ["| " + " | ".join(_row(r)) + " |" for r in results]
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="bench.http_bench", description=__doc__.split("\n")[0])
    p.add_argument("--database-url", help="PostgreSQL server (default: embedded)")
    p.add_argument("--data-dir", type=Path, default=Path("var/bench-http"))
    p.add_argument("--users", type=int, default=1_000)
    p.add_argument("--clients", type=int, default=50)
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--server-workers", type=int, default=1)
    p.add_argument("--rate", type=float, default=1_000.0,
                   help="requests/s offered in total by the paced run of balances (0: none)")
    p.add_argument("--ops", nargs="+", default=["balances", "withdrawals"],
                   choices=["balances", "withdrawals"])
    p.add_argument("--no-in-process", action="store_true", help="skip the in-process runs")
    return p.parse_args(argv)


def _verdict(results: Sequence[Result], rate: float, seconds: float) -> bool:
    closed = next((r for r in results if r.name == "HTTP balances closed"), None)
    paced = next((r for r in results if r.name.startswith("HTTP balances paced")), None)
    if closed is None or paced is None:
        return True
    offered = round(rate * seconds)
    ok = (paced.errors == 0 and paced.requests >= offered - 1 and paced.pct(0.99) < 30
          and closed.rps >= rate)
    verdict = "[green]met[/]" if ok else "[red]NOT met[/]"
    console.print(
        f"target (balances >= 1,000 req/s with p99 < 30 ms): {verdict}"
        f" (paced: {paced.requests:,} of {offered:,} offered answered, {paced.errors} errors, "
        f"p99 {paced.pct(0.99):.1f} ms from the scheduled send time; closed loop: "
        f"{closed.rps:,.0f} req/s at saturation)")
    return ok


def main(argv: Sequence[str] | None = None) -> int:
    from config.database import embedded_url
    from devtools.anvil import free_port

    args = parse_args(argv)
    server_url = args.database_url or embedded_url(args.data_dir)
    pg = None if args.database_url else postmaster_pid(args.data_dir)
    console.print(f"[bold]setup[/]: {args.users:,} users, funded; API server with "
                  f"{args.server_workers} worker process(es); {args.clients} clients, "
                  f"{args.seconds:.0f} s per mode; {os.cpu_count()} CPUs; "
                  f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    url, key, users = setup(server_url, args.users)
    port = free_port()
    import subprocess

    # A plain child process (not multiprocessing: uvicorn's own worker processes need a real
    # stdin file descriptor to inherit).
    server = subprocess.Popen(
        [sys.executable, "-c", "import sys; from bench.http_bench import serve; "
         "serve(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))", url, str(port),
         str(args.server_workers)], stdin=subprocess.DEVNULL)
    parties: dict[str, Callable[[], float]] = {"server": lambda: tree_cpu_s(server.pid)}
    if pg is not None:
        parties["postgres"] = lambda: tree_cpu_s(pg)
    runs: list[tuple[str, float | None]] = [(op, None) for op in args.ops]
    if args.rate and "balances" in args.ops:
        runs.insert(1, ("balances", args.rate))
    results: list[Result] = []
    try:
        _wait_port(port)
        console.print("warm-up: 2 s of balances")
        http_load("balances", port, key, users, args.clients, 2.0)
        for op, rate in runs:
            console.print(f"[bold]{op}[/] over HTTP, "
                          f"{'closed loop' if rate is None else f'paced at {rate:,.0f}/s'}")
            results.append(http_load_in_child(op, port, key, users, args.clients, args.seconds,
                                              rate, parties))
            console.print(table(results[-1:]))
    finally:
        server.terminate()
        server.wait(timeout=30)
    if not args.no_in_process:
        in_parties = {k: v for k, v in parties.items() if k == "postgres"}
        for op in args.ops:
            console.print(f"[bold]{op}[/] in-process, {args.clients} threads")
            results.append(in_process(op, url, users, args.clients, args.seconds, in_parties))
            console.print(table(results[-1:]))
    console.print(table(results))
    console.print(markdown(results))
    return 0 if _verdict(results, args.rate, args.seconds) else 1


if __name__ == "__main__":
    sys.exit(main())
