"""``custody config check`` run as an operator runs it (a subprocess) against a real anvil."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from devtools.anvil import AnvilNode, Contract, free_port
from devtools.config import dev_config, to_toml

pytestmark = pytest.mark.anvil


@pytest.fixture(scope="module")
def node() -> Iterator[AnvilNode]:
    with AnvilNode.start(slots_in_an_epoch=2) as n:
        yield n


@pytest.fixture(scope="module")
def usdc(node: AnvilNode) -> Contract:
    return node.deploy("TestToken", "USD Coin", "USDC", 6)


def custody(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # No database is given on purpose: the check needs none.
    env = {k: v for k, v in os.environ.items()
           if k not in ("CUSTODY_CONFIG", "CUSTODY_DATABASE_URL")}
    env["COLUMNS"] = "250"
    return subprocess.run([sys.executable, "-m", "api.cli", "config", "check",
                           "--config", str(config), *args], env=env, text=True,
                          capture_output=True, timeout=120)


def _write(tmp_path: Path, doc: dict[str, Any]) -> Path:
    path = tmp_path / "custody.toml"
    path.write_text(to_toml(doc))
    return path


def _doc(url: str, token: str, *, withdrawals: bool = True) -> dict[str, Any]:
    doc = dev_config(rpc_url=url, token=token, chain_options={"rpc_timeout_ms": 2000,
                                                              "rpc_retries_max": 1})
    if not withdrawals:
        del doc["withdrawals"]
    # A second chain on the same node, agreeing too.
    doc["chains"]["mirror"] = copy.deepcopy(doc["chains"]["devnet"])
    return doc


def test_help_says_what_is_checked_and_the_exit_codes() -> None:
    done = subprocess.run([sys.executable, "-m", "api.cli", "config", "check", "--help"],
                          env={**os.environ, "COLUMNS": "200"}, text=True, capture_output=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert "eth_chainId" in done.stdout and "Exit 2" in done.stdout and "--json" in done.stdout


def test_a_good_configuration_exits_0_with_a_table_per_chain(
        tmp_path: Path, node: AnvilNode, usdc: Contract) -> None:
    done = custody(_write(tmp_path, _doc(node.url, usdc.address)))
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    out = done.stdout
    assert "chain devnet" in out and "chain mirror" in out
    assert f"token {usdc.address} decimals" in out and "'USDC'" in out
    assert "withdrawals: configured (hot wallets: devnet)" in out
    assert "ok: 2 chains agree with their nodes" in out


def test_tracing_off_is_reported_not_refused(tmp_path: Path, node: AnvilNode,
                                            usdc: Contract) -> None:
    doc = _doc(node.url, usdc.address)
    doc["chains"]["mirror"]["trace_internal"] = False
    done = custody(_write(tmp_path, doc), "--json")
    assert done.returncode == 0, done.stderr
    chains = {c["chain"]: c for c in json.loads(done.stdout)["chains"]}
    (off,) = [f for f in chains["mirror"]["findings"] if f["field"] == "trace_internal"]
    assert (off["configured"], off["checked"]) == ("false", False)
    assert off["observed"] == "not asked: ETH paid by internal calls is not detected"
    (on,) = [f for f in chains["devnet"]["findings"] if f["field"] == "trace_internal"]
    assert (on["configured"], on["checked"], on["ok"]) == ("true", True, True)


def test_json_parses_and_says_what_was_read(tmp_path: Path, node: AnvilNode,
                                           usdc: Contract) -> None:
    done = custody(_write(tmp_path, _doc(node.url, usdc.address, withdrawals=False)), "--json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["ok"] is True and doc["withdrawals_configured"] is False
    devnet = doc["chains"][0]
    assert (devnet["chain"], devnet["ok"], devnet["reachable"]) == ("devnet", True, True)
    assert devnet["findings"] == [
        {"field": "chain_id", "configured": "31337", "observed": "31337", "ok": True,
         "checked": True},
        {"field": "trace_internal", "configured": "true",
         "observed": "debug_traceBlockByHash with callTracer answers", "ok": True,
         "checked": True},
        {"field": f"token {usdc.address} decimals", "configured": "6", "observed": "6",
         "ok": True, "checked": True},
        {"field": f"token {usdc.address} symbol", "configured": "'USDC'",
         "observed": "'USDC'", "ok": True, "checked": False},
    ]


@pytest.mark.parametrize(("change", "line"), [
    ({"chain_id": 1}, "error [config_mismatch]: chain mirror: chain_id is 1 in the "
                      "configuration, the node says 31337"),
    ({"decimals": 18}, "error [config_mismatch]: chain mirror: token {token} decimals is 18 "
                       "in the configuration, the node says 6"),
], ids=["chain_id", "decimals"])
def test_each_mismatch_exits_2_with_one_line(tmp_path: Path, node: AnvilNode, usdc: Contract,
                                             change: dict[str, int], line: str) -> None:
    doc = _doc(node.url, usdc.address)
    mirror = doc["chains"]["mirror"]
    if "decimals" in change:
        mirror["tokens"][0]["decimals"] = change["decimals"]
    else:
        mirror.update(change)
    path = _write(tmp_path, doc)
    done = custody(path)
    assert done.returncode == 2
    assert done.stderr.splitlines() == [line.format(token=usdc.address)]
    assert "NO" in done.stdout and "ok:" not in done.stdout
    as_json = custody(path, "--json")
    assert as_json.returncode == 2
    parsed = json.loads(as_json.stdout)
    assert parsed["ok"] is False
    assert [c["ok"] for c in parsed["chains"]] == [True, False]
    assert as_json.stderr.splitlines() == [line.format(token=usdc.address)]


def test_an_unreachable_node_is_one_line_and_exit_2(tmp_path: Path, usdc: Contract) -> None:
    doc = dev_config(rpc_url=f"http://127.0.0.1:{free_port()}", token=usdc.address,
                     chain_options={"rpc_timeout_ms": 500, "rpc_retries_max": 0})
    done = custody(_write(tmp_path, doc), "--json")
    assert done.returncode == 2
    [line] = done.stderr.splitlines()
    assert line.startswith("error [rpc_unavailable]: chain devnet: the node could not be "
                           "checked: ")
    assert json.loads(done.stdout)["chains"][0]["reachable"] is False


def test_a_file_that_does_not_load_is_one_line_and_exit_2(tmp_path: Path, node: AnvilNode,
                                                          usdc: Contract) -> None:
    doc = _doc(node.url, usdc.address)
    doc["withdrawals"]["assets"][0]["chain"] = "nowhere"
    done = custody(_write(tmp_path, doc))
    assert done.returncode == 2
    [line] = done.stderr.splitlines()
    assert line.startswith("error [configuration_invalid]: ")
    assert custody(tmp_path / "missing.toml").returncode == 2
