"""The scheduler: every background job as a bounded step, run by APScheduler 3.11.

- Jobs: a deposit watcher step per chain; a withdrawal processor step per chain with a hot
  wallet (sign, send, track to finality, settle, the unknown-outcome ladder, nonce closing);
  per chain that ``[sweeps]`` lists, a sweeper step (``sweeps.run:<chain>``: sweeps, gas
  top-ups, approved cold transfers) and a hot-limit check (``sweeps.limits:<chain>``: the
  excess over the hot maximum proposed to cold, a refill asked for below the minimum, with
  their alert events); per chain, custody against the chain (``reconcile.custody:<chain>``,
  every ``custody_s``); the custody providers' newest statements matched again
  (``reconcile.provider``); both record their findings as cases (``api.cases``);
  open withdrawal items past the SLA (alert); reconciliation (``ledger.integrity.verify``, an
  ``alert.ledger_drift`` event when anything drifted, and a case per finding), the deposit
  histories against the ledger (``reconcile.histories``) and items waiting too long
  (``reconcile.aging``), each finding a case (``api.cases.record_and_alert``:
  ``alert.case_opened`` once per case); a balance checkpoint; the ledger seal (``ledger.seal``:
  seals over newly committed transactions); webhook delivery; cleanup of
  idempotency records, rate-limit windows and the run log.
- Each run takes ``pg_try_advisory_xact_lock(7351, hashtext(job))`` in a transaction kept open
  on a connection of its own and skips the run if another process holds it: two processes never
  run the same job at once. The run is logged in ``job_runs`` by the commit that releases the
  lock (SQL and why not a session lock: ``api.repository.jobs``).
- APScheduler's in-memory job store is per process (never shared); ``max_instances=1`` and
  ``coalesce`` keep one run per job per process. ``stop`` waits for running steps (each is
  bounded), so SIGTERM ends a worker cleanly.
- Every job of a chain (its watcher, its withdrawal processor, its sweeper) passes that chain's
  :class:`ChainGate` first: the configuration is checked against the node
  (``chains.probe``: ``eth_chainId``, each token's ``decimals()``; ``symbol()`` recorded) once
  per process. A mismatch refuses that chain for the life of the process (one CRITICAL line
  per mismatch on ``custody.alerts``, an ``alert.config_mismatch`` event; each later run is
  recorded as a ``config_mismatch`` error without stepping); the other chains keep running. A
  node that cannot be reached leaves the chain unchecked: the next run checks again.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
import socket
import threading
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import TYPE_CHECKING, Any

from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.schedulers.background import BackgroundScheduler
from fastapi import FastAPI
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import Engine

from api import outbox
from api.repository import jobs as repo
from config.chains import ChainConfig, ChainsConfig
from config.errors import CustodyError
from config.logging import correlated, new_correlation_id, register_configured_secrets
from config.reconcile import ReconcileConfig
from config.sweeps import SweepsConfig
from config.uow import UnitOfWork, is_connection_lost
from config.withdrawals import WithdrawalsConfig

if TYPE_CHECKING:
    from chains.probe import ChainExpected, ProbeReport
    from reconcile.custody import CustodyCheck
    from reconcile.model import Recorded

log = logging.getLogger("custody.jobs")
alerts = logging.getLogger("custody.alerts")
LOCK_NAMESPACE = 7351
WORKER = f"{socket.gethostname()}:{os.getpid()}"


@dataclass(frozen=True)
class Job:
    """A bounded step run every ``interval_s`` seconds."""

    name: str
    interval_s: float
    step: Callable[[datetime], object]


@dataclass
class Intervals:
    """How often each kind of job runs (seconds); ``fast`` overrides all when given."""

    watch_s: float | None = None  # default: the chain's poll interval
    withdrawals_s: float = 2.0
    deliver_s: float = 1.0
    reconcile_s: float = 60.0
    open_items_s: float = 300.0
    #: allowlist.address_active events of the addresses whose activation delay passed.
    allowlist_s: float = 60.0
    checkpoint_s: float = 3600.0
    cleanup_s: float = 600.0
    sweeps_s: float = 5.0
    hot_limits_s: float = 60.0
    seal_s: float = 10.0
    histories_s: float = 300.0
    aging_s: float = 300.0
    #: Custody against the chain reads every address we control at the final block: less often.
    custody_s: float = 600.0
    #: A proof-of-reserves report stores a leaf per user (a million users: a million rows).
    reserves_s: float = 86_400.0
    #: Settled deposits re-read past the reorg window, one bounded batch per run.
    recheck_s: float = 60.0

    @classmethod
    def uniform(cls, seconds: float) -> Intervals:
        """Every job every ``seconds`` (tests, the demo), but the proof-of-reserves report,
        which keeps its own interval: each report stores a leaf per user and signs every
        address holding funds (a test or the demo takes one when its money has settled)."""
        return cls(**{f.name: seconds for f in dataclasses.fields(cls) if f.name != "reserves_s"})


@dataclass
class Stats:
    """Counts of what this process's scheduler did."""

    runs: dict[str, int] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)
    errors: dict[str, int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def bump(self, table: dict[str, int], job: str) -> None:
        """Count one."""
        with self._lock:
            table[job] = table.get(job, 0) + 1


def run_locked(engine: Engine, job: Job, *, now: datetime | None = None,
               stats: Stats | None = None) -> bool:
    """Run one step of ``job`` if no process runs it now; False when skipped."""
    stats = stats or Stats()
    with engine.connect() as conn:
        # An advisory lock held by a transaction kept open on a connection of its own, across
        # the step's own transactions (and its node calls), without holding any row lock; the
        # run log's commit releases it (repository docstring: not a session-level lock).
        if not repo.try_lock(conn, LOCK_NAMESPACE, job.name):
            conn.rollback()
            stats.bump(stats.skipped, job.name)
            return False
        started = datetime.now(UTC)
        outcome, detail = "ok", None
        # A fresh correlation id per step: every line it writes, the ledger's ``posted`` lines
        # with their transaction ids included, carries it and the job's name.
        step_id = new_correlation_id()
        try:
            with correlated(step_id, job=job.name):
                job.step(now or started)
        except ChainRefused as exc:
            # Reported once, loudly, by the chain's gate; every later run only records it.
            outcome, detail = "error", f"{exc.code}: {exc.message}"[:2000]
        except CustodyError as exc:
            # An expected outcome (node down, watcher busy, a refused request): the next run
            # retries. Broken invariants are not CustodyErrors (withdrawals.errors
            # .InvariantBroken): they land below. The withdrawal processor never lets one
            # escape its step: it holds the withdrawal concerned and raises an alert.
            outcome, detail = "error", f"{exc.code}: {exc.message}"[:2000]
            log.warning("job %s: %s", job.name, detail,
                        extra={"job": job.name, "correlation_id": step_id, "code": exc.code})
        except Exception as exc:
            # A programmer error or a broken invariant: loud, logged with its traceback and
            # recorded, so operations see it; the job keeps its schedule.
            outcome, detail = "error", f"{type(exc).__name__}: {exc}"[:2000]
            log.exception("job %s failed", job.name,
                          extra={"job": job.name, "correlation_id": step_id})
        finally:
            try:
                repo.insert_run(conn, job=job.name, worker=WORKER, started_at=started,
                                finished_at=datetime.now(UTC), outcome=outcome, detail=detail)
                conn.commit()
            finally:
                # A failed insert (or a connection lost in a failover) ends the transaction
                # here, and with it the lock.
                conn.rollback()
        stats.bump(stats.runs if outcome == "ok" else stats.errors, job.name)
        return True


# --- the jobs --------------------------------------------------------------------------------


class LedgerDrift(CustodyError):
    """Reconciliation found the ledger drifted: the run is recorded as an error whose detail
    starts with ``ledger_drift: <N> findings`` (what ``/metrics`` reports)."""

    code = "ledger_drift"


def reconcile(engine: Engine, now: datetime) -> None:
    """Verify the ledger; any drift becomes an ``alert.ledger_drift`` event (once per distinct
    set of findings), a case per finding (``reconcile.ledger``: opened, or re-sighted when it
    is open already, with ``alert.case_opened`` per new case), a log error and an error outcome
    of the run (LedgerDrift)."""
    from api.cases import record_and_alert
    from ledger.integrity import verify
    from reconcile import ledger as ledger_check

    report = verify(engine)
    if report.ok:
        return
    findings = sorted(str(d) for d in report.discrepancies)
    log.error("ledger drift: %d findings: %s", len(findings), "; ".join(findings[:5]))
    cases = ledger_check.findings_of(engine, report)
    with UnitOfWork(engine) as uow:
        outbox.raise_alert(uow.conn, "ledger_drift", "\n".join(findings), {
            "findings": [{"kind": d.kind, "subject": d.subject, "expected": d.expected,
                          "observed": d.observed} for d in report.discrepancies[:100]],
            "count": len(findings), "detected_at": now.isoformat(),
            "next": "run custody verify to see each finding; stored balances off the postings: "
                    "custody rebuild-balances; postings wrong: a correcting transaction "
                    "(custody reverse TXID ...) referencing the finding"})
        record_and_alert(uow, ledger_check.CHECK, cases, now)
        uow.commit()
    raise LedgerDrift(f"{len(findings)} findings: {'; '.join(findings[:5])}")


def reconcile_histories(engine: Engine, now: datetime) -> object:
    """The deposit histories against the ledger; every finding a case."""
    from api.cases import record_check
    from reconcile import histories

    return record_check(engine, histories.CHECK, histories.run(engine, now=now), now)


def reconcile_aging(engine: Engine, cfg: ReconcileConfig, now: datetime) -> object:
    """Reserves, unknown and held withdrawals, deposits held for review, waiting longer than
    their thresholds; every finding a case (about the withdrawal or deposit)."""
    from api.cases import record_check
    from reconcile import aging

    return record_check(engine, aging.CHECK, aging.run(engine, cfg, now=now), now)


def checkpoint(engine: Engine, now: datetime) -> None:
    """Checkpoint every balance (verify and rebuild start from the newest verified one)."""
    from ledger.integrity import create_checkpoint

    cp = create_checkpoint(engine)
    if not cp.verified:
        log.error("checkpoint %s is not verified: stored balances drifted", cp.id)


def seal(engine: Engine, now: datetime) -> None:
    """Seal the ledger transactions committed since the newest seal, up to the watermark
    (bounded: at most 100 seals of 10,000 transactions per run; the next run goes on)."""
    from ledger.seals import seal_once

    made = seal_once(engine, now)
    if made:
        log.info("sealed transactions %s..%s in %d seals", made[0].from_transaction_id,
                 made[-1].through_transaction_id, len(made))


@dataclass(frozen=True)
class LastRun:
    """The newest recorded run of a job."""

    job: str
    finished_at: datetime
    ok: bool
    detail: str | None


def last_runs(uow: UnitOfWork) -> list[LastRun]:
    """The newest run of every job in the run log (kept a day: see ``cleanup``)."""
    return [LastRun(job, finished_at, outcome == "ok", detail)
            for job, finished_at, outcome, detail in repo.last_runs(uow.conn)]


def last_successes(uow: UnitOfWork) -> dict[str, datetime]:
    """When the newest successful run of each job ended (the run log keeps it: ``cleanup``)."""
    return dict(repo.last_successes(uow.conn))


def drift_findings(runs: Sequence[LastRun]) -> int | None:
    """Findings of the newest reconciliation (0: clean), None when it has not run."""
    for run in runs:
        if run.job == "ledger.reconcile":
            if run.ok:
                return 0
            match = re.match(rf"{LedgerDrift.code}: (\d+) findings", run.detail or "")
            # Another error (the database was away, say): nothing is known about drift.
            return int(match.group(1)) if match else None
    return None


def cleanup(engine: Engine, now: datetime) -> None:
    """Drop expired idempotency records, old rate-limit windows and run-log rows."""
    from api import idempotency, ratelimit

    with UnitOfWork(engine) as uow:
        idempotency.cleanup(uow.conn)
        ratelimit.cleanup(uow.conn)
        repo.delete_runs_before(uow.conn, now - timedelta(days=1))
        uow.commit()


def open_items(engine: Engine, cfg: WithdrawalsConfig, now: datetime) -> None:
    """Reserves open past the SLA: an ``alert.withdrawal_overdue`` event each (once)."""
    from withdrawals.service import open_items as list_open

    overdue = [i for i in list_open(engine, cfg, older_than=timedelta(seconds=cfg.open_item_sla_s),
                                    now=now) if i.overdue]
    if not overdue:
        return
    with UnitOfWork(engine) as uow:
        for item in overdue:
            row = item.row
            outbox.raise_alert(uow.conn, "withdrawal_overdue", f"{row.withdrawal_id}", {
                "withdrawal_id": str(row.withdrawal_id), "age_s": int(item.age_s),
                "sla_s": cfg.open_item_sla_s, "state": row.state,
                "next": f"custody withdrawal show {row.withdrawal_id}: find why it has not "
                        "settled (an unknown outcome goes down the ladder, never released on "
                        "a timer)"})
        uow.commit()


def allowlist_activations(engine: Engine, now: datetime) -> int:
    """An ``allowlist.address_active`` event for each allowlisted address whose activation
    delay passed (``withdrawals.service.announce_activations``: bounded, safe twice)."""
    from withdrawals.service import announce_activations

    return announce_activations(engine, now=now)


def build_jobs(engine: Engine, chains: ChainsConfig | None, wcfg: WithdrawalsConfig | None, *,
               intervals: Intervals | None = None, environ: dict[str, str] | None = None,
               only: Sequence[str] = (), scfg: SweepsConfig | None = None,
               rcfg: ReconcileConfig | None = None) -> list[Job]:
    """Every job of this deployment (``only``: names or name prefixes to keep; ``scfg``: the
    ``[sweeps]`` section, whose chains get a sweeper and a hot-limit check; ``rcfg``: the
    ``[reconcile]`` thresholds, by default the reserve SLA of ``wcfg`` and the defaults)."""
    iv = intervals or Intervals()
    if rcfg is None:
        rcfg = ReconcileConfig(**({"reserve_sla_s": wcfg.open_item_sla_s} if wcfg else {}))
    aging_cfg = rcfg
    # The secrets this deployment's configuration names never reach a log line.
    register_configured_secrets([chains, wcfg, scfg], environ)
    jobs = [
        Job("webhooks.deliver", iv.deliver_s, lambda now: outbox.deliver_due(engine, now=now)),
        Job("ledger.reconcile", iv.reconcile_s, lambda now: reconcile(engine, now)),
        Job("reconcile.histories", iv.histories_s,
            lambda now: reconcile_histories(engine, now)),
        Job("reconcile.aging", iv.aging_s, lambda now: reconcile_aging(engine, aging_cfg, now)),
        Job("ledger.checkpoint", iv.checkpoint_s, lambda now: checkpoint(engine, now)),
        Job("ledger.seal", iv.seal_s, lambda now: seal(engine, now)),
        Job("maintenance.cleanup", iv.cleanup_s, lambda now: cleanup(engine, now)),
    ]
    if chains is not None:
        jobs += _chain_jobs(engine, chains, wcfg, iv, environ, scfg)
        jobs.append(Job("reserves.report", iv.reserves_s,
                        partial(reserves_report, engine, chains, wcfg, environ)))
    if wcfg is not None:
        jobs.append(Job("withdrawals.open_items", iv.open_items_s,
                        lambda now: open_items(engine, wcfg, now)))
        jobs.append(Job("withdrawals.allowlist", iv.allowlist_s,
                        lambda now: allowlist_activations(engine, now)))
    jobs.append(Job("reconcile.provider", iv.reconcile_s,
                    lambda now: provider_recheck(engine, now)))
    if only:
        jobs = [j for j in jobs if any(j.name == o or j.name.startswith(o + ".")
                                       or j.name.startswith(o + ":") for o in only)]
    return jobs


def _chain_jobs(engine: Engine, chains: ChainsConfig, wcfg: WithdrawalsConfig | None,
                iv: Intervals, environ: dict[str, str] | None,
                scfg: SweepsConfig | None = None) -> list[Job]:
    from deposits.recheck import Rechecker
    from deposits.watcher import Watcher
    from withdrawals import processor

    jobs = []
    for name, chain in chains.chains.items():
        # One gate per chain, shared by all its jobs: whichever runs first checks.
        gate = ChainGate(engine, chain)
        watcher = Watcher(engine, chains, name)
        jobs.append(Job(f"deposits.watch:{name}", iv.watch_s or chain.poll_interval_s,
                        partial(_watch, gate, watcher)))
        jobs.append(Job(f"reconcile.custody:{name}", iv.custody_s,
                        partial(_custody, gate, engine, chains, name)))
        rechecker = Rechecker(engine, chains, name)
        if rechecker.enabled:
            jobs.append(Job(f"deposits.recheck:{name}", iv.recheck_s,
                            partial(_recheck, gate, rechecker)))
        if wcfg is None or name not in wcfg.hot_wallets:
            continue
        # The sweeper runs without the hot wallet's signer too (its sweeps are signed by the
        # deposit addresses' keys; top-ups and cold transfers then wait, logged).
        jobs += _sweep_jobs(engine, chains, wcfg, scfg, name, gate, iv, environ)
        try:
            ctx = processor.build_context(chains, wcfg, name, environ=environ)
        except CustodyError as exc:
            log.warning("no withdrawal processing on %s: %s", name, exc.message)
            continue
        jobs.append(Job(f"withdrawals.process:{name}", iv.withdrawals_s,
                        partial(_process, gate, engine, wcfg, ctx)))
    return jobs


def _sweep_jobs(engine: Engine, chains: ChainsConfig, wcfg: WithdrawalsConfig,
                scfg: SweepsConfig | None, name: str, gate: ChainGate, iv: Intervals,
                environ: dict[str, str] | None) -> list[Job]:
    """The sweeper (``sweeps.run:<chain>``) and the hot-limit check (``sweeps.limits:<chain>``)
    of a chain that ``[sweeps]`` lists, behind the chain's gate like its processor."""
    if scfg is None or name not in scfg.chains():
        return []
    from sweeps import runner

    try:
        ctx = runner.build_context(chains, wcfg, scfg, name, environ=environ)
    except CustodyError as exc:
        log.warning("no sweeper on %s: %s", name, exc.message)
        return []
    return [Job(f"sweeps.run:{name}", iv.sweeps_s, partial(_sweep, gate, engine, ctx)),
            Job(f"sweeps.limits:{name}", iv.hot_limits_s,
                partial(_hot_limits, gate, engine, ctx))]


def _sweep(gate: ChainGate, engine: Engine, ctx: Any, now: datetime) -> object:
    from sweeps import runner

    gate.admit(now)
    return runner.step(engine, ctx, now=now)


def _hot_limits(gate: ChainGate, engine: Engine, ctx: Any, now: datetime) -> object:
    from sweeps.limits import check_hot_limits

    gate.admit(now)
    report = check_hot_limits(engine, ctx, now)
    hot_limit_alerts(engine, ctx.chain.name)
    return report


def hot_limit_alerts(engine: Engine, chain: str) -> int:
    """What the hot-limit check leaves for an operator on ``chain`` as alert events, each
    written once: an ``alert.hot_wallet_low`` per open low episode (with the refill request
    it asks to be sent from cold), an ``alert.cold_transfer_proposed`` per cold transfer
    waiting for admins' decisions. Read from the database after every check, so an alert lost
    with a crashed process is raised by the next one. Returns how many were new."""
    from sweeps import service
    from sweeps.limits import low_episodes
    from sweeps.model import Kind, State

    low = low_episodes(engine, chain)
    waiting = service.list_cold_transfers(engine, chain=chain, states=[State.PROPOSED])
    if not low and not waiting:
        return 0
    new = 0
    with UnitOfWork(engine) as uow:
        for item in low:
            e, r = item.episode, item.refill
            new += outbox.raise_alert(uow.conn, "hot_wallet_low", f"episode:{e.id}", {
                "chain": chain, "asset": e.asset, "hot_wallet": e.hot_wallet,
                "holding_chain_units": str(e.holding),
                "hot_min_chain_units": str(e.limit_amount),
                "episode_id": str(e.id), "since": e.started_at.isoformat(),
                "refill_request_id": None if r is None else str(r.id),
                "next": "no cold address to refill from: refill the hot wallet and declare "
                        "it (custody refills request)" if r is None else
                        f"send exactly {r.amount} (chain units) of {r.asset} from {r.source} "
                        f"to {r.destination}; the watcher matches it to refill request {r.id}"})
        for m, decisions in waiting:
            new += outbox.raise_alert(uow.conn, "cold_transfer_proposed",
                                      f"{Kind.COLD_TRANSFER.value}:{m.id}", {
                "chain": chain, "cold_transfer_id": str(m.id), "asset": m.data["asset"],
                "amount_chain_units": str(m.amount("amount")),
                "destination": m.data["destination"], "proposed_by": m.data["proposed_by"],
                "approvals_required": int(m.data["approvals_required"]),
                "approvals": [d.approver for d in decisions if d.decision == "approve"],
                "next": f"admins approve or reject it: custody cold approve {m.id} --as NAME"})
        uow.commit()
    return new


def _custody(gate: ChainGate, engine: Engine, chains: ChainsConfig, name: str,
             now: datetime) -> object:
    gate.admit(now)
    return custody_check(engine, chains, name, now)


def custody_check(engine: Engine, chains: ChainsConfig, name: str,
                  now: datetime) -> tuple[CustodyCheck, Recorded]:
    """Custody against the chain on ``name`` (``reconcile.custody``), its findings recorded as
    cases (``alert.case_opened`` for each new one) under ``reconcile.custody:<chain>``. A node
    that cannot give exact figures raises HoldingsUnavailable and nothing is recorded."""
    from api.cases import record_and_alert
    from reconcile import custody

    check = custody.check(engine, chains, name)
    with UnitOfWork(engine) as uow:
        recorded = record_and_alert(uow, f"reconcile.custody:{name}", check.findings, now)
        uow.commit()
    return check, recorded


def reserves_report(engine: Engine, chains: ChainsConfig, wcfg: WithdrawalsConfig | None,
                    environ: dict[str, str] | None, now: datetime) -> tuple[int | None, Recorded]:
    """A proof-of-reserves report taken now over every chain (``reserves.service``), signed by
    the engine's signers, its findings recorded as cases under ``reserves.report`` (holdings
    below liabilities, an unexplained difference, a negative balance). Returns the report id
    (None: refused) and what was recorded."""
    from api.cases import record_and_alert
    from reserves import service as reserves
    from reserves.signers import EngineSigners

    taken = reserves.take_report(engine, chains, now=now, taken_by="reserves.report",
                                 signer_of=EngineSigners(chains, wcfg, environ=environ))
    with UnitOfWork(engine) as uow:
        recorded = record_and_alert(uow, "reserves.report", taken.findings, now)
        uow.commit()
    return taken.report_id, recorded


def provider_recheck(engine: Engine, now: datetime) -> Recorded:
    """Each custody provider's newest statement matched again (``reconcile.provider``: a fix
    booked or a credit made since its import is seen), findings recorded as cases."""
    from api.cases import record_and_alert
    from reconcile import provider

    with UnitOfWork(engine) as uow:
        checks = provider.recheck_latest(uow)
        recorded = record_and_alert(uow, provider.CHECK,
                                    [f for c in checks for f in c.findings], now)
        uow.commit()
    return recorded


def _watch(gate: ChainGate, watcher: Any, now: datetime) -> object:
    gate.admit(now)
    return watcher.step(now=now)


def _recheck(gate: ChainGate, rechecker: Any, now: datetime) -> object:
    gate.admit(now)
    return rechecker.step(now=now)


def _process(gate: ChainGate, engine: Engine, wcfg: WithdrawalsConfig, ctx: Any,
             now: datetime) -> object:
    from withdrawals import processor

    gate.admit(now)
    report = processor.step(engine, wcfg, ctx, now=now)
    withdrawal_alerts(engine, ctx.chain.name, limit=wcfg.batch_max, now=now)
    return report


def withdrawal_alerts(engine: Engine, chain: str, *, limit: int,
                      now: datetime | None = None) -> int:
    """What waits for an operator on ``chain`` as alert events, each written once: an
    ``alert.withdrawal_held`` per open case of a held withdrawal, an ``alert.gas_float_low``
    per payout waiting for the gas float, an ``alert.signer_unavailable`` per payout the signer
    has not signed for ``withdrawals.service.SIGNING_OVERDUE_S`` (``now``: the current time).
    Read from the database after every processor step, so an alert lost with a crashed process
    is raised by the next step. Returns how many were new."""
    from withdrawals.service import waiting

    found = waiting(engine, chain, limit=limit, now=now or datetime.now(UTC))
    if not found.cases and not found.gas_float_low and not found.signing_overdue:
        return 0
    new = 0
    with UnitOfWork(engine) as uow:
        for case in found.cases:
            new += outbox.raise_alert(uow.conn, "withdrawal_held", f"case:{case.id}", {
                "withdrawal_id": str(case.withdrawal_id), "case_id": str(case.id),
                "chain": chain, "kind": case.kind, "reason": case.reason,
                "evidence": case.evidence, "opened_at": case.opened_at.isoformat(),
                "next": f"fix the cause, then custody withdrawal retry {case.withdrawal_id} "
                        "--by NAME --reason TEXT"})
        for w in found.gas_float_low:
            new += outbox.raise_alert(uow.conn, "gas_float_low", f"withdrawal:{w.id}", {
                "withdrawal_id": str(w.id), "chain": chain, "asset": w.asset_code,
                "reserved_since": w.state_changed_at.isoformat(),
                "next": f"fund treasury:{chain} (a declared treasury funding); the payout is "
                        "signed by itself once the gas float covers it"})
        for w in found.signing_overdue:
            new += outbox.raise_alert(uow.conn, "signer_unavailable", f"withdrawal:{w.id}", {
                "withdrawal_id": str(w.id), "chain": chain, "nonce": str(w.nonce),
                "hot_wallet": w.hot_wallet, "signing_since": w.state_changed_at.isoformat(),
                "next": "restore the signer (see the processor's log for its error); the "
                        "payout is signed with the same nonce by itself, and every later payout "
                        "of this hot wallet waits for it"})
        uow.commit()
    return new


# --- the configuration check of a chain ------------------------------------------------------


class ChainRefused(CustodyError):
    """The chain's configuration disagrees with its node: none of its jobs steps in this
    process (fix the configuration and restart). Not retryable."""

    code = "config_mismatch"


def expected_of(chain: ChainConfig) -> ChainExpected:
    """What the configuration says about ``chain``, as ``chains.probe`` compares it."""
    from chains.probe import ChainExpected, TokenExpected

    return ChainExpected(chain.name, chain.chain_id, tuple(
        TokenExpected(t.contract, t.decimals, t.symbol) for t in chain.tokens),
        trace_internal=chain.trace_internal, trace_method=chain.trace_method)


def check_chain(chain: ChainConfig) -> ProbeReport:
    """Check ``chain``'s configuration against its node, with the chain's RPC timeout and
    retry budget (RpcUnavailable when the node cannot be reached: nothing is known)."""
    # Imported here, as the chain jobs' modules are: a worker without chains starts sooner.
    from chains.probe import probe
    from chains.rpc import RpcClient

    with RpcClient(chain.rpc_url, rpc_timeout_ms=chain.rpc_timeout_ms,
                   retries_max=chain.rpc_retries_max) as rpc:
        return probe(rpc, expected_of(chain))


def report_mismatch(engine: Engine, report: ProbeReport, now: datetime) -> None:
    """One CRITICAL line per mismatch on ``custody.alerts`` and an ``alert.config_mismatch``
    event (once per distinct set of mismatches of the chain)."""
    lines = [f.line() for f in report.mismatches]
    for line in lines:
        alerts.critical("%s", line)
    with UnitOfWork(engine) as uow:
        outbox.raise_alert(uow.conn, "config_mismatch", f"{report.chain}:" + "\n".join(lines), {
            "chain": report.chain, "detected_at": now.isoformat(),
            "mismatches": [{"field": f.field, "configured": f.configured,
                            "observed": f.observed} for f in report.mismatches],
            "next": f"fix chain {report.chain} in the configuration file (or its node's URL), "
                    "check it with custody config check, then restart: the chain's jobs stay "
                    "refused until then"})
        uow.commit()


def _log_agreement(report: ProbeReport) -> None:
    for f in report.findings:
        if not f.checked and f.ok and f.observed != f.configured:
            log.warning("%s (recorded only: tokens are identified by their contract)", f.line())
    log.info("chain %s: the configuration agrees with the node: %s", report.chain,
             "; ".join(f"{f.field} {f.observed}" for f in report.findings))


def require_agreement(engine: Engine, chain: ChainConfig, now: datetime) -> ProbeReport:
    """The gate's check, once, for a command that steps a chain without the scheduler
    (``custody watch``, ``custody withdrawals process``): the report when the configuration
    agrees; ChainRefused (after the CRITICAL line and the alert) on a mismatch; the node's
    error (RpcUnavailable...) when it could not be asked."""
    gate = ChainGate(engine, chain)
    gate.admit(now)
    assert gate.report is not None
    return gate.report


class ChainGate:
    """The configuration check of one chain, run before any of its jobs steps.

    ``admit`` returns once the check has passed (remembered for the life of the process),
    raises :class:`ChainRefused` when it found a mismatch (also remembered: a wrong
    configuration does not heal by itself), and lets the node's errors through when it could
    not check (the node was unreachable): then the next job run checks again. The chain's
    jobs run in the scheduler's threads; the lock makes the first of them check and the others
    wait for its answer (bounded by the chain's RPC timeout and retries).
    """

    def __init__(self, engine: Engine, chain: ChainConfig,
                 check: Callable[[ChainConfig], ProbeReport] = check_chain) -> None:
        self.engine = engine
        self.chain = chain
        self._check = check
        self._lock = threading.Lock()
        #: The report of the check, once one could be made.
        self.report: ProbeReport | None = None

    def admit(self, now: datetime) -> None:
        """Return when the chain may step (see the class)."""
        with self._lock:
            if self.report is None:
                report = self._check(self.chain)
                if report.ok:
                    _log_agreement(report)
                else:
                    report_mismatch(self.engine, report, now)
                self.report = report
            report = self.report
        if not report.ok:
            first, *more = report.mismatches
            raise ChainRefused(first.line() + (f" (and {len(more)} more)" if more else ""))


# --- the scheduler ---------------------------------------------------------------------------


class Scheduler:
    """APScheduler 3.11 running ``jobs`` under their advisory locks."""

    def __init__(self, engine: Engine, jobs: Sequence[Job], *, max_workers: int = 8) -> None:
        self.engine = engine
        self.jobs = list(jobs)
        self.stats = Stats()
        # A job store of its own (memory): APScheduler stores must never be shared.
        self._scheduler = BackgroundScheduler(
            executors={"default": ThreadPoolExecutor(max_workers=max_workers)},
            job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": 30},
            timezone=UTC)
        # "skipped: maximum number of running instances reached" is the intended effect of
        # max_instances=1 for a step that outlasts its interval, not news: keep it out of logs.
        logging.getLogger("apscheduler.scheduler").setLevel(logging.ERROR)
        for job in self.jobs:
            self._scheduler.add_job(self._run, "interval", args=[job], id=job.name,
                                    name=job.name, seconds=job.interval_s,
                                    next_run_time=datetime.now(UTC))

    def _run(self, job: Job) -> None:
        try:
            run_locked(self.engine, job, stats=self.stats)
        except sa_exc.DBAPIError as exc:
            if not is_connection_lost(exc):
                raise
            # A failover or a restart ended the connection holding the job's lock (and its
            # lock with it): the pool reconnects, to the new primary, on the next run.
            self.stats.bump(self.stats.errors, job.name)
            first = (str(exc.orig).strip().splitlines() or [""])[0][:200]
            log.warning("job %s: the database connection was lost (%s); the next run "
                        "reconnects", job.name, first, extra={"job": job.name})

    @property
    def running(self) -> bool:
        """Whether the scheduler is started and its thread alive (``/readyz``)."""
        thread = getattr(self._scheduler, "_thread", None)
        return bool(self._scheduler.running and thread is not None and thread.is_alive())

    def start(self) -> None:
        """Start running jobs in background threads."""
        self._scheduler.start()
        log.info("scheduler started: %s", ", ".join(j.name for j in self.jobs))

    def stop(self) -> None:
        """Stop scheduling and wait for the steps that are running (each is bounded)."""
        if self._scheduler.running:
            self._scheduler.shutdown(wait=True)
            log.info("scheduler stopped")

    def lifespan(self) -> Callable[[FastAPI], Any]:
        """An entry for ``create_app(lifespans=...)``: start with the app, stop with it."""

        @asynccontextmanager
        async def hook(app: FastAPI) -> AsyncIterator[None]:
            import asyncio

            app.state.scheduler = self  # what /readyz checks
            self.start()
            try:
                yield
            finally:
                await asyncio.to_thread(self.stop)

        return hook
