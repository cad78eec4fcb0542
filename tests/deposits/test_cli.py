"""``custody timeline`` and ``custody deposits`` as an operator runs them (a real process)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from config.logging import ENGINE_LOGGERS
from tests.deposits.conftest import ALICE, Rig

pytestmark = pytest.mark.anvil
ENTRY = "from api.cli_deposits import deposits_app; deposits_app()"


def run_cli(
    database_url: str, *args: str, timeout_s: float = 60
) -> subprocess.CompletedProcess[str]:
    """Run a deposit command in its own process against the test database."""
    env = {**os.environ, "CUSTODY_DATABASE_URL": database_url, "COLUMNS": "250"}
    return subprocess.run([sys.executable, "-c", ENTRY, *args], env=env, capture_output=True,
                          text=True, timeout=timeout_s, check=False)


def test_timeline_and_user_deposits(rig: Rig, database_url: str) -> None:
    addr = rig.user("alice")
    tx = rig.node.transact(rig.tokens.usdc, "batchTransfer",
                           [[addr, addr], [1_500_000, 2_250_000]], ALICE, gas=300_000)
    rig.node.mine(3)
    rig.step()
    shown = run_cli(database_url, "timeline", "dev", tx)
    assert shown.returncode == 0, shown.stderr
    out = shown.stdout
    assert "log:0" in out and "log:1" in out
    assert out.index("transfer_included") < out.index("finality_reached") \
        < out.index("attested_for_user") < out.index("ledger deposit")
    assert f"deposit:dev:{tx}:log:1" in out
    assert "2.250000 USDC" in out
    listed = run_cli(database_url, "deposits", "alice")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.count("credited") == 2 and "1.500000" in listed.stdout


def test_unknown_transaction_is_one_line_and_exit_2(rig: Rig, database_url: str) -> None:
    shown = run_cli(database_url, "timeline", "dev", "0x" + "0" * 64)
    assert shown.returncode == 2
    assert shown.stderr.strip().startswith("error [deposit_not_found]")


def test_watch_runs_bounded_rounds(rig: Rig, database_url: str, tmp_path: Path) -> None:
    addr = rig.user("alice")
    rig.node.transact(rig.tokens.usdc, "transfer", [addr, 3_000_000], ALICE)
    rig.node.mine(3)
    config = tmp_path / "chains.toml"
    config.write_text(
        '[assets.USDC]\nscale = 6\n[assets.ETH]\nscale = 18\n'
        f'[chains.dev]\nchain_id = 31337\nrpc_url = "{rig.node.url}"\n'
        'finality = "confirmations:3"\nnative_asset = "ETH"\n'
        f'[[chains.dev.tokens]]\ncontract = "{rig.tokens.usdc.address}"\nsymbol = "USDC"\n'
        'asset = "USDC"\ndecimals = 6\n')
    ran = run_cli(database_url, "watch", "--chain", "dev", "--steps", "2", "--config", str(config),
                  "--poll-interval-s", "0")
    assert ran.returncode == 0, ran.stderr
    assert "credited 1" in ran.stdout and "2 rounds" in ran.stdout
    assert rig.wallet("alice", "USDC") == 3_000_000


def test_watch_prints_no_library_lines(rig: Rig, database_url: str, tmp_path: Path) -> None:
    """``custody watch`` (the installed entry point, output piped): the engine's INFO lines, no
    line of web3, urllib3, asyncio, APScheduler or Alembic (seen: Alembic's plugin lines)."""
    config = tmp_path / "chains.toml"
    config.write_text(
        '[assets.USDC]\nscale = 6\n[assets.ETH]\nscale = 18\n'
        f'[chains.dev]\nchain_id = 31337\nrpc_url = "{rig.node.url}"\n'
        'finality = "confirmations:3"\nnative_asset = "ETH"\n'
        f'[[chains.dev.tokens]]\ncontract = "{rig.tokens.usdc.address}"\nsymbol = "USDC"\n'
        'asset = "USDC"\ndecimals = 6\n')
    env = {**os.environ, "CUSTODY_DATABASE_URL": database_url, "COLUMNS": "80"}
    env.pop("CUSTODY_LOG_LEVEL", None)
    ran = subprocess.run([str(Path(sys.executable).parent / "custody"), "watch", "--chain", "dev",
                          "--steps", "2", "--config", str(config), "--poll-interval-s", "0"],
                         env=env, capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0, ran.stderr
    loggers = [json.loads(line)["logger"] for line in ran.stderr.splitlines()]
    assert loggers, "the engine says which chains agree with their node"
    assert all(name.split(".")[0] in ENGINE_LOGGERS for name in loggers), ran.stderr
