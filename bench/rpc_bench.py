"""Read throughput on anvil: raw batched JSON-RPC (chains.rpc) versus web3.py one call per item.

Run: ``.venv/bin/python -m bench.rpc_bench [--blocks 100] [--txs-per-block 5] [--seconds 2]``.
It starts its own anvil, fills it with token transfers (``--txs-per-block`` batchTransfer
transactions of 4 Transfer logs per block), then measures each read path for about
``--seconds`` and prints a table. It stops by itself.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable

from web3 import Web3

from chains.rpc import RpcClient
from devtools.anvil import DEV_ACCOUNTS, AnvilNode

LOGS_PER_TX = 4


def _progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def fill_chain(node: AnvilNode, blocks: int, txs_per_block: int) -> tuple[int, int]:
    """Mine ``blocks`` blocks of token transfers; return the (first, last) block numbers."""
    token = node.deploy("TestToken", "Bench", "BNCH", 18)
    senders = DEV_ACCOUNTS[:txs_per_block] if txs_per_block <= len(DEV_ACCOUNTS) else None
    if senders is None:
        raise SystemExit(f"--txs-per-block must be <= {len(DEV_ACCOUNTS)}")
    for sender in senders:
        node.transact(token, "mint", [sender, 10**30])
    recipients = [f"0x{i:040x}" for i in range(1, LOGS_PER_TX + 1)]
    node.set_automine(False)
    first = node.head() + 1
    for index in range(blocks):
        for sender in senders:
            node.transact(token, "batchTransfer", [recipients, [1] * LOGS_PER_TX], sender,
                          gas=300_000)
        node.mine(1)
        if (index + 1) % 20 == 0 or index + 1 == blocks:
            _progress(f"  filled {index + 1}/{blocks} blocks")
    node.set_automine(True)
    return first, node.head()


def measure(name: str, seconds: float, run_once: Callable[[], int]) -> tuple[str, int, float]:
    """Call ``run_once`` (which returns how many items it read) until ``seconds`` have passed
    (at least once, at most 1,000 times); return (name, items, items per second)."""
    _progress(f"  measuring {name} ...")
    items = 0
    started = time.perf_counter()
    for _ in range(1_000):
        items += run_once()
        if time.perf_counter() - started >= seconds:
            break
    elapsed = time.perf_counter() - started
    return name, items, items / elapsed


def run(blocks: int, txs_per_block: int, seconds: float) -> list[tuple[str, int, float]]:
    """Start anvil, fill it, and measure the four read paths."""
    _progress("starting anvil ...")
    with AnvilNode.start() as node:
        _progress(f"filling {blocks} blocks x {txs_per_block} txs x {LOGS_PER_TX} logs ...")
        first, last = fill_chain(node, blocks, txs_per_block)
        numbers = list(range(first, last + 1))
        rpc = RpcClient(node.url, rpc_timeout_ms=30_000)
        w3 = Web3(Web3.HTTPProvider(node.url, request_kwargs={"timeout": 30}))

        def raw_logs() -> int:
            return len(rpc.get_logs(first, last))

        def raw_receipts() -> int:
            total = 0
            for start in range(0, len(numbers), 100):
                for receipts in rpc.get_block_receipts(numbers[start:start + 100]):
                    assert receipts is not None
                    total += len(receipts)
            return total

        def web3_logs() -> int:
            return len(w3.eth.get_logs({"fromBlock": first, "toBlock": last}))

        def web3_receipts() -> int:
            total = 0
            for number in numbers:
                for tx_hash in w3.eth.get_block(number)["transactions"]:
                    w3.eth.get_transaction_receipt(tx_hash)  # type: ignore[arg-type]
                    total += 1
            return total

        results = [
            measure("raw eth_getLogs (one range)", seconds, raw_logs),
            measure("raw eth_getBlockReceipts (batch 100)", seconds, raw_receipts),
            measure("web3 get_logs (formatted)", seconds, web3_logs),
            measure("web3 get_block + receipt per tx", seconds, web3_receipts),
        ]
        rpc.close()
    return results


def main(argv: list[str] | None = None) -> None:
    """Parse arguments, run the benchmark, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--blocks", type=int, default=100)
    parser.add_argument("--txs-per-block", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=2.0)
    args = parser.parse_args(argv)
    results = run(args.blocks, args.txs_per_block, args.seconds)
    print(f"\n{'path':<40} {'items read':>12} {'items/s':>12}")
    for name, items, rate in results:
        print(f"{name:<40} {items:>12,} {rate:>12,.0f}")
    print("(logs for the get_logs rows, receipts for the receipt rows)")


if __name__ == "__main__":
    main()
