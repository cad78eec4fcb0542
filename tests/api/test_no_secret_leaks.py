"""No secret in anything the engine prints, logs or answers (issue 19).

One demo-like run against anvil: the API and the scheduler in one server, the chain reached
through a node provider's kind of URL (its API key in the path and in the query), deposit
addresses from the development mnemonic, a hot wallet signing the payout, sweeps signed with
the mnemonic's keys, webhooks delivered and signed, a console sign-in, refusals of every kind,
``/metrics``, the node going down (errors with its URL in them), then the CLI's commands. Every
byte of output is collected: each log record at DEBUG as logged (``caplog``: message and
traceback, before any redaction) and as written (the JSON lines), the process's stdout and
stderr, every HTTP answer, every delivered webhook, the CLI's stdout and stderr, and a
``pg_dump`` of the database. None may hold any secret, nor its hex or base64 or URL-encoded
form. The only places a secret may appear are the answers that exist to hand it over once (a
new webhook endpoint's secret), which are left out of the scan.
"""

from __future__ import annotations

import base64
import io
import json
import logging
import os
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import quote, quote_plus

import httpx
import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from api.app import create_app
from api.auth import create_key
from api.jobs import Intervals, Scheduler, build_jobs, run_locked
from chains.addresses import MnemonicAddressSource
from config.chains import parse_chains_config
from config.encryption import CONSOLE_PURPOSE, KEY_ENV, keyring
from config.logging import ENGINE_LOGGERS, setup_logging
from config.sweeps import parse_sweeps_config
from config.withdrawals import parse_withdrawals_config
from devtools.anvil import DEV_MNEMONIC
from devtools.e2e import (
    CHAIN,
    DESTINATION,
    HOT_KEY_ENV,
    MNEMONIC_ENV,
    Devchain,
    Scenario,
    ServerThread,
    WebhookReceiver,
)
from migrations.snapshot import pg_dump_binary

CONFIRMATIONS = 3
#: The node provider's API key, in the path and in the query of the RPC URL.
PATH_KEY = "a1b2c3d4e5f60718293a4b5c6d7e8f90"
QUERY_KEY = "Zq9Xw8Vu7Ts6Rp5Qo4Nm3Lk2"
RUN = "from api.cli import app; app(prog_name='custody')"


class KeyedNode:
    """A node provider in front of anvil: JSON-RPC only at ``/v3/<key>?apikey=<key>``."""

    def __init__(self, upstream: str) -> None:
        path = f"/v3/{PATH_KEY}?apikey={QUERY_KEY}"

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                if self.path != path:
                    self.send_response(404)
                    self.end_headers()
                    return
                request = urllib.request.Request(upstream, data=body, headers={
                    "Content-Type": "application/json"})
                with urllib.request.urlopen(request, timeout=30) as answer:  # noqa: S310
                    data = answer.read()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass  # The test's own stand-in: its access lines are not the engine's output.

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}{path}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        """The node goes down: connections are refused from now on."""
        self.server.shutdown()
        self.server.server_close()


class Output:
    """Everything collected, by where it came from."""

    def __init__(self) -> None:
        self.items: list[tuple[str, str]] = []

    def add(self, where: str, text: str) -> None:
        self.items.append((where, text))

    def answer(self, response: httpx.Response) -> None:
        """Every HTTP answer, but those that hand a new webhook secret over (once)."""
        response.read()
        path = response.request.url.path
        hands_over = response.request.method == "POST" and response.is_success and (
            path == "/v1/admin/webhook-endpoints" or path.endswith("/rotate"))
        if not hands_over:
            self.add(f"HTTP {response.request.method} {path} {response.status_code}",
                     json.dumps(dict(response.headers)) + "\n" + response.text)


@pytest.fixture
def logged() -> Iterator[io.StringIO]:
    """The process's logging as a service sets it up, at DEBUG (JSON lines), into a buffer."""
    root = logging.getLogger()
    level, handlers = root.level, list(root.handlers)
    engine_levels = {n: logging.getLogger(n).level for n in ENGINE_LOGGERS}
    stream = io.StringIO()
    handler = setup_logging("json", level="DEBUG", stream=stream)
    try:
        yield stream
    finally:
        root.removeHandler(handler)
        root.handlers[:] = handlers
        root.setLevel(level)
        for name, was in engine_levels.items():
            logging.getLogger(name).setLevel(was)


def forms(value: str) -> set[str]:
    """``value`` and the forms it could leak in: without a 0x, hex of its bytes, base64,
    URL-encoded, JSON-escaped."""
    found = {value, value.removeprefix("0x"), value.encode().hex(),
             base64.b64encode(value.encode()).decode(), quote(value, safe=""), quote_plus(value),
             json.dumps(value)[1:-1]}
    return {f for f in found if len(f) >= 12}


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", RUN, *args], env=env, text=True,
                          capture_output=True, timeout=180)


@pytest.mark.slow
@pytest.mark.anvil
def test_no_secret_in_any_log_answer_or_output(
        engine: Engine, database_url: str, devchain: Devchain, tmp_path: Path,
        caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str],
        logged: io.StringIO, monkeypatch: pytest.MonkeyPatch) -> None:
    caplog.set_level(logging.DEBUG)
    out = Output()
    node = KeyedNode(devchain.node.url)
    text = devchain.config_toml(confirmations=CONFIRMATIONS, sweeps=True).replace(
        devchain.node.url, node.url)
    assert node.url in text
    config = tmp_path / "custody.toml"
    config.write_text(text)
    monkeypatch.setenv(HOT_KEY_ENV, devchain.hot_key)
    monkeypatch.setenv(MNEMONIC_ENV, DEV_MNEMONIC)
    import tomllib

    data = tomllib.loads(text)
    chains = parse_chains_config(data)
    wcfg = parse_withdrawals_config(data, chains)
    scfg = parse_sweeps_config(data, chains, wcfg)

    key = create_key(engine, "acme", "client").key
    admin_key = create_key(engine, "ops", "admin").key
    support_key = create_key(engine, "sam", "support").key
    receiver = WebhookReceiver().start()
    scheduler = Scheduler(engine, build_jobs(engine, chains, wcfg, scfg=scfg,
                                             intervals=Intervals.uniform(0.1)))
    server = ServerThread(create_app(engine, chains, wcfg, lifespans=[scheduler.lifespan()],
                                     sweeps_config=scfg))
    hooks = {"response": [out.answer]}
    webhook_secrets: list[str] = []
    try:
        with httpx.Client(base_url=server.url, timeout=30, event_hooks=hooks,
                          headers={"Authorization": f"Bearer {key}"}) as http, \
                httpx.Client(base_url=server.url, timeout=30, event_hooks=hooks,
                             headers={"Authorization": f"Bearer {admin_key}"}) as admin, \
                httpx.Client(base_url=server.url, timeout=30, event_hooks=hooks) as anonymous:
            made = admin.post("/v1/admin/webhook-endpoints", headers={
                "Idempotency-Key": "hook-1"}, json={"client": "acme", "url": receiver.url})
            assert made.status_code == 201, made.text
            webhook_secrets.append(made.json()["secret"])
            rotated = admin.post(f"/v1/admin/webhook-endpoints/{made.json()['id']}/rotate",
                                 headers={"Idempotency-Key": "hook-2"})
            assert rotated.status_code == 200, rotated.text
            webhook_secrets.append(rotated.json()["secret"])
            receiver.secret = webhook_secrets[-1]

            story = Scenario(http, admin, devchain, CONFIRMATIONS, progress=print)
            story.run()
            story.sweep_all()
            assert receiver.wait_for(lambda r: "withdrawal.settled" in r.types(),
                                     timeout_s=20), receiver.types()
            _refusals(http, admin, anonymous, story, key, admin_key, support_key)
            out.add("GET /metrics", admin.get("/metrics").text)

            node.stop()  # The node is down: its URL (and key) is in every transport error.
            for step in range(3):
                down = admin.get("/v1/admin/holdings", params={"chain": CHAIN})
                assert down.status_code >= 400, down.text
                time.sleep(0.3 * step)
            jobs = {j.name: j for j in build_jobs(engine, chains, wcfg, only=(
                "deposits.watch", "withdrawals.process"))}
            for job in jobs.values():
                run_locked(engine, job)
            out.add("GET /metrics (node down)", admin.get("/metrics").text)
    finally:
        server.stop()
        receiver.stop()
    for request in receiver.requests:
        out.add(f"webhook {request.event_type}", request.signature + "\n"
                + request.body.decode())

    env = {**os.environ, "CUSTODY_DATABASE_URL": database_url, "CUSTODY_CONFIG": str(config),
           "COLUMNS": "200", "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    withdrawal_id = str(story.withdrawal["id"])
    for args in (("verify",), ("webhooks", "endpoints"), ("webhooks", "log"), ("keys", "list"),
                 ("secrets", "status"), ("withdrawal", "show", withdrawal_id),
                 ("holdings", "--chain", CHAIN, "--no-progress"), ("config", "check"),
                 ("--log-format", "text", "holdings", "--json"),
                 ("withdrawal", "show", "999999"), ("balances", "nobody")):
        done = cli({**env, "CUSTODY_LOG_LEVEL": "DEBUG"}, *args)
        out.add(f"custody {' '.join(args)} (exit {done.returncode})",
                done.stdout + "\n" + done.stderr)

    parsed = sa.make_url(database_url).set(drivername="postgresql")
    out.add("pg_dump", subprocess.run(
        [pg_dump_binary(), f"--dbname={parsed.render_as_string(hide_password=False)}"],
        check=True, capture_output=True, text=True, timeout=120).stdout)
    captured = capsys.readouterr()
    out.add("stdout", captured.out)
    out.add("stderr", captured.err)
    out.add("log lines", logged.getvalue())
    for record in caplog.records:
        out.add(f"log record {record.name}", record.getMessage() + "\n" + (
            logging.Formatter().formatException(record.exc_info) if record.exc_info else "")
            + json.dumps({k: v for k, v in vars(record).items() if k not in (
                "msg", "args", "exc_info")}, default=str))

    secrets = _secrets(engine, devchain, key, admin_key, support_key, webhook_secrets)
    leaks = [(name, where) for name, value in secrets.items() for form in forms(value)
             for where, text in out.items if form in text]
    assert not leaks, sorted(set(leaks))
    # The scan saw the run: the engine's lines, the refusals and the node's errors.
    everything = "\n".join(text for _, text in out.items)
    assert "custody.ledger" in everything and "withdrawal.settled" in everything
    assert f"http://127.0.0.1:{node.port}/[redacted]" in everything
    assert "rpc_unavailable" in everything and "unauthenticated" in everything


def _refusals(http: httpx.Client, admin: httpx.Client, anonymous: httpx.Client,
              story: Scenario, key: str, admin_key: str, support_key: str) -> None:
    """The error paths: bad keys, bad input, a reused Idempotency-Key, a refused withdrawal,
    a console sign-in with a wrong key and then the right one."""
    bob = story.users["bob"]
    for bad in (key + "x", key[:-4], admin_key.replace("cust_", "cust_0"), "Bearer " + key):
        r = anonymous.get(f"/v1/users/{bob}/balances", headers={"Authorization": f"Bearer {bad}"})
        assert r.status_code == 401, r.text
    r = anonymous.get(f"/v1/users/{bob}/balances", headers={"Authorization": key})
    assert r.status_code == 401
    body = {"asset": "USDC", "chain": CHAIN, "to": DESTINATION, "amount": "1"}
    assert http.post(f"/v1/users/{bob}/withdrawals", headers={
        "Idempotency-Key": f"demo-withdrawal-{bob}"}, json=body).status_code == 422
    too_much = {**body, "amount": str(10**15)}
    assert http.post(f"/v1/users/{bob}/withdrawals", headers={
        "Idempotency-Key": uuid.uuid4().hex}, json=too_much).status_code == 422
    assert http.post(f"/v1/users/{bob}/withdrawals", headers={
        "Idempotency-Key": uuid.uuid4().hex}, json={**body, "to": "0x" + "zz" * 20}
    ).status_code == 422
    assert admin.post("/v1/admin/webhook-endpoints", headers={"Idempotency-Key": "hook-x"},
                      json={"client": "acme", "url": f"ftp://{key}"}).status_code == 422
    form = anonymous.get("/console/login").text
    token = form.split('name="csrf" value="', 1)[1].split('"', 1)[0]
    wrong = anonymous.post("/console/login", data={"key": support_key + "x", "csrf": token})
    assert wrong.status_code in (401, 403), wrong.text
    form = anonymous.get("/console/login").text
    token = form.split('name="csrf" value="', 1)[1].split('"', 1)[0]
    signed = anonymous.post("/console/login", data={"key": support_key, "csrf": token})
    assert signed.status_code == 303, signed.text
    assert anonymous.get(f"/console/users/{bob}").status_code == 200


def _secrets(engine: Engine, devchain: Devchain, key: str, admin_key: str, support_key: str,
             webhook_secrets: list[str]) -> dict[str, str]:
    """Every secret of the run, by a name for the failure message."""
    with engine.connect() as conn:
        sealed = conn.execute(sa.text("SELECT secret_sealed FROM console_secrets")).scalar_one()
    source = MnemonicAddressSource(DEV_MNEMONIC, account=1)
    found = {
        "dev mnemonic": DEV_MNEMONIC,
        "hot wallet key": devchain.hot_key,
        "RPC URL": f"/v3/{PATH_KEY}?apikey={QUERY_KEY}",
        "RPC path key": PATH_KEY,
        "RPC query key": QUERY_KEY,
        "secrets key": os.environ[KEY_ENV],
        "secrets key (hex)": base64.b64decode(os.environ[KEY_ENV]).hex(),
        "console cookie key": keyring().open(sealed, CONSOLE_PURPOSE),
    }
    for name, value in (("client", key), ("admin", admin_key), ("support", support_key)):
        found[f"{name} API key"] = value
        found[f"{name} API key's secret part"] = value.split("_", 2)[2]
    for n, secret in enumerate(webhook_secrets):
        found[f"webhook secret {n}"] = secret
        found[f"webhook secret {n} (hex part)"] = secret.removeprefix("whsec_")
    for index in range(2):  # the deposit addresses' keys (the sweeper signs with them)
        found[f"deposit key {index}"] = "0x" + bytes(source.account_for(index).key).hex()
    return found
