"""HTTP throughput and latency of ``GET balances`` and ``POST withdrawals`` beside the same
operations called in-process (the overhead of the HTTP layer).

Run ``python -m bench.http_bench --help``. One run:

1. creates a fresh migrated database (embedded server under ``var/bench-http`` unless
   ``--database-url`` names another server), opens USDC and ETH with the company accounts,
   creates ``--users`` users (1,000) owned by one API client and funds each with 100,000 USDC;
2. starts the API (``api.app.create_app``, the real routes, auth, rate limits and idempotency)
   under uvicorn in a process of its own (``--server-workers`` processes);
3. for each operation, ``--clients`` (50) concurrent keep-alive connections in one asyncio
   load process send requests closed-loop for ``--seconds`` (each connection sends its next
   request when the previous one answered) against random users; latency is per request,
   from write to full response;
4. runs the same operation in-process with ``--clients`` threads (no HTTP, no auth, no rate
   limit, no idempotency record: ``ledger.service.user_balances`` + pending deposits, and
   ``withdrawals.service.request_withdrawal``);
5. prints requests/s, p50, p99, and the verdict (balances: >= 1,000 requests/s with p99 < 30 ms).

The load generator is a minimal HTTP/1.1 client on asyncio streams (no httpx/aiohttp overhead:
on 2 cores the client shares the machine with the server and PostgreSQL).
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
import tomllib
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
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
    from chains.addresses import xpub_from_mnemonic
    from chains.anvil import DEV_MNEMONIC
    from config.chains import parse_chains_config
    from config.withdrawals import parse_withdrawals_config
    from tests.withdrawals.conftest import config_toml

    text = config_toml(extra="batch_max = 50") + (
        f'\n[address_sources.evm]\nkind = "xpub"\n'
        f'xpub = "{xpub_from_mnemonic(DEV_MNEMONIC, account=1)}"\n')
    # Large limits: the bench measures the path, not the policy refusing it.
    text = text.replace('daily_limit = "20000"', 'daily_limit = "100000000"')
    data = tomllib.loads(text)
    chains = parse_chains_config(data)
    return chains, parse_withdrawals_config(data, chains)


# --- setup -----------------------------------------------------------------------------------


def setup(server_url: str, users: int) -> tuple[str, str, list[str]]:
    """Fresh database, book, users and funding; returns (url, API key, user ids)."""
    import sqlalchemy as sa

    from api.auth import create_key, create_user
    from api.e2e import open_company_book
    from bench.ledger_bench import create_database
    from config.database import make_engine
    from config.uow import UnitOfWork
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
            record, _ = create_user(uow.conn, client_id, f"u{i}")
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

    chains, wcfg = configs()
    engine = make_engine(os.environ["CUSTODY_BENCH_URL"], pool_size=40)
    limits = RateLimits(by_scope={"client": RateLimit(10**9)})
    return create_app(engine, chains, wcfg, rate_limits=limits)


# --- HTTP load -------------------------------------------------------------------------------


@dataclass
class Result:
    """One measured mode."""

    name: str
    requests: int
    errors: int
    seconds: float
    latencies_ms: list[float]

    @property
    def rps(self) -> float:
        return self.requests / self.seconds

    def pct(self, q: float) -> float:
        if not self.latencies_ms:
            return float("nan")
        ordered = sorted(self.latencies_ms)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def _connection(port: int, make: Callable[[], bytes], until: float,
                      latencies: list[float], errors: list[int]) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        while time.perf_counter() < until:
            request = make()
            started = time.perf_counter()
            writer.write(request)
            head = await reader.readuntil(b"\r\n\r\n")
            status = int(head[9:12])
            length = 0
            for line in head.split(b"\r\n"):
                if line[:15].lower() == b"content-length:":
                    length = int(line[15:])
            if length:
                await reader.readexactly(length)
            latencies.append((time.perf_counter() - started) * 1000)
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
              seconds: float) -> Result:
    """``clients`` keep-alive connections, closed-loop, for ``seconds``."""
    latencies: list[float] = []
    errors: list[int] = []

    async def main() -> float:
        start = time.perf_counter()
        until = start + seconds
        await asyncio.gather(*(_connection(port, _requests(op, key, users, i), until, latencies,
                                           errors) for i in range(clients)))
        return time.perf_counter() - start

    elapsed = asyncio.run(main())
    return Result(f"HTTP {op}", len(latencies), len(errors), elapsed, latencies)


def _http_child(op: str, port: int, key: str, users: list[str], clients: int, seconds: float,
                queue: Any) -> None:
    r = http_load(op, port, key, users, clients, seconds)
    queue.put((r.name, r.requests, r.errors, r.seconds, r.latencies_ms))


def http_load_in_child(op: str, port: int, key: str, users: list[str], clients: int,
                       seconds: float) -> Result:
    """The load generator in a process of its own (not sharing this one's GIL)."""
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=_http_child, args=(op, port, key, users, clients, seconds, queue))
    proc.start()
    got = queue.get(timeout=seconds + 120)
    proc.join(timeout=30)
    return Result(*got)


# --- in-process ------------------------------------------------------------------------------


def in_process(op: str, url: str, users: Sequence[str], clients: int, seconds: float) -> Result:
    """The same operation without HTTP: ``clients`` threads calling the services."""
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

    start = time.perf_counter()
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - start
    engine.dispose()
    return Result(f"in-process {op}", len(latencies), len(errors), elapsed, latencies)


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


def table(results: Sequence[Result]) -> Table:
    t = Table(title="HTTP vs in-process (closed loop)")
    for col in ("mode", "requests", "errors", "req/s", "p50 ms", "p99 ms"):
        t.add_column(col, justify="left" if col == "mode" else "right")
    for r in results:
        t.add_row(r.name, f"{r.requests:,}", str(r.errors), f"{r.rps:,.0f}", f"{r.pct(0.5):.1f}",
                  f"{r.pct(0.99):.1f}")
    return t


def markdown(results: Sequence[Result]) -> str:
    lines = ["| mode | requests | errors | req/s | p50 ms | p99 ms |",
             "|---|---:|---:|---:|---:|---:|"]
    lines += [f"| {r.name} | {r.requests:,} | {r.errors} | {r.rps:,.0f} | {r.pct(0.5):.1f} | "
              f"{r.pct(0.99):.1f} |" for r in results]
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="bench.http_bench", description=__doc__.split("\n")[0])
    p.add_argument("--database-url", help="PostgreSQL server (default: embedded)")
    p.add_argument("--data-dir", type=Path, default=Path("var/bench-http"))
    p.add_argument("--users", type=int, default=1_000)
    p.add_argument("--clients", type=int, default=50)
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--server-workers", type=int, default=1)
    p.add_argument("--ops", nargs="+", default=["balances", "withdrawals"],
                   choices=["balances", "withdrawals"])
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    from chains.anvil import free_port
    from config.database import embedded_url

    args = parse_args(argv)
    server_url = args.database_url or embedded_url(args.data_dir)
    console.print(f"[bold]setup[/]: {args.users:,} users, funded; API server with "
                  f"{args.server_workers} worker process(es); {args.clients} clients, "
                  f"{args.seconds:.0f} s per mode; {os.cpu_count()} CPUs")
    url, key, users = setup(server_url, args.users)
    port = free_port()
    import subprocess

    # A plain child process (not multiprocessing: uvicorn's own worker processes need a real
    # stdin file descriptor to inherit).
    server = subprocess.Popen(
        [sys.executable, "-c", "import sys; from bench.http_bench import serve; "
         "serve(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))", url, str(port),
         str(args.server_workers)], stdin=subprocess.DEVNULL)
    results: list[Result] = []
    try:
        _wait_port(port)
        http_load("balances", port, key, users, args.clients, 2.0)  # warm-up
        for op in args.ops:
            results.append(http_load_in_child(op, port, key, users, args.clients, args.seconds))
            console.print(table(results[-1:]))
    finally:
        server.terminate()
        server.wait(timeout=30)
    for op in args.ops:
        results.append(in_process(op, url, users, args.clients, args.seconds))
        console.print(table(results[-1:]))
    console.print(table(results))
    console.print(markdown(results))
    bal = next((r for r in results if r.name == "HTTP balances"), None)
    if bal is None:
        return 0
    ok = bal.rps >= 1_000 and bal.pct(0.99) < 30 and bal.errors == 0
    console.print(f"target (balances >= 1,000 req/s, p99 < 30 ms): "
                  f"{'[green]met[/]' if ok else '[red]NOT met[/]'} "
                  f"({bal.rps:,.0f} req/s, p99 {bal.pct(0.99):.1f} ms)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
