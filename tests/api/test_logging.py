"""Logs: one JSON object per line, a correlation id from the request or job step to the ledger
transaction it wrote, and no secret in any line (config.logging)."""

from __future__ import annotations

import io
import json
import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
import uvicorn
from sqlalchemy.engine import Engine

from api.app import create_app
from api.auth import create_key
from api.jobs import Job, build_jobs, run_locked
from config.chains import ChainsConfig
from config.logging import ENGINE_LOGGERS, correlated, setup_logging
from config.uow import UnitOfWork
from config.withdrawals import WithdrawalsConfig
from devtools.anvil import DEV_MNEMONIC
from devtools.config import dev_config, dev_configs
from ledger import service as ledger
from ledger.model import Entry, credit, debit
from tests.api.conftest import DEST
from tests.withdrawals.conftest import TEST_HOT_KEY_ENV, fund, open_book

#: A name that says nothing about a secret: only the configuration (mnemonic_env) says it is.
WORDS_ENV = "CUSTODY_SIGNALS_WORDS"
#: anvil's well-known key of its dev account 1, the development hot wallet.
HOT_KEY = "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d"
DB_PASSWORD = "hunter2-not-for-logs"
WEBHOOK_SECRET = "whsec_" + "5e" * 32
T0 = datetime(2026, 1, 1, tzinfo=UTC)


@dataclass
class Captured:
    """Every line the process logged while the test ran."""

    stream: io.StringIO

    def lines(self) -> list[str]:
        return [line for line in self.stream.getvalue().splitlines() if line]

    def records(self) -> list[dict[str, Any]]:
        docs = []
        for line in self.lines():
            doc = json.loads(line)  # every line is one JSON object
            assert isinstance(doc, dict), line
            assert {"time", "level", "logger", "message"} <= doc.keys(), line
            docs.append(doc)
        return docs


@pytest.fixture
def captured() -> Iterator[Captured]:
    """The process's logging set up as the CLI sets it up (JSON, INFO), into a buffer."""
    root = logging.getLogger()
    level, handlers = root.level, list(root.handlers)
    engine_levels = {n: logging.getLogger(n).level for n in ENGINE_LOGGERS}
    stream = io.StringIO()
    handler = setup_logging("json", level="INFO", stream=stream)
    try:
        yield Captured(stream)
    finally:
        root.removeHandler(handler)
        root.handlers[:] = handlers
        root.setLevel(level)
        for name, was in engine_levels.items():
            logging.getLogger(name).setLevel(was)


def test_libraries_log_warnings_only_and_the_engine_keeps_its_info(captured: Captured) -> None:
    for name in ("web3.providers.HTTPProvider", "alembic.runtime.plugins", "asyncio",
                 "urllib3.connectionpool", "apscheduler.executors.default", "any.other.lib"):
        logging.getLogger(name).info("noise from %s", name)
        logging.getLogger(name).debug("debug noise from %s", name)
    logging.getLogger("any.other.lib").warning("a library's warning")
    logging.getLogger("custody.jobs").info("an engine line")
    logging.getLogger("withdrawals.processor").info("another engine line")
    logging.getLogger("custody.jobs").debug("below the chosen level")
    assert [(r["logger"], r["message"]) for r in captured.records()] == [
        ("any.other.lib", "a library's warning"), ("custody.jobs", "an engine line"),
        ("withdrawals.processor", "another engine line")]


class Server:
    """uvicorn as the CLI runs it (``log_config=None``: its lines go through our handler)."""

    def __init__(self, app: Any) -> None:
        config = uvicorn.Config(app, host="127.0.0.1", port=0, log_config=None,
                                lifespan="on", ws="none", http="h11")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            assert time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.01)
        self.url = f"http://127.0.0.1:{self.server.servers[0].sockets[0].getsockname()[1]}"

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


def _configs() -> tuple[ChainsConfig, WithdrawalsConfig]:
    doc = dev_config(hot_key_env=TEST_HOT_KEY_ENV)
    doc["address_sources"] = {"evm": {"kind": "mnemonic", "mnemonic_env": WORDS_ENV}}
    return dev_configs(doc)


def test_every_line_is_json_follows_its_correlation_id_and_holds_no_secret(
        engine: Engine, captured: Captured, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(WORDS_ENV, DEV_MNEMONIC)
    monkeypatch.setenv(TEST_HOT_KEY_ENV, HOT_KEY)
    open_book(engine)
    chains, wcfg = _configs()
    key = create_key(engine, "acme", "client").key
    server = Server(create_app(engine, chains, wcfg))
    try:
        with httpx.Client(base_url=server.url, timeout=30) as http:
            auth = {"Authorization": f"Bearer {key}"}
            user = http.post("/v1/users", json={}, headers=auth).json()["id"]
            fund(engine, [user], 150_000_000)
            made = http.post(f"/v1/users/{user}/withdrawals", headers={
                **auth, "Idempotency-Key": "w1", "X-Request-ID": "req-signals-1"}, json={
                "asset": "USDC", "chain": "devnet", "to": DEST, "amount": "30000000"})
            assert made.status_code == 201, made.text
            assert http.get("/v1/users/x/balances", headers={
                "Authorization": f"Bearer {key}x"}).status_code == 401
            timeline = http.get(f"/v1/withdrawals/{made.json()['id']}", headers=auth).json()
    finally:
        server.stop()
    reserve_txid = timeline["ledger_transactions"][0]["id"]

    # Jobs of a deployment whose address source is a seed phrase, then a step that posts.
    # Building them reads the hot wallet's key (the processor's signer) and names the seed.
    jobs = {j.name: j for j in build_jobs(engine, chains, wcfg, only=(
        "deposits.watch", "withdrawals.process", "ledger.reconcile"))}
    assert set(jobs) == {"deposits.watch:devnet", "withdrawals.process:devnet",
                         "ledger.reconcile"}
    run_locked(engine, jobs["deposits.watch:devnet"])
    run_locked(engine, jobs["ledger.reconcile"])
    poster = Job("test.post", 60, lambda now: _post(engine, user))
    run_locked(engine, poster)
    run_locked(engine, poster)
    # Code that would leak, on purpose: whatever it says, the line is redacted.
    leak = logging.getLogger("custody.test")
    with correlated(job="leaky"):
        leak.warning("seed %s key %s header Authorization: Bearer %s", DEV_MNEMONIC, HOT_KEY,
                     key, extra={"url": f"postgresql://custody:{DB_PASSWORD}@db/custody",
                                 "headers": {"authorization": f"Bearer {key}"},
                                 "webhook_secret": WEBHOOK_SECRET})
        leak.error("raw key %s", key)

    records = captured.records()
    text = captured.stream.getvalue()
    secret_part = key.split("_", 2)[2]
    for secret in (key, secret_part, DEV_MNEMONIC, HOT_KEY, HOT_KEY[2:], DB_PASSWORD,
                   WEBHOOK_SECRET):
        assert secret not in text, secret
    assert sum("[redacted]" in line for line in captured.lines()) >= 2

    # The request: its id on its HTTP line and on the ledger's line of the reserve it posted.
    mine = [r for r in records if r.get("correlation_id") == "req-signals-1"]
    assert {"logger": "custody.ledger", "transaction_id": reserve_txid} in [
        {"logger": r["logger"], "transaction_id": r.get("transaction_id")} for r in mine]
    http_lines = [r for r in mine if r["logger"] == "custody.http"]
    assert [(r["route"], r["status"]) for r in http_lines] == [
        ("/v1/users/{user_id}/withdrawals", 201)]
    # Each job step: a fresh id, the job's name, and the transaction it posted.
    posted = [r for r in records if r["logger"] == "custody.ledger" and r.get("job") ==
              "test.post"]
    assert len(posted) == 2 and posted[0]["correlation_id"] != posted[1]["correlation_id"]
    assert {r["status"] for r in posted} == {"posted", "replayed"}
    assert len({r["transaction_id"] for r in posted}) == 1
    # The watcher's node is down: its warning names the job and the step's id.
    watch = [r for r in records if r.get("job") == "deposits.watch:devnet"
             and r["level"] == "WARNING"]
    assert watch and all(len(r["correlation_id"]) == 32 for r in watch)


def _post(engine: Engine, user: str) -> None:
    with UnitOfWork(engine) as uow:
        asset = ledger.get_asset(uow, "USDC")
        wallet, _ = ledger.open_user_accounts(uow, user, asset)
        custody = ledger.get_account(uow, "custody:devnet", "USDC")
        uow.commit()
    ledger.post_entry(engine, Entry("test:signals:job-post", "deposit", T0,
                                    "tests", (debit(custody, 5), credit(wallet, 5))))


def test_text_lines_for_humans_carry_the_correlation_id_and_are_redacted() -> None:
    root = logging.getLogger()
    level, handlers = root.level, list(root.handlers)
    stream = io.StringIO()
    handler = setup_logging("text", level="INFO", stream=stream)
    try:
        with correlated("cid-text-1", job="x"):
            logging.getLogger("custody.test").info("token Bearer abc.def-123 and %s",
                                                   "cust_0123456789ab_s3cr3tS3cr3t")
    finally:
        root.removeHandler(handler)
        root.handlers[:] = handlers
        root.setLevel(level)
    line = stream.getvalue().strip()
    assert "INFO custody.test token Bearer [redacted]" in line
    assert "cust_0123456789ab_[redacted]" in line and "s3cr3t" not in line
    assert line.endswith("job=x correlation_id=cid-text-1")
