"""``custody serve``, ``custody worker``, ``custody webhooks ...`` and ``custody demo``.

Mounted by ``api/cli.py``::

    from api.cli_service import service_cli
    app.add_typer(service_cli)

(no name: the commands appear at the top level). ``serve`` runs the HTTP API and the scheduler
in one process; ``worker`` runs the scheduler alone (``custody api`` runs the API alone). Both
stop cleanly on SIGTERM or Ctrl-C: running job steps finish, then the process exits 0.
"""

from __future__ import annotations

import signal
import threading
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any

import typer

from api.cli_audit import audited
from api.cli_reads import JsonOption
from api.console import console, err_console, friendly
from api.render import Grid, print_grid

if TYPE_CHECKING:
    from config.chains import ChainsConfig
    from config.sweeps import SweepsConfig
    from config.withdrawals import WithdrawalsConfig

service_cli = typer.Typer(help="Running the engine: server, worker, webhooks, demo.")
webhooks_app = typer.Typer(help="Webhook endpoints, the delivery log and replays.",
                           no_args_is_help=True)
service_cli.add_typer(webhooks_app, name="webhooks")

ConfigOption = Annotated[str | None, typer.Option(help="Configuration file "
                                                       "(default: $CUSTODY_CONFIG).")]
IntervalOption = Annotated[float | None, typer.Option(
    min=0.05, help="Run every job this often (seconds) instead of its own interval; the "
                   "proof-of-reserves report keeps its own (daily).")]
OnlyOption = Annotated[list[str] | None, typer.Option(
    "--job", help="Run only these jobs (name or prefix, e.g. webhooks, deposits.watch).")]




def _parse_time(value: str | None) -> datetime | None:
    if value is None:
        return None
    try:
        at = datetime.fromisoformat(value)
    except ValueError:
        raise typer.BadParameter(f"not an ISO 8601 time: {value!r}") from None
    return at if at.tzinfo else at.replace(tzinfo=UTC)


def load_configs(path: str | None, *, required: bool) -> tuple[ChainsConfig | None,
                                                               WithdrawalsConfig | None]:
    """Both configurations from ``path`` or ``$CUSTODY_CONFIG``; (None, None) when there is
    none and none is ``required``; the withdrawals' None when the file has no
    ``[withdrawals]`` table (deposits only: no payouts, withdrawal requests are refused)."""
    import os

    from api.configuration import load_withdrawals_if_present
    from config.chains import CONFIG_ENV, load_chains_config

    if path is None and not os.environ.get(CONFIG_ENV) and not required:
        return None, None
    chains = load_chains_config(path)
    return chains, load_withdrawals_if_present(chains, path)


def load_sweeps(path: str | None, chains: ChainsConfig | None,
                wcfg: WithdrawalsConfig | None) -> SweepsConfig | None:
    """The ``[sweeps]`` section of the file the chains came from (None without chains or
    without the section)."""
    from api.configuration import load_sweeps_if_present

    return None if chains is None else load_sweeps_if_present(chains, wcfg, path)


def _scheduler(config: str | None, interval_s: float | None, only: list[str] | None, *,
               required: bool) -> tuple[Any, ChainsConfig | None, WithdrawalsConfig | None,
                                        SweepsConfig | None]:
    from api.jobs import Intervals, Scheduler, build_jobs
    from config.database import STARTUP_WAIT_S, get_engine
    from config.encryption import keyring
    from config.reconcile import load_reconcile_config

    keyring()  # No secrets key: refuse to start (the webhook deliveries need it).
    chains, wcfg = load_configs(config, required=required)
    scfg = load_sweeps(config, chains, wcfg)
    intervals = Intervals.uniform(interval_s) if interval_s else Intervals()
    engine = get_engine(wait_s=STARTUP_WAIT_S)
    return Scheduler(engine, build_jobs(engine, chains, wcfg, intervals=intervals,
                                        only=only or (), scfg=scfg,
                                        rcfg=load_reconcile_config(config))), chains, wcfg, scfg


@service_cli.command("serve")
@friendly
def serve(
    host: Annotated[str, typer.Option(help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535, help="Port.")] = 8000,
    config: ConfigOption = None,
    interval_s: IntervalOption = None,
    job: OnlyOption = None,
) -> None:
    """Serve the HTTP API (uvicorn) and run the scheduler in the same process."""
    from api.app import create_app
    from config.logging import ensure_logging
    from config.runtime import keep_startup_out_of_gc

    ensure_logging()

    scheduler, chains, wcfg, scfg = _scheduler(config, interval_s, job, required=True)
    assert chains is not None
    from config.database import get_read_engine

    reader = get_read_engine()
    app = create_app(scheduler.engine, chains, wcfg, lifespans=[scheduler.lifespan()],
                     sweeps_config=scfg,
                     read_engine=None if reader is scheduler.engine else reader)
    keep_startup_out_of_gc()
    run_uvicorn(app, host, port)


def run_uvicorn(app: Any, host: str, port: int, *, log_level: str = "info") -> None:
    """Serve ``app`` until SIGTERM or Ctrl-C, then return (exit code 0).

    uvicorn shuts down gracefully on those signals (the lifespan stops the scheduler) and then
    re-raises the signal to the handler that was installed before it ran; without one of ours
    the process would die of that signal (exit -15) after an orderly shutdown.
    """
    import uvicorn

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: None)
    # log_config=None: uvicorn's lines go through config.logging's handler (JSON, redacted).
    uvicorn.run(app, host=host, port=port, log_level=log_level, ws="none", log_config=None)


@service_cli.command("worker")
@friendly
def worker(
    config: ConfigOption = None,
    interval_s: IntervalOption = None,
    job: OnlyOption = None,
) -> None:
    """Run the scheduler alone (no HTTP). Without a configuration only the jobs that need no
    chain run (webhooks, reconciliation, checkpoints, cleanup)."""
    from config.logging import ensure_logging

    ensure_logging()
    scheduler, _, _, _ = _scheduler(config, interval_s, job, required=False)
    from config.runtime import settle_batch_process

    settle_batch_process()  # No HTTP here: a batch process (watchers, processors, jobs).
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    scheduler.start()
    console.print(f"worker running {len(scheduler.jobs)} jobs: "
                  + ", ".join(j.name for j in scheduler.jobs), highlight=False)
    while not stop.wait(0.5):
        pass
    err_console.print("stopping: waiting for running job steps", highlight=False)
    scheduler.stop()
    s = scheduler.stats
    console.print(f"stopped: runs {sum(s.runs.values())}, errors {sum(s.errors.values())}, "
                  f"skipped {sum(s.skipped.values())} (held by another process)",
                  highlight=False)


# --- webhooks ---------------------------------------------------------------------------------


EventsOption = Annotated[list[str] | None, typer.Option(
    "--events", help="Only these event types (repeatable or comma-separated; default: all). "
                     "See docs/webhooks.md.")]


def _event_types(values: list[str] | None) -> list[str] | None:
    if not values:
        return None
    return [t.strip() for v in values for t in v.split(",") if t.strip()]


@webhooks_app.command("endpoint")
@friendly
@audited("webhook_endpoint.create", ("client",), details=("url", "alerts", "events"))
def endpoint(
    client: Annotated[str, typer.Argument(help="API client name.")],
    url: Annotated[str, typer.Argument(help="Where to POST its events.")],
    alerts: Annotated[bool, typer.Option(help="Also send alert.* events here.")] = False,
    events: EventsOption = None,
) -> None:
    """Set a client's webhook URL (its newest endpoint, or a first one); prints the new
    signing secret once."""
    from api.outbox import set_endpoint
    from config.database import get_engine

    made = set_endpoint(get_engine(), client, url, alerts=alerts,
                        event_types=_event_types(events))
    err_console.print(f"webhooks of {client} go to {made.url} (endpoint {made.id}, "
                      f"{'all events' if made.event_types is None else ', '.join(made.event_types)}"
                      "); signing secret (shown once):", highlight=False, soft_wrap=True)
    console.print(made.secret, highlight=False, markup=False, soft_wrap=True)


@webhooks_app.command("endpoints")
@friendly
def endpoints(
    client: Annotated[str | None, typer.Option(help="Only this API client's.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="JSON, as the admin API lists them.")]
    = False,
) -> None:
    """Every webhook endpoint (never its secret), oldest first."""
    import json

    from api import outbox
    from api.routes.webhooks import endpoint_view
    from config.database import get_engine
    from config.uow import UnitOfWork

    with UnitOfWork(get_engine()) as uow:
        rows = outbox.list_endpoints(uow, client_name=client, limit=10_000)
    views = [endpoint_view(r) for r in rows]
    if as_json:
        console.print_json(json.dumps([v.model_dump(mode="json") for v in views]))
        return
    table = Grid(title="webhook endpoints")
    for column in ("id", "client", "url", "events", "alerts", "state", "old secret valid until"):
        table.add_column(column)
    for v in views:
        table.add_row(v.id, v.client, v.url, "all" if v.events is None else ",".join(v.events),
                      "yes" if v.alerts else "no", v.state,
                      "" if v.previous_secret_expires_at is None
                      else v.previous_secret_expires_at.isoformat(timespec="seconds"))
    print_grid(console, table)


@webhooks_app.command("rotate")
@friendly
@audited("webhook_endpoint.rotate", ("endpoint_id",))
def rotate(
    endpoint_id: Annotated[int, typer.Argument(min=1, help="Endpoint id (custody webhooks "
                                                           "endpoints).")],
) -> None:
    """A new signing secret (printed once); the old one stays valid, and deliveries carry both
    signatures, for 24 hours."""
    from api import outbox
    from config.database import get_engine
    from config.uow import UnitOfWork

    with UnitOfWork(get_engine()) as uow:
        row, secret = outbox.rotate_endpoint(uow, endpoint_id, datetime.now(UTC))
        uow.commit()
    assert row.previous_secret_expires_at is not None
    err_console.print(f"endpoint {row.id} of {row.client_name}: the old secret stays valid "
                      f"until {row.previous_secret_expires_at.isoformat(timespec='seconds')}; "
                      "new signing secret (shown once):", highlight=False, soft_wrap=True)
    console.print(secret, highlight=False, markup=False, soft_wrap=True)


@webhooks_app.command("disable")
@friendly
@audited("webhook_endpoint.disable", ("endpoint_id",))
def disable(
    endpoint_id: Annotated[int, typer.Argument(min=1, help="Endpoint id.")],
) -> None:
    """Send nothing more to the endpoint (its events stay in GET /v1/events; a replay does
    not reach it)."""
    from api import outbox
    from config.database import get_engine
    from config.uow import UnitOfWork

    with UnitOfWork(get_engine()) as uow:
        row = outbox.disable_endpoint(uow, endpoint_id, datetime.now(UTC))
        uow.commit()
    console.print(f"endpoint {row.id} of {row.client_name} disabled", highlight=False)


@webhooks_app.command("replay")
@friendly
@audited("webhook_event.replay", ("event", "client"),
         details=("since", "until", "failed", "deliver", "by"))
def replay(
    event: Annotated[list[str] | None, typer.Option(help="Event id (repeatable).")] = None,
    client: Annotated[str | None, typer.Option(help="Every event of this client.")] = None,
    since: Annotated[str | None, typer.Option(help="Events written at or after (ISO 8601).")]
    = None,
    until: Annotated[str | None, typer.Option(help="Events written before (ISO 8601).")] = None,
    failed: Annotated[bool, typer.Option("--failed", help="Only deliveries that gave up.")]
    = False,
    deliver: Annotated[bool, typer.Option(help="Deliver now (else the worker does).")] = True,
    by: Annotated[str, typer.Option(help="Who replays (logged).")] = "cli",
) -> None:
    """Send events again (same event id, same body): receivers dedupe by the id."""
    from api.outbox import deliver_due
    from api.outbox import replay as run_replay
    from config.database import get_engine

    engine = get_engine()
    queued = run_replay(engine, event_ids=event or (), client_name=client,
                        since=_parse_time(since), until=_parse_time(until), failed_only=failed,
                        actor=by)
    console.print(f"{queued} deliveries queued", highlight=False)
    if not deliver or not queued:
        return
    delivered = retried = failed_n = 0
    for _ in range(max(1, queued // 50 + 1)):  # bounded: each batch takes up to 50
        report = deliver_due(engine)
        delivered, retried = delivered + report.delivered, retried + report.retried
        failed_n += report.failed
        if report.attempted == 0:
            break
    console.print(f"{delivered} delivered, {retried} to retry, {failed_n} failed",
                  highlight=False)


@webhooks_app.command("log")
@friendly
def delivery_log(
    event: Annotated[str | None, typer.Option(help="Only this event id.")] = None,
    limit: Annotated[int, typer.Option(min=1, max=10_000, help="Rows.")] = 50,
    as_json: JsonOption = False,
) -> None:
    """The newest delivery attempts and replays (--json: a list of {at, event_id, type,
    client, attempt, outcome, status, error})."""
    from api.outbox import delivery_log as read_log
    from config.database import get_engine

    with get_engine().connect() as conn:
        rows = read_log(conn, event_id=event, limit=limit)
    if as_json:
        from api.cli_reads import print_report

        print_report([{"at": r.at, "event_id": r.event_id, "type": r.event_type,
                       "client": r.client_name, "attempt": r.attempt_no, "outcome": r.outcome,
                       "status": r.status_code, "error": r.error} for r in rows])
        return
    table = Grid(title="webhook deliveries (newest first)")
    for column in ("at", "event", "type", "client", "attempt", "outcome", "status", "error"):
        table.add_column(column)
    for r in rows:
        table.add_row(r.at.isoformat(timespec="seconds"), r.event_id, r.event_type,
                      r.client_name, str(r.attempt_no), r.outcome,
                      "" if r.status_code is None else str(r.status_code), r.error or "")
    print_grid(console, table)


@service_cli.command("demo")
@friendly
def demo(
    port: Annotated[int, typer.Option(min=1, max=65535,
                                      help="API port (a free one if it is taken).")] = 8000,
) -> None:
    """The whole engine on a fresh machine: embedded PostgreSQL, anvil, deposits through a
    reorg, a withdrawal, webhooks; then the API stays up until Ctrl-C."""
    from config.logging import ensure_logging
    from devtools.demo import run_demo

    ensure_logging("WARNING")  # the demo tells its story on stdout
    run_demo(console, port=port)
