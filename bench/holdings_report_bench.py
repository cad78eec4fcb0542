"""The holdings report end to end (``sweeps.holdings.holdings`` and ``custody holdings``) on
anvil and PostgreSQL, for N deposit addresses with real, credited deposits.

Run from the repository root: ``.venv/bin/python -m bench.holdings_report_bench`` (``--help``
for the options). One run starts its own anvil (automine, ``--slots-in-an-epoch 1``), deploys a
TestToken, and for each N in ``--sizes``:

1. creates a fresh migrated database (embedded server under ``var/bench-holdings`` unless
   ``--database-url`` is given) and N deposit addresses, one user each (inserted directly:
   deterministic addresses of their own per size, see ``assign``);
2. sends the token to every address (``batchTransfer``, 250 recipients per transaction, each
   address its own amount) and ETH to every tenth (one transaction each), plus a declared
   treasury funding to a hot address; mines past finality; lets the watcher credit every
   deposit and book the funding (untimed);
3. times ``holdings`` ``--runs`` times in this process (the ledger side, the chain side and
   the whole) and checks each report: per asset, on chain = custody + treasury exactly and
   every status ``ok``;
4. times ``GET /v1/admin/holdings`` as an admin, in process (``fastapi.testclient``: the
   route, the schema's validation and the JSON serialisation, no network), ``--runs`` times;
5. times ``custody holdings --json`` and ``custody holdings`` (the table) as a user runs them
   (a subprocess each: start-up, imports, the schema check of ``config.database.get_engine``,
   database, node, output), ``--runs`` times each, and as a baseline ``custody holdings
   --chain nochain``, which pays the same start-up and schema check, then exits 2 before
   reading anything.

Prints every run's figures (wall seconds, and the CPU seconds of the process doing the work:
this process for the in-process rows, the child for the commands), then stops anvil. The node
and this process share the machine; on a loaded machine the wall time is mostly waiting for a
core, which the CPU seconds leave out.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from rich.console import Console
from rich.table import Table
from sqlalchemy.engine import Engine

from bench.ledger_bench import create_database
from chains.evm import encode_call
from chains.rpc import to_quantity
from config.chains import ChainsConfig, parse_chains_config
from config.database import embedded_url, make_engine
from config.uow import UnitOfWork
from deposits import own
from deposits.watcher import Watcher
from devtools.anvil import DEV_ACCOUNTS, AnvilNode, Contract
from devtools.config import dev_config, to_toml
from sweeps.holdings import ChainHoldings, holdings

NOW = datetime(2026, 12, 3, tzinfo=UTC)
RECIPIENTS_PER_TX = 250
FUNDING_WEI = 5 * 10**18
console = Console(highlight=False, width=150)


_STARTED = time.monotonic()


def _progress(message: str) -> None:
    print(f"[{time.monotonic() - _STARTED:7.1f} s] {message}", file=sys.stderr, flush=True)


def hot_address(size: int) -> str:
    """The hot address of the chain of ``size`` (its own per size: the sizes share anvil)."""
    return "0x4e" + f"{size:038x}"


@dataclass(frozen=True)
class Run:
    """One timed run."""

    size: int
    what: str
    run: int
    wall_s: float
    cpu_s: float
    ledger_s: float | None = None
    chain_s: float | None = None


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def assign(engine: Engine, size: int, account: int) -> list[str]:
    """``size`` deposit addresses of family ``evm``, one user each. Inserted in one statement,
    not derived (deriving 100,000 from an xpub through ``deposits.service.assign_address`` took
    19 minutes here): deterministic addresses nobody holds a key for, which is all the report
    needs (it never signs)."""
    addresses = ["0x" + hashlib.sha256(f"holdings-report-bench/{account}/{i}".encode())
                 .hexdigest()[:40] for i in range(size)]
    with UnitOfWork(engine) as uow:
        uow.conn.execute(sa.text(
            "INSERT INTO deposit_addresses (family, address, derivation_index, user_id) "
            "SELECT 'evm', a, i, u FROM unnest(CAST(:a AS text[]), CAST(:i AS integer[]), "
            "CAST(:u AS text[])) AS t (a, i, u)"),
            {"a": addresses, "i": list(range(size)), "u": [f"a{account}-{i}" for i in range(size)]})
        uow.commit()
    return addresses


def fund(node: AnvilNode, token: Contract, addresses: list[str]) -> None:
    """The token to every address, ETH to every tenth, each its own amount. Automine is off
    meanwhile and blocks are mined full (one per transaction made anvil's blocks the limit:
    with 100,000 funded accounts it mined about 1.5 a second); returns once every transaction
    is mined."""
    sender = DEV_ACCOUNTS[0]
    sent = node.rpc.get_transaction_count(sender, "latest")
    node.set_automine(False)
    try:
        # One request at a time (anvil runs a batch's items concurrently: nonce order breaks).
        for start in range(0, len(addresses), RECIPIENTS_PER_TX):
            part = addresses[start:start + RECIPIENTS_PER_TX]
            data = encode_call(token.abi, "batchTransfer",
                               [part, [1_000_000 + start + i for i in range(len(part))]])
            node.rpc.request("eth_sendTransaction", [{
                "from": sender, "to": token.address, "data": data,
                "gas": to_quantity(40_000 * len(part))}])
            sent += 1
        for n, address in enumerate(addresses[::10]):
            node.rpc.request("eth_sendTransaction", [{
                "from": sender, "to": address, "value": to_quantity(10**16 + n),
                "gas": "0x5208"}])
            sent += 1
        # Bounded by blocks, not by the clock (a full block holds about 50 batchTransfers or
        # 14,000 transfers of ETH; this machine's clock was seen to jump).
        for _ in range(len(addresses)):
            mined = node.rpc.get_transaction_count(sender, "latest")
            if mined >= sent:
                break
            node.mine(1)
        else:
            pool = node.rpc.request("txpool_status")
            raise SystemExit(f"the node mined {mined} of {sent} transactions (pool: {pool})")
    finally:
        node.set_automine(True)


def chain_document(node: AnvilNode, token: Contract, size: int) -> dict[str, Any]:
    """The one-chain configuration of ``size`` (chain ``bench<size>``, finality
    ``finalized``, one hot address)."""
    return dev_config(rpc_url=node.url, token=token.address, chain=f"bench{size}",
                      finality="finalized", token_minimum="0", hot_wallet=None,
                      chain_options={"hot_addresses": [hot_address(size)],
                                     "scan_blocks_max": 500,
                                     "native_minimum": "0"})


def credit(engine: Engine, config: ChainsConfig, name: str) -> None:
    """Watch until every deposit and the funding are booked."""
    watcher = Watcher(engine, config, name, settle_batch_max=2_000)
    try:
        while True:
            report = watcher.step(now=NOW)
            if report.caught_up and report.credited == 0 and report.finals == 0:
                return
    finally:
        watcher.close()


def check(report: ChainHoldings, size: int) -> None:
    """Exact: per asset on chain = custody + treasury, everything ok."""
    if report.deposit_addresses != size:
        raise SystemExit(f"{report.deposit_addresses} deposit addresses, expected {size}")
    for a in report.assets:
        if a.on_chain != a.ledger or a.status != "ok" or a.group.status != "ok":
            raise SystemExit(f"{a.line.asset}: on chain {a.on_chain}, ledger {a.ledger}, "
                             f"{a.status}")
        if a.on_chain == 0:
            raise SystemExit(f"{a.line.asset}: nothing on chain: the seeding failed")
    if any(h.status not in (None, "ok") for h in report.addresses):
        raise SystemExit("an address differs")


def measure(engine: Engine, config: ChainsConfig, name: str, size: int,
            runs: int) -> list[Run]:
    """``runs`` timed reports in this process, each checked."""
    found = []
    for run in range(1, runs + 1):
        cpu, started = time.process_time(), time.perf_counter()
        (report,) = holdings(engine, config, name).chains
        wall, cpu = time.perf_counter() - started, time.process_time() - cpu
        check(report, size)
        found.append(Run(size, "holdings() in process", run, wall, cpu, report.ledger_read_s,
                         report.chain_read_s))
    return found


def measure_api(engine: Engine, config: ChainsConfig, size: int, runs: int) -> list[Run]:
    """``GET /v1/admin/holdings`` in process, as an admin."""
    import warnings

    with warnings.catch_warnings():  # starlette's notice about its httpx-based client
        warnings.simplefilter("ignore")
        from fastapi.testclient import TestClient

    from api.app import create_app
    from api.auth import create_key

    key = create_key(engine, "bench", "admin").key
    found = []
    with TestClient(create_app(engine, config, None)) as client:
        for run in range(1, runs + 1):
            cpu, started = time.process_time(), time.perf_counter()
            answer = client.get("/v1/admin/holdings", headers={"Authorization": f"Bearer {key}"})
            wall, cpu = time.perf_counter() - started, time.process_time() - cpu
            if answer.status_code != 200:
                raise SystemExit(f"GET /v1/admin/holdings: {answer.status_code} {answer.text}")
            (chain,) = answer.json()["chains"]
            if any(a["status"] != "ok" for a in chain["assets"]):
                raise SystemExit("GET /v1/admin/holdings: not every asset ok")
            found.append(Run(size, "GET /v1/admin/holdings (in process)", run, wall, cpu))
    return found


def measure_cli(url: str, config_path: Path, size: int, runs: int) -> list[Run]:
    """``custody holdings --json`` and the table, as subprocesses."""
    env = {**os.environ, "CUSTODY_DATABASE_URL": url, "CUSTODY_CONFIG": str(config_path),
           "COLUMNS": "80"}
    found = []
    for args, what, code in (
            (["--chain", "nochain"], "custody holdings --chain nochain (start-up only)", 2),
            (["--json"], "custody holdings --json", 0), ([], "custody holdings", 0)):
        for run in range(1, runs + 1):
            cpu, started = _children_cpu_s(), time.perf_counter()
            done = subprocess.run([sys.executable, "-m", "api.cli", "holdings", *args], env=env,
                                  capture_output=True, text=True, timeout=600)
            wall, cpu = time.perf_counter() - started, _children_cpu_s() - cpu
            if done.returncode != code:
                raise SystemExit(f"{what} exited {done.returncode}: {done.stderr[-500:]}")
            found.append(Run(size, what, run, wall, cpu))
    return found


def one_size(node: AnvilNode, token: Contract, server_url: str, size: int, account: int,
             runs: int, workdir: Path) -> list[Run]:
    """Seed one database and chain name for ``size`` addresses and measure."""
    name = f"bench{size}"
    url = create_database(server_url, f"holdings_bench_{size}")
    engine = make_engine(url, pool_size=4)
    try:
        _progress(f"{size:,}: assigning deposit addresses")
        addresses = assign(engine, size, account)
        doc = chain_document(node, token, size)
        config = parse_chains_config(doc)
        with UnitOfWork(engine) as uow:
            own.declare_funding(uow, config, own.FundingRequest(
                name, "ETH", str(FUNDING_WEI), DEV_ACCOUNTS[1], "bench gas float"),
                declared_by="bench", idempotency_key=f"bench-{size}")
            uow.commit()
        _progress(f"{size:,}: funding on chain")
        fund(node, token, addresses)
        node.send_eth(DEV_ACCOUNTS[1], hot_address(size), FUNDING_WEI)
        node.mine(4)  # everything at or below `finalized` (2 blocks behind)
        _progress(f"{size:,}: the watcher credits every deposit")
        credit(engine, config, name)
        config_path = workdir / f"{name}.toml"
        config_path.write_text(to_toml(doc))
        _progress(f"{size:,}: measuring")
        return (measure(engine, config, name, size, runs)
                + measure_api(engine, config, size, runs)
                + measure_cli(url, config_path, size, runs))
    finally:
        engine.dispose()


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print every run."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000",
                        help="deposit address counts, comma-separated")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--database-url", default=None)
    parser.add_argument("--data-dir", type=Path, default=Path("var/bench-holdings"))
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    load_before = os.getloadavg()
    server_url = args.database_url or embedded_url(args.data_dir)
    runs: list[Run] = []
    # --prune-history: anvil keeps only recent states, in memory; by default it writes every
    # older state to ~/.foundry/anvil/tmp and never removes it (about 15 MB a block with
    # 100,000 funded accounts: a run filled the disk). The reads here are all recent.
    with AnvilNode.start(slots_in_an_epoch=1, extra_args=["--gas-limit", "300000000",
                                                          "--prune-history", "256"]) as node, \
            tempfile.TemporaryDirectory() as workdir:
        token = node.deploy("TestToken", "USD Coin", "USDC", 6)
        node.transact(token, "mint", [DEV_ACCOUNTS[0], 10**30])
        for i, size in enumerate(sizes):
            runs += one_size(node, token, server_url, size, 20 + i, args.runs, Path(workdir))
    table = Table(title="holdings report: every deposit address holds the token, every tenth "
                        "ETH; 1 hot address; 2 assets (each report checked exact)")
    for column in ("deposit addresses", "what", "run", "wall s", "CPU s", "ledger side s",
                   "chain side s"):
        table.add_column(column, justify="left" if column == "what" else "right")
    for r in runs:
        table.add_row(f"{r.size:,}", r.what, str(r.run), f"{r.wall_s:.2f}", f"{r.cpu_s:.2f}",
                      "" if r.ledger_s is None else f"{r.ledger_s:.2f}",
                      "" if r.chain_s is None else f"{r.chain_s:.2f}")
    console.print(table)
    console.print("load average (1, 5, 15 min) before: "
                  f"{' / '.join(f'{x:.2f}' for x in load_before)}, after: "
                  f"{' / '.join(f'{x:.2f}' for x in os.getloadavg())} ({os.cpu_count()} cores)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
