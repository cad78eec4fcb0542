"""Alerts: each is a webhook event and a structured log line, and each says what to do next."""

from __future__ import annotations

import ast
import io
import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from api.outbox import AlertWithoutNext, raise_alert
from config.logging import setup_logging
from config.uow import UnitOfWork
from tests.api.conftest import Api, seed_deposit

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("api", "ledger", "chains", "deposits", "withdrawals", "outgoing", "sweeps", "config",
            "reconcile")


@pytest.fixture
def lines() -> Iterator[io.StringIO]:
    root = logging.getLogger()
    level, handlers = root.level, list(root.handlers)
    stream = io.StringIO()
    handler = setup_logging("json", level="INFO", stream=stream)
    try:
        yield stream
    finally:
        root.removeHandler(handler)
        root.handlers[:] = handlers
        root.setLevel(level)


def _alerts(stream: io.StringIO) -> list[dict[str, object]]:
    docs = [json.loads(line) for line in stream.getvalue().splitlines() if line]
    return [d for d in docs if d.get("alert") is True]


def test_an_alert_is_an_event_and_one_log_line_naming_the_next_step(
        engine: Engine, lines: io.StringIO) -> None:
    payload = {"chain": "devnet", "next": "fund treasury:devnet"}
    with UnitOfWork(engine) as uow:
        assert raise_alert(uow.conn, "gas_float_low", "withdrawal:1", payload)
        assert not raise_alert(uow.conn, "gas_float_low", "withdrawal:1", payload)  # same one
        assert raise_alert(uow.conn, "ledger_drift", "x", {"next": "custody verify"})
        uow.commit()
    with engine.connect() as conn:
        events = conn.execute(sa.text(
            "SELECT type, payload FROM outbox_events WHERE type LIKE 'alert.%' ORDER BY id")).all()
    assert [(e.type, e.payload["next"]) for e in events] == [
        ("alert.gas_float_low", "fund treasury:devnet"), ("alert.ledger_drift", "custody verify")]
    logged = _alerts(lines)
    assert [(d["level"], d["logger"], d["kind"], d["next"]) for d in logged] == [
        ("WARNING", "custody.alerts", "gas_float_low", "fund treasury:devnet"),
        ("ERROR", "custody.alerts", "ledger_drift", "custody verify")]
    assert logged[0]["payload"] == {"chain": "devnet"}
    assert str(logged[0]["event_id"]).startswith("evt_alert_")


def test_an_alert_without_a_next_step_is_refused_and_writes_nothing(engine: Engine) -> None:
    with UnitOfWork(engine) as uow:
        for payload in ({}, {"next": ""}, {"next": None}):
            with pytest.raises(AlertWithoutNext):
                raise_alert(uow.conn, "withdrawal_overdue", "1", payload)
        uow.commit()
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM outbox_events")).scalar() == 0


def _raise_alert_calls() -> Iterator[tuple[str, ast.Call, ast.Module]]:
    for package in PACKAGES:
        if not (ROOT / package).is_dir():
            continue
        for path in sorted((ROOT / package).rglob("*.py")):
            tree = ast.parse(path.read_text(), str(path))
            for node in ast.walk(tree):
                if isinstance(node, ast.Call) and (
                        getattr(node.func, "attr", None) == "raise_alert"
                        or getattr(node.func, "id", None) == "raise_alert"):
                    yield f"{path.relative_to(ROOT)}:{node.lineno}", node, tree


def _has_next(payload: ast.expr, module: ast.Module) -> bool:
    """A dict literal with a ``"next"`` key, or a call of a function of the same module each
    of whose returns is one."""
    if isinstance(payload, ast.Dict):
        return "next" in {k.value for k in payload.keys if isinstance(k, ast.Constant)}
    if isinstance(payload, ast.Call) and isinstance(payload.func, ast.Name):
        defs = [n for n in module.body if isinstance(n, ast.FunctionDef)
                and n.name == payload.func.id]
        returns = [r.value for d in defs for r in ast.walk(d) if isinstance(r, ast.Return)]
        return bool(returns) and all(r is not None and _has_next(r, module) for r in returns)
    return False


def test_every_alert_raised_anywhere_names_what_to_do_next() -> None:
    calls = list(_raise_alert_calls())
    assert len(calls) >= 8  # drift, overdue, config, hot wallet, cold, held, gas, signer
    for where, call, module in calls:
        assert len(call.args) == 4, where
        assert _has_next(call.args[3], module), f"{where}: alert without a 'next' field"


def test_the_alert_of_a_deposit_case_written_by_the_database_names_the_next_step(
        api: Api) -> None:
    from deposits.repository.cases import insert_case

    tx_hash = seed_deposit(api, api.new_user())
    with UnitOfWork(api.engine) as uow:
        deposit_id = uow.conn.execute(sa.text("SELECT id FROM deposits WHERE tx_hash = :h"),
                                      {"h": tx_hash}).scalar_one()
        case_id = insert_case(uow.conn, deposit_id, "deep_reorg", None, {"block": 100},
                              {"block": None})
        uow.commit()
    with api.engine.connect() as conn:
        payload = conn.execute(sa.text(
            "SELECT payload FROM outbox_events WHERE type = 'alert.deep_reorg'")).scalar_one()
    assert payload["next"] == (
        f"deposit {deposit_id} was credited in a block that is no longer canonical: custody "
        f"timeline devnet {tx_hash}, then resolve case {case_id} (reverse the credit if the "
        "deposit is gone)")
