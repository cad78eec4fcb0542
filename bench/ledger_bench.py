"""Ledger throughput: the ledger's ``post`` and ``post_batch`` against a plain PL/pgSQL baseline.

Run ``python -m bench.ledger_bench --help``. One run:

1. creates a fresh database (on the embedded server under ``var/bench`` unless
   ``--database-url`` names another server), applies the migrations, and opens through the
   ledger service one asset (USDC), one hot account (``custody:eth``: an asset account with
   ``credits_must_not_exceed_debits``) and ``--accounts`` user wallets (liabilities with
   ``debits_must_not_exceed_credits``), then funds every wallet with a deposit;
2. loads ``bench/baseline.sql`` (the baseline's own tables and ``baseline_transfer``) and seeds it
   with the same accounts, balances and history (the ledger's transactions and postings);
3. measures, for each scenario and mode, a fixed window of ``--seconds``:

   - scenarios: ``hot`` = every transfer is a deposit from the one custody account to a random
     wallet (so every transfer locks and updates the custody balance row); ``spread`` = a transfer
     between two random distinct wallets;
   - modes: ``baseline`` (one ``baseline_transfer`` call per transfer, autocommit, each client
     its own psycopg connection as the owner), ``post`` (``ledger.service.post_entry`` per
     transfer on the application engine), ``post_batch`` (each writer posts ``--batch-size``
     entries per call with ``service.post_entries``, the standalone batch form: one statement);

   - posting checks (``--posting-checks``, ledger modes only): ``trigger`` = the ledger as
     migrated (every writer's postings checked by ``ledger_postings_account_and_transaction``,
     revision 0019); ``none`` = that trigger disabled in the bench database (the ledger
     between revisions 0006 and 0019: the write functions' postings unchecked); ``fk`` = that
     trigger disabled and the postings' foreign keys of revision 0001 added back (NOT VALID:
     checked for new rows), ``(account_id, asset_id) -> accounts (id, asset_id)`` and
     ``transaction_id -> ledger_transactions``, the alternative the trigger was chosen over.
     Each round runs every variant of a mode one after the other, in an order rotated from round
     to round, and the table gives each run's ratio to the ``none`` run of its round;

4. checks the ledger with ``ledger.integrity.verify`` (trial balance zero, stored = replayed, ...)
   and the baseline's own trial balance and replay, and that every acknowledged transfer is
   stored exactly once; prints the table and the verdict against the targets.

Clients are processes by default (``--runner process``): the Python work of ``post_batch``
(validation, fingerprints, JSON) then runs beside the database instead of queueing on one GIL
(``--runner thread`` measured the same within noise; client CPU stays well under one core).
Entries are built before the clock starts. Durability settings are never touched. Every run is
repeated ``--rounds`` times, interleaved, because the machine may be shared: the table shows,
besides tx/s and latency per call (a call is one batch in ``post_batch``), the CPU of this
PostgreSQL server's processes, that CPU per transfer (comparable whatever else runs), the
clients' CPU, and "other CPU": what the rest of the machine used meanwhile (100% = one core).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import random
import resource
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
from rich.console import Console
from rich.table import Table
from sqlalchemy.engine import Engine

import migrations
from config.database import embedded_url, make_engine, with_database
from config.uow import UnitOfWork, run_in_transaction
from ledger import chart, service
from ledger.integrity import verify
from ledger.model import Account, Asset, Entry, Line

HERE = Path(__file__).resolve().parent
BASELINE_SQL = HERE / "baseline.sql"
#: Every wallet starts with this much (minor units), far more than the runs can spend.
FUNDING_MINOR = 10**15
EFFECTIVE_AT = datetime(2026, 11, 29, tzinfo=UTC)
#: Targets from the issue: ratio of tx/s against the baseline, per scenario and mode. The
#: issue's fourth, a single ``post`` at 0.75x on spread accounts, was withdrawn by the project
#: owners: the bare baseline function carries none of the guarantees ``post`` must keep. The
#: bench still measures that row; it is no longer judged.
TARGETS = {("hot", "post_batch"): 5.0, ("spread", "post_batch"): 3.0, ("hot", "post"): 0.75}
#: The posting-check variants (see the module docstring); the targets judge ``trigger`` runs.
POSTING_CHECKS = ("trigger", "none", "fk")
CHECK_TRIGGER = "ledger_postings_account_and_transaction"

console = Console(highlight=False, width=150)


# --- plain values shared with the clients -----------------------------------------------------


@dataclass(frozen=True)
class Book:
    """The accounts every run uses (plain values; inherited by forked clients)."""

    url: str
    asset: Asset
    hot: Account
    wallets: tuple[Account, ...]


@dataclass(frozen=True)
class RunSpec:
    """One measured run: a scenario, a mode and its clients."""

    scenario: str
    mode: str
    clients: int
    batch_size: int
    seconds: float
    runner: str
    tag: str
    seed: int
    round: int = 1
    #: The posting-check variant of the ledger while this runs ("-" for the baseline).
    check: str = "trigger"

    @property
    def per_call(self) -> int:
        """Transfers per call."""
        return self.batch_size if self.mode == "post_batch" else 1


@dataclass
class WorkerResult:
    """What one client reports after its run."""

    worker: int
    latencies_s: list[float]
    counted: int
    acknowledged: int
    errors: int
    first_error: str | None
    cpu_s: float


@dataclass
class RunResult:
    """A measured run: throughput, latency per call, CPU of the server and of the clients."""

    spec: RunSpec
    tx_per_s: float
    p50_ms: float
    p99_ms: float
    calls: int
    acknowledged: int
    errors: int
    first_error: str | None
    server_cpu_pct: float | None
    client_cpu_pct: float
    other_cpu_pct: float | None = None
    server_us_per_tx: float | None = None
    ratio: float | None = None
    #: tx/s against the same round's run of this scenario, mode and clients with check "none".
    vs_none: float | None = None
    per_second: list[int] = field(default_factory=list)


# --- the work of one client -------------------------------------------------------------------


def _pair(book: Book, scenario: str, rng: random.Random) -> tuple[Account, Account]:
    """(debited, credited) account of one transfer."""
    if scenario == "hot":
        return book.hot, rng.choice(book.wallets)
    debited, credited = rng.sample(book.wallets, 2)
    return debited, credited


def _entry(book: Book, spec: RunSpec, key: str, rng: random.Random) -> Entry:
    debited, credited = _pair(book, spec.scenario, rng)
    amount = rng.randint(1, 1000)
    return Entry(
        idempotency_key=key,
        kind="deposit" if spec.scenario == "hot" else "transfer",
        effective_at=EFFECTIVE_AT,
        source="bench",
        lines=(Line(debited, amount), Line(credited, -amount)),
    )


def _maker(book: Book, spec: RunSpec, worker: int) -> Callable[[int], Any]:
    """Builds the ``i``-th call of this client: baseline arguments, an Entry or a batch."""
    rng = random.Random(f"{spec.seed}:{spec.tag}:{worker}")
    prefix = f"{spec.tag}:{worker}"

    def make(i: int) -> Any:
        if spec.mode == "baseline":
            debited, credited = _pair(book, spec.scenario, rng)
            return (debited.id, credited.id, rng.randint(1, 1000), f"{prefix}:{i}")
        if spec.mode == "post":
            return _entry(book, spec, f"{prefix}:{i}", rng)
        return [_entry(book, spec, f"{prefix}:{i}:{j}", rng) for j in range(spec.batch_size)]

    return make


def _caller(book: Book, spec: RunSpec) -> tuple[Callable[[Any], int], Callable[[], None]]:
    """(call, close): ``call(item)`` performs one call and returns the transfers it acknowledged."""
    if spec.mode == "baseline":
        conn = psycopg.connect(libpq_url(book.url), autocommit=True)
        cur = conn.cursor()

        def baseline(args: Any) -> int:
            cur.execute("SELECT baseline_transfer(%s, %s, %s, %s)", args)
            cur.fetchone()
            return 1

        return baseline, conn.close
    engine = make_engine(book.url, pool_size=1)
    if spec.mode == "post":

        def post(entry: Any) -> int:
            service.post_entry(engine, entry)
            return 1

        return post, engine.dispose

    def post_batch(entries: Any) -> int:
        outcomes = service.post_entries(engine, entries)
        refused = [o for o in outcomes if not o.ok]
        if refused:
            # The accepted ones are committed: count them before reporting the refusal.
            raise BatchRefused(len(outcomes) - len(refused),
                               f"{len(refused)} entries refused, first: {refused[0].error}")
        return len(outcomes)

    return post_batch, engine.dispose


class BatchRefused(Exception):
    """Some entries of a committed batch were refused (the funding makes that a bench bug)."""

    def __init__(self, posted: int, message: str) -> None:
        super().__init__(message)
        self.posted = posted


@dataclass
class Shared:
    """Synchronisation between the parent and its clients (works for threads and processes)."""

    ready: Any
    go: Any
    done: Any
    window: Any
    counters: Any
    results: Any


def _prebuilt_count(spec: RunSpec, rate_cap: float) -> int:
    """Calls to build before the clock starts: enough for ``rate_cap`` transfers/s overall.

    A client that runs out builds the rest inside the window (microseconds per entry).
    """
    per_client = rate_cap * (spec.seconds + 1) / spec.clients / spec.per_call
    return max(50, int(per_client))


def client_main(book: Book, spec: RunSpec, worker: int, shared: Shared, rate_cap: float) -> None:
    """One client: build its calls, connect, warm up, wait for the window, call until it ends."""
    make = _maker(book, spec, worker)
    prebuilt = [make(i) for i in range(_prebuilt_count(spec, rate_cap))]
    call, close = _caller(book, spec)
    acknowledged = errors = counted = 0
    first_error: str | None = None
    latencies: list[float] = []
    try:
        try:
            for i in range(2):  # warm-up: connection, plan caches; acknowledged, not counted
                acknowledged += call(make(10**9 + i))
        except BaseException:
            shared.ready.abort()  # let the parent fail now rather than at its timeout
            raise
        shared.ready.wait(timeout=300)
        shared.go.wait(timeout=300)
        start_at, end_at = shared.window[0], shared.window[1]
        time.sleep(max(0.0, start_at - time.monotonic()))
        cpu0 = time.process_time()
        i = 0
        while time.monotonic() < end_at:
            item = prebuilt[i] if i < len(prebuilt) else make(i)
            i += 1
            t0 = time.monotonic()
            try:
                n = call(item)
            except Exception as exc:  # reported in the table; a benchmark must not hide failures
                acknowledged += exc.posted if isinstance(exc, BatchRefused) else 0
                errors += 1
                first_error = first_error or f"{type(exc).__name__}: {exc}"[:300]
                continue
            t1 = time.monotonic()
            acknowledged += n
            if t1 <= end_at:
                counted += n
                latencies.append(t1 - t0)
                shared.counters[worker] += n
        cpu_s = time.process_time() - cpu0
        shared.results.put(WorkerResult(worker, latencies, counted, acknowledged, errors,
                                        first_error, cpu_s))
        shared.done.wait(timeout=120)  # keep the backend alive until the server CPU is read
    finally:
        close()


# --- measuring one run ------------------------------------------------------------------------


def _postmaster(url: str) -> Any | None:
    """The local postmaster of ``url`` (psutil.Process), or None when it is not on this host."""
    try:
        import psutil

        with psycopg.connect(libpq_url(url)) as conn:
            row = conn.execute("SELECT pg_backend_pid()").fetchone()
            assert row is not None
            # Ask while the backend lives: it exits as soon as this connection closes.
            return psutil.Process(row[0]).parent()
    except Exception:
        return None


def server_cpu_s(postmaster: Any | None) -> float | None:
    """CPU seconds used so far by the server's live processes (None if not measurable)."""
    if postmaster is None:
        return None
    total = 0.0
    for proc in postmaster.children(recursive=True):
        try:
            t = proc.cpu_times()
            total += t.user + t.system
        except Exception:  # a backend that exited meanwhile
            continue
    return total


def system_busy_s() -> float:
    """CPU seconds the whole machine spent busy so far (all cores, every process)."""
    import psutil

    t = psutil.cpu_times()
    return float(sum(getattr(t, f) for f in ("user", "nice", "system", "irq", "softirq", "steal")
                     if hasattr(t, f)))


def wait_for_quiet(max_wait_s: float, busy_max_pct: float) -> float:
    """Wait (at most ``max_wait_s``) for half a second with the machine below ``busy_max_pct``.

    Other work on the machine (other test suites) competes for the same two cores and would be
    measured as slowness of whatever runs now. Returns the last busy percentage seen.
    """
    import psutil

    deadline = time.monotonic() + max_wait_s
    busy = float(psutil.cpu_percent(interval=0.5)) * (os.cpu_count() or 1)
    while busy > busy_max_pct and time.monotonic() < deadline:
        busy = float(psutil.cpu_percent(interval=0.5)) * (os.cpu_count() or 1)
    return busy


def measure(book: Book, spec: RunSpec, postmaster: Any | None, rate_cap: float) -> RunResult:
    """Run the clients of ``spec`` for one window and collect what they report."""
    ctx = mp.get_context("fork")
    n = spec.clients
    shared = Shared(ready=ctx.Barrier(n + 1), go=ctx.Event(), done=ctx.Event(),
                    window=ctx.Array("d", 2, lock=False), counters=ctx.Array("q", n, lock=False),
                    results=ctx.Queue())
    kind = ctx.Process if spec.runner == "process" else threading.Thread
    clients = [kind(target=client_main, args=(book, spec, w, shared, rate_cap), daemon=True)
               for w in range(n)]
    for c in clients:
        c.start()
    shared.ready.wait(timeout=300)
    server0 = server_cpu_s(postmaster)
    self0 = resource.getrusage(resource.RUSAGE_SELF)
    busy0, cpu_t0 = system_busy_s(), time.monotonic()
    start_at = time.monotonic() + 0.05
    end_at = start_at + spec.seconds
    shared.window[0], shared.window[1] = start_at, end_at
    shared.go.set()
    per_second = _progress(spec, shared, start_at, end_at)
    results = [shared.results.get(timeout=120) for _ in range(n)]
    server1 = server_cpu_s(postmaster)
    self1 = resource.getrusage(resource.RUSAGE_SELF)
    busy1, cpu_t1 = system_busy_s(), time.monotonic()
    shared.done.set()
    for c in clients:
        c.join(timeout=60)
    if spec.runner == "process":
        client_cpu = sum(r.cpu_s for r in results)
    else:
        client_cpu = (self1.ru_utime - self0.ru_utime) + (self1.ru_stime - self0.ru_stime)
    result = _summarize(spec, results, per_second)
    elapsed = cpu_t1 - cpu_t0
    result.client_cpu_pct = 100 * client_cpu / elapsed
    if server0 is not None and server1 is not None:
        result.server_cpu_pct = 100 * (server1 - server0) / elapsed
        counted = result.tx_per_s * spec.seconds
        if counted:
            # Per transfer, so comparable whatever else the machine was doing meanwhile.
            result.server_us_per_tx = 1e6 * (server1 - server0) * spec.seconds / elapsed / counted
        # Everything else the machine did meanwhile: other processes (other test suites).
        other = (busy1 - busy0) - (server1 - server0) - client_cpu
        result.other_cpu_pct = max(0.0, 100 * other / elapsed)
    return result


def _progress(spec: RunSpec, shared: Shared, start_at: float, end_at: float) -> list[int]:
    """Print one line per second while the window runs; returns the transfers of each second."""
    label = f"{spec.scenario:6} {spec.mode:10} {spec.check:7} x{spec.clients:<2}"
    per_second: list[int] = []
    last = 0
    tick = start_at
    while tick < end_at:
        tick = min(tick + 1.0, end_at)
        time.sleep(max(0.0, tick - time.monotonic()))
        now = sum(shared.counters[:])
        per_second.append(now - last)
        console.print(f"  {label} t={tick - start_at:4.1f}s  {now - last:7,d} tx  total {now:9,d}")
        last = now
    return per_second


def _percentile(values: Sequence[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _summarize(spec: RunSpec, results: list[WorkerResult], per_second: list[int]) -> RunResult:
    latencies = [x for r in results for x in r.latencies_s]
    counted = sum(r.counted for r in results)
    errors = sum(r.errors for r in results)
    return RunResult(
        spec=spec,
        tx_per_s=counted / spec.seconds,
        p50_ms=_percentile(latencies, 0.50) * 1000,
        p99_ms=_percentile(latencies, 0.99) * 1000,
        calls=len(latencies),
        acknowledged=sum(r.acknowledged for r in results),
        errors=errors,
        first_error=next((r.first_error for r in results if r.first_error), None),
        server_cpu_pct=None,
        client_cpu_pct=0.0,
        per_second=per_second,
    )


# --- database, book, baseline -----------------------------------------------------------------


def libpq_url(url: str) -> str:
    """A SQLAlchemy URL as libpq (psycopg.connect) takes it."""
    return url.replace("postgresql+psycopg://", "postgresql://", 1)


def _autocommit(url: str, statement: str) -> None:
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        conn.execute(statement)


def create_database(server_url: str, name: str) -> str:
    """A fresh, migrated database ``name`` on the server; returns its (owner) URL."""
    _autocommit(server_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    _autocommit(server_url, f'CREATE DATABASE "{name}"')
    url = with_database(server_url, name)
    migrations.upgrade(url)
    return url


def open_book(url: str, accounts: int) -> Book:
    """Open the asset, the hot custody account and the wallets through the ledger service."""
    engine = make_engine(url, pool_size=2)
    try:
        with UnitOfWork(engine) as uow:
            asset = service.open_asset(uow, "USDC", 6)
            hot = service.open_account(uow, chart.custody("eth"), asset)
            uow.commit()
        wallets: list[Account] = []
        for start in range(0, accounts, 1000):
            with UnitOfWork(engine) as uow:
                for n in range(start, min(start + 1000, accounts)):
                    wallets.append(service.open_account(uow, chart.user_wallet(f"b{n:05d}"), asset))
                uow.commit()
        book = Book(url=url, asset=asset, hot=hot, wallets=tuple(wallets))
        fund_wallets(engine, book)
    finally:
        engine.dispose()
    return book


def fund_wallets(engine: Engine, book: Book) -> int:
    """Deposit FUNDING_MINOR into every wallet (custody -> wallet), in batches."""
    posted = 0
    for start in range(0, len(book.wallets), 500):
        entries = [
            Entry(idempotency_key=f"fund:{w.code}", kind="deposit", effective_at=EFFECTIVE_AT,
                  source="bench", lines=(Line(book.hot, FUNDING_MINOR), Line(w, -FUNDING_MINOR)))
            for w in book.wallets[start:start + 500]
        ]

        def work(uow: UnitOfWork, e: list[Entry] = entries) -> list[service.BatchOutcome]:
            return service.post_batch(uow, e)

        outcomes = run_in_transaction(engine, work)
        assert all(o.ok for o in outcomes), "funding deposits were refused"
        posted += len(outcomes)
    return posted


def set_posting_check(url: str, check: str) -> None:
    """Put the bench database's posting checks in the state of variant ``check`` (as the owner;
    between runs, while no client is connected)."""
    enable = "ENABLE" if check == "trigger" else "DISABLE"
    statements = [
        f"ALTER TABLE ledger_postings {enable} TRIGGER {CHECK_TRIGGER}",
        "ALTER TABLE ledger_postings DROP CONSTRAINT IF EXISTS bench_postings_account_fk,"
        " DROP CONSTRAINT IF EXISTS bench_postings_transaction_fk",
    ]
    if check == "fk":
        statements.append(
            "ALTER TABLE ledger_postings ADD CONSTRAINT bench_postings_account_fk"
            " FOREIGN KEY (account_id, asset_id) REFERENCES accounts (id, asset_id) NOT VALID,"
            " ADD CONSTRAINT bench_postings_transaction_fk"
            " FOREIGN KEY (transaction_id) REFERENCES ledger_transactions (id) NOT VALID")
    with psycopg.connect(libpq_url(url), autocommit=True) as conn, conn.transaction():
        for statement in statements:
            conn.execute(statement)


def load_baseline(url: str) -> None:
    """Create the baseline's tables and function and seed them from the ledger's accounts,
    balances and history."""
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        conn.execute(BASELINE_SQL.read_text())
        conn.execute("SELECT baseline_seed()")
        conn.execute("ANALYZE")


# --- checks afterwards ------------------------------------------------------------------------


@dataclass(frozen=True)
class Checks:
    """Findings of the checks after the runs; ``ok`` when there are none."""

    findings: list[str]
    ledger_transactions: int
    baseline_transfers: int

    @property
    def ok(self) -> bool:
        """Whether every check passed."""
        return not self.findings


def check_everything(url: str, ledger_acked: int, baseline_acked: int) -> Checks:
    """verify() the ledger, check the baseline's books, and count what was acknowledged."""
    findings: list[str] = []
    engine = make_engine(url, pool_size=1)
    try:
        report = verify(engine, full=True)
        findings += [f"ledger: {d}" for d in report.discrepancies[:20]]
    finally:
        engine.dispose()
    with psycopg.connect(libpq_url(url)) as conn:
        row = conn.execute(
            "SELECT (SELECT count(*) FROM ledger_transactions),"
            " (SELECT count(*) FROM bl_journal WHERE idempotency_key NOT LIKE 'ledger:%'),"
            " (SELECT coalesce(sum(balance), 0) FROM bl_balances),"
            " (SELECT coalesce(sum(amount), 0) FROM bl_postings),"
            " (SELECT count(*) FROM bl_balances b LEFT JOIN (SELECT account_id, sum(amount) s,"
            "   count(*) n FROM bl_postings GROUP BY account_id) p USING (account_id)"
            "   WHERE b.balance <> coalesce(p.s, 0) OR b.version <> coalesce(p.n, 0)),"
            " (SELECT count(*) FROM (SELECT journal_id FROM bl_postings GROUP BY journal_id"
            "   HAVING sum(amount) <> 0) j)"
        ).fetchone()
    assert row is not None
    ledger_count, baseline_count, bl_trial, bl_postings, bl_drift, bl_unbalanced = row
    if bl_trial != 0 or bl_postings != 0:
        findings.append(f"baseline: trial balance {bl_trial}, postings sum {bl_postings}")
    if bl_drift or bl_unbalanced:
        findings.append(f"baseline: {bl_drift} balances differ from replay, "
                        f"{bl_unbalanced} journals unbalanced")
    if ledger_count != ledger_acked:
        findings.append(f"ledger: {ledger_count} transactions stored, {ledger_acked} acknowledged")
    if baseline_count != baseline_acked:
        findings.append(
            f"baseline: {baseline_count} transfers stored, {baseline_acked} acknowledged")
    return Checks(findings, ledger_count, baseline_count)


# --- report ----------------------------------------------------------------------------------

COLUMNS = ("scenario", "mode", "check", "clients", "batch", "round", "tx/s", "vs baseline",
           "vs no check", "p50 ms/call", "p99 ms/call", "server CPU", "server µs/tx",
           "client CPU", "other CPU", "errors")


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}%"


def _cells(r: RunResult) -> list[str]:
    return [
        r.spec.scenario, r.spec.mode, r.spec.check, str(r.spec.clients), str(r.spec.per_call),
        str(r.spec.round), f"{r.tx_per_s:,.0f}", "-" if r.ratio is None else f"{r.ratio:.2f}x",
        "-" if r.vs_none is None else f"{r.vs_none:.3f}x",
        f"{r.p50_ms:.1f}", f"{r.p99_ms:.1f}", _pct(r.server_cpu_pct),
        "-" if r.server_us_per_tx is None else f"{r.server_us_per_tx:,.0f}",
        _pct(r.client_cpu_pct), _pct(r.other_cpu_pct), str(r.errors),
    ]


def best_runs(results: list[RunResult]) -> list[RunResult]:
    """Per (scenario, mode, check, clients), the round with the most tx/s; ratios against the
    best baseline round of the scenario (so the baseline gets the same benefit of the doubt)
    and against the best "none" round of the same scenario, mode and clients."""
    best: dict[tuple[str, str, str, int], RunResult] = {}
    for r in results:
        key = (r.spec.scenario, r.spec.mode, r.spec.check, r.spec.clients)
        if key not in best or r.tx_per_s > best[key].tx_per_s:
            best[key] = r
    chosen = []
    for (scenario, mode, _, clients), r in best.items():
        base = best.get((scenario, "baseline", "-", clients)) or next(
            (b for k, b in best.items() if k[:2] == (scenario, "baseline")), None)
        ratio = r.tx_per_s / base.tx_per_s if base and base.tx_per_s else None
        bare = best.get((scenario, mode, "none", clients))
        vs_none = r.tx_per_s / bare.tx_per_s if bare and bare.tx_per_s and mode != "baseline" \
            else None
        chosen.append(RunResult(**{**r.__dict__, "ratio": ratio, "vs_none": vs_none}))
    return chosen


def results_table(results: list[RunResult], title: str) -> Table:
    """A table of runs (rich)."""
    table = Table(title=title)
    for name in COLUMNS:
        table.add_column(name, justify="left" if name in ("scenario", "mode") else "right")
    for r in results:
        table.add_row(*_cells(r))
    return table


def markdown_table(results: list[RunResult]) -> str:
    """A table of runs in Markdown, for RESULTS.md."""
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(_cells(r)) + " |" for r in results]
    return "\n".join(lines)


def verdicts(best: list[RunResult]) -> list[str]:
    """One line per target of the issue: met or missed, with the best measured ratio."""
    lines = []
    for (scenario, mode), target in TARGETS.items():
        rows = [r for r in best if (r.spec.scenario, r.spec.mode) == (scenario, mode)
                and r.spec.check == "trigger" and r.ratio is not None]
        if not rows:
            continue
        top = max(rows, key=lambda r: r.tx_per_s)
        assert top.ratio is not None
        word = "MET" if top.ratio >= target else "MISSED"
        lines.append(f"{scenario} {mode}: target >= {target:.2f}x baseline: {word} "
                     f"({top.ratio:.2f}x, {top.tx_per_s:,.0f} tx/s with {top.spec.clients} "
                     f"clients)")
    return lines


# --- main ------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Command-line options."""
    p = argparse.ArgumentParser(
        prog="python -m bench.ledger_bench",
        description="Ledger transactions per second: post and post_batch against a plain "
                    "PL/pgSQL baseline, on one hot account and on spread accounts.")
    p.add_argument("--seconds", type=float, default=10.0, help="measured window per run (10)")
    p.add_argument("--rounds", type=int, default=2,
                   help="repeat every run this many times, interleaved; the best round counts (2)")
    p.add_argument("--clients", type=int, default=20,
                   help="clients of the baseline and of post (20)")
    p.add_argument("--batch-size", type=int, default=100, help="entries per post_batch call (100)")
    p.add_argument("--batch-writers", default="4,20",
                   help="comma-separated writer counts for post_batch (4,20)")
    p.add_argument("--accounts", type=int, default=10_000, help="user wallets (10000)")
    p.add_argument("--scenarios", default="hot,spread", help="hot,spread")
    p.add_argument("--modes", default="baseline,post,post_batch", help="baseline,post,post_batch")
    p.add_argument("--posting-checks", default="trigger",
                   help="comma-separated posting-check variants of the ledger modes: trigger (as "
                        "migrated), none (its trigger disabled), fk (foreign keys instead) "
                        "(trigger)")
    p.add_argument("--runner", choices=("process", "thread"), default="process",
                   help="clients as processes (default) or threads of this process")
    p.add_argument("--database-url", default="",
                   help="a PostgreSQL server URL whose login may create databases; default: the "
                        "embedded server in --data-dir")
    p.add_argument("--data-dir", type=Path, default=Path("var/bench"),
                   help="data directory of the embedded server (var/bench)")
    p.add_argument("--database-name", default="", help="database to (re)create (bench_<time>)")
    p.add_argument("--keep", action="store_true", help="keep the database afterwards")
    p.add_argument("--seed", type=int, default=1, help="random seed of the transfers")
    p.add_argument("--rate-cap", type=float, default=12_000,
                   help="transfers/s to pre-build entries for before the clock starts (12000)")
    p.add_argument("--idle-wait", type=float, default=0.0,
                   help="before each run, wait up to this many seconds for the machine to be "
                        "quiet (0: only measure and print how busy it is)")
    p.add_argument("--idle-busy-max", type=float, default=30.0,
                   help="quiet = machine-wide CPU below this percentage of one core (30)")
    p.add_argument("--what-if-sql", type=Path, default=None,
                   help="EXPERIMENTS ONLY: SQL run as the owner after the migrations (e.g. a "
                        "candidate planner setting on ledger_post_arrays); the report says so")
    p.add_argument("--markdown", type=Path, default=None,
                   help="also write the tables and verdicts in Markdown to this file")
    return p.parse_args(argv)


def plan(args: argparse.Namespace) -> list[RunSpec]:
    """Every run, in order: rounds interleaved; per scenario, the baseline first."""
    stamp = datetime.now(UTC).strftime("%H%M%S")
    checks = args.posting_checks.split(",")
    unknown = set(checks) - set(POSTING_CHECKS)
    if unknown:
        raise SystemExit(f"--posting-checks: unknown {sorted(unknown)}; known {POSTING_CHECKS}")
    runs = []
    for round_no in range(1, args.rounds + 1):
        # Rotated per round: no variant always runs first (after the baseline) or last.
        shift = (round_no - 1) % len(checks)
        order = checks[shift:] + checks[:shift]
        for scenario in args.scenarios.split(","):
            for mode in args.modes.split(","):
                counts = ([int(x) for x in args.batch_writers.split(",")] if mode == "post_batch"
                          else [args.clients])
                for clients in counts:
                    for check in (["-"] if mode == "baseline" else order):
                        tag = f"{stamp}:{scenario}:{mode}:{check}:{clients}:{round_no}"
                        runs.append(RunSpec(scenario, mode, clients, args.batch_size,
                                            args.seconds, args.runner, tag, args.seed, round_no,
                                            check))
    return runs


def setup(args: argparse.Namespace, server_url: str, name: str) -> Book:
    """Fresh database, migrations, accounts, funding, baseline (and the what-if SQL, if any)."""
    console.print(f"[bold]setup[/] database {name}: migrate, open {args.accounts:,} wallets, fund")
    url = create_database(server_url, name)
    book = open_book(url, args.accounts)
    load_baseline(url)
    if args.what_if_sql:
        console.print(f"[bold red]WHAT-IF[/] running {args.what_if_sql} as the owner: these "
                      "figures are NOT the ledger as migrated")
        with psycopg.connect(libpq_url(url), autocommit=True) as conn:
            conn.execute(args.what_if_sql.read_text())
    with psycopg.connect(libpq_url(url)) as conn:
        settings = conn.execute(
            "SELECT version(), current_setting('fsync'), current_setting('synchronous_commit'),"
            " current_setting('wal_sync_method'), current_setting('full_page_writes'),"
            " current_setting('shared_buffers')").fetchone()
    assert settings is not None
    console.print(f"  {settings[0]}")
    console.print(f"  fsync={settings[1]} synchronous_commit={settings[2]} "
                  f"wal_sync_method={settings[3]} full_page_writes={settings[4]} "
                  f"shared_buffers={settings[5]}")
    return book


def run_all(args: argparse.Namespace, book: Book) -> tuple[list[RunResult], int, int]:
    """Measure every planned run; returns the results and the acknowledged transfers
    (ledger, baseline)."""
    postmaster = _postmaster(book.url)
    ledger_acked = len(book.wallets)  # the funding deposits
    baseline_acked = 0
    results: list[RunResult] = []
    current_check = "trigger"  # as migrated
    for spec in plan(args):
        if spec.check not in ("-", current_check):
            set_posting_check(book.url, spec.check)
            current_check = spec.check
        busy = wait_for_quiet(args.idle_wait, args.idle_busy_max)
        console.print(f"[bold]run[/] round {spec.round}: {spec.scenario} / {spec.mode} / "
                      + ("" if spec.check == "-" else f"posting check {spec.check} / ")
                      + f"{spec.clients} clients"
                      + (f" / batches of {spec.batch_size}" if spec.mode == "post_batch" else "")
                      + f" (machine busy before: {busy:.0f}% of a core)")
        result = measure(book, spec, postmaster, args.rate_cap)
        results.append(result)
        if spec.mode == "baseline":
            baseline_acked += result.acknowledged
        else:
            ledger_acked += result.acknowledged
        console.print(f"  -> {result.tx_per_s:,.0f} tx/s, p50 {result.p50_ms:.1f} ms, "
                      f"p99 {result.p99_ms:.1f} ms, server CPU {_pct(result.server_cpu_pct)}, "
                      f"client CPU {_pct(result.client_cpu_pct)}, other CPU "
                      f"{_pct(result.other_cpu_pct)}, errors {result.errors}"
                      + (f" (first: {result.first_error})" if result.first_error else ""))
    for r in results:
        base = next((b for b in results if b.spec.scenario == r.spec.scenario
                     and b.spec.mode == "baseline" and b.spec.round == r.spec.round), None)
        r.ratio = r.tx_per_s / base.tx_per_s if base and base.tx_per_s else None
        bare = next((b for b in results if b.spec.check == "none" and b.spec.round == r.spec.round
                     and (b.spec.scenario, b.spec.mode, b.spec.clients)
                     == (r.spec.scenario, r.spec.mode, r.spec.clients)), None)
        if bare and bare.tx_per_s and r.spec.mode != "baseline":
            r.vs_none = r.tx_per_s / bare.tx_per_s
    if current_check != "trigger":
        set_posting_check(book.url, "trigger")  # the checks below read the ledger as migrated
    return results, ledger_acked, baseline_acked


def main(argv: Sequence[str] | None = None) -> int:
    """Set up, measure every run, check the books, print the tables; exit 1 if a check fails."""
    args = parse_args(argv)
    began = time.monotonic()
    server_url = args.database_url or embedded_url(args.data_dir)
    name = args.database_name or f"bench_{datetime.now(UTC):%Y%m%d_%H%M%S}"
    book = setup(args, server_url, name)
    console.print(f"  setup took {time.monotonic() - began:.1f}s; runner={args.runner}, "
                  f"nproc={os.cpu_count()}")
    results, ledger_acked, baseline_acked = run_all(args, book)
    console.print("[bold]checks[/] verify(full=True), baseline books, acknowledged = stored")
    checks = check_everything(book.url, ledger_acked, baseline_acked)
    best = best_runs(results)
    console.print(results_table(results, "Every run (ratio: against the same round's baseline)"))
    console.print(results_table(best, "Best round per scenario/mode/clients "
                                      "(ratio: against the best baseline round)"))
    lines = verdicts(best)
    for line in lines:
        console.print("  " + line)
    check_line = (f"checks: {'OK' if checks.ok else 'FAILED'} (ledger transactions "
                  f"{checks.ledger_transactions:,} = acknowledged; verify(full=True): trial "
                  f"balance zero, stored = replayed, no other finding; baseline transfers "
                  f"{checks.baseline_transfers:,} = acknowledged, trial balance zero, stored = "
                  f"replayed)")
    console.print(check_line)
    for finding in checks.findings:
        console.print(f"  [red]{finding}[/]")
    if args.markdown:
        args.markdown.write_text(
            "All runs:\n\n" + markdown_table(results) + "\n\nBest round:\n\n"
            + markdown_table(best) + "\n\n" + "\n".join(f"- {v}" for v in lines)
            + f"\n- {check_line}\n" + "".join(f"  - {f}\n" for f in checks.findings))
    if not args.keep:
        _autocommit(server_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    console.print(f"total {time.monotonic() - began:.0f}s")
    return 0 if checks.ok and not any(r.errors for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
