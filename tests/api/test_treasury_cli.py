"""``custody treasury`` and ``custody cases`` run as a user runs them (a subprocess on a real
database; the report and a declared funding against a real anvil)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from config.uow import UnitOfWork
from devtools.anvil import DEV_ACCOUNTS, AnvilNode
from devtools.config import dev_config, to_toml
from tests.api.conftest import configs
from tests.api.test_treasury import seed_final_own
from tests.withdrawals.conftest import TEST_HOT_KEY_ENV, open_book

HOT = "0x" + "44" * 20
ALICE = DEV_ACCOUNTS[0]


def custody(database_url: str, config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``custody ARGS`` with this database and configuration file."""
    env = {**os.environ, "CUSTODY_DATABASE_URL": database_url, "CUSTODY_CONFIG": str(config),
           "COLUMNS": "250"}
    return subprocess.run([sys.executable, "-m", "api.cli", *args], env=env, text=True,
                          capture_output=True, timeout=120)


def count(engine: Engine, table: str) -> int:
    """Rows of ``table``."""
    with UnitOfWork(engine) as uow:
        return int(uow.conn.execute(sa.text(f"SELECT count(*) FROM {table}")).scalar_one())


@pytest.fixture
def api_config(tmp_path: Path) -> Path:
    """The API tests' configuration as a file (chain devnet, no node)."""
    path = tmp_path / "custody.toml"
    path.write_text(to_toml(dev_config(hot_key_env=TEST_HOT_KEY_ENV, xpub=True)))
    return path


EXPECT = ["treasury", "expect", "--chain", "devnet", "--asset", "ETH", "--amount",
          "1500000000000000000",
          "--from", "0x" + "55" * 20, "--reason", "seed capital"]


def _with(args: list[str], option: str, value: str) -> list[str]:
    changed = list(args)
    changed[changed.index(option) + 1] = value
    return changed


def test_expect_replay_conflict_and_bad_input(engine: Engine, database_url: str,
                                              api_config: Path) -> None:
    first = custody(database_url, api_config, *EXPECT, "--key", "k1", "--by", "carol", "--json")
    assert first.returncode == 0, first.stderr
    declared = json.loads(first.stdout)
    assert declared["amount"]["minor"] == "1500000000000000000"
    assert (declared["state"], declared["replayed"]) == ("expected", False)
    again = custody(database_url, api_config, *EXPECT, "--key", "k1", "--json")
    assert json.loads(again.stdout)["id"] == declared["id"] and json.loads(again.stdout)[
        "replayed"]
    other = custody(database_url, api_config, *_with(EXPECT, "--amount", "2000000000000000000"),
                    "--key", "k1")
    assert other.returncode == 2
    assert other.stderr.strip().startswith("error [funding_key_reused]:")
    for option, value in [("--chain", "nochain"), ("--asset", "DOGE"), ("--amount", "abc"),
                          ("--amount", "1e3"), ("--amount", "-1"), ("--amount", "1.5"),
                          ("--from", "0x1234")]:
        bad = custody(database_url, api_config, *_with(EXPECT, option, value))
        assert bad.returncode == 2, (option, value, bad.stdout)
        (line,) = bad.stderr.strip().splitlines()
        assert line.startswith("error [funding_invalid]: "), line
    assert count(engine, "treasury_fundings") == 1
    listed = custody(database_url, api_config, "treasury", "fundings", "--json")
    assert [f["id"] for f in json.loads(listed.stdout)["items"]] == [declared["id"]]


def test_cases_resolve_and_approve_by_two_admins(engine: Engine, database_url: str,
                                                 api_config: Path) -> None:
    open_book(engine)
    seed_final_own(engine)
    with UnitOfWork(engine) as uow:
        case_id = int(uow.conn.execute(sa.text("SELECT id FROM deposit_cases")).scalar_one())
    listed = custody(database_url, api_config, "cases", "list")
    assert listed.returncode == 0 and "unattributed_own_address" in listed.stdout
    proposed = custody(database_url, api_config, "cases", "resolve", str(case_id), "--as",
                       "capital", "--by", "carol", "--reason", "owner top-up")
    assert proposed.returncode == 0 and "proposed by carol" in proposed.stdout
    votes, transactions = count(engine, "deposit_case_votes"), count(engine,
                                                                     "ledger_transactions")
    same = custody(database_url, api_config, "cases", "approve", str(case_id), "--by", "carol")
    assert same.returncode == 2
    assert same.stderr.strip().startswith("error [second_admin_required]:")
    assert (count(engine, "deposit_case_votes"), count(engine, "ledger_transactions")) == (
        votes, transactions)
    done = custody(database_url, api_config, "cases", "approve", str(case_id), "--by", "dave")
    assert done.returncode == 0, done.stderr
    assert "resolved as capital" in done.stdout and "approved by dave" in done.stdout
    again = custody(database_url, api_config, "cases", "resolve", str(case_id), "--as",
                    "refund", "--by", "erin", "--reason", "x")
    assert again.returncode == 2 and "already has a proposal" in again.stderr
    assert custody(database_url, api_config, "verify").returncode == 0


def _case_ids(engine: Engine) -> list[int]:
    with UnitOfWork(engine) as uow:
        return [int(i) for i in uow.conn.execute(
            sa.text("SELECT id FROM deposit_cases ORDER BY id")).scalars()]


def test_cases_refund_by_two_admins_and_a_refund_that_cannot_be_paid(
        engine: Engine, database_url: str, api_config: Path) -> None:
    open_book(engine)
    seed_final_own(engine)  # 4.00 USDC: refunded 2.00 (minus the 2.00 fee_max reserve).
    seed_final_own(engine, 2_500_000)  # 0.50 after the reserve: below the 1.00 minimum.
    paid, unpaid = _case_ids(engine)
    for case_id in (paid, unpaid):
        proposed = custody(database_url, api_config, "cases", "resolve", str(case_id), "--as",
                           "refund", "--by", "carol", "--reason", "not ours: send it back")
        assert proposed.returncode == 0 and "refund proposed by carol" in proposed.stdout
    tables = ("deposit_case_resolutions", "deposit_case_refunds", "ledger_transactions",
              "withdrawals")
    before = [count(engine, t) for t in tables]
    same = custody(database_url, api_config, "cases", "approve", str(paid), "--by", "carol")
    assert same.returncode == 2
    assert same.stderr.strip().startswith("error [second_admin_required]:")
    refused = custody(database_url, api_config, "cases", "approve", str(unpaid), "--by", "dave")
    assert refused.returncode == 2
    (line,) = refused.stderr.strip().splitlines()
    assert line.startswith("error [refund_refused]:") and "below the minimum" in line, line
    assert [count(engine, t) for t in tables] == before
    done = custody(database_url, api_config, "cases", "approve", str(paid), "--by", "dave")
    assert done.returncode == 0, done.stderr
    assert "resolved as refund withdrawal" in done.stdout and "approved by dave" in done.stdout
    with UnitOfWork(engine) as uow:
        (wid,) = uow.conn.execute(sa.text("SELECT id FROM withdrawals")).scalars()
    assert f"withdrawal {wid}" in done.stdout
    again = custody(database_url, api_config, "cases", "approve", str(paid), "--by", "dave")
    assert again.returncode == 0 and f"withdrawal {wid}" in again.stdout
    assert count(engine, "withdrawals") == 1
    listed = custody(database_url, api_config, "cases", "list", "--all")
    assert listed.returncode == 0, listed.stderr
    (row,) = [r for r in listed.stdout.splitlines() if "refund" in r and f" {paid} " in r]
    assert str(wid) in row.split("│")[-2], row
    still_open = custody(database_url, api_config, "cases", "list")
    assert "refund" not in still_open.stdout
    assert custody(database_url, api_config, "verify").returncode == 0


@pytest.mark.anvil
def test_declared_funding_on_chain_and_treasury_show_equals_the_chain(
        engine: Engine, database_url: str, tmp_path: Path) -> None:
    with AnvilNode.start(slots_in_an_epoch=2) as node:
        # The configured USDC must exist (the configuration is checked against the node): the
        # first contract of dev account 0 is at the configuration's token address.
        node.deploy("TestToken", "USD Coin", "USDC", 6)
        doc = dev_config(rpc_url=node.url, chain="dev", hot_wallet=None,
                         chain_options={"hot_addresses": [HOT]})
        config = tmp_path / "custody.toml"
        config.write_text(to_toml(doc))
        expect = custody(database_url, config, "treasury", "expect", "--chain", "dev",
                         "--asset", "ETH", "--amount", str(25 * 10**17), "--from", ALICE,
                         "--reason", "seed capital", "--key", "seed-1")
        assert expect.returncode == 0, expect.stderr
        node.send_eth(ALICE, HOT, 25 * 10**17)
        node.mine(10)  # Final under confirmations:3 and at or below the finalized block.
        watched = custody(database_url, config, "watch", "--chain", "dev", "--steps", "2")
        assert watched.returncode == 0, watched.stderr
        shown = custody(database_url, config, "treasury", "show", "--json")
        assert shown.returncode == 0, shown.stderr
        (eth, _usdc) = json.loads(shown.stdout)["items"]
        assert eth["asset"] == "ETH" and eth["native"]
        assert eth["treasury"]["minor"] == eth["gas_float"]["minor"] == str(25 * 10**17)
        assert eth["hot_onchain"]["minor"] == eth["onchain"]["minor"] == str(25 * 10**17)
        assert (eth["hot_treasury"]["minor"], eth["hot_custody"]["minor"]) == (
            str(25 * 10**17), "0")
        assert eth["custody_plus_treasury"]["minor"] == str(25 * 10**17)
        assert eth["difference"]["minor"] == "0"
        table = custody(database_url, config, "treasury", "show", "--chain", "dev")
        assert table.returncode == 0 and "2.500000000000000000" in table.stdout
        funded = json.loads(custody(database_url, config, "treasury", "fundings",
                                    "--json").stdout)["items"]
        assert funded[0]["state"] == "matched"
        unknown = custody(database_url, config, "treasury", "show", "--chain", "nochain")
        assert unknown.returncode == 2 and unknown.stderr.startswith("error [")
    assert configs()  # The API configuration stays valid with hot addresses derived.


def test_show_without_a_node_prints_the_ledger_figures_then_one_line_and_exits_2(
        database_url: str, api_config: Path) -> None:
    # api_config's chain points at a port where no node listens.
    shown = custody(database_url, api_config, "treasury", "show")
    assert shown.returncode == 2
    assert "ETH" in shown.stdout and "USDC" in shown.stdout  # the ledger's figures, shown
    (line,) = shown.stderr.strip().splitlines()
    assert line.startswith("error [node_unavailable]: chain devnet: on-chain figures not read:")
    as_json = custody(database_url, api_config, "treasury", "show", "--json")
    assert as_json.returncode == 2
    rows = json.loads(as_json.stdout)["items"]
    assert {r["asset"] for r in rows} == {"ETH", "USDC"}
    assert all(r["onchain"] is None and r["unavailable"] for r in rows)
