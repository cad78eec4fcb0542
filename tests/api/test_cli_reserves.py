"""``custody reserves`` as an operator runs it (subprocesses on a real database and anvil):
a report taken, shown, listed and written as HTML; a user's proof exported and checked offline
(and a tampered one refused in one line); the ownership of every address checked offline,
the cold address external until its signature, made with its own key, is imported; bad input
refused in one line, changing nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from eth_account import Account
from eth_account.messages import encode_defunct
from sqlalchemy.engine import Engine

from devtools.anvil import AnvilNode
from tests.api.test_treasury_cli import count
from tests.sweeps.conftest import ETH, USDC, SweepRig, make_rig

pytestmark = pytest.mark.anvil


@pytest.fixture
def node() -> Iterator[AnvilNode]:
    """A fresh anvil (automine on, finalized 4 blocks behind)."""
    with AnvilNode.start(slots_in_an_epoch=2) as n:
        yield n


def _run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "api.cli", "reserves", *args], env=env,
                          text=True, capture_output=True, timeout=120)


def test_report_proof_and_ownership_from_the_command_line(
        engine: Engine, node: AnvilNode, database_url: str, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    cold = Account.create()
    rig: SweepRig = make_rig(engine, node, monkeypatch)
    rig.doc["chains"][next(iter(rig.doc["chains"]))]["cold_addresses"] = [
        str(cold.address).lower()]
    rig.fund_treasury(ETH)
    rig.deposit_eth("a", ETH // 4)
    rig.deposit_usdc("b", 3 * USDC)
    rig.settle()
    env = {**rig.process_env(database_url, rig.write_config(tmp_path / "custody.toml")),
           "COLUMNS": "80"}

    html = tmp_path / "report.html"
    taken = _run(env, "report", "--json", "--html", str(html), "--by", "ops")
    assert taken.returncode == 0, taken.stderr
    doc = json.loads(taken.stdout)
    root = doc["liabilities"]["root"]
    assert doc["format"] == "custody-por-report/1" and doc["liabilities"]["users"] == 2
    assert all(a["difference"] == "0" for a in doc["assets"])
    assert root in html.read_text() and "chart-ETH" in html.read_text()
    table = _run(env, "show")
    assert table.returncode == 0 and root in table.stdout.replace("\n", "")
    listed = _run(env, "list", "--json")
    assert [i["id"] for i in json.loads(listed.stdout)["items"]] == [doc["id"]]

    proof = _run(env, "proof", "a")
    assert proof.returncode == 0, proof.stderr
    path = tmp_path / "proof.json"
    path.write_text(proof.stdout)
    ok = _run(env, "verify", str(path), root)
    assert ok.returncode == 0 and "valid: user a" in ok.stdout
    verdict = json.loads(_run(env, "verify", str(path), root, "--json").stdout)
    assert (verdict["valid"], verdict["user_id"], verdict["root"]) == (True, "a", root)
    assert all(isinstance(v, str) for v in verdict["balances"].values())
    bad = json.loads(proof.stdout)
    bad["leaf"]["balances"][0] = str(int(bad["leaf"]["balances"][0]) + 1)
    path.write_text(json.dumps(bad))
    refused = _run(env, "verify", str(path), root)
    assert refused.returncode == 1 and refused.stderr.startswith("invalid [root_mismatch]: ")
    assert refused.stderr.count("\n") == 1
    as_json = _run(env, "verify", str(path), root, "--json")
    assert as_json.returncode == 1
    assert json.loads(as_json.stdout) == {"valid": False, "reason": "root_mismatch"}
    standalone = subprocess.run([sys.executable, "-I", "-S", "docs/verify_proof.py",
                                 str(tmp_path / "proof.json"), root], text=True,
                                capture_output=True, timeout=30,
                                cwd=Path(__file__).resolve().parents[2])
    assert standalone.returncode == 1 and "root_mismatch" in standalone.stdout + standalone.stderr

    report_file = tmp_path / "report.json"
    report_file.write_text(taken.stdout)
    owned = _run(env, "verify-ownership", str(report_file))
    assert owned.returncode == 0, owned.stdout + owned.stderr  # The cold one holds nothing.
    verdicts = json.loads(_run(env, "verify-ownership", str(report_file), "--json").stdout)
    assert {v["address"] for v in verdicts} == {a["address"] for a in doc["addresses"]}
    assert {(v["kind"], v["verdict"]) for v in verdicts if v["kind"] == "cold"} == {
        ("cold", "unsigned")}
    (entry,) = [a for a in doc["addresses"] if a["kind"] == "cold"]
    assert (entry["signer"], entry["signature"]) == ("external", None)
    signature = "0x" + bytes(Account.sign_message(encode_defunct(text=entry["message"]),
                                                  cold.key).signature).hex()
    sigs = tmp_path / "sigs.json"
    sigs.write_text(json.dumps([{"chain": entry["chain"], "address": entry["address"],
                                 "signature": signature}]))
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps([{"chain": entry["chain"], "address": entry["address"],
                                  "signature": "0x" + bytes(Account.sign_message(
                                      encode_defunct(text=entry["message"]),
                                      Account.create().key).signature).hex()}]))
    before = count(engine, "reserve_signatures")
    no = _run(env, "import-signatures", str(doc["id"]), str(wrong), "--by", "ops")
    assert no.returncode == 2 and no.stderr.startswith("error [signature_refused]: ")
    assert count(engine, "reserve_signatures") == before
    yes = _run(env, "import-signatures", str(doc["id"]), str(sigs), "--by", "ops")
    assert yes.returncode == 0 and "1 signature(s) recorded" in yes.stdout
    shown = json.loads(_run(env, "show", "--json").stdout)
    (cold_entry,) = [a for a in shown["addresses"] if a["kind"] == "cold"]
    assert cold_entry["signature"] == signature
    # A tampered report fails offline.
    shown["liabilities"]["root"] = "0" * 64
    report_file.write_text(json.dumps(shown))
    assert _run(env, "verify-ownership", str(report_file)).returncode == 1

    listing = tmp_path / "list.json"
    listing.write_text("[1, 2]")
    for args, code in ((["report", "--at-block", "dev"], "request_invalid"),
                       (["report", "--at-block", "dev=999999"], "block_not_final"),
                       (["show", "999"], "report_not_found"),
                       (["proof", "nobody"], "proof_not_found"),
                       (["verify", str(tmp_path / "missing.json"), root], "file_unreadable"),
                       (["verify", str(path), "not-a-root"], "request_invalid"),
                       (["verify-ownership", str(listing)], "report_malformed")):
        failed = _run(env, *args)
        assert failed.returncode == 2, (args, failed.stderr)
        assert failed.stderr.startswith(f"error [{code}]: ") and failed.stderr.count("\n") == 1
    assert count(engine, "reserve_reports") == 1
    assert os.path.getsize(html) > 1000
