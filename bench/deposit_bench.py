"""Deposit catch-up: the watcher against a naive web3.py baseline, on anvil and PostgreSQL.

Run ``python -m bench.deposit_bench --help``. One run:

1. creates a fresh migrated database (embedded server under ``var/bench-deposits`` unless
   ``--database-url`` is given) and assigns ``--users`` deposit addresses (xpub source);
2. starts its own anvil and fills ``--blocks`` blocks; each block holds one ``batchTransfer``
   transaction with ``--ours-per-block`` transfers to our deposit addresses and as many to
   other addresses (so 10,000 blocks hold 10,000 deposits and 10,000 foreign transfers);
3. measures the watcher (``deposits.watcher.Watcher``) catching up from block 0 with rule
   ``finalized`` (every block is long final): batched ``eth_getBlockReceipts`` scans, internal
   calls read as ``--trace`` says, node-receipt attestation and the plan of each range's
   writes made ahead (``deposits.readahead``), and each range's history rows and ledger
   credits (``ledger.service.send_prepared``) in the scan's transaction;
   reported as blocks/s and deposits/s into the history and into the ledger (end to end: the
   clock stops when every deposit is credited), with the peak RSS of this process and the CPU
   seconds this process, PostgreSQL and anvil used meanwhile;
4. measures the naive baseline over the first ``--baseline-blocks`` blocks (same chain, its own
   chain name so keys never collide): web3.py ``get_block`` plus one
   ``get_transaction_receipt`` per transaction, and one database transaction per deposit
   (history rows + ``ledger.service.post``);
5. checks ``ledger.integrity.verify`` and that every deposit was credited exactly once, and
   prints the table.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from hexbytes import HexBytes
from rich.console import Console
from rich.table import Table
from web3 import Web3

from bench.ledger_bench import create_database
from chains.addresses import XpubAddressSource, xpub_from_mnemonic
from chains.evm import TRANSFER_TOPIC, encode_call
from chains.rpc import to_quantity
from config.chains import ChainsConfig, parse_chains_config
from config.database import embedded_url, make_engine
from config.runtime import settle_batch_process
from config.uow import UnitOfWork, run_in_transaction
from deposits import repository as repo
from deposits import service
from deposits.watcher import Watcher
from devtools.anvil import DEV_ACCOUNTS, DEV_MNEMONIC, AnvilNode, Contract
from devtools.config import dev_config
from ledger import chart
from ledger import service as ledger
from ledger.integrity import verify
from ledger.model import Entry, Line

NOW = datetime(2026, 11, 29, tzinfo=UTC)
console = Console(highlight=False, width=150)


def _progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def cpu_seconds() -> dict[str, float]:
    """CPU seconds (user + system) used so far by this process, every PostgreSQL process and
    every anvil on the machine, from ``/proc`` (processes that exited are not counted; the
    watcher's database connections stay open for the whole catch-up)."""
    tick = os.sysconf("SC_CLK_TCK")
    used = {"this process": 0.0, "postgres": 0.0, "anvil": 0.0}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        name = text[text.index("(") + 1:text.rindex(")")]
        fields = text[text.rindex(")") + 2:].split()
        seconds = (int(fields[11]) + int(fields[12])) / tick
        if stat.parent.name == str(os.getpid()):
            used["this process"] += seconds
        elif name.startswith("postgres"):
            used["postgres"] += seconds
        elif name.startswith("anvil"):
            used["anvil"] += seconds
    return used


@dataclass(frozen=True)
class Measure:
    """One measured run."""

    name: str
    blocks: int
    deposits: int
    history_s: float
    ledger_s: float


def fill_chain(node: AnvilNode, ours: list[str], blocks: int, per_block: int) -> Contract:
    """Mine ``blocks`` blocks of one batchTransfer each: ``per_block`` to us, as many to others."""
    token = node.deploy("TestToken", "USD Coin", "USDC", 6)
    node.transact(token, "mint", [DEV_ACCOUNTS[0], 10**30])
    others = [f"0x{i:040x}" for i in range(1, 1001)]
    n = 0
    # One request at a time: automine then gives each transaction its own block (anvil runs
    # the items of a JSON-RPC batch concurrently, which breaks nonce order).
    for b in range(blocks):
        targets, amounts = [], []
        for _ in range(per_block):
            targets += [ours[n % len(ours)], others[n % len(others)]]
            amounts += [1_000_000 + n, 7]
            n += 1
        data = encode_call(token.abi, "batchTransfer", [targets, amounts])
        node.rpc.request("eth_sendTransaction", [{"from": DEV_ACCOUNTS[0], "to": token.address,
                                                  "data": data,
                                                  "gas": to_quantity(120_000 * per_block)}])
        if (b + 1) % 250 == 0 or b + 1 == blocks:
            # anvil answers before it mines: keep its queue short, or it drops transactions.
            deadline = time.monotonic() + 60
            while node.rpc.get_transaction_count(DEV_ACCOUNTS[0], "latest") < 2 + b + 1:
                assert time.monotonic() < deadline, "the node did not mine every transaction"
                time.sleep(0.02)
        if (b + 1) % 1000 == 0:
            _progress(f"  filled {b + 1}/{blocks} blocks")
    if node.head() < blocks:
        node.mine(blocks - node.head())  # Concurrent sends may share blocks: top up.
    node.mine(8)  # Everything we filled is now below `finalized`.
    return token


#: ``--trace``: how the watcher finds ETH paid by internal calls (``trace_internal`` and
#: ``trace_method`` of the chain), or ``off``.
TRACES = ("trace_block", "debug_traceBlockByHash", "off")


def chains_config(node: AnvilNode, token: Contract, name: str,
                  trace: str = "trace_block", scan_blocks_max: int = 500) -> ChainsConfig:
    """A one-chain configuration for the bench."""
    options: dict[str, Any] = {"scan_blocks_max": scan_blocks_max}
    if trace == "off":
        options["trace_internal"] = False
    else:
        options["trace_method"] = trace
    return parse_chains_config(dev_config(
        rpc_url=node.url, token=token.address, chain=name, finality="finalized",
        token_minimum="0", hot_wallet=None, chain_options=options))


def run_watcher(engine: Any, config: ChainsConfig, head: int) -> Measure:
    """Catch up with the watcher; the clock stops when the ledger has every deposit."""
    watcher = Watcher(engine, config, "fast", settle_batch_max=2_000)
    settle_batch_process()  # as `custody watch` (deposits.jobs.run_watch) does
    started = time.perf_counter()
    history_s = 0.0
    deposits = credited = 0
    try:
        while True:
            report = watcher.step(now=NOW)
            deposits += report.new_deposits
            credited += report.credited
            if (report.cursor_block is not None and report.cursor_block >= head
                    and not history_s):
                history_s = time.perf_counter() - started
            if report.caught_up and report.credited == 0 and report.finals == 0:
                break
            _progress(f"  watcher at block {report.cursor_block}: {deposits} deposits, "
                      f"{credited} credited")
    finally:
        watcher.close()
    return Measure("watcher (batched receipts, set-based writes, post_batch)", head + 1,
                   deposits, history_s, time.perf_counter() - started)


def run_naive(engine: Any, node: AnvilNode, config: ChainsConfig, blocks: int) -> Measure:
    """The naive baseline: web3.py, a receipt per transaction, a commit per deposit."""
    w3 = Web3(Web3.HTTPProvider(node.url))
    chain = config.chain("naive")
    token = chain.tokens[0].contract
    with UnitOfWork(engine) as uow:
        users: dict[str, str] = dict(uow.conn.execute(sa.text(
            "SELECT address, user_id FROM deposit_addresses")).all())
    accounts = service.AccountCache()
    started = time.perf_counter()
    count = 0
    history_s = 0.0
    for number in range(blocks):
        block = w3.eth.get_block(number)
        for item in block["transactions"]:
            assert isinstance(item, bytes)  # get_block(full_transactions=False): hashes
            tx_hash = HexBytes(item)
            receipt = w3.eth.get_transaction_receipt(tx_hash)
            for i, log in enumerate(receipt["logs"]):
                if (log["address"].lower() != token or len(log["topics"]) != 3
                        or "0x" + log["topics"][0].hex() != TRANSFER_TOPIC):
                    continue
                to = "0x" + log["topics"][2].hex()[-40:]
                if to not in users:
                    continue
                count += 1
                t0 = time.perf_counter()
                _naive_credit(engine, config, accounts, users[to], tx_hash.to_0x_hex(), i,
                              int(log["data"].hex(), 16), block)
                history_s += time.perf_counter() - t0
    return Measure("naive (web3.py get_block + receipt per tx, commit per deposit)", blocks,
                   count, time.perf_counter() - started, time.perf_counter() - started)


def _naive_credit(engine: Any, config: ChainsConfig, accounts: service.AccountCache,
                  user: str, tx_hash: str, index: int, value: int, block: Any) -> None:
    chain = config.chain("naive")
    needed = [(chart.custody("naive"), "USDC"), (chart.user_wallet(user), "USDC")]
    run_in_transaction(engine, lambda uow: accounts.ensure(uow, config, needed))

    def work(uow: UnitOfWork) -> None:
        key = ("naive", tx_hash.lower(), f"log:{index}")
        ids = repo.insert_deposits(uow.conn, [{
            "chain": key[0], "tx_hash": key[1], "position": key[2], "token": None,
            "from_address": DEV_ACCOUNTS[0], "to_address": "0x0", "value": str(value),
            "tx_from": None, "tx_nonce": None, "user_id": user, "asset_code": "USDC",
            "amount_minor": str(value), "booking": "user", "booking_reason": None,
            "state": "included", "block_number": block["number"],
            "block_hash": block["hash"].to_0x_hex(), "confirmations": None}])
        posted = ledger.post(uow, Entry(
            idempotency_key=f"deposit:{key[0]}:{key[1]}:{key[2]}", kind="deposit",
            effective_at=NOW, source="naive", lines=(
                Line(accounts.get(f"custody:{chain.name}", "USDC"), value),
                Line(accounts.get(chart.user_wallet(user).code, "USDC"), -value))))
        event = {"deposit_id": ids[key], "chain": key[0], "tx_hash": key[1],
                 "position": key[2], "observed_at": NOW.isoformat(), "block_number": None,
                 "block_hash": None, "confirmations": None}
        repo.append_events(uow.conn, [
            {**event, "event": "transfer_included", "state": "included"},
            {**event, "event": "finality_reached", "state": "final"},
            {**event, "event": "attested_for_user", "state": "credited",
             "ledger_transaction_id": posted.transaction_id}],
            [{"deposit_id": ids[key], "state": "credited", "block_number": None,
              "block_hash": None, "confirmations": None,
              "ledger_transaction_id": posted.transaction_id}])

    run_in_transaction(engine, work)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=10_000)
    parser.add_argument("--ours-per-block", type=int, default=1)
    parser.add_argument("--users", type=int, default=1_000)
    parser.add_argument("--baseline-blocks", type=int, default=1_000)
    parser.add_argument("--trace", choices=TRACES, default="trace_block",
                        help="how the watcher reads internal calls (default trace_block; "
                             "debug_traceBlockByHash re-executes every block on the node)")
    parser.add_argument("--scan-blocks-max", type=int, default=500,
                        help="the chain's scan_blocks_max: blocks per watcher step (default 500, "
                             "the configuration's default)")
    parser.add_argument("--database-url", default=None)
    parser.add_argument("--data-dir", type=Path, default=Path("var/bench-deposits"))
    args = parser.parse_args(argv)
    server_url = args.database_url or embedded_url(args.data_dir)
    url = create_database(server_url, "deposit_bench")
    engine = make_engine(url, pool_size=4)
    _progress(f"assigning {args.users} deposit addresses")
    source = XpubAddressSource(xpub_from_mnemonic(DEV_MNEMONIC, account=7))
    with UnitOfWork(engine) as uow:
        ours = [service.assign_address(uow, "evm", f"user{i}", source)
                for i in range(args.users)]
        uow.commit()
    with AnvilNode.start(slots_in_an_epoch=1, extra_args=["--gas-limit", "300000000"]) as node:
        _progress(f"filling {args.blocks} blocks")
        token = fill_chain(node, ours, args.blocks, args.ours_per_block)
        head = node.head()
        fast_cfg = chains_config(node, token, "fast", args.trace, args.scan_blocks_max)
        naive_cfg = chains_config(node, token, "naive")
        _progress("watcher catching up")
        rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        cpu_before = cpu_seconds()
        fast = run_watcher(engine, fast_cfg, head)
        cpu = {k: v - cpu_before[k] for k, v in cpu_seconds().items()}
        rss_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        _progress(f"naive baseline over {args.baseline_blocks} blocks")
        naive = run_naive(engine, node, naive_cfg, args.baseline_blocks)
    report = verify(engine)
    with UnitOfWork(engine) as uow:
        twice = uow.conn.execute(sa.text(
            "SELECT count(*) FROM deposits WHERE chain = 'fast' AND state <> 'credited'")
        ).scalar_one()
    table = Table(title=f"deposit catch-up: {args.blocks} blocks, "
                        f"{args.blocks * args.ours_per_block} deposits + as many foreign, "
                        f"internal calls: {args.trace}")
    for column in ("pipeline", "blocks", "deposits", "blocks/s", "deposits/s history",
                   "deposits/s ledger (end to end)"):
        table.add_column(column, justify="left" if column == "pipeline" else "right")
    for m in (fast, naive):
        table.add_row(m.name, str(m.blocks), str(m.deposits), f"{m.blocks / m.ledger_s:,.0f}",
                      f"{m.deposits / m.history_s:,.0f}", f"{m.deposits / m.ledger_s:,.0f}")
    console.print(table)
    ratio = (fast.deposits / fast.ledger_s) / (naive.deposits / naive.ledger_s)
    console.print(f"end to end: {ratio:.1f}x the naive baseline (target >= 40x); "
                  f"{fast.deposits / fast.ledger_s:,.0f} deposits/s (target >= 5,000); "
                  f"verify {'ok' if report.ok else 'FAILED'}; not credited: {twice}")
    console.print(f"peak RSS of this process: {rss_before:,.0f} MB before the catch-up, "
                  f"{rss_peak:,.0f} MB after it")
    console.print(f"CPU during the catch-up ({fast.ledger_s:.2f} s on {os.cpu_count()} cores): "
                  + ", ".join(f"{k} {v:.2f} s" for k, v in cpu.items()))
    return 0 if report.ok and twice == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
