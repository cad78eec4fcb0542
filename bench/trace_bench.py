"""What tracing internal transfers costs the watcher's scan, per block, on anvil.

Run: ``.venv/bin/python -m bench.trace_bench [--blocks 500] [--rounds 3] [--chunk 500]``.
It starts its own anvil and mines ``--blocks`` blocks, each holding one ERC-20
``batchTransfer`` (4 logs, two of them to "our" addresses) and one splitter transaction
(``devtools.forwarders``) paying two of our addresses and one other by internal calls. Then,
alternating in each round, it scans the whole range with ``deposits.scanner.scan_blocks`` in
chunks of ``--chunk`` blocks (the watcher's ``scan_blocks_max``) with ``trace_internal`` off,
on (``debug_traceBlockByHash``) and on with ``trace_method = "trace_block"``, and reads the
same blocks' traces alone three ways (``debug_traceBlockByHash``, ``debug_traceBlockByNumber``
with the callTracer, and ``trace_block``), batched by chunk.
No database: the users' lookup is a set. It prints a table and stops by itself.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable, Iterable

from chains.rpc import RpcCall, RpcClient, to_quantity
from deposits.scanner import CALL_TRACER, scan_blocks
from devtools import forwarders
from devtools.anvil import DEV_ACCOUNTS, AnvilNode

OURS = [f"0x{i:040x}" for i in range(0x1001, 0x1005)]
OTHERS = [f"0x{i:040x}" for i in range(0x2001, 0x2004)]


def _progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def fill_chain(node: AnvilNode, blocks: int) -> tuple[int, int, int]:
    """Mine the blocks; return (first, last, transactions per block)."""
    token = node.deploy("TestToken", "Bench", "BNCH", 18)
    node.transact(token, "mint", [DEV_ACCOUNTS[0], 10**30])
    splitter = forwarders.deploy_runtime(node, forwarders.splitter_runtime())
    node.set_automine(False)
    first = node.head() + 1
    for index in range(blocks):
        node.transact(token, "batchTransfer", [[OURS[0], OTHERS[0], OURS[1], OTHERS[1]],
                                               [1, 2, 3, 4]], DEV_ACCOUNTS[0], gas=300_000)
        forwarders.split(node, splitter, [(OURS[2], 5), (OTHERS[2], 6), (OURS[3], 7)],
                         DEV_ACCOUNTS[1], gas=200_000)
        node.mine(1)
        if (index + 1) % 100 == 0 or index + 1 == blocks:
            _progress(f"  filled {index + 1}/{blocks} blocks")
    node.set_automine(True)
    return first, node.head(), 2


def _chunks(first: int, last: int, size: int) -> Iterable[tuple[int, int]]:
    for start in range(first, last + 1, size):
        yield start, min(last, start + size - 1)


def scan_all(rpc: RpcClient, first: int, last: int, chunk: int, trace: bool,
             method: str = "debug_traceBlockByHash") -> int:
    """Scan the range as the watcher does; return the observations found."""
    ours = set(OURS)
    found = 0
    tip = None
    for start, end in _chunks(first, last, chunk):
        result = scan_blocks(rpc, tip, start, end,
                             lookup_users=lambda a: {x: "u" for x in a if x in ours},
                             is_listed=lambda c: True, trace_internal=trace,
                             trace_method=method)
        assert not result.reorg and result.headers[-1].number == end
        tip = (end, result.headers[-1].hash)
        found += len(result.observations)
    return found


def traces_only(rpc: RpcClient, first: int, last: int, chunk: int, method: str,
                hashes: dict[int, str]) -> int:
    """Read every block's traces in batches of ``chunk``; return the blocks read."""
    read = 0
    for start, end in _chunks(first, last, chunk):
        heights = range(start, end + 1)
        if method == "debug_traceBlockByHash":
            calls = [RpcCall(method, [hashes[h], CALL_TRACER]) for h in heights]
        elif method == "debug_traceBlockByNumber":
            calls = [RpcCall(method, [to_quantity(h), CALL_TRACER]) for h in heights]
        else:
            calls = [RpcCall(method, [to_quantity(h)]) for h in heights]
        read += len(rpc.batch_results(calls))
    return read


def timed(fn: Callable[[], int]) -> tuple[float, int]:
    started = time.perf_counter()
    out = fn()
    return time.perf_counter() - started, out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--chunk", type=int, default=500)
    args = parser.parse_args(argv)
    with AnvilNode.start() as node:
        _progress(f"filling {args.blocks} blocks")
        first, last, per_block = fill_chain(node, args.blocks)
        blocks = last - first + 1
        rpc = RpcClient(node.url, rpc_timeout_ms=120_000, retries_max=1)
        hashes = {h: str(node.rpc.request("eth_getBlockByNumber", [to_quantity(h), False])
                         ["hash"]) for h in range(first, last + 1)}
        runs: dict[str, list[float]] = {}
        counts: dict[str, int] = {}
        cases: dict[str, Callable[[], int]] = {
            "scan, trace_internal off": lambda: scan_all(rpc, first, last, args.chunk, False),
            "scan, trace_internal on": lambda: scan_all(rpc, first, last, args.chunk, True),
            "scan, trace_internal on, trace_block": lambda: scan_all(
                rpc, first, last, args.chunk, True, "trace_block"),
        }
        def reader(method: str) -> Callable[[], int]:
            return lambda: traces_only(rpc, first, last, args.chunk, method, hashes)

        for method in ("debug_traceBlockByHash", "debug_traceBlockByNumber", "trace_block"):
            cases[f"traces only: {method}"] = reader(method)
        for round_ in range(args.rounds):
            _progress(f"round {round_ + 1}/{args.rounds}")
            for name, fn in cases.items():
                elapsed, count = timed(fn)
                runs.setdefault(name, []).append(elapsed)
                counts[name] = count
        print(f"{blocks} blocks, {per_block} transactions each (one ERC-20 batchTransfer, one "
              f"splitter paying 3 by internal calls), chunks of {args.chunk}, "
              f"{args.rounds} rounds")
        print(f"| what | found | ms per block (median of {args.rounds}) | min..max |")
        print("|---|---:|---:|---:|")
        for name, times in runs.items():
            per = [t / blocks * 1000 for t in times]
            print(f"| {name} | {counts[name]} | {statistics.median(per):.2f} | "
                  f"{min(per):.2f}..{max(per):.2f} |")
        off = statistics.median(runs["scan, trace_internal off"])
        on = statistics.median(runs["scan, trace_internal on"])
        parity = statistics.median(runs["scan, trace_internal on, trace_block"])
        print(f"tracing adds {(on - off) / blocks * 1000:.2f} ms per block "
              f"({on / off:.2f}x the scan without it); with trace_block "
              f"{(parity - off) / blocks * 1000:.2f} ms ({parity / off:.2f}x)")


if __name__ == "__main__":
    main()
