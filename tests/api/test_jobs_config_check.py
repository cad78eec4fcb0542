"""The configuration is checked against the chain before a chain's jobs step.

One real anvil node is configured twice: chain ``good`` as it is, chain ``bad`` with a wrong
``chain_id`` or a wrong token ``decimals``. The real jobs (``api.jobs.build_jobs``, run under
their advisory locks by ``run_locked``) credit a deposit on ``good`` while ``bad``'s watcher
and withdrawal processor never step: no cursor, no deposit, one CRITICAL line per mismatch,
one ``alert.config_mismatch`` event. A node that is down at startup is checked again at the
next run and its chain then runs.
"""

from __future__ import annotations

import copy
import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from eth_account import Account
from sqlalchemy.engine import Engine

from api.jobs import Job, build_jobs, run_locked
from chains.addresses import MnemonicAddressSource
from config.chains import parse_chains_config
from config.uow import UnitOfWork
from config.withdrawals import parse_withdrawals_config
from deposits import service
from devtools.anvil import DEV_ACCOUNTS, DEV_MNEMONIC, AnvilNode, Contract, free_port
from devtools.config import DEV_TOKEN, dev_config, to_toml

pytestmark = pytest.mark.anvil
KEY_ENV = "CUSTODY_TEST_CFGCHECK_KEY"
HOT = Account.create()
AMOUNT = 25_000_000  # 25 USDC


@pytest.fixture
def node() -> Iterator[AnvilNode]:
    with AnvilNode.start(slots_in_an_epoch=2) as n:
        yield n


@pytest.fixture
def usdc(node: AnvilNode) -> Contract:
    token = node.deploy("TestToken", "USD Coin", "USDC", 6)
    node.transact(token, "mint", [DEV_ACCOUNTS[0], 10**12])
    return token


def _doc(url: str, token: str, **bad: Any) -> dict[str, Any]:
    """Chain ``good`` on ``url`` and, when ``bad`` keys are given, chain ``bad`` on the same
    node with those changes; the hot wallet (withdrawals) is on ``bad``."""
    doc = dev_config(rpc_url=url, token=token, chain="good", finality="confirmations:1",
                     hot_wallet=None, chain_options={"rpc_timeout_ms": 2000,
                                                     "rpc_retries_max": 1})
    if bad:
        chain = copy.deepcopy(doc["chains"]["good"])
        chain["tokens"][0]["decimals"] = bad.pop("decimals", 6)
        chain.update(bad)
        doc["chains"]["bad"] = chain
        doc["withdrawals"] = dev_config(chain="bad", token=token, hot_wallet=HOT.address,
                                        hot_key_env=KEY_ENV)["withdrawals"]
    return doc


def _jobs(engine: Engine, doc: dict[str, Any]) -> list[Job]:
    chains = parse_chains_config(doc)
    wcfg = parse_withdrawals_config(doc, chains) if "withdrawals" in doc else None
    return build_jobs(engine, chains, wcfg, environ={KEY_ENV: HOT.key.to_0x_hex()},
                      only=["deposits.watch", "withdrawals.process"])


def _address(engine: Engine, user: str) -> str:
    with UnitOfWork(engine) as uow:
        address = service.assign_address(uow, "evm", user,
                                         MnemonicAddressSource(DEV_MNEMONIC, account=1))
        uow.commit()
    return address


def _run_all(engine: Engine, jobs: list[Job], times: int) -> None:
    for _ in range(times):
        for job in jobs:
            assert run_locked(engine, job)


def _rows(engine: Engine, sql: str, **params: Any) -> list[Any]:
    with engine.connect() as conn:
        return list(conn.execute(sa.text(sql), params).all())


def _credited(engine: Engine, chain: str) -> list[Any]:
    return _rows(engine, "SELECT amount_minor FROM deposits WHERE chain = :c "
                         "AND state = 'credited'", c=chain)


@pytest.mark.parametrize(("bad", "line"), [
    ({"chain_id": 1}, "chain bad: chain_id is 1 in the configuration, the node says 31337"),
    ({"decimals": 18}, "chain bad: token {token} decimals is 18 in the configuration, "
                       "the node says 6"),
], ids=["chain_id", "decimals"])
def test_a_mismatch_refuses_that_chain_while_the_other_keeps_crediting(
        engine: Engine, node: AnvilNode, usdc: Contract, caplog: pytest.LogCaptureFixture,
        bad: dict[str, Any], line: str) -> None:
    line = line.format(token=usdc.address)
    jobs = _jobs(engine, _doc(node.url, usdc.address, **bad))
    assert [j.name for j in jobs] == ["deposits.watch:good", "deposits.watch:bad",
                                      "withdrawals.process:bad"]
    node.transact(usdc, "transfer", [_address(engine, "alice"), AMOUNT])
    with caplog.at_level(logging.INFO):
        _run_all(engine, jobs, times=3)
        node.mine(2)
        _run_all(engine, jobs, times=2)

    assert [r.amount_minor for r in _credited(engine, "good")] == [AMOUNT]
    # The bad chain's watcher never stepped: no cursor, not even a recorded deposit.
    assert _rows(engine, "SELECT chain FROM watcher_cursors") == [("good",)]
    assert _rows(engine, "SELECT 1 FROM deposits WHERE chain = 'bad'") == []
    runs = _rows(engine, "SELECT job, outcome, detail FROM job_runs ORDER BY id")
    assert {r.outcome for r in runs if r.job == "deposits.watch:good"} == {"ok"}
    for job in ("deposits.watch:bad", "withdrawals.process:bad"):
        details = {r.detail for r in runs if r.job == job}
        assert details == {f"config_mismatch: {line}"}, details
    # Said once, however often the jobs run: one CRITICAL line, one alert event and its one
    # structured line (what to do next).
    said = [r for r in caplog.records if r.name == "custody.alerts"]
    assert [(r.levelno, r.getMessage()) for r in said][0] == (logging.CRITICAL, line)
    assert [(r.levelno, getattr(r, "kind", None), bool(getattr(r, "next", None)))
            for r in said[1:]] == [(logging.ERROR, "config_mismatch", True)]
    assert not [r for r in caplog.records
                if r.name == "custody.jobs" and r.levelno >= logging.WARNING]
    [alert] = _rows(engine, "SELECT payload FROM outbox_events "
                            "WHERE type = 'alert.config_mismatch'")
    assert alert.payload["chain"] == "bad"
    [mismatch] = alert.payload["mismatches"]
    assert line == (f"chain bad: {mismatch['field']} is {mismatch['configured']} in the "
                    f"configuration, the node says {mismatch['observed']}")
    assert any("chain good: the configuration agrees with the node" in r.getMessage()
               and "'USDC'" in r.getMessage() for r in caplog.records)


def test_a_node_down_at_startup_is_checked_again_at_the_next_run(engine: Engine) -> None:
    port = free_port()
    [watch] = _jobs(engine, _doc(f"http://127.0.0.1:{port}", DEV_TOKEN))
    assert run_locked(engine, watch)
    assert run_locked(engine, watch)
    [first, second] = _rows(engine, "SELECT outcome, detail FROM job_runs ORDER BY id")
    assert first.detail.startswith("rpc_unavailable:") and second.detail.startswith(
        "rpc_unavailable:")
    assert _rows(engine, "SELECT 1 FROM outbox_events") == []
    assert _rows(engine, "SELECT 1 FROM watcher_cursors") == []
    with AnvilNode.start(port=port, slots_in_an_epoch=2) as late:
        # The configured token: the first contract dev account 0 deploys.
        assert late.deploy("TestToken", "USD Coin", "USDC", 6).address == DEV_TOKEN
        assert run_locked(engine, watch)
    third = _rows(engine, "SELECT outcome, detail FROM job_runs ORDER BY id")[-1]
    assert (third.outcome, third.detail) == ("ok", None)
    assert _rows(engine, "SELECT chain FROM watcher_cursors") == [("good",)]


def _cli(database_url: str, config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CUSTODY_DATABASE_URL": database_url, "CUSTODY_CONFIG": str(config),
           KEY_ENV: HOT.key.to_0x_hex(), "COLUMNS": "250"}
    return subprocess.run([sys.executable, "-m", "api.cli", *args], env=env, text=True,
                          capture_output=True, timeout=120)


def test_watch_and_withdrawals_process_check_first(engine: Engine, database_url: str,
                                                    node: AnvilNode, usdc: Contract,
                                                    tmp_path: Path) -> None:
    line = "chain bad: chain_id is 1 in the configuration, the node says 31337"
    config = tmp_path / "custody.toml"
    config.write_text(to_toml(_doc(node.url, usdc.address, chain_id=1)))
    node.transact(usdc, "transfer", [_address(engine, "alice"), AMOUNT])
    node.mine(2)
    watched = _cli(database_url, config, "watch", "--steps", "2", "--poll-interval-s", "0")
    assert watched.returncode == 0, watched.stderr
    assert "watching good" in watched.stdout and "credited 1" in watched.stdout
    assert f"error [config_mismatch]: {line}" in watched.stderr.splitlines()
    assert [r.amount_minor for r in _credited(engine, "good")] == [AMOUNT]
    assert _rows(engine, "SELECT chain FROM watcher_cursors") == [("good",)]
    only_bad = _cli(database_url, config, "watch", "--chain", "bad", "--steps", "1")
    assert only_bad.returncode == 2 and "watching" not in only_bad.stdout
    processed = _cli(database_url, config, "withdrawals", "process", "bad", "--steps", "1")
    assert processed.returncode == 2
    # The CRITICAL log line (JSON, as every command logs) and the command's error line; the
    # alert was raised by the watch already (once per finding: no second alert line).
    logged, error = processed.stderr.splitlines()
    assert (json.loads(logged)["level"], json.loads(logged)["message"]) == ("CRITICAL", line)
    assert error == f"error [config_mismatch]: {line}"
    [alert] = _rows(engine, "SELECT payload FROM outbox_events "
                            "WHERE type = 'alert.config_mismatch'")
    assert alert.payload["chain"] == "bad"
