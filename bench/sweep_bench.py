"""Sweeps: the sweeper against a one-at-a-time baseline, on anvil and PostgreSQL.

Run ``python -m bench.sweep_bench --help``. One run:

1. starts its own anvil mining a block every ``--block-time-s`` seconds (a real chain's rhythm:
   a transaction waits for the next block, as on any network), and a fresh migrated database
   (embedded server under ``var/bench-sweeps`` unless ``--database-url`` is given);
2. funds ``--addresses`` deposit addresses (development mnemonic, so the sweeper can sign for
   them): half with ETH, half with USDC (each of those needs a gas top-up first), lets the
   watcher credit them, and funds the treasury with declared capital;
3. measures the sweeper (``sweeps.runner.step`` with the watcher, as the scheduler runs them)
   from the first step until every sweep and top-up is final under ``confirmations:3``:
   addresses swept per second, transactions submitted and confirmed per second;
4. measures the baseline on a second anvil of the same rhythm, with ``--baseline-addresses``
   addresses funded the same way, one at a time: sign, send, wait for the receipt, next (a token
   address: its top-up, then its token transfer). No database and no finality wait, which only
   flatters the baseline; its rate is extrapolated to ``--addresses`` (said so in the table);
5. times the holdings report (``sweeps.holdings``) for the swept addresses;
6. checks ``ledger.integrity.verify`` and that per asset the on-chain holdings of all our
   addresses equal custody + treasury, and prints the table.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from eth_account import Account
from eth_utils.address import to_checksum_address
from rich.console import Console
from rich.table import Table

from bench.ledger_bench import create_database
from chains.addresses import MnemonicAddressSource
from chains.evm import encode_call, erc20_transfer_calldata
from chains.rpc import RpcClient, to_quantity
from config.database import embedded_url, make_engine
from config.sweeps import parse_sweeps_config
from config.uow import UnitOfWork
from deposits import own
from deposits import service as deposits
from deposits.watcher import Watcher
from devtools.anvil import DEV_ACCOUNTS, DEV_MNEMONIC, AnvilNode, Contract
from devtools.config import dev_config, dev_configs
from ledger import chart
from ledger import service as ledger
from ledger.integrity import verify
from outgoing.chain import FeePolicy, fresh_caps
from outgoing.signer import LocalKeySigner, UnsignedTx
from sweeps import holdings, runner

CHAIN = "dev"
MNEMONIC_ENV = "CUSTODY_BENCH_DEPOSIT_MNEMONIC"
HOT_KEY_ENV = "CUSTODY_BENCH_HOT_KEY"
T0 = datetime(2026, 12, 2, tzinfo=UTC)
console = Console(highlight=False, width=150)


def _progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


@dataclass(frozen=True)
class Rig:
    """The chain, the database and the configuration of one run."""

    node: AnvilNode
    usdc: Contract
    engine: Any
    doc: dict[str, Any]
    hot: str
    hot_key: str


def start(block_time_s: float, database_url: str | None, batch_max: int) -> Rig:
    node = AnvilNode.start(slots_in_an_epoch=2, extra_args=["--block-time", str(block_time_s)])
    usdc = node.deploy("TestToken", "USD Coin", "USDC", 6)
    node.transact(usdc, "mint", [to_checksum_address(DEV_ACCOUNTS[0]), 10**18])
    account = Account.create()
    hot, key = str(account.address).lower(), "0x" + bytes(account.key).hex()
    doc = dev_config(rpc_url=node.url, token=usdc.address, chain=CHAIN, hot_wallet=hot,
                     hot_key_env=HOT_KEY_ENV,
                     chain_options={"native_minimum": "0.001", "scan_blocks_max": 500,
                                    "rpc_timeout_ms": 10_000, "rpc_retries_max": 2})
    doc["address_sources"] = {"evm": {"kind": "mnemonic", "mnemonic_env": MNEMONIC_ENV,
                                      "account": 1}}
    doc["sweeps"] = {"batch_max": batch_max, "bump_after_s": 3600, "assets": [
        {"chain": CHAIN, "asset": "ETH", "threshold": "0.01"},
        {"chain": CHAIN, "asset": "USDC", "threshold": "1"}]}
    os.environ[MNEMONIC_ENV] = DEV_MNEMONIC
    os.environ[HOT_KEY_ENV] = key
    server = database_url or embedded_url(Path("var/bench-sweeps"))
    url = create_database(server, "custody_bench_sweeps")
    return Rig(node, usdc, make_engine(url, pool_size=4), doc, hot, key)


def assign(rig: Rig, prefix: str, count: int) -> list[str]:
    source = MnemonicAddressSource(DEV_MNEMONIC, account=1)
    found = []
    with UnitOfWork(rig.engine) as uow:
        for i in range(count):
            found.append(deposits.assign_address(uow, "evm", f"{prefix}{i:05d}", source))
        uow.commit()
    return found


def wait_mined(node: AnvilNode, sender: str, nonce: int, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while node.rpc.get_transaction_count(sender, "latest") < nonce:
        assert time.monotonic() < deadline, "the node did not mine the funding transactions"
        time.sleep(0.05)


def fund(rig: Rig, addresses: list[str]) -> tuple[list[str], list[str]]:
    """ETH to the first half, USDC to the second half; returns (eth, usdc) addresses."""
    half = len(addresses) // 2
    eth, usdc = addresses[:half], addresses[half:]
    sender = DEV_ACCOUNTS[2]
    first = rig.node.rpc.get_transaction_count(sender, "pending")
    for i, address in enumerate(eth):
        rig.node.rpc.request("eth_sendTransaction", [{
            "from": sender, "to": address, "value": to_quantity(10**17 + i),
            "gas": to_quantity(21_000), "nonce": to_quantity(first + i)}])
    wait_mined(rig.node, sender, first + len(eth))
    token_sender = DEV_ACCOUNTS[0]
    first = rig.node.rpc.get_transaction_count(token_sender, "pending")
    chunks = [usdc[i:i + 100] for i in range(0, len(usdc), 100)]
    for n, chunk in enumerate(chunks):
        data = encode_call(rig.usdc.abi, "batchTransfer",
                           [chunk, [10 * 10**6 + i for i in range(len(chunk))]])
        rig.node.rpc.request("eth_sendTransaction", [{
            "from": token_sender, "to": rig.usdc.address, "data": data,
            "gas": to_quantity(60_000 * len(chunk) + 50_000), "nonce": to_quantity(first + n)}])
    wait_mined(rig.node, token_sender, first + len(chunks))
    return eth, usdc


def credit_all(rig: Rig, watcher: Watcher) -> None:
    deadline = time.monotonic() + 300
    while True:
        watcher.step(now=T0)
        with UnitOfWork(rig.engine) as uow:
            waiting = uow.conn.execute(sa.text(
                "SELECT count(*) FROM deposits WHERE state IN ('included', 'unconfirmed', "
                "'final')")).scalar_one()
        if waiting == 0:
            return
        assert time.monotonic() < deadline, "deposits not credited"
        time.sleep(0.2)


def fund_treasury(rig: Rig, wei: int) -> None:
    chains = dev_configs(rig.doc)[0]
    with UnitOfWork(rig.engine) as uow:
        own.declare_funding(uow, chains, own.FundingRequest(
            CHAIN, "ETH", str(wei), DEV_ACCOUNTS[3], "bench gas float"), declared_by="bench",
            idempotency_key="bench-seed")
        uow.commit()
    rig.node.send_eth(DEV_ACCOUNTS[3], rig.hot, wei)


@dataclass(frozen=True)
class Measured:
    """One measured sweep."""

    name: str
    addresses: int
    transactions: int
    seconds: float
    extrapolated: bool = False


def open_movements(rig: Rig) -> int:
    with UnitOfWork(rig.engine) as uow:
        return int(uow.conn.execute(sa.text(
            "SELECT (SELECT count(*) FROM sweeps WHERE state NOT IN ('final', 'reverted', "
            "'dropped')) + (SELECT count(*) FROM gas_top_ups WHERE state NOT IN ('final', "
            "'reverted', 'dropped'))")).scalar_one())


def run_sweeper(rig: Rig, watcher: Watcher, expected: int) -> Measured:
    chains, wcfg = dev_configs(rig.doc)
    ctx = runner.build_context(chains, wcfg, parse_sweeps_config(rig.doc, chains, wcfg), CHAIN)
    clock = T0
    started = time.perf_counter()
    last = 0.0
    while True:
        clock += timedelta(seconds=1)
        runner.step(rig.engine, ctx, now=clock)
        watcher.step(now=clock)
        with UnitOfWork(rig.engine) as uow:
            final = int(uow.conn.execute(sa.text(
                "SELECT count(*) FROM sweeps WHERE state = 'final'")).scalar_one())
        if final >= expected and open_movements(rig) == 0:
            break
        now = time.perf_counter()
        if now - last > 5:
            _progress(f"  sweeper: {final}/{expected} sweeps final after {now - started:.0f}s")
            last = now
        assert now - started < 1800, "the sweeper did not finish within 30 minutes"
    seconds = time.perf_counter() - started
    with UnitOfWork(rig.engine) as uow:
        txs = int(uow.conn.execute(sa.text(
            "SELECT count(DISTINCT (movement_kind, coalesce(sweep_id, top_up_id))) FROM "
            "outgoing_attempts WHERE movement_kind IN ('sweep', 'gas_top_up')")).scalar_one())
    return Measured("sweeper (pipelined, final under confirmations:3)", expected, txs, seconds)


def run_baseline(block_time_s: float, count: int, first_index: int) -> Measured:
    """One at a time on a second anvil of the same rhythm (no database: the baseline's
    transfers are not the engine's): sign, send, wait for the receipt, next."""
    node = AnvilNode.start(slots_in_an_epoch=2, extra_args=["--block-time", str(block_time_s)])
    try:
        usdc = node.deploy("TestToken", "USD Coin", "USDC", 6)
        node.transact(usdc, "mint", [to_checksum_address(DEV_ACCOUNTS[0]), 10**18])
        account = Account.create()
        hot, hot_key = str(account.address).lower(), "0x" + bytes(account.key).hex()
        node.send_eth(DEV_ACCOUNTS[3], hot, 1_000 * 10**18)
        source = MnemonicAddressSource(DEV_MNEMONIC, account=1)
        addresses = [source.address_for(first_index + i).lower() for i in range(count)]
        fake = Rig(node, usdc, None, {}, hot, hot_key)
        eth, tokens = fund(fake, addresses)
        rpc = RpcClient(node.url, rpc_timeout_ms=10_000)
        index = {a: first_index + i for i, a in enumerate(addresses)}
        hot_signer = LocalKeySigner.of_account(Account.from_key(hot_key), "bench hot")
        fees = FeePolicy(10**9, 200 * 10**9)
        hot_nonce = rpc.get_transaction_count(hot, "pending")

        def send_and_wait(signer: Any, tx: UnsignedTx) -> None:
            signed = signer.sign(tx)
            rpc.send_raw_transaction(signed.raw_tx)
            while rpc.get_receipt(signed.tx_hash) is None:
                time.sleep(0.02)

        txs = 0
        started = time.perf_counter()
        for address in eth:
            caps = fresh_caps(rpc, fees)
            balance = rpc.get_balance(address, "latest")
            signer = LocalKeySigner.of_account(source.account_for(index[address]), "bench")
            send_and_wait(signer, UnsignedTx(
                31337, 0, hot, balance - 21_000 * caps.max_fee_per_gas, "0x", 21_000,
                caps.max_fee_per_gas, caps.max_priority_fee_per_gas))
            txs += 1
        for address in tokens:
            caps = fresh_caps(rpc, fees)
            send_and_wait(hot_signer, UnsignedTx(
                31337, hot_nonce, address, 100_000 * caps.max_fee_per_gas, "0x", 21_000,
                caps.max_fee_per_gas, caps.max_priority_fee_per_gas))
            hot_nonce += 1
            amount = int(node.call(usdc, "balanceOf", [to_checksum_address(address)]))
            signer = LocalKeySigner.of_account(source.account_for(index[address]), "bench")
            send_and_wait(signer, UnsignedTx(
                31337, 0, usdc.address, 0, erc20_transfer_calldata(hot, amount), 100_000,
                caps.max_fee_per_gas, caps.max_priority_fee_per_gas))
            txs += 2
        seconds = time.perf_counter() - started
    finally:
        node.stop()
    return Measured("baseline (one at a time, no database, no finality wait)", count, txs,
                    seconds)


def holdings_seconds(rig: Rig) -> tuple[float, int]:
    """The holdings report's time for the chain (``sweeps.holdings``, what ``custody holdings``
    and ``GET /v1/admin/holdings`` answer), and the number of deposit addresses it covered."""
    chains = dev_configs(rig.doc)[0]
    started = time.perf_counter()
    report = holdings.holdings(rig.engine, chains, CHAIN, include_empty=True)
    seconds = time.perf_counter() - started
    return seconds, report.chains[0].deposit_addresses


def check(rig: Rig, addresses: list[str]) -> None:
    report = verify(rig.engine)
    assert report.ok, report
    rpc = rig.node.rpc
    ours = [rig.hot, *addresses]
    wei = sum(rpc.get_balance(a, "latest") for a in ours)
    units = sum(int(rig.node.call(rig.usdc, "balanceOf", [to_checksum_address(a)]))
                for a in ours)
    with UnitOfWork(rig.engine) as uow:
        def bal(code: str, asset: str) -> int:
            try:
                return ledger.account_balance(uow, ledger.get_account(uow, code, asset)
                                              ).balance_minor
            except Exception:  # noqa: BLE001 - AccountNotFound: nothing posted there
                return 0
        for asset, held in (("ETH", wei), ("USDC", units)):
            books = bal(chart.custody(CHAIN).code, asset) + bal(chart.treasury(CHAIN).code, asset)
            assert held == books, f"{asset}: chain {held} != ledger {books}"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="bench.sweep_bench", description=__doc__.split("\n")[0])
    parser.add_argument("--addresses", type=int, default=1_000)
    parser.add_argument("--baseline-addresses", type=int, default=40)
    parser.add_argument("--block-time-s", type=float, default=1.0)
    parser.add_argument("--batch-max", type=int, default=1_000)
    parser.add_argument("--database-url", default=None)
    args = parser.parse_args(argv)
    _progress(f"starting anvil (a block every {args.block_time_s}s) and a fresh database")
    rig = start(args.block_time_s, args.database_url, args.batch_max)
    try:
        _progress(f"assigning and funding {args.addresses} + {args.baseline_addresses} addresses")
        ours = assign(rig, "s", args.addresses)
        fund_treasury(rig, 1_000 * 10**18)
        fund(rig, ours)
        chains = dev_configs(rig.doc)[0]
        watcher = Watcher(rig.engine, chains, CHAIN, settle_batch_max=2_000)
        credit_all(rig, watcher)
        _progress(f"baseline: {args.baseline_addresses} addresses one at a time")
        baseline = run_baseline(args.block_time_s, args.baseline_addresses, args.addresses)
        _progress(f"sweeper: {len(ours)} addresses")
        ours_m = run_sweeper(rig, watcher, len(ours))
        holdings_s, holdings_n = holdings_seconds(rig)
        check(rig, ours)
    finally:
        rig.node.stop()
        rig.engine.dispose()
    per_address = baseline.seconds / baseline.addresses
    table = Table(title=f"Sweeps on anvil (a block every {args.block_time_s}s), "
                        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC")
    for column in ("run", "addresses", "transactions", "seconds", "addresses/s", "tx/s"):
        table.add_column(column, justify="right" if column != "run" else "left")
    for m in (ours_m, baseline):
        table.add_row(m.name, f"{m.addresses:,}", f"{m.transactions:,}", f"{m.seconds:.1f}",
                      f"{m.addresses / m.seconds:.2f}", f"{m.transactions / m.seconds:.2f}")
    table.add_row(f"baseline extrapolated to {args.addresses:,} addresses", f"{args.addresses:,}",
                  "", f"{per_address * args.addresses:.0f}", f"{1 / per_address:.2f}", "")
    console.print(table)
    speedup = (ours_m.addresses / ours_m.seconds) / (1 / per_address)
    console.print(f"sweeper / baseline (addresses per second): {speedup:.1f}x (target 10x)")
    console.print(f"holdings report ({holdings_n:,} deposit addresses, every asset, at the "
                  f"final block): {holdings_s:.2f}s (target < 2 s)")
    console.print("checks: verify ok; per asset, on-chain holdings of all our addresses == "
                  "custody + treasury")


if __name__ == "__main__":
    main()
