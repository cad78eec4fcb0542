"""The holdings report over HTTP (``GET /v1/admin/holdings``) and on the command line
(``custody holdings``, a subprocess as a user runs it), against a real anvil and a real
PostgreSQL (the sweep rig), and with a node that does not answer."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from api.app import create_app
from api.auth import create_key
from api.schemas import Holdings
from chains.rpc import to_quantity
from devtools.config import dev_config, to_toml
from tests.api.conftest import Api, Server
from tests.sweeps.conftest import ETH, USDC, SweepRig, node, rig  # noqa: F401  (fixtures)
from tests.withdrawals.conftest import TEST_HOT_KEY_ENV

CALLERS = {"carol": "admin", "sam": "support", "acme": "client"}


@pytest.fixture
def served(rig: SweepRig) -> Iterator[Api]:  # noqa: F811
    """The API on the rig's database and chain, with a key per caller."""
    app = create_app(rig.engine, rig.chains, rig.wcfg)
    server = Server(app)
    try:
        with httpx.Client(base_url=server.url, timeout=60) as http:
            api = Api(rig.engine, app, http)
            for name, scope in CALLERS.items():
                api.keys[name] = create_key(rig.engine, name, scope).key
            yield api
    finally:
        server.stop()


def custody(database_url: str, config: Path, *args: str,
            columns: int = 80) -> subprocess.CompletedProcess[str]:
    """``custody ARGS`` with this database and configuration file, output piped."""
    env = {**os.environ, "CUSTODY_DATABASE_URL": database_url, "CUSTODY_CONFIG": str(config),
           "COLUMNS": str(columns)}
    return subprocess.run([sys.executable, "-m", "api.cli", *args], env=env, text=True,
                          capture_output=True, timeout=120)


def _without_timings(body: dict[str, Any]) -> dict[str, Any]:
    """The report without its timings (the only figures that differ between two reads)."""
    return {"chains": [{k: v for k, v in c.items() if k not in ("ledger_read_ms",
                                                                "chain_read_ms")}
                       for c in body["chains"]]}


def _amounts(value: Any) -> Iterator[Any]:
    """Every ``{"minor", "decimal"}`` amount inside a JSON value."""
    if isinstance(value, dict):
        if set(value) == {"minor", "decimal"}:
            yield value
        else:
            for v in value.values():
                yield from _amounts(v)
    elif isinstance(value, list):
        for v in value:
            yield from _amounts(v)


@pytest.mark.anvil
def test_staff_read_the_report_clients_cannot_and_the_cli_says_the_same(
        rig: SweepRig, served: Api, database_url: str, tmp_path: Path) -> None:  # noqa: F811
    rig.fund_treasury(2 * ETH)
    rig.deposit_eth("a", ETH // 3)
    rig.deposit_usdc("a", 12 * USDC + 5)
    rig.deposit_usdc("b", 7 * USDC)
    rig.settle(sweep=False)

    r = served.call("GET", "/v1/admin/holdings", "carol")
    assert r.status_code == 200, r.text
    body = r.json()
    Holdings.model_validate(body)  # the documented shape
    (chain,) = body["chains"]
    assert chain["chain"] == "dev" and chain["finality"] == "confirmations:3"
    assert re.fullmatch(r"0x[0-9a-f]{64}", chain["block_hash"])
    eth, usdc = chain["assets"]
    assert eth["custody_plus_treasury"]["minor"] == str(rig.custody("ETH") + rig.treasury("ETH"))
    assert eth["on_chain"] == eth["custody_plus_treasury"]
    assert usdc["on_chain"] == {"minor": "19000005", "decimal": "19.000005"}
    assert usdc["ledger"] == {"scale": 6, "custody": usdc["on_chain"],
                              "treasury": {"minor": "0", "decimal": "0.000000"},
                              "custody_plus_treasury": usdc["on_chain"]}
    for a in chain["assets"]:
        assert (a["difference"]["minor"], a["status"], a["hot_cold"]["status"]) == (
            "0", "ok", "ok")
    assert all(isinstance(x["minor"], str) and isinstance(x["decimal"], str)
               for x in _amounts(body))
    rows = {(h["address"], h["asset"]): h for h in chain["addresses"]}
    a_usdc = rows[(rig.user("a"), "USDC")]
    assert (a_usdc["customer"]["minor"], a_usdc["status"]) == ("12000005", "ok")
    assert rows[(rig.hot, "ETH")]["expected"] is None

    support = served.call("GET", "/v1/admin/holdings?chain=dev", "sam")
    assert support.status_code == 200
    assert _without_timings(support.json()) == _without_timings(body)
    for who, status in (("acme", 403), (None, 401)):
        refused = served.call("GET", "/v1/admin/holdings", who)
        assert refused.status_code == status
        assert refused.headers["content-type"] == "application/problem+json"
    unknown = served.call("GET", "/v1/admin/holdings?chain=nochain", "carol")
    assert unknown.status_code == 422 and unknown.json()["code"] == "chain_unknown"
    assert unknown.headers["content-type"] == "application/problem+json"
    malformed = served.call("GET", "/v1/admin/holdings?chain=NO%20CHAIN", "carol")
    assert malformed.status_code == 422 and malformed.json()["code"] == "request_invalid"

    config = tmp_path / "custody.toml"
    config.write_text(to_toml(rig.doc))
    as_json = custody(database_url, config, "holdings", "--json")
    assert as_json.returncode == 0, as_json.stderr
    assert _without_timings(json.loads(as_json.stdout)) == _without_timings(body)
    assert as_json.stderr == ""  # No progress bar when stderr is not a terminal.

    table = custody(database_url, config, "holdings", "--chain", "dev")
    assert table.returncode == 0, table.stderr
    out = table.stdout
    assert "…" not in out and "..." not in out
    for address in (rig.hot, rig.user("a"), rig.user("b"), chain["block_hash"]):
        assert address in out, address  # whole, on one line
    assert max(len(line) for line in out.splitlines()) <= 80
    assert "0.333333333333333333 ETH" in out and "333333333333333333" in out
    assert "12.000005 USDC" in out and "dev USDC: on chain = custody + treasury, exactly" in out

    # A balance nobody booked: reported exactly, and the command exits 1 (a finding).
    rig.node.rpc.request("anvil_setBalance", [rig.user("b"), to_quantity(4_242)])
    rig.node.mine(3)
    found = custody(database_url, config, "holdings", "--chain", "dev")
    assert found.returncode == 1, found.stderr
    assert "4242" in found.stdout and "ETH: unexplained" in found.stdout
    r = served.call("GET", "/v1/admin/holdings?chain=dev", "sam")
    b_eth = next(h for h in r.json()["chains"][0]["addresses"]
                 if h["address"] == rig.user("b") and h["asset"] == "ETH")
    assert (b_eth["difference"]["minor"], b_eth["status"]) == ("4242", "unexplained")


def test_a_node_that_cannot_be_read_is_a_503_problem(api: Api, database_url: str,
                                                      tmp_path: Path) -> None:
    # This app's chain points at a port where no node listens.
    r = api.call("GET", "/v1/admin/holdings", "sam")
    assert r.status_code == 503, r.text
    assert r.headers["content-type"] == "application/problem+json"
    problem = r.json()
    assert problem["code"] == "holdings_unavailable"
    assert problem["detail"].startswith("devnet: the node could not be read")
    unknown = api.call("GET", "/v1/admin/holdings?chain=nochain", "carol")
    assert unknown.status_code == 422 and unknown.json()["code"] == "chain_unknown"

    config = tmp_path / "custody.toml"
    config.write_text(to_toml(dev_config(hot_key_env=TEST_HOT_KEY_ENV, xpub=True)))
    shown = custody(database_url, config, "holdings")
    assert shown.returncode == 2 and shown.stdout == ""
    (line,) = shown.stderr.strip().splitlines()
    assert line.startswith("error [holdings_unavailable]: devnet: the node could not be read")
    unknown_cli = custody(database_url, config, "holdings", "--chain", "nochain", "--json")
    assert unknown_cli.returncode == 2
    assert unknown_cli.stderr.startswith("error [configuration_invalid]: no chain 'nochain'")
