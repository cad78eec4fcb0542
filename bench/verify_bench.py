"""``verify`` with seals as the ledger grows: seconds and peak memory, from the checkpoint and full.

Run ``python -m bench.verify_bench --help``. On a fresh database (the embedded server under
``var/bench`` unless ``--database-url`` names another) with ``--accounts`` funded wallets, for
each stage of ``--stages`` (total postings; default 100,000, 1,000,000 and 1,100,000):

1. ``--writers`` processes post batches of spread transfers (two postings each) with
   ``service.post_entries`` until the ledger holds that many postings, and the sealer
   (``seal_once``) seals them all;
2. ``ledger.integrity.verify`` (every ledger invariant and the seal chain) runs twice, each in a
   fresh process (so that its peak resident memory is its own): from the newest verified
   checkpoint (what ``custody verify`` does: the balance replay and the seals after the
   checkpoint's seal) and ``full=True`` (from the first posting and the first seal);
3. a balance checkpoint is taken (it records the newest seal).

The table gives per stage and mode: postings in the ledger, postings and seals new since the
checkpoint the run started from, seconds, the child's peak RSS and its RSS before verify
started (imports, engine), and whether verify was clean. What to look for: the non-full verify
of the last stage (100,000 postings after a checkpoint at 1,000,000) should cost about what the
first stage cost, not what the full verify of 1,100,000 costs.
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
from ledger.integrity import create_checkpoint
from ledger.model import Entry, Line
from ledger.seals import seal_once

console = Console(highlight=False, width=150)
EFFECTIVE_AT = datetime(2026, 11, 29, tzinfo=UTC)


def fill_main(book: Book, tag: str, worker: int, batches: int, batch: int) -> None:
    """Post ``batches`` batches of ``batch`` spread transfers."""
    rng = random.Random(f"{tag}:{worker}")
    engine = make_engine(book.url, pool_size=1)
    try:
        for i in range(batches):
            entries = []
            for j in range(batch):
                debited, credited = rng.sample(book.wallets, 2)
                amount = rng.randint(1, 1000)
                entries.append(Entry(idempotency_key=f"{tag}:{worker}:{i}:{j}", kind="transfer",
                                     effective_at=EFFECTIVE_AT, source="bench",
                                     lines=(Line(debited, amount), Line(credited, -amount))))
            outcomes = service.post_entries(engine, entries)
            assert all(o.ok for o in outcomes), "the funding makes refusals a bench bug"
    finally:
        engine.dispose()


def postings(engine: sa.Engine) -> int:
    """Postings in the ledger."""
    with engine.connect() as conn:
        return int(conn.execute(sa.text("SELECT count(*) FROM ledger_postings")).scalar_one())


def fill_to(book: Book, engine: sa.Engine, target: int, args: argparse.Namespace) -> None:
    """Post transfers until the ledger holds at least ``target`` postings, with progress."""
    missing = target - postings(engine)
    if missing <= 0:
        return
    per_batch = 2 * args.batch_size
    batches = -(-missing // per_batch)
    per_writer = [batches // args.writers + (1 if w < batches % args.writers else 0)
                  for w in range(args.writers)]
    ctx = mp.get_context("fork")
    tag = f"{datetime.now(UTC):%H%M%S%f}"
    procs = [ctx.Process(target=fill_main, args=(book, tag, w, n, args.batch_size), daemon=True)
             for w, n in enumerate(per_writer) if n]
    t0 = time.monotonic()
    for p in procs:
        p.start()
    while any(p.is_alive() for p in procs):
        time.sleep(5)
        console.print(f"  posting: {postings(engine):,} postings ({time.monotonic() - t0:.0f}s)")
    assert all(p.exitcode == 0 for p in procs), "a writer failed"


@dataclass
class Measured:
    """One verify in a fresh process."""

    seconds: float
    peak_rss_mb: float
    start_rss_mb: float
    findings: int
    seals_checked: int


def _status_mb(field: str) -> float:
    # /proc/self/status, not getrusage: ru_maxrss carries over the parent's peak across exec.
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"{field} not in /proc/self/status")


def verify_child(url: str, full: bool, out: Any) -> None:
    """Run integrity.verify once; report seconds, peak RSS and findings."""
    from ledger import repository as repo
    from ledger.integrity import verify
    from ledger.seals import verify_seals

    engine = make_engine(url, pool_size=1)
    with engine.connect() as conn:  # connect before measuring: the pool's cost is not verify's
        conn.execute(sa.text("SELECT 1"))
    start_rss = _status_mb("VmRSS")
    t0 = time.monotonic()
    report = verify(engine, full=full)
    seconds = time.monotonic() - t0
    peak = _status_mb("VmHWM")
    with repo.snapshot(engine, read_only=True) as conn:  # how many seals that walk covered
        base = None if full else repo.newest_verified_checkpoint(conn)
        checked = verify_seals(conn, base).seals_checked if base or full else -1
    engine.dispose()
    out.put(Measured(seconds, peak, start_rss, len(report.discrepancies), checked))


def measure(url: str, full: bool) -> Measured:
    """verify in a spawned process (its own memory)."""
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    proc = ctx.Process(target=verify_child, args=(url, full, out))
    proc.start()
    result: Measured = out.get(timeout=3600)
    proc.join(timeout=60)
    return result


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Command-line options."""
    p = argparse.ArgumentParser(prog="python -m bench.verify_bench",
                                description="verify (with seals): seconds and peak memory as "
                                            "the ledger grows, from a checkpoint and full.")
    p.add_argument("--stages", default="100000,1000000,1100000",
                   help="total postings at each stage, a checkpoint after each "
                        "(100000,1000000,1100000)")
    p.add_argument("--writers", type=int, default=3, help="batch writer processes (3)")
    p.add_argument("--batch-size", type=int, default=100, help="entries per batch (100)")
    p.add_argument("--accounts", type=int, default=1_000, help="user wallets (1000)")
    p.add_argument("--database-url", default="", help="server URL; default: embedded server")
    p.add_argument("--data-dir", type=Path, default=Path("var/bench"),
                   help="data directory of the embedded server (var/bench)")
    p.add_argument("--keep", action="store_true", help="keep the database afterwards")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Grow the ledger stage by stage, verify both ways at each, print the table."""
    args = parse_args(argv)
    began = time.monotonic()
    server_url = args.database_url or embedded_url(args.data_dir)
    name = f"verify_bench_{datetime.now(UTC):%Y%m%d_%H%M%S}"
    console.print(f"[bold]setup[/] database {name}: migrate, open {args.accounts:,} wallets, fund")
    url = create_database(server_url, name)
    book = open_book(url, args.accounts)
    engine = make_engine(url, pool_size=2)
    table = Table(title="verify with seals (each in a fresh process)")
    for col in ("postings", "mode", "new postings", "seals recomputed", "seconds",
                "peak RSS MB", "RSS before MB", "findings"):
        table.add_column(col, justify="right")
    clean = True
    checkpoint_postings = 0
    try:
        for target in (int(x) for x in args.stages.split(",")):
            console.print(f"[bold]stage[/] {target:,} postings")
            fill_to(book, engine, target, args)
            t0 = time.monotonic()
            sealed = sum(s.transactions_count for s in seal_once(
                engine, datetime.now(UTC), seals_max=10_000))
            console.print(f"  sealed {sealed:,} transactions in {time.monotonic() - t0:.1f}s")
            total = postings(engine)
            for full in (False, True):
                m = measure(url, full)
                new = total if full else total - checkpoint_postings
                mode = "full" if full else "from checkpoint"
                console.print(f"  verify {mode}: {m.seconds:.1f}s, peak RSS {m.peak_rss_mb:.0f} MB"
                              f" (before {m.start_rss_mb:.0f} MB), {m.findings} findings")
                table.add_row(f"{total:,}", mode, f"{new:,}",
                              "all" if m.seals_checked < 0 else str(m.seals_checked),
                              f"{m.seconds:.1f}", f"{m.peak_rss_mb:.0f}",
                              f"{m.start_rss_mb:.0f}", str(m.findings))
                clean = clean and m.findings == 0
            cp = create_checkpoint(engine)
            checkpoint_postings = total
            console.print(f"  checkpoint {cp.id} through posting {cp.through_posting_id:,}"
                          f" ({'verified' if cp.verified else 'NOT verified'})")
        console.print(table)
        console.print(f"  checks: {'OK' if clean else 'FAILED'} (every verify clean)")
    finally:
        engine.dispose()
        if not args.keep:
            _autocommit(server_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    console.print(f"total {time.monotonic() - began:.0f}s")
    return 0 if clean else 1


if __name__ == "__main__":
    sys.exit(main())
