"""``custody withdrawal show`` at 80 columns with the output piped: accounts by code, amounts as
decimals with the asset and the minor units, every hash whole; ``--json`` in the API's shape."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine

from api.schemas import WithdrawalTimeline
from withdrawals import service

from .chainkit import Devnet
from .conftest import CHAIN, write_config
from .test_returns_cli import custody_cli, devnet, settled

pytestmark = pytest.mark.anvil
__all__ = ["devnet"]  # The fixture, used by name.


def test_show_names_accounts_and_amounts_whole(engine: Engine, devnet: Devnet,
                                               database_url: str, tmp_path: Path) -> None:
    wid = settled(engine, devnet)
    config = write_config(tmp_path, devnet.toml)
    [attempt] = service.timeline(engine, wid).attempts
    shown = custody_cli(database_url, config, "withdrawal_app", "show", str(wid),
                        env={"COLUMNS": "80"})
    assert shown.returncode == 0, shown.stderr
    out = shown.stdout
    assert "…" not in out and attempt.tx_hash in out
    assert "30.000000 USDC (30000000)" in out.splitlines()[0]
    # Postings by account code with the signed decimal and minor units (debit positive).
    assert "user:u1:wallet" in out and "user:u1:withdrawals" in out
    assert f"custody:{CHAIN}" in out
    assert "-30.000000 USDC (-30000000)" in out
    assert "account_id" not in out


def test_show_json_is_the_api_shape(engine: Engine, devnet: Devnet, database_url: str,
                                    tmp_path: Path) -> None:
    wid = settled(engine, devnet)
    config = write_config(tmp_path, devnet.toml)
    shown = custody_cli(database_url, config, "withdrawal_app", "show", str(wid), "--json")
    assert shown.returncode == 0, shown.stderr
    body = WithdrawalTimeline.model_validate(json.loads(shown.stdout))
    assert body.withdrawal.id == wid and body.withdrawal.state == "settled"
    assert body.withdrawal.amount.minor == "30000000"
    assert body.withdrawal.amount.decimal == "30.000000"
    assert [t.kind for t in body.ledger_transactions][:2] == ["withdrawal_reserve",
                                                               "withdrawal_settle"]
