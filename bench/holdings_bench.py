"""Holdings read throughput on anvil: chains.balances.read_balances against one request per call.

Run from the repository root: ``.venv/bin/python -m bench.holdings_bench`` (``--help`` for the
options). One run:

1. starts its own anvil and deploys a TestToken;
2. funds every ``--funded-every``-th of ``max(--sizes)`` addresses with a distinct amount of
   both assets: ETH with ``anvil_setBalance`` (batched, then one block mined) and the token
   with ``batchTransfer`` transactions, so that a mixed-up or dropped figure cannot pass;
3. warms both read paths up on 100 addresses (untimed), then reads the native balance and
   the token balance of the first ``n`` addresses for each ``n`` in ``--sizes`` with
   :func:`chains.balances.read_balances` at that block, checks every funded figure and the
   totals, and times it;
4. measures the baseline on ``--baseline-sample`` addresses: the same two reads per address,
   one HTTP request each (``RpcClient.request``, same client settings, same decoding), checked
   the same way; its time for the other sizes is EXTRAPOLATED linearly from that sample;
5. prints the table (wall seconds, this process's CPU seconds, addresses/s) and stops anvil.

The node and this process share the machine: on 2 cores, most of the wall time is anvil's.
"""

from __future__ import annotations

import argparse
import hashlib
import math
import resource
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass

from chains.balances import (
    Balances,
    balance_of_calldata,
    decode_quantity,
    decode_word,
    read_balances,
)
from chains.rpc import RpcCall, RpcClient, to_quantity
from devtools.anvil import DEV_ACCOUNTS, AnvilNode, Contract

#: Recipients per ``batchTransfer`` transaction (about 30,000 gas each, well under a block).
TRANSFER_RECIPIENTS_MAX = 250
NATIVE_BASE_MINOR = 10**15


def _progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def holder_addresses(count: int) -> list[str]:
    """``count`` deterministic addresses (lower-case hex from a hash; nobody holds the keys)."""
    return ["0x" + hashlib.sha256(f"holdings-bench/{i}".encode()).hexdigest()[:40]
            for i in range(count)]


def expected_native(index: int) -> int:
    """The wei given to funded address ``index``."""
    return NATIVE_BASE_MINOR + index


def expected_token(index: int) -> int:
    """The token minor units given to funded address ``index``."""
    return index + 1


def fund(node: AnvilNode, token: Contract, funded: dict[int, str]) -> int:
    """Give each funded address its ETH and token amounts; return the block holding them."""
    rpc = node.rpc
    calls = [RpcCall("anvil_setBalance", [a, to_quantity(expected_native(i))])
             for i, a in funded.items()]
    for start in range(0, len(calls), 1_000):
        rpc.batch_results(calls[start:start + 1_000])
    items = list(funded.items())
    node.transact(token, "mint", [DEV_ACCOUNTS[0], sum(expected_token(i) for i, _ in items)])
    for start in range(0, len(items), TRANSFER_RECIPIENTS_MAX):
        part = items[start:start + TRANSFER_RECIPIENTS_MAX]
        node.transact(token, "batchTransfer",
                      [[a for _, a in part], [expected_token(i) for i, _ in part]])
        done = start + len(part)
        if done % 2_500 < TRANSFER_RECIPIENTS_MAX or done == len(items):
            _progress(f"  token funded {done:,}/{len(items):,} addresses")
    return node.mine(1)  # the anvil_setBalance changes land in a block too


def check(balances: Balances, holders: Sequence[str], funded: dict[int, str],
          token: str) -> None:
    """Every funded figure exact, every other one zero (through the totals)."""
    count = len(holders)
    in_range = [i for i in funded if i < count]
    for i in in_range:
        address = holders[i]
        if (balances.native_minor[address] != expected_native(i)
                or balances.tokens_minor[(address, token)] != expected_token(i)):
            raise SystemExit(f"wrong figure for address {i} ({address})")
    native_total = sum(expected_native(i) for i in in_range)
    token_total = sum(expected_token(i) for i in in_range)
    if (len(balances.native_minor) != count or len(balances.tokens_minor) != count
            or sum(balances.native_minor.values()) != native_total
            or sum(balances.tokens_minor.values()) != token_total):
        raise SystemExit(f"totals differ for {count:,} addresses")


@dataclass(frozen=True)
class Row:
    """One measured (or extrapolated) read."""

    path: str
    addresses: int
    calls: int
    requests: int
    wall_s: float
    cpu_s: float | None
    extrapolated: bool = False

    @property
    def addresses_per_s(self) -> float:
        """Addresses read per wall-clock second."""
        return self.addresses / self.wall_s


def measure_batched(url: str, block: int, holders: Sequence[str], token: Contract,
                    funded: dict[int, str], batch_calls_max: int) -> Row:
    """Time one read_balances over ``holders`` and check its figures."""
    _progress(f"  batched read of {len(holders):,} addresses ...")
    step = max(1, len(holders) // 10)
    reported = [0]

    def on_progress(done: int, total: int) -> None:
        if done - reported[0] >= step or done == total:
            reported[0] = done
            _progress(f"    {done:,}/{total:,}")

    with RpcClient(url, rpc_timeout_ms=60_000, batch_size_max=batch_calls_max) as rpc:
        cpu = time.process_time()
        started = time.perf_counter()
        balances = read_balances(rpc, block, holders, [token.address],
                                 on_progress=on_progress)
        wall = time.perf_counter() - started
        cpu = time.process_time() - cpu
    check(balances, holders, funded, token.address)
    calls = 2 * len(holders)
    # The block hash is read once before and once after: 2 more requests.
    return Row("batched (read_balances)", len(holders), calls + 2,
               math.ceil(calls / batch_calls_max) + 2, wall, cpu)


def measure_baseline(url: str, block: int, holders: Sequence[str], token: Contract,
                     funded: dict[int, str]) -> Row:
    """Time one request per address per asset over ``holders`` and check the figures."""
    _progress(f"  baseline: one request per call, {len(holders):,} addresses ...")
    at = to_quantity(block)
    native: dict[str, int] = {}
    held: dict[tuple[str, str], int] = {}
    with RpcClient(url, rpc_timeout_ms=60_000) as rpc:
        cpu = time.process_time()
        started = time.perf_counter()
        for address in holders:
            native[address] = decode_quantity(rpc.request("eth_getBalance", [address, at]))
            word = rpc.request("eth_call", [{"to": token.address,
                                             "data": balance_of_calldata(address)}, at])
            held[(address, token.address)] = decode_word(word)
        wall = time.perf_counter() - started
        cpu = time.process_time() - cpu
    check(Balances(block, "", native, held), holders, funded, token.address)
    calls = 2 * len(holders)
    return Row("one request per call", len(holders), calls, calls, wall, cpu)


def extrapolate(sample: Row, addresses: int) -> Row:
    """The baseline's time for ``addresses``, scaled linearly from the sample (not measured)."""
    factor = addresses / sample.addresses
    return Row(sample.path, addresses, 2 * addresses, 2 * addresses, sample.wall_s * factor,
               None, extrapolated=True)


def run(sizes: Sequence[int], baseline_sample: int, funded_every: int,
        batch_calls_max: int) -> list[Row]:
    """Start anvil, fund, measure every size and the baseline; return the rows."""
    total = max(sizes)
    holders = holder_addresses(total)
    funded = {i: holders[i] for i in range(0, total, funded_every)}
    _progress("starting anvil ...")
    with AnvilNode.start() as node:
        token = node.deploy("TestToken", "USD Coin", "USDC", 6)
        _progress(f"funding {len(funded):,} of {total:,} addresses ...")
        block = fund(node, token, funded)
        _progress(f"reading at block {block}")
        # Untimed warm-up of both paths: the first requests pay for the connection and
        # anvil's cold state caches, which would count against whichever path runs first.
        measure_batched(node.url, block, holders[:100], token, funded, batch_calls_max)
        measure_baseline(node.url, block, holders[:100], token, funded)
        rows = [measure_batched(node.url, block, holders[:n], token, funded, batch_calls_max)
                for n in sizes]
        sample = measure_baseline(node.url, block, holders[:baseline_sample], token, funded)
    rows.append(sample)
    rows.extend(extrapolate(sample, n) for n in sizes if n != baseline_sample)
    return rows


def print_table(rows: Sequence[Row], batch_calls_max: int) -> None:
    """The results, then what the columns mean."""
    print(f"\n{'path':<24} {'addresses':>10} {'calls':>9} {'requests':>9} {'wall s':>9} "
          f"{'cpu s':>7} {'addresses/s':>12}")
    for row in rows:
        cpu = "-" if row.cpu_s is None else f"{row.cpu_s:.2f}"
        note = "  (extrapolated)" if row.extrapolated else ""
        print(f"{row.path:<24} {row.addresses:>10,} {row.calls:>9,} {row.requests:>9,} "
              f"{row.wall_s:>9.2f} {cpu:>7} {row.addresses_per_s:>12,.0f}{note}")
    batched = {r.addresses: r for r in rows if r.path.startswith("batched")}
    naive = {r.addresses: r for r in rows if not r.path.startswith("batched")}
    for n in sorted(batched):
        if n in naive:
            kind = "extrapolated" if naive[n].extrapolated else "measured"
            print(f"speed-up at {n:,} addresses: {naive[n].wall_s / batched[n].wall_s:.1f}x "
                  f"(baseline {kind})")
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"native + 1 token per address; batches of at most {batch_calls_max:,} calls; "
          f"cpu s = this process only (anvil excluded); peak RSS of this process "
          f"{peak_mb:,.0f} MB")


def main(argv: list[str] | None = None) -> None:
    """Parse arguments, run the benchmark, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sizes", default="1000,10000,100000",
                        help="comma-separated address counts (default: %(default)s)")
    parser.add_argument("--baseline-sample", type=int, default=1_000)
    parser.add_argument("--funded-every", type=int, default=10)
    parser.add_argument("--batch-calls", type=int, default=1_000,
                        help="calls per JSON-RPC batch request (default: %(default)s)")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    if min(sizes) < 1 or args.baseline_sample > max(sizes) or args.funded_every < 1:
        parser.error("sizes >= 1, --baseline-sample <= max(sizes), --funded-every >= 1")
    rows = run(sizes, args.baseline_sample, args.funded_every, args.batch_calls)
    print_table(rows, args.batch_calls)


if __name__ == "__main__":
    main()
