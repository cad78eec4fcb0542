"""``custody demo``: the whole engine on a fresh machine.

It starts the embedded PostgreSQL (or uses ``CUSTODY_DATABASE_URL``'s server) with a fresh
``custody_demo`` database, an anvil node, deploys the test token, writes a configuration
(``var/demo/custody.toml``), then runs the API and the scheduler in this process (as
``custody serve`` does) and, over HTTP: declares the company's capital (10 ETH for gas, 1,000
USDC of payout liquidity) and sends it on chain to the empty hot wallet, creates two users,
deposits ETH to one and USDC to the other, reorgs the USDC deposit out before finality (it
lands again), mines to finality so both deposits are credited and both fundings booked as
capital, withdraws 30 USDC (settled with a 0.40 fee and 1.60 refunded), sweeps both deposit
addresses to the hot wallet (the USDC after a gas top-up from the hot wallet is final), and
shows the holdings of all our addresses against custody + treasury, the treasury, each user's
balances, the reorged deposit's timeline and the signed webhooks a local receiver got.
Without ``CUSTODY_SECRETS_KEY`` the webhook and console secrets are sealed under the development
key file beside the embedded data directory (``var/pg-secrets.key``, generated once, said so in a
warning line), which the export lines name for another shell.
The API then stays up (URL, docs URL and a demo API key printed) until Ctrl-C, which stops
everything the demo started. Each run starts from a fresh database and a fresh chain, so a
second run works like the first.
"""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path
from typing import Any

from rich.console import Console

from api.render import Grid, print_grid
from ledger.model import format_amount

DEMO_DATABASE = "custody_demo"
CONFIRMATIONS = 6


def _fresh_database() -> str:
    """Drop and recreate the demo database on the configured (or embedded) server; migrate."""
    import migrations
    from config.database import database_url, owner_engine, with_database

    server = database_url()
    owner = owner_engine(server)
    try:
        with owner.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{DEMO_DATABASE}" WITH (FORCE)')
            conn.exec_driver_sql(f'CREATE DATABASE "{DEMO_DATABASE}"')
    finally:
        owner.dispose()
    url = with_database(server, DEMO_DATABASE)
    migrations.upgrade(url)
    return url


def _port(preferred: int) -> int:
    import socket

    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", preferred))
            return preferred
        except OSError:
            from devtools.anvil import free_port

            return free_port()


def run_demo(console: Console, *, port: int = 8000) -> None:
    """Run the demo, then serve until Ctrl-C (or SIGTERM); stop everything it started."""
    from devtools.e2e import start_devchain

    stop = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stop.set())
                for sig in (signal.SIGINT, signal.SIGTERM)}
    started: list[Any] = []  # things to stop, in reverse order
    try:
        with console.status("starting PostgreSQL and creating the demo database"):
            url = _fresh_database()
        console.print(f"[green]✓[/] database {DEMO_DATABASE} migrated")
        with console.status("starting anvil and deploying the test token"):
            chain = start_devchain()
            started.append(chain.stop)
        console.print(f"[green]✓[/] anvil at {chain.node.url}; USDC token "
                      f"{chain.token.address}; hot wallet {chain.hot}")
        _run(console, url, chain, port, stop, started)
    except KeyboardInterrupt:
        console.print("interrupted")
    finally:
        for undo in reversed(started):
            try:
                undo()
            except Exception as exc:  # noqa: BLE001 - keep stopping the rest
                console.print(f"[yellow]while stopping: {exc}[/]")
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _run(console: Console, url: str, chain: Any, port: int, stop: threading.Event,
         started: list[Any]) -> None:
    import tomllib

    import httpx

    from api.app import create_app
    from api.auth import create_key
    from api.jobs import Intervals, Scheduler, build_jobs
    from api.outbox import set_endpoint
    from config.chains import parse_chains_config
    from config.database import make_engine
    from config.encryption import use_dev_key_file
    from config.sweeps import parse_sweeps_config
    from config.withdrawals import parse_withdrawals_config
    from devtools.anvil import DEV_MNEMONIC
    from devtools.e2e import HOT_KEY_ENV, MNEMONIC_ENV, Scenario, ServerThread, WebhookReceiver

    text = chain.config_toml(confirmations=CONFIRMATIONS, sweeps=True)
    path = Path("var/demo/custody.toml")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    console.print(f"[green]✓[/] configuration written to {path} "
                  f"(finality: {CONFIRMATIONS} confirmations)")
    data = tomllib.loads(text)
    chains = parse_chains_config(data)
    wcfg = parse_withdrawals_config(data, chains)
    scfg = parse_sweeps_config(data, chains, wcfg)
    os.environ[HOT_KEY_ENV] = chain.hot_key  # a throwaway dev key, read from the environment
    os.environ[MNEMONIC_ENV] = DEV_MNEMONIC  # the sweeper signs for the deposit addresses
    # The webhook and console secrets are sealed under CUSTODY_SECRETS_KEY if set, else under
    # the development key file beside the embedded data directory (said so once).
    use_dev_key_file()
    engine = make_engine(url)
    started.append(engine.dispose)
    key = create_key(engine, "demo", "client").key
    admin_key = create_key(engine, "demo-operator", "admin").key
    support_key = create_key(engine, "demo-support", "support").key
    receiver = WebhookReceiver().start()
    started.append(receiver.stop)
    receiver.secret = set_endpoint(engine, "demo", receiver.url).secret

    # Every job four times a second, but the proof-of-reserves report (its own interval):
    # the story takes one when its money has settled.
    scheduler = Scheduler(engine, build_jobs(engine, chains, wcfg, scfg=scfg,
                                             intervals=Intervals.uniform(0.25)))
    app = create_app(engine, chains, wcfg, lifespans=[scheduler.lifespan()],
                     sweeps_config=scfg)
    server = ServerThread(app, port=_port(port))
    started.append(server.stop)
    console.print(f"[green]✓[/] API and scheduler running at {server.url} "
                  f"({len(scheduler.jobs)} jobs)")

    http = httpx.Client(base_url=server.url, timeout=30,
                        headers={"Authorization": f"Bearer {key}"})
    started.append(http.close)
    admin = httpx.Client(base_url=server.url, timeout=30,
                         headers={"Authorization": f"Bearer {admin_key}"})
    started.append(admin.close)
    with console.status("") as status:
        def progress(line: str) -> None:
            if line.startswith("waiting: "):
                status.update(line[len("waiting: "):] + " ...")
            else:
                console.print(f"[green]✓[/] {line}", highlight=False)

        story = Scenario(http, admin, chain, CONFIRMATIONS, progress=progress, timeout_s=120,
                         cancel=stop)
        story.run()
        story.sweep_all()
        status.update("waiting for the webhooks to be delivered ...")
        receiver.wait_for(lambda r: "withdrawal.settled" in r.types(), timeout_s=15)

    _report(console, story, receiver)
    _reserves(console, engine, chains, wcfg, story)
    console.rule("the API keeps running")
    console.print(f"API:          {server.url}", highlight=False)
    console.print(f"docs:         {server.url}/docs", highlight=False)
    console.print(f"demo API key: {key}", highlight=False, soft_wrap=True)
    console.print(f"support key:  {support_key} (read-only staff: any user's balances, "
                  "deposits, withdrawals, timelines)", highlight=False, soft_wrap=True)
    console.print(f"console:      {server.url}/console (sign in with the support key "
                  f"{support_key}, or the admin key {admin_key})", highlight=False,
                  soft_wrap=True)
    console.print(f"try:          curl -H 'Authorization: Bearer {key}' "
                  f"{server.url}/v1/users/{story.users['bob']}/balances", highlight=False,
                  soft_wrap=True)
    _exports(console, url, path, chain.hot_key, story.users["bob"])
    console.print("Press Ctrl-C to stop the API, the scheduler, anvil and PostgreSQL.")
    while not stop.wait(0.5):
        pass
    console.print("stopping ...")


def export_lines(url: str, config: Path, hot_key: str) -> list[str]:
    """The ``export`` lines that let ``custody`` in another shell, from any directory, reach
    the demo's database (not the embedded server's default one), its configuration and the
    development keys it signs with (anvil's throwaway ones). A password in the database URL
    is shown as ``***``, to be typed in."""
    import shlex

    import sqlalchemy as sa

    from config.encryption import KEY_FILE_ENV, use_dev_key_file
    from devtools.anvil import DEV_MNEMONIC
    from devtools.e2e import HOT_KEY_ENV, MNEMONIC_ENV

    parsed = sa.make_url(url)
    shown = parsed.render_as_string(hide_password=bool(parsed.password))
    values = {"CUSTODY_DATABASE_URL": shown, "CUSTODY_CONFIG": str(config.resolve()),
              HOT_KEY_ENV: hot_key, MNEMONIC_ENV: DEV_MNEMONIC}
    # The webhook and console secrets are sealed under the development key file (never the key
    # itself in the output); a CUSTODY_SECRETS_KEY of the user's is theirs to set.
    key_file = use_dev_key_file()
    if key_file is not None:
        values[KEY_FILE_ENV] = str(key_file)
    return [f"export {name}={shlex.quote(value)}" for name, value in values.items()]


def _exports(console: Console, url: str, config: Path, hot_key: str, bob: str) -> None:
    console.print("the CLI in another shell (while this one runs): paste these lines, then "
                  f"for example `custody verify` or `custody addresses list {bob}`",
                  highlight=False, markup=False, soft_wrap=True)
    for line in export_lines(url, config, hot_key):
        console.print(line, highlight=False, markup=False, soft_wrap=True)


def _reserves(console: Console, engine: Any, chains: Any, wcfg: Any, story: Any) -> None:
    """A proof-of-reserves report of the settled demo (``api.jobs.reserves_report``, what the
    job runs), its figures, the HTML page, and alice's proof checked offline."""
    from datetime import UTC, datetime

    from api.jobs import reserves_report
    from config.uow import UnitOfWork
    from reserves import merkle, service
    from reserves.html import render_report

    report_id, _ = reserves_report(engine, chains, wcfg, None, datetime.now(UTC))
    if report_id is None:
        console.print("[red]the proof-of-reserves report was refused (see the cases)[/]")
        return
    with UnitOfWork(engine) as uow:
        doc = service.report_document(uow, report_id)
        history = service.history(uow, limit=100)
        proof = service.user_proof(uow, story.users["alice"], report_id)
    root = doc["liabilities"]["root"]
    table = Grid(title=f"proof of reserves, report {report_id}: liabilities root {root}")
    for column in ("asset", "liabilities", "on chain", "difference", "ratio"):
        table.add_column(column, justify="left" if column == "asset" else "right")
    for a in doc["assets"]:
        table.add_row(a["asset"], format_amount(int(a["liabilities"]), a["scale"]),
                      format_amount(int(a["on_chain"]), a["scale"]),
                      format_amount(int(a["difference"]), a["scale"]), a["ratio"] or "-")
    print_grid(console, table)
    page = Path("var/demo/reserves.html")
    page.write_text(render_report(doc, list(reversed(history))), encoding="utf-8")
    signed = sum(1 for a in doc["addresses"] if a["signature"])
    verified = merkle.verify(proof, root)
    held = ", ".join(f"{format_amount(v, proof['scales'][a])} {a}"
                     for a, v in verified.balances.items() if v)
    console.print(f"{signed} of {len(doc['addresses'])} addresses signed the report; alice's "
                  f"inclusion proof verifies ({held}); the report as a page: {page}",
                  highlight=False, soft_wrap=True)


def _report(console: Console, story: Any, receiver: Any) -> None:
    holdings = story.holdings()
    table = Grid(title=f"holdings of all our addresses at block {holdings['block_number']} "
                        f"(final under {holdings['finality']})")
    for column in ("asset", "on chain", "custody", "treasury", "custody + treasury",
                   "difference"):
        table.add_column(column, justify="left" if column == "asset" else "right")
    for a in holdings["assets"]:
        table.add_row(a["asset"], a["on_chain"]["decimal"], a["custody"]["decimal"],
                      a["treasury"]["decimal"], a["custody_plus_treasury"]["decimal"],
                      a["difference"]["decimal"])
    print_grid(console, table)
    table = Grid(title="treasury (company money) and holdings at the finalized block")
    for column in ("asset", "treasury", "custody", "on chain, all our addresses",
                   "custody + treasury", "difference"):
        table.add_column(column, justify="left" if column == "asset" else "right")
    for row in story.treasury():
        table.add_row(row["asset"], row["treasury"]["decimal"], row["custody"]["decimal"],
                      row["onchain"]["decimal"], row["custody_plus_treasury"]["decimal"],
                      row["difference"]["decimal"])
    print_grid(console, table)
    for name in ("alice", "bob"):
        table = Grid(title=f"{name} ({story.users[name]})")
        for column in ("asset", "posted", "pending in", "pending out", "available"):
            table.add_column(column, justify="left" if column == "asset" else "right")
        for b in story.balances(name):
            table.add_row(b["asset"], b["posted"]["decimal"], b["pending_incoming"]["decimal"],
                          b["pending_outgoing"]["decimal"], b["available"]["decimal"])
        print_grid(console, table)
    timeline = story.timeline("bob USDC")
    table = Grid(title=f"timeline of bob's USDC deposit {timeline['tx_hash']}")
    for column in ("event", "state", "block", "confirmations", "ledger tx"):
        table.add_column(column)
    for e in timeline["transfers"][0]["events"]:
        table.add_row(e["event"], e["state"], str(e["block_number"] or ""),
                      str(e["confirmations"] or ""), str(e["ledger_transaction_id"] or ""))
    print_grid(console, table)
    accepted = receiver.accepted()
    valid = all(r.signature_valid for r in receiver.requests)
    console.print(f"webhooks received: {len(accepted)} events "
                  f"({'all signatures valid' if valid else 'INVALID SIGNATURES'}): "
                  + ", ".join(r.event_type for r in accepted.values()), highlight=False)
