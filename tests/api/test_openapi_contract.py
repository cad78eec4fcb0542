"""The OpenAPI document describes every field, and its state enums are the tables' own."""

from __future__ import annotations

import re
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from api.openapi import STATES
from tests.api.conftest import Api

#: "Schema.field" of ``api.openapi.STATES`` -> the table and column whose CHECK lists the values.
TABLES = {
    "Deposit.state": ("deposits", "state"),
    "EventDeposit.state": ("deposits", "state"),
    "EventDepositHistory.state": ("deposit_events", "state"),
    "EventWithdrawal.state": ("withdrawals", "state"),
    "DepositEvent.state": ("deposit_events", "state"),
    "Withdrawal.state": ("withdrawals", "state"),
    "Sweep.state": ("sweeps", "state"),
    "GasTopUp.state": ("gas_top_ups", "state"),
    "ColdTransfer.state": ("cold_transfers", "state"),
    "Refill.state": ("refill_requests", "state"),
    "CaseItem.status": ("cases", "status"),
    "CaseItem.type": ("cases", "type"),
    "Case.kind": ("deposit_cases", "kind"),
    "Decision.kind": ("withdrawal_decisions", "kind"),
}


def _check_values(engine: Engine, table: str, column: str) -> set[str]:
    with engine.connect() as conn:
        (definition,) = conn.execute(sa.text(
            "SELECT pg_get_constraintdef(oid) FROM pg_constraint "
            "WHERE conname = :name AND conrelid = CAST(:table AS regclass)"),
            {"name": f"{table}_{column}_check", "table": table}).one()
    return set(re.findall(r"'([^']+)'::text", definition))


def _schemas(api: Api) -> dict[str, Any]:
    doc = api.http.get("/openapi.json").json()
    schemas: dict[str, Any] = doc["components"]["schemas"]
    return schemas


def test_state_enums_are_the_values_the_tables_allow(api: Api) -> None:
    assert set(TABLES) == set(STATES)
    schemas = _schemas(api)
    for key, (table, column) in TABLES.items():
        schema, field = key.split(".")
        value = schemas[schema]["properties"][field]
        variants = value.get("anyOf", [value])
        (enum,) = [v["enum"] for v in variants if "enum" in v]
        assert set(enum) == _check_values(api.engine, table, column), key
        assert len(enum) == len(set(enum)), key


def test_every_state_field_is_an_enum(api: Api) -> None:
    loose = []
    for name, schema in _schemas(api).items():
        for field, value in schema.get("properties", {}).items():
            if field == "state" and not any("enum" in v or "const" in v
                                            for v in value.get("anyOf", [value])):
                loose.append(f"{name}.{field}")
    assert loose == []


def test_every_field_is_described_and_scalars_have_examples(api: Api) -> None:
    undescribed, without_example = [], []
    for name, schema in _schemas(api).items():
        for field, value in schema.get("properties", {}).items():
            if not value.get("description"):
                undescribed.append(f"{name}.{field}")
    assert undescribed == []
    # Examples on the fields that identify things (what an integrator pastes and matches).
    for name, schema in _schemas(api).items():
        for field, value in schema.get("properties", {}).items():
            if field in ("chain", "asset", "tx_hash", "user_id", "block_number", "minor",
                         "decimal") and "examples" not in value:
                without_example.append(f"{name}.{field}")
    assert without_example == []
