"""Proof of reserves over many users: seconds and peak memory to take a report (its ledger
read, the tree, the store), the time to give one user's proof (p50, p99) and to verify one
offline, and how the report's time grows with the number of users.

Run ``python -m bench.reserves_bench --help``. On a fresh database (the embedded server under
``var/bench`` unless ``--database-url`` names another), for each stage of ``--stages`` (total
users; default 100,000 then 1,000,000):

1. **Setup** (not measured): the users up to the stage are written in bulk SQL as the owner
   (triggers off for the load, as a restore would): per user a wallet in each of 3 assets (ETH,
   USDC, BTC) and, for every tenth user, a withdrawals account holding a reserve; the postings
   behind every balance (one deposit transaction per 1,000 users: each wallet credited, custody
   debited) and the balances projected from those postings. The ledger stays balanced.
2. **The report**, in a fresh process (so that its peak resident memory is its own):
   ``reserves.service.take_report`` with no chain configured (the chain side is the holdings
   read, measured by ``bench.holdings_bench``): the ledger point and the users' balances, the
   tree with a fresh salt per user, the store of every leaf and the upper nodes. Its stages are
   timed through the service's progress callback.
3. **Proofs**: ``--proofs`` random users' ``user_proof`` (the chunk's leaves, the upper nodes,
   the path recomputed) on one connection, and each proof verified offline
   (``reserves.merkle.verify``).

Targets on 2 cores: the report for 1,000,000 users in under 60 s with under 2 GB of memory, a
proof in under 50 ms. The baseline measured in the same run: SHA-256 over as many 64-byte
messages as the tree hashes, in a plain loop (what the tree's time cannot go below in Python).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import random
import resource
import statistics
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from rich.console import Console
from rich.table import Table

from bench.ledger_bench import _autocommit, create_database
from config.chains import parse_chains_config
from config.database import embedded_url, make_engine, owner_engine

console = Console(highlight=False, width=150)
ASSETS = (("BTC", 8), ("ETH", 18), ("USDC", 6))
CHAINS = {"assets": {code: {"scale": scale} for code, scale in ASSETS}}
USERS_PER_TRANSACTION = 1_000

_LOAD = """
WITH batch AS (
  SELECT g AS n FROM generate_series(CAST(:lo AS bigint), CAST(:hi AS bigint) - 1) g
), opened AS (
  INSERT INTO accounts (code, asset_id, type, debits_must_not_exceed_credits,
                        credits_must_not_exceed_debits)
  SELECT 'user:u' || b.n || ':' || k.kind, s.id, 'liability', true, false
    FROM batch b CROSS JOIN assets s
    CROSS JOIN (VALUES ('wallet'), ('withdrawals')) AS k(kind)
   WHERE k.kind = 'wallet' OR b.n % 10 = 0
  RETURNING id, code, asset_id
)
INSERT INTO bench_opened SELECT id, code, asset_id FROM opened
"""


def load_users(owner: sa.Engine, lo: int, hi: int) -> None:
    """Users [lo, hi): accounts, deposit postings and projected balances, in bulk."""
    with owner.begin() as conn:
        conn.execute(sa.text("SET LOCAL session_replication_role = replica"))
        conn.execute(sa.text("CREATE TEMP TABLE bench_opened (id bigint, code text, "
                             "asset_id int) ON COMMIT DROP"))
        conn.execute(sa.text(_LOAD), {"lo": lo, "hi": hi})
        # Each balance: a per-asset unit times 1..97, and 3 more on a withdrawals account.
        conn.execute(sa.text("""
            CREATE TEMP TABLE bench_amounts ON COMMIT DROP AS
            SELECT o.id, o.asset_id, split_part(o.code, ':', 2) AS uid,
                   CAST(substr(split_part(o.code, ':', 2), 2) AS bigint) AS n,
                   (CASE s.code WHEN 'BTC' THEN 100000::numeric
                                WHEN 'ETH' THEN 1000000000000000::numeric
                                ELSE 1000000::numeric END)
                   * (1 + CAST(substr(split_part(o.code, ':', 2), 2) AS bigint) % 97)
                   + (CASE WHEN split_part(o.code, ':', 3) = 'withdrawals' THEN 3 ELSE 0 END)
                   AS amount
              FROM bench_opened o JOIN assets s ON s.id = o.asset_id"""))
        conn.execute(sa.text("""
            CREATE TEMP TABLE bench_tx ON COMMIT DROP AS
            SELECT DISTINCT n / :per AS grp FROM bench_amounts"""), {"per": USERS_PER_TRANSACTION})
        conn.execute(sa.text("""
            CREATE TEMP TABLE bench_txids ON COMMIT DROP AS
            WITH ins AS (
              INSERT INTO ledger_transactions (idempotency_key, fingerprint, kind, effective_at,
                                               source)
              SELECT 'bench:deposits:' || grp, repeat('0', 64), 'deposit', now(), 'bench'
                FROM bench_tx RETURNING id, idempotency_key)
            SELECT id, CAST(split_part(idempotency_key, ':', 3) AS bigint) AS grp FROM ins"""))
        conn.execute(sa.text("""
            INSERT INTO ledger_postings (transaction_id, line_no, account_id, asset_id, amount)
            SELECT t.id, row_number() OVER (PARTITION BY t.id ORDER BY a.id), a.id, a.asset_id,
                   -a.amount
              FROM bench_amounts a JOIN bench_txids t ON t.grp = a.n / :per"""),
                     {"per": USERS_PER_TRANSACTION})
        conn.execute(sa.text("""
            INSERT INTO ledger_postings (transaction_id, line_no, account_id, asset_id, amount)
            SELECT t.id, 10000 + c.asset_id, c.id, c.asset_id, sum(a.amount)
              FROM bench_amounts a JOIN bench_txids t ON t.grp = a.n / :per
              JOIN accounts c ON c.code = 'custody:bench' AND c.asset_id = a.asset_id
             GROUP BY t.id, c.id, c.asset_id"""), {"per": USERS_PER_TRANSACTION})
        conn.execute(sa.text("""
            INSERT INTO account_balances (account_id, asset_id, balance, version,
                                          debits_must_not_exceed_credits,
                                          credits_must_not_exceed_debits)
            SELECT id, asset_id, -amount, 1, true, false FROM bench_amounts"""))
        conn.execute(sa.text("""
            UPDATE account_balances b SET balance = b.balance + d.total, version = b.version + d.n
              FROM (SELECT c.id, sum(a.amount) AS total, count(DISTINCT a.n / :per) AS n
                      FROM bench_amounts a
                      JOIN accounts c ON c.code = 'custody:bench' AND c.asset_id = a.asset_id
                     GROUP BY c.id) d
             WHERE b.account_id = d.id"""), {"per": USERS_PER_TRANSACTION})


def open_assets(url: str) -> None:
    """The three assets and their custody accounts, through the ledger service."""
    from config.uow import UnitOfWork
    from ledger import chart, service

    engine = make_engine(url, pool_size=1)
    try:
        with UnitOfWork(engine) as uow:
            for code, scale in ASSETS:
                asset = service.open_asset(uow, code, scale)
                service.open_account(uow, chart.custody("bench"), asset)
            uow.commit()
    finally:
        engine.dispose()


def report_child(url: str, out: Any) -> None:
    """Take one report in this process; put its timings and peak RSS on ``out``."""
    from reserves import service

    chains = parse_chains_config(CHAINS)
    engine = make_engine(url, pool_size=2)
    marks: dict[str, float] = {}
    began = time.perf_counter()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

    def progress(stage: str, done: int, total: int) -> None:
        marks[stage] = time.perf_counter() - began

    taken = service.take_report(engine, chains, now=datetime.now(UTC), taken_by="bench",
                                signer_of=lambda chain, address, index: None,
                                on_progress=progress)
    total = time.perf_counter() - began
    engine.dispose()
    out.put({"report_id": taken.report_id, "seconds": total, "marks": marks,
             "rss_before_mb": before / 1024,
             "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024})


def take_in_child(url: str) -> dict[str, Any]:
    """``report_child`` in a fresh process."""
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    proc = ctx.Process(target=report_child, args=(url, out))
    proc.start()
    result: dict[str, Any] = out.get(timeout=3600)
    proc.join(timeout=60)
    return result


def hashing_baseline(users: int) -> float:
    """Seconds to hash as many 64-byte messages with SHA-256 as the tree hashes (a leaf and a
    node per user, padded to a power of two): the part of the tree's time no code can save,
    measured in the same run, on the same machine state."""
    import hashlib

    count = 2 * 2 ** max(0, (users - 1).bit_length())
    message = bytes(64)
    started = time.perf_counter()
    for _ in range(count):
        hashlib.sha256(message).digest()
    return time.perf_counter() - started


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile (0..1) of ``values`` (nearest rank)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))]


def proofs(url: str, report_id: int, users: int, count: int, seed: int) -> dict[str, float]:
    """``count`` random users' proofs (ms each, p50/p99) and their offline verification."""
    from config.uow import UnitOfWork
    from reserves import merkle, service

    engine = make_engine(url, pool_size=1)
    rng = random.Random(seed)
    give, check = [], []
    try:
        with UnitOfWork(engine) as uow:
            root = service.report_document(uow, report_id)["liabilities"]["root"]
            for _ in range(count):
                user = f"u{rng.randrange(users)}"
                t0 = time.perf_counter()
                proof = service.user_proof(uow, user, report_id)
                t1 = time.perf_counter()
                parsed = json.loads(json.dumps(proof))
                t2 = time.perf_counter()
                assert merkle.verify(parsed, root).user_id == user
                t3 = time.perf_counter()
                give.append((t1 - t0) * 1000)
                check.append((t3 - t2) * 1000)
    finally:
        engine.dispose()
    return {"proof_p50": statistics.median(give), "proof_p99": percentile(give, 0.99),
            "verify_p50": statistics.median(check), "verify_p99": percentile(check, 0.99)}


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Command-line options."""
    p = argparse.ArgumentParser(prog="python -m bench.reserves_bench",
                                description="Proof of reserves: report, proof and verify times "
                                            "and peak memory as the users grow.")
    p.add_argument("--stages", default="100000,1000000",
                   help="total users at each stage (100000,1000000)")
    p.add_argument("--proofs", type=int, default=1_000, help="proofs timed per stage (1000)")
    p.add_argument("--seed", type=int, default=1, help="seed of the users picked (1)")
    p.add_argument("--database-url", default="", help="server URL; default: embedded server")
    p.add_argument("--data-dir", type=Path, default=Path("var/bench"),
                   help="data directory of the embedded server (var/bench)")
    p.add_argument("--keep", action="store_true", help="keep the database afterwards")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Grow the users stage by stage; take a report and time proofs at each; print the table."""
    args = parse_args(argv)
    server_url = args.database_url or embedded_url(args.data_dir)
    name = f"reserves_bench_{datetime.now(UTC):%Y%m%d_%H%M%S}"
    console.print(f"[bold]setup[/] database {name}: migrate, open {len(ASSETS)} assets")
    url = create_database(server_url, name)
    open_assets(url)
    owner = owner_engine(url)
    table = Table(title="proof of reserves (3 assets; the report in a fresh process)")
    for col in ("users", "accounts", "ledger read s", "tree s", "sha256 only s", "store s",
                "report s",
                "peak RSS MB", "proof p50 ms", "proof p99 ms", "verify p50 ms", "verify p99 ms"):
        table.add_column(col, justify="right")
    loaded = 0
    try:
        for stage in [int(s) for s in args.stages.split(",")]:
            for lo in range(loaded, stage, 100_000):
                hi = min(lo + 100_000, stage)
                started = time.perf_counter()
                load_users(owner, lo, hi)
                console.print(f"  loaded users {lo:,}..{hi - 1:,} "
                              f"({time.perf_counter() - started:.1f} s)")
            loaded = stage
            with owner.begin() as conn:
                conn.execute(sa.text("ANALYZE"))
                accounts = int(conn.execute(sa.text("SELECT count(*) FROM accounts")).scalar_one())
            console.print(f"[bold]report[/] over {stage:,} users ({accounts:,} accounts)")
            r = take_in_child(url)
            m = r["marks"]
            console.print(f"  report {r['report_id']}: {r['seconds']:.1f} s, peak RSS "
                          f"{r['peak_rss_mb']:.0f} MB; timing {args.proofs:,} proofs")
            p = proofs(url, int(r["report_id"]), stage, args.proofs, args.seed)
            baseline = hashing_baseline(stage)
            table.add_row(f"{stage:,}", f"{accounts:,}", f"{m['ledger']:.1f}",
                          f"{m['tree'] - m['chains']:.1f}", f"{baseline:.1f}",
                          f"{m['stored'] - m['tree']:.1f}",
                          f"{r['seconds']:.1f}", f"{r['peak_rss_mb']:.0f}",
                          f"{p['proof_p50']:.2f}", f"{p['proof_p99']:.2f}",
                          f"{p['verify_p50']:.3f}", f"{p['verify_p99']:.3f}")
    finally:
        owner.dispose()
        if not args.keep:
            _autocommit(server_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    console.print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
