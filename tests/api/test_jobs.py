"""The scheduler: advisory-locked jobs, two real worker processes never run the same job at
once, SIGTERM stops ``worker`` and ``serve`` cleanly (exit 0)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from api.jobs import LOCK_NAMESPACE, Job, Scheduler, Stats, build_jobs, run_locked
from devtools.anvil import free_port
from tests.conftest import BOTH_ROUTES
from tests.withdrawals.conftest import config_toml

RUN = "from api.cli import app; app(prog_name='custody')"  # the `custody` entry point


def spawn(database_url: str, *args: str, config: Path | None = None) -> subprocess.Popen[str]:
    env = {**os.environ, "CUSTODY_DATABASE_URL": database_url, "COLUMNS": "200"}
    env.pop("CUSTODY_CONFIG", None)
    if config is not None:
        env["CUSTODY_CONFIG"] = str(config)
    return subprocess.Popen([sys.executable, "-c", RUN, *args], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def test_a_job_held_elsewhere_is_skipped(engine: Engine) -> None:
    ran: list[str] = []
    job = Job("test.job", 1.0, lambda now: ran.append("x"))
    stats = Stats()
    with engine.connect() as other:
        other.execute(sa.text("SELECT pg_advisory_lock(:ns, hashtext('test.job'))"),
                      {"ns": LOCK_NAMESPACE})
        assert run_locked(engine, job, stats=stats) is False
        other.execute(sa.text("SELECT pg_advisory_unlock(:ns, hashtext('test.job'))"),
                      {"ns": LOCK_NAMESPACE})
        other.commit()
    assert run_locked(engine, job, stats=stats) is True
    assert ran == ["x"] and stats.skipped == {"test.job": 1} and stats.runs == {"test.job": 1}


@BOTH_ROUTES
def test_the_lock_is_held_for_the_whole_run_and_released_after_it(engine: Engine) -> None:
    # Behind PgBouncer in transaction mode a session-level lock stays on whichever server
    # connection took it: a run of the same job from another connection could land there and
    # take it again, and an unlock sent through another server connection releases nothing.
    inside: list[bool] = []
    other = Job("test.held", 1.0, lambda now: None)
    job = Job("test.held", 1.0, lambda now: inside.append(run_locked(engine, other)))
    for _ in range(5):
        assert run_locked(engine, job) is True
    assert inside == [False] * 5


def _end_every_session(owner: Engine) -> int:
    """What a failover does to the engine's connections: the server ends them all."""
    with owner.connect() as conn:
        return len(conn.execute(sa.text(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = "
            "current_database() AND backend_type = 'client backend' "
            "AND pid <> pg_backend_pid()")).all())


def test_jobs_survive_the_server_ending_every_connection(engine: Engine, owner: Engine) -> None:
    runs: list[int] = []

    def step(now: object) -> None:
        with engine.connect() as conn:
            runs.append(int(conn.execute(sa.text("SELECT 1")).scalar_one()))

    scheduler = Scheduler(engine, [Job("test.survivor", 0.05, step)])
    scheduler.start()
    try:
        deadline = time.monotonic() + 30
        while len(runs) < 2:
            assert time.monotonic() < deadline, "the job did not run"
            time.sleep(0.02)
        assert _end_every_session(owner) >= 1
        seen = len(runs)
        while len(runs) < seen + 3:
            assert time.monotonic() < deadline + 30, "the job stopped running"
            time.sleep(0.02)
        assert scheduler.running
    finally:
        scheduler.stop()


def test_a_failing_job_is_logged_and_releases_its_lock(engine: Engine) -> None:
    def boom(now: object) -> None:
        raise RuntimeError("broken invariant")

    job = Job("test.boom", 1.0, boom)
    assert run_locked(engine, job) and run_locked(engine, job)
    with engine.connect() as conn:
        rows = conn.execute(sa.text("SELECT outcome, detail FROM job_runs")).all()
    assert [r.outcome for r in rows] == ["error", "error"]
    assert "broken invariant" in rows[0].detail


def test_build_jobs_without_chains_and_with_a_filter(engine: Engine) -> None:
    names = [j.name for j in build_jobs(engine, None, None)]
    assert names == ["webhooks.deliver", "ledger.reconcile", "reconcile.histories",
                     "reconcile.aging", "ledger.checkpoint", "ledger.seal", "maintenance.cleanup",
                     "reconcile.provider"]
    assert [j.name for j in build_jobs(engine, None, None, only=["ledger"])] == [
        "ledger.reconcile", "ledger.checkpoint", "ledger.seal"]


def test_reconciliation_drift_is_one_alert_delivered_to_alert_endpoints(
        engine: Engine, owner: Engine) -> None:
    from api.jobs import reconcile
    from api.outbox import deliver_due, set_endpoint
    from devtools.e2e import WebhookReceiver
    from tests.api.conftest import serve

    receiver = WebhookReceiver().start()
    try:
        with serve(engine) as api:
            api.funded_user()
            receiver.secret = set_endpoint(engine, "sam", receiver.url, alerts=True).secret
            set_endpoint(engine, "globex", "http://127.0.0.1:9/x")  # no alerts wanted
            job = Job("ledger.reconcile", 60, lambda now: reconcile(engine, now))
            assert run_locked(engine, job)
            with owner.begin() as conn:
                conn.execute(sa.text(
                    "UPDATE account_balances SET balance = balance - 1 WHERE balance < 0"))
            assert run_locked(engine, job) and run_locked(engine, job)
            # One drift alert, and one alert per case the findings opened (the second run
            # re-sights the same cases: nothing new).
            assert deliver_due(engine).delivered == 1 + len(open_cases(engine))
        drift, *opened = receiver.requests
        assert drift.event_type == "alert.ledger_drift" and drift.signature_valid
        assert drift.document["data"]["findings"][0]["kind"] == "balance_drift"
        assert {a.event_type for a in opened} == {"alert.case_opened"}
        assert sorted(a.document["data"]["case_id"] for a in opened) == sorted(
            str(c.id) for c in open_cases(engine))
        assert all(c.seen_count == 2 for c in open_cases(engine))
    finally:
        receiver.stop()


def open_cases(engine: Engine) -> list[Any]:
    """The open cases (reconcile.service)."""
    from config.uow import UnitOfWork
    from reconcile import service

    with UnitOfWork(engine) as uow:
        return service.open_cases(uow)


def metric(text: str, name: str, **labels: str) -> float | None:
    """The value of the sample ``name`` with exactly ``labels``, or None (the exposition
    read with prometheus_client's parser)."""
    from prometheus_client.parser import text_string_to_metric_families

    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and sample.labels == labels:
                return float(sample.value)
    return None


def test_metrics_show_the_outbox_jobs_and_drift(engine: Engine, owner: Engine) -> None:
    from api.jobs import reconcile
    from api.outbox import deliver_due, set_endpoint
    from tests.api.conftest import serve

    with serve(engine) as api:
        before = api.call("GET", "/metrics", "sam").text
        assert metric(before, "custody_ledger_drift_findings") is None  # never reconciled
        assert metric(before, "custody_outbox_undelivered") == 0
        set_endpoint(engine, "acme", "http://127.0.0.1:9/nobody-listens")
        api.withdraw(api.funded_user())  # "withdrawal reserved": an event for acme's endpoint
        job = Job("ledger.reconcile", 60, lambda now: reconcile(engine, now))
        assert run_locked(engine, job)
        assert deliver_due(engine).delivered == 0  # refused: stays pending, retried later
        text = api.call("GET", "/metrics", "sam").text
        assert (metric(text, "custody_outbox_undelivered") or 0) >= 1
        assert metric(text, "custody_outbox_oldest_undelivered_age_seconds") is not None
        assert metric(text, "custody_outbox_failed") == 0
        assert metric(text, "custody_job_last_run_ok", job="ledger.reconcile") == 1
        ran_at = metric(text, "custody_job_last_run_timestamp_seconds", job="ledger.reconcile")
        assert ran_at is not None and abs(ran_at - time.time()) < 60
        assert metric(text, "custody_job_last_success_timestamp_seconds",
                      job="ledger.reconcile") == ran_at
        assert metric(text, "custody_ledger_drift_findings") == 0
        with owner.begin() as conn:
            conn.execute(sa.text(
                "UPDATE account_balances SET balance = balance - 1 WHERE balance < 0"))
        assert run_locked(engine, job)
        text = api.call("GET", "/metrics", "sam").text
        assert metric(text, "custody_job_last_run_ok", job="ledger.reconcile") == 0
        assert (metric(text, "custody_ledger_drift_findings") or 0) >= 1
        # The failed run is the newest run; the newest success is still the first one.
        assert metric(text, "custody_job_last_success_timestamp_seconds",
                      job="ledger.reconcile") == ran_at
        assert (metric(text, "custody_job_last_run_timestamp_seconds",
                       job="ledger.reconcile") or 0) > ran_at


@pytest.mark.slow
def test_two_workers_never_run_the_same_job_at_once(database_url: str, engine: Engine) -> None:
    workers = [spawn(database_url, "worker", "--interval-s", "0.05") for _ in range(2)]
    # Both schedulers running (each has logged a run), then a few seconds of contention: a
    # fixed sleep from the spawn would let a loaded machine stop them before they start.
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and all(w.poll() is None for w in workers):
        with engine.connect() as conn:
            if conn.execute(sa.text("SELECT count(DISTINCT worker) FROM job_runs")).scalar() == 2:
                break
        time.sleep(0.2)
    time.sleep(3)
    for w in workers:
        w.send_signal(signal.SIGTERM)
    outputs = [w.communicate(timeout=30) for w in workers]
    assert [w.returncode for w in workers] == [0, 0], outputs
    assert all("stopped: runs" in out for out, _ in outputs), outputs
    skipped = sum(int(out.split("skipped ")[1].split()[0]) for out, _ in outputs)
    with engine.connect() as conn:
        rows = conn.execute(sa.text(
            "SELECT job, worker, started_at, finished_at, outcome FROM job_runs "
            "ORDER BY job, started_at")).all()
    assert {r.worker for r in rows} and len({r.worker for r in rows}) == 2
    assert all(r.outcome == "ok" for r in rows), [r for r in rows if r.outcome != "ok"]
    by_job: dict[str, list[sa.Row[Any]]] = defaultdict(list)
    for r in rows:
        by_job[r.job].append(r)
    assert set(by_job) == {"webhooks.deliver", "ledger.reconcile", "reconcile.histories",
                           "reconcile.aging", "ledger.checkpoint", "ledger.seal",
                           "maintenance.cleanup", "reconcile.provider"}
    for job, runs in by_job.items():
        for a, b in zip(runs, runs[1:], strict=False):
            assert b.started_at >= a.finished_at, f"{job}: {a} overlaps {b}"
    # Both processes wanted the same jobs at the same moments: the lock turned some away.
    assert skipped > 0


@pytest.mark.slow
def test_serve_answers_http_runs_jobs_and_exits_0_on_sigterm(database_url: str, engine: Engine,
                                                             tmp_path: Path) -> None:
    config = tmp_path / "custody.toml"
    config.write_text(config_toml())
    port = free_port()
    proc = spawn(database_url, "serve", "--port", str(port), "--interval-s", "0.2",
                 "--job", "webhooks", "--job", "ledger.reconcile", config=config)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                r = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline and proc.poll() is None, proc.stderr
                time.sleep(0.1)
        assert r.status_code == 200
        time.sleep(1)
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    # Cleanly: nothing failed on the way out, and the shutdown (which stops the scheduler and
    # waits for its running steps) ran to its end before the process exited.
    assert "Traceback" not in err, err
    assert "Application shutdown complete." in err, err
    with engine.connect() as conn:
        jobs = set(conn.execute(sa.text("SELECT DISTINCT job FROM job_runs")).scalars())
    assert jobs == {"webhooks.deliver", "ledger.reconcile"}
