"""Sealing against the batch ledger: does the sealer keep up?

Run ``python -m bench.seal_bench --help``. One run, on a fresh database (the embedded server
under ``var/bench`` unless ``--database-url`` names another), with ``--accounts`` funded wallets
(``bench.ledger_bench.open_book``):

1. **ledger alone**: ``--writers`` processes post batches of ``--batch-size`` spread transfers
   with ``service.post_entries`` (the ledger's batch path, as ``bench.ledger_bench`` measures
   it) for ``--seconds``: the sustained batch rate, no sealer running. This leaves a backlog.
2. **sealer alone**: ``ledger.seals.seal_once`` seals that backlog (seals of
   ``--max-transactions``): the sealing rate, transactions sealed per second.
3. **both at once**: the writers again for ``--seconds`` while the sealer runs in a loop
   beside them (back to back, or every ``--seal-interval`` seconds as the ``ledger.seal`` job
   does every 10 s): the batch rate with sealing on
   (the sealer takes the ledger write gate for each watermark), the sealing rate meanwhile, the
   unsealed backlog at the end of the window and how long the sealer then takes to catch up.

Then ``verify_seals`` over the whole chain (clean) and a check that every transaction is in
exactly one seal. Verdict: sealing must be faster than the sustained batch rate (phase 2 vs
phase 1), and in phase 3 the backlog must not grow (sealed >= written in the window, less one
step's worth). Exit 1 otherwise.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import random
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from rich.console import Console
from rich.table import Table

from bench.ledger_bench import Book, _autocommit, create_database, open_book
from config.database import embedded_url, make_engine
from ledger import service
from ledger.model import Entry, Line
from ledger.seals import seal_once, verify_seals

console = Console(highlight=False, width=150)
EFFECTIVE_AT = datetime(2026, 11, 29, tzinfo=UTC)


def writer_main(book: Book, tag: str, worker: int, batch: int, deadline: float,
                counter: Any) -> None:
    """Post batches of spread transfers until ``deadline``; count what was acknowledged."""
    rng = random.Random(f"{tag}:{worker}")
    engine = make_engine(book.url, pool_size=1)
    i = 0
    try:
        while time.monotonic() < deadline:
            entries = []
            for j in range(batch):
                debited, credited = rng.sample(book.wallets, 2)
                amount = rng.randint(1, 1000)
                entries.append(Entry(idempotency_key=f"{tag}:{worker}:{i}:{j}", kind="transfer",
                                     effective_at=EFFECTIVE_AT, source="bench",
                                     lines=(Line(debited, amount), Line(credited, -amount))))
            i += 1
            outcomes = service.post_entries(engine, entries)
            assert all(o.ok for o in outcomes), "the funding makes refusals a bench bug"
            if time.monotonic() <= deadline:
                with counter.get_lock():
                    counter.value += len(outcomes)
    finally:
        engine.dispose()


@dataclass
class SealerStats:
    """What a sealer loop did: transactions and seals made, seconds spent inside seal_once."""

    transactions: int = 0
    seals: int = 0
    busy_s: float = 0.0

    def add(self, made: Sequence[Any], seconds: float) -> None:
        """Count one seal_once call."""
        self.transactions += sum(s.transactions_count for s in made)
        self.seals += len(made)
        self.busy_s += seconds


def seal_step(engine: sa.Engine, stats: SealerStats, max_transactions: int) -> int:
    """One seal_once call, timed; returns the transactions it sealed."""
    t0 = time.monotonic()
    made = seal_once(engine, datetime.now(UTC), max_transactions=max_transactions, seals_max=10)
    stats.add(made, time.monotonic() - t0)
    return sum(s.transactions_count for s in made)


def unsealed(engine: sa.Engine) -> int:
    """Committed transactions above the newest seal."""
    with engine.connect() as conn:
        return int(conn.execute(sa.text(
            "SELECT count(*) FROM ledger_transactions WHERE id > coalesce("
            "(SELECT max(through_transaction_id) FROM ledger_seals), 0)")).scalar_one())


def run_writers(book: Book, args: argparse.Namespace, tag: str, engine: sa.Engine,
                sealer: SealerStats | None) -> tuple[float, float]:
    """The writers for one window (with the sealer looping in this process if ``sealer``);
    returns (acknowledged transactions per second, window seconds)."""
    ctx = mp.get_context("fork")
    counter = ctx.Value("q", 0)
    start = time.monotonic()
    deadline = start + args.seconds
    procs = [ctx.Process(target=writer_main, args=(book, tag, w, args.batch_size, deadline,
                                                    counter), daemon=True)
             for w in range(args.writers)]
    for p in procs:
        p.start()
    tick = start + 1.0
    next_seal = start
    while time.monotonic() < deadline:
        if sealer is not None and time.monotonic() >= next_seal and (
                seal_step(engine, sealer, args.max_transactions) == 0 or args.seal_interval):
            next_seal = time.monotonic() + args.seal_interval
        time.sleep(0.05 if sealer is None or args.seal_interval else 0.0)
        if time.monotonic() >= tick:
            extra = f", sealed {sealer.transactions:,}" if sealer else ""
            console.print(f"  t={tick - start:4.0f}s written {counter.value:,}{extra}")
            tick += 1.0
    for p in procs:
        p.join(timeout=120)
        assert p.exitcode == 0, f"a writer failed (exit {p.exitcode})"
    return counter.value / args.seconds, args.seconds


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Command-line options."""
    p = argparse.ArgumentParser(prog="python -m bench.seal_bench",
                                description="Sealing rate against the ledger's batch rate.")
    p.add_argument("--seconds", type=float, default=20.0, help="each writing window (20)")
    p.add_argument("--writers", type=int, default=4, help="batch writer processes (4)")
    p.add_argument("--batch-size", type=int, default=100, help="entries per batch (100)")
    p.add_argument("--accounts", type=int, default=2_000, help="user wallets (2000)")
    p.add_argument("--max-transactions", type=int, default=10_000,
                   help="transactions per seal at most (10000, the job's default)")
    p.add_argument("--seal-interval", type=float, default=0.0,
                   help="phase 3: seconds between sealer runs (0: back to back, the hardest "
                        "case for the writers; the ledger.seal job runs every 10 s)")
    p.add_argument("--database-url", default="", help="server URL; default: embedded server")
    p.add_argument("--data-dir", type=Path, default=Path("var/bench"),
                   help="data directory of the embedded server (var/bench)")
    p.add_argument("--keep", action="store_true", help="keep the database afterwards")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Measure the three phases, check the chain, print the table and the verdict."""
    args = parse_args(argv)
    began = time.monotonic()
    server_url = args.database_url or embedded_url(args.data_dir)
    name = f"seal_bench_{datetime.now(UTC):%Y%m%d_%H%M%S}"
    console.print(f"[bold]setup[/] database {name}: migrate, open {args.accounts:,} wallets, fund")
    url = create_database(server_url, name)
    book = open_book(url, args.accounts)
    engine = make_engine(url, pool_size=2)
    stamp = datetime.now(UTC).strftime("%H%M%S")
    try:
        # The funding deposits are sealed first, so that phase 2 seals only phase 1's backlog.
        seal_once(engine, datetime.now(UTC), seals_max=1000)
        console.print(f"[bold]1. ledger alone[/]: {args.writers} writers, batches of "
                      f"{args.batch_size}, {args.seconds:.0f} s")
        batch_rate, _ = run_writers(book, args, f"{stamp}:a", engine, None)
        backlog = unsealed(engine)
        console.print(f"  -> {batch_rate:,.0f} tx/s; backlog {backlog:,} transactions")
        console.print(f"[bold]2. sealer alone[/]: seal the backlog of {backlog:,}")
        alone = SealerStats()
        t0 = time.monotonic()
        while seal_step(engine, alone, args.max_transactions):
            console.print(f"  sealed {alone.transactions:,} in {time.monotonic() - t0:.1f}s")
        seal_rate = alone.transactions / alone.busy_s if alone.busy_s else 0.0
        console.print(f"  -> {seal_rate:,.0f} tx/s ({alone.transactions:,} in {alone.busy_s:.1f}s,"
                      f" {alone.seals} seals)")
        console.print("[bold]3. both at once[/]: the writers with the sealer beside them ("
                      + (f"every {args.seal_interval:g} s)" if args.seal_interval
                         else "back to back)"))
        both = SealerStats()
        both_rate, window = run_writers(book, args, f"{stamp}:b", engine, both)
        lag = unsealed(engine)
        t1 = time.monotonic()
        while seal_step(engine, both, args.max_transactions):
            pass
        catch_up = time.monotonic() - t1
        console.print(f"  -> writers {both_rate:,.0f} tx/s; sealed {both.transactions:,} "
                      f"({both.seals} seals); unsealed at the end {lag:,}, caught up in "
                      f"{catch_up:.1f}s")
        console.print("[bold]checks[/] verify_seals over the whole chain, one seal each")
        with engine.connect() as conn:
            report = verify_seals(conn)
            covered = conn.execute(sa.text(
                "SELECT count(*), count(DISTINCT x) FROM ledger_seals, unnest(transaction_ids) x"
            )).one()
            total = int(conn.execute(sa.text("SELECT count(*) FROM ledger_transactions"))
                        .scalar_one())
        checks_ok = not report.discrepancies and covered[0] == covered[1] == total
        table = Table(title="Sealing vs the batch ledger (same run)")
        for col in ("phase", "ledger tx/s", "sealing tx/s", "transactions sealed",
                    "seals", "sealer busy s", "unsealed at end"):
            table.add_column(col, justify="right")
        table.add_row("1 ledger alone", f"{batch_rate:,.0f}", "-", "-", "-", "-", f"{backlog:,}")
        table.add_row("2 sealer alone", "-", f"{seal_rate:,.0f}", f"{alone.transactions:,}",
                      str(alone.seals), f"{alone.busy_s:.1f}", "0")
        table.add_row("3 both", f"{both_rate:,.0f}",
                      f"{both.transactions / window:,.0f} (wall)", f"{both.transactions:,}",
                      str(both.seals), f"{both.busy_s:.1f}", f"{lag:,}")
        console.print(table)
        faster = seal_rate > batch_rate
        kept_up = lag <= args.max_transactions * 10 + both_rate * 2
        console.print(f"  sealing {seal_rate / batch_rate if batch_rate else 0:.1f}x the "
                      f"sustained batch rate: {'MET' if faster else 'MISSED'} (must be > 1x)")
        console.print(f"  with both running, unsealed at the end {lag:,} (about "
                      f"{lag / both_rate if both_rate else 0:.1f} s of writing), caught up in "
                      f"{catch_up:.1f}s: {'kept up' if kept_up else 'FELL BEHIND'}")
        console.print(f"  checks: {'OK' if checks_ok else 'FAILED'} ({report.seals_checked} "
                      f"seals verified, {covered[0]:,} sealed ids for {total:,} transactions, "
                      f"{len(report.discrepancies)} findings)")
    finally:
        engine.dispose()
        if not args.keep:
            _autocommit(server_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    console.print(f"total {time.monotonic() - began:.0f}s")
    return 0 if faster and kept_up and checks_ok else 1


if __name__ == "__main__":
    sys.exit(main())
