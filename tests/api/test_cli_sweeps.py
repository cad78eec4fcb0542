"""``custody cold``, ``custody refills`` and ``custody sweeps`` run as a user runs them (a
subprocess on a real database): proposals with keys, admins' decisions, one-line refusals that
write nothing, ``--json`` bodies; on a real anvil, an xpub chain's proposed sweeps listed as
needing a signer (addresses never cut), and ``custody config check`` reading ``[sweeps]``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import Engine

from devtools.anvil import AnvilNode
from devtools.config import to_toml
from tests.api.test_sweeps_api import TABLES, counts, sweeps_doc
from tests.api.test_treasury_cli import custody
from tests.sweeps.conftest import ETH, make_rig, node  # noqa: F401
from tests.sweeps.test_cold import COLD

PROPOSE = ["cold", "propose", "--chain", "devnet", "--asset", "ETH", "--amount",
           "25000000000000000000", "--reason", "excess of the week"]

#: An empty page of a list (``api.routes.paging``).
EMPTY_PAGE = {"items": [], "has_more": False, "next_cursor": None}


@pytest.fixture
def config(tmp_path: Path) -> Path:
    """The sweeps API tests' configuration as a file, with a third admin (erin)."""
    doc = sweeps_doc()
    doc["withdrawals"]["roles"]["admins"].append("erin")
    path = tmp_path / "custody.toml"
    path.write_text(to_toml(doc))
    return path


def _with(args: list[str], option: str, value: str) -> list[str]:
    changed = list(args)
    changed[changed.index(option) + 1] = value
    return changed


def column(table: str, name: str) -> str:
    """The text of column ``name`` of a one-row table, each cell's wrapped lines joined
    (without spaces for the header and ``name`` ``address``/``available``, with one for
    prose), or of its record when the table was printed as records (``api.render``)."""

    def cells(mark: str, prose: bool) -> list[str]:
        rows = [[c.strip() for c in line.split(mark)[1:-1]] for line in table.splitlines()
                if line.count(mark) > 1]
        glue = " " if prose else ""
        return [glue.join(p for p in parts if p) for parts in zip(*rows, strict=True)]

    if "┃" not in table:  # Too wide for the terminal: one ``name: value`` line per cell.
        (value,) = [line.split(":", 1)[1].strip() for line in table.splitlines()
                    if line.startswith(f"{name}:")]
        return value
    at = cells("┃", False).index(name)
    return cells("│", name == "note")[at]


def refused(result: Any, code: str) -> None:
    """Exit 2 with exactly one line, ``error [code]: ...``."""
    assert result.returncode == 2, (result.stdout, result.stderr)
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"error [{code}]: "), line


def test_cold_propose_decide_list_show(engine: Engine, database_url: str, config: Path) -> None:
    first = custody(database_url, config, *PROPOSE, "--as", "carol", "--key", "k1", "--json")
    assert first.returncode == 0, first.stderr
    body = json.loads(first.stdout)
    assert (body["state"], body["approvals_required"], body["replayed"]) == (
        "proposed", 2, False)
    assert body["amount"]["minor"] == "25000000000000000000" and body["destination"] == COLD
    again = custody(database_url, config, *PROPOSE, "--as", "carol", "--key", "k1", "--json")
    assert json.loads(again.stdout)["id"] == body["id"] and json.loads(again.stdout)["replayed"]
    refused(custody(database_url, config, *_with(PROPOSE, "--amount", "1"), "--as", "carol",
                    "--key", "k1"), "request_key_reused")
    written = counts(engine)
    for option, value, code in [("--amount", "abc", "cold_transfer_invalid"),
                                ("--amount", "1.5", "cold_transfer_invalid"),
                                ("--amount", "-1", "cold_transfer_invalid"),
                                ("--amount", "1e3", "cold_transfer_invalid"),
                                ("--amount", "0", "cold_transfer_invalid"),
                                ("--chain", "nochain", "cold_transfer_invalid"),
                                ("--asset", "DOGE", "cold_transfer_invalid")]:
        refused(custody(database_url, config, *_with(PROPOSE, option, value), "--as", "carol"),
                code)
    refused(custody(database_url, config, *PROPOSE, "--as", "bob"), "admin_required")
    refused(custody(database_url, config, *_with(PROPOSE, "--amount", "1"), "--as", "dave"),
            "cold_transfer_open")
    cold = str(body["id"])
    refused(custody(database_url, config, "cold", "approve", cold, "--as", "carol"),
            "cold_decision_refused")
    refused(custody(database_url, config, "cold", "approve", cold, "--as", "alice"),
            "admin_required")
    assert counts(engine) == written
    one = custody(database_url, config, "cold", "approve", cold, "--as", "dave")
    assert one.returncode == 0, one.stderr
    assert "proposed" in one.stdout and "approvals 1 of 2 (dave)" in one.stdout
    refused(custody(database_url, config, "cold", "approve", cold, "--as", "dave"),
            "cold_decision_refused")
    two = custody(database_url, config, "cold", "approve", cold, "--as", "erin", "--json")
    assert json.loads(two.stdout)["state"] == "approved"
    listed = custody(database_url, config, "cold", "list", "--state", "approved", "--json")
    assert [c["id"] for c in json.loads(listed.stdout)["items"]] == [body["id"]]
    table = custody(database_url, config, "cold", "list")
    assert COLD in table.stdout and "2/2 dave erin" in table.stdout
    shown = custody(database_url, config, "cold", "show", cold, "--json")
    timeline = json.loads(shown.stdout)
    assert [e["event"] for e in timeline["events"]] == ["planned", "approval_recorded",
                                                        "approved"]
    text = custody(database_url, config, "cold", "show", cold)
    assert text.returncode == 0 and "dave approved" in text.stdout
    refused(custody(database_url, config, "cold", "show", "999"), "movement_not_found")

    small = custody(database_url, config, "cold", "propose", "--chain", "devnet", "--asset",
                    "USDC", "--amount", "1000000", "--reason", "usdc excess", "--as", "carol",
                    "--json")
    assert small.returncode == 0, small.stderr
    usdc = str(json.loads(small.stdout)["id"])
    refused(custody(database_url, config, "cold", "reject", usdc, "--as", "dave", "--reason",
                    ""), "cold_decision_refused")
    gone = custody(database_url, config, "cold", "reject", usdc, "--as", "dave", "--reason",
                   "not today", "--json")
    assert (json.loads(gone.stdout)["state"], json.loads(gone.stdout)["state_reason"]) == (
        "rejected", "not today")


def test_refills_request_and_list(engine: Engine, database_url: str, config: Path) -> None:
    ask = ["refills", "request", "--chain", "devnet", "--asset", "USDC", "--amount",
           "2500000000", "--reason", "weekend", "--as", "carol"]
    made = custody(database_url, config, *ask, "--key", "r1", "--json")
    assert made.returncode == 0, made.stderr
    body = json.loads(made.stdout)
    assert (body["source"], body["state"], body["amount"]["decimal"]) == (
        COLD, "open", "2500.000000")
    text = custody(database_url, config, *ask, "--key", "r1")
    assert "replayed" in text.stdout and COLD in text.stdout
    written = counts(engine)
    refused(custody(database_url, config, *_with(ask, "--amount", "0")), "refill_invalid")
    refused(custody(database_url, config, *_with(ask, "--amount", "2.5")), "refill_invalid")
    refused(custody(database_url, config, *ask, "--source", "0x" + "12" * 20), "refill_invalid")
    refused(custody(database_url, config, *_with(ask, "--as", "bob")), "admin_required")
    assert counts(engine) == written
    listed = custody(database_url, config, "refills", "list", "--json")
    assert [r["id"] for r in json.loads(listed.stdout)["items"]] == [body["id"]]
    assert COLD in custody(database_url, config, "refills", "list").stdout


def test_without_sweeps_writes_are_refused(engine: Engine, database_url: str,
                                           tmp_path: Path) -> None:
    doc = sweeps_doc()
    del doc["sweeps"]
    path = tmp_path / "custody.toml"
    path.write_text(to_toml(doc))
    refused(custody(database_url, path, *PROPOSE, "--as", "carol"), "sweeps_not_configured")
    refused(custody(database_url, path, "refills", "request", "--chain", "devnet", "--asset",
                    "ETH", "--amount", "1", "--reason", "low", "--as", "carol"),
            "sweeps_not_configured")
    listed = custody(database_url, path, "sweeps", "list", "--json")
    assert json.loads(listed.stdout) == EMPTY_PAGE
    assert counts(engine) == dict.fromkeys(TABLES, 0)


@pytest.mark.anvil
def test_an_xpub_chains_sweeps_need_a_signer(engine: Engine, database_url: str,
                                             node: AnvilNode,  # noqa: F811
                                             monkeypatch: pytest.MonkeyPatch,
                                             tmp_path: Path) -> None:
    rig = make_rig(engine, node, monkeypatch, xpub=True)
    rig.deposit_eth("x1", ETH)
    rig.settle()  # The sweeper proposes the sweep: nothing to sign it with.
    path = tmp_path / "custody.toml"
    path.write_text(to_toml(rig.doc))
    listed = custody(database_url, path, "sweeps", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    (sweep,) = json.loads(listed.stdout)["items"]
    assert (sweep["state"], sweep["needs_signer"], sweep["address"]) == (
        "proposed", True, rig.user("x1"))
    assert sweep["available"] == {"units": str(ETH), "decimals": 18,
                                  "decimal": "1.000000000000000000"}
    # A narrow terminal: the table wraps, it never cuts an address or an amount.
    env = {**os.environ, "CUSTODY_DATABASE_URL": database_url, "CUSTODY_CONFIG": str(path),
           "COLUMNS": "80"}
    narrow = subprocess.run([sys.executable, "-m", "api.cli", "sweeps", "list"], env=env,
                            text=True, capture_output=True, timeout=120)
    assert narrow.returncode == 0, narrow.stderr
    assert "…" not in narrow.stdout
    assert column(narrow.stdout, "address") == rig.user("x1")
    assert column(narrow.stdout, "available") == "1.000000000000000000"
    assert column(narrow.stdout, "note").startswith("needs a")
    shown = custody(database_url, path, "sweeps", "show", str(sweep["id"]))
    assert shown.returncode == 0 and "needs a signer" in shown.stdout
    checked = custody(database_url, path, "config", "check")
    assert checked.returncode == 0, checked.stderr
    assert "sweeps: configured (ETH on dev" in checked.stdout
    as_json = custody(database_url, path, "config", "check", "--json")
    assert json.loads(as_json.stdout)["sweeps_configured"] is True
    broken = dict(rig.doc)
    broken["sweeps"] = {"assets": [{"chain": "dev", "asset": "ETH", "hot_max": "1"}]}
    path.write_text(to_toml(broken))
    refused(custody(database_url, path, "config", "check"), "configuration_invalid")
