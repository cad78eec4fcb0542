"""A fresh install operated as a new user would: only the ``custody`` command line and the HTTP
API, against a blank PostgreSQL database and a local anvil node.

The test imports no Python helper of the engine (no ``devtools``, no domain package): it
writes its own configuration file, starts anvil itself, talks to the node with plain JSON-RPC,
and runs the engine as subprocesses (``custody db upgrade``, ``custody keys create``,
``custody treasury expect``, ``custody serve``, ``custody treasury show``, ``custody
verify``). Its hot wallet is a fresh key that holds nothing on chain until the declared
treasury funding lands on it, so every wei there is accounted for: at the end, the on-chain
holdings of all our addresses at the finalized block equal ``custody:*`` + ``treasury:*`` in
the ledger exactly, and the payout's gas was paid out of the treasury's part.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
from eth_account import Account

pytestmark = [pytest.mark.anvil, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
CUSTODY = str(Path(sys.executable).with_name("custody"))
CHAIN = "localnet"
CONFIRMATIONS = 3
ETH = 10**18
HOT_KEY_ENV = "FRESH_INSTALL_HOT_KEY"
MNEMONIC_ENV = "FRESH_INSTALL_MNEMONIC"
#: anvil's first three unlocked development accounts.
FUNDER = "0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266"
SENDER = "0x70997970c51812dc3a010c7d01b50e0d17dc79c8"
DESTINATION = "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _anvil_binary() -> str:
    found = shutil.which("anvil")
    candidates = [*sorted(ROOT.glob(".tools/node_modules/@foundry-rs/anvil-*-*/bin/anvil")),
                  ROOT / ".tools/node_modules/.bin/anvil"]
    for path in [Path(found)] if found else candidates:
        if path.exists():
            return str(path)
    pytest.fail("anvil is not installed (make anvil)")


class Node:
    """Plain JSON-RPC to the anvil this test started."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.http = httpx.Client(timeout=10)

    def call(self, method: str, params: list[Any]) -> Any:
        answer = self.http.post(self.url, json={"jsonrpc": "2.0", "id": 1, "method": method,
                                                "params": params}).json()
        if "error" in answer:
            raise RuntimeError(f"{method}: {answer['error']}")
        return answer["result"]

    def mine(self, blocks: int = 1) -> None:
        self.call("anvil_mine", [hex(blocks)])

    def send_eth(self, sender: str, to: str, value: int) -> str:
        return str(self.call("eth_sendTransaction", [{"from": sender, "to": to,
                                                       "value": hex(value)}]))

    def balance(self, address: str, block: str = "finalized") -> int:
        return int(self.call("eth_getBalance", [address, block]), 16)


@pytest.fixture
def node() -> Iterator[Node]:
    port = _free_port()
    # Automine off: the test decides when blocks come, as finality needs. One slot per epoch:
    # the node's ``finalized`` block trails latest by two blocks.
    process = subprocess.Popen(
        [_anvil_binary(), "--port", str(port), "--no-mining", "--slots-in-an-epoch", "1"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    n = Node(f"http://127.0.0.1:{port}")
    deadline = time.monotonic() + 20
    while True:
        try:
            n.call("eth_chainId", [])
            break
        except httpx.HTTPError:
            if time.monotonic() > deadline:
                process.kill()
                pytest.fail("anvil did not start")
            time.sleep(0.1)
    yield n
    n.http.close()
    process.terminate()
    process.wait(timeout=10)


@pytest.fixture
def blank_database(server_url: str) -> Iterator[str]:
    """A database with nothing in it: the install migrates it through the CLI."""
    name = f"fresh_{os.getpid()}_{time.monotonic_ns()}"
    owner = sa.create_engine(server_url, isolation_level="AUTOCOMMIT")
    with owner.connect() as conn:
        conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
    yield sa.make_url(server_url).set(database=name).render_as_string(hide_password=False)
    with owner.connect() as conn:
        conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    owner.dispose()


def _config(rpc_url: str, hot: str) -> str:
    return f"""
[assets]
ETH = {{ scale = 18 }}

[address_sources.evm]
kind = "mnemonic"
mnemonic_env = "{MNEMONIC_ENV}"

[chains.{CHAIN}]
family = "evm"
chain_id = 31337
rpc_url = "{rpc_url}"
finality = "confirmations:{CONFIRMATIONS}"
native_asset = "ETH"
native_decimals = 18
native_minimum = "0.001"
poll_interval_s = 0.2

[withdrawals]
bump_after_s = 3600
escalate_after_s = 3600

[withdrawals.roles]
admins = ["carol", "dave"]

[withdrawals.hot_wallets.{CHAIN}]
address = "{hot}"
signer = "local_key"
key_env = "{HOT_KEY_ENV}"

[[withdrawals.assets]]
chain = "{CHAIN}"
asset = "ETH"
minimum = "0.001"
maximum = "100"
fee = "0.0001"
fee_max = "0.0005"
daily_limit = "1000"
"""


class Install:
    """The engine as an operator runs it: the ``custody`` command with one environment."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run([CUSTODY, *args], env=self.env, capture_output=True, text=True,
                              timeout=120)
        if check and done.returncode != 0:
            raise AssertionError(f"custody {' '.join(args)} exited {done.returncode}:\n"
                                 f"{done.stdout}\n{done.stderr}")
        return done

    def json(self, *args: str) -> Any:
        return json.loads(self.run(*args, "--json").stdout)

    def key(self, scope: str, client: str) -> str:
        return self.run("keys", "create", "--scope", scope, "--client", client
                        ).stdout.strip().splitlines()[-1]


def _wait(what: str, done: Callable[[], bool], node: Node, *, timeout_s: float = 90) -> None:
    """Mine a block every 0.2 s until ``done()`` (bounded)."""
    deadline = time.monotonic() + timeout_s
    while not done():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting: {what}")
        node.mine(1)
        time.sleep(0.2)


def _ok(response: httpx.Response, *codes: int) -> Any:
    assert response.status_code in (codes or (200,)), (response.status_code, response.text)
    return response.json()


def _ledger_holdings(show: Any, chain: str, asset: str) -> tuple[int, int, int]:
    """(custody, treasury, on-chain holdings of all our addresses) from ``treasury show``."""
    row = next(r for r in show["items"] if (r["chain"], r["asset"]) == (chain, asset))
    return (int(row["custody"]["minor"]), int(row["treasury"]["minor"]),
            int(row["onchain"]["minor"]))


def test_fresh_install_funds_the_treasury_on_chain_and_settles_a_withdrawal(
        node: Node, blank_database: str, tmp_path: Path) -> None:
    hot = Account.create()
    Account.enable_unaudited_hdwallet_features()  # only to draw a fresh deposit seed phrase
    mnemonic = Account.create_with_mnemonic()[1]
    config = tmp_path / "custody.toml"
    config.write_text(_config(node.url, hot.address.lower()))
    env = {**os.environ, "CUSTODY_DATABASE_URL": blank_database, "CUSTODY_CONFIG": str(config),
           HOT_KEY_ENV: "0x" + bytes(hot.key).hex(), MNEMONIC_ENV: mnemonic,
           "CUSTODY_SETTINGS_FILE": ""}
    install = Install(env)
    assert node.balance(hot.address, "latest") == 0, "the hot wallet starts empty"

    install.run("db", "upgrade")
    install.run("config", "check")
    client_key = install.key("client", "exchange")
    admin_key = install.key("admin", "carol")
    port = _free_port()
    log = open(tmp_path / "serve.log", "w")  # noqa: SIM115 - closed below
    server = subprocess.Popen([CUSTODY, "serve", "--port", str(port), "--interval-s", "0.2"],
                              env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        base = f"http://127.0.0.1:{port}"
        api = httpx.Client(base_url=base, timeout=30,
                           headers={"Authorization": f"Bearer {client_key}"})
        admin = httpx.Client(base_url=base, timeout=30,
                             headers={"Authorization": f"Bearer {admin_key}"})
        deadline = time.monotonic() + 30
        while True:
            try:
                if api.get("/healthz").status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline and server.poll() is None, \
                (tmp_path / "serve.log").read_text()
            time.sleep(0.2)
        try:
            _story(install, node, api, admin, hot.address.lower())
        finally:
            api.close()
            admin.close()
    finally:
        server.terminate()
        server.wait(timeout=60)
        log.close()


def _story(install: Install, node: Node, api: httpx.Client, admin: httpx.Client,
           hot: str) -> None:
    # The operator declares the company's capital before sending it on chain.
    install.run("treasury", "expect", "--chain", CHAIN, "--asset", "ETH", "--amount", str(ETH),
                "--from", FUNDER, "--reason", "seed capital for gas", "--key", "seed-1")
    funding_tx = node.send_eth(FUNDER, hot, ETH)
    node.mine(1)

    user = _ok(api.post("/v1/users", json={"reference": "alice"}), 201)["id"]
    address = _ok(api.post(f"/v1/users/{user}/deposit-addresses", json={"chain": CHAIN}),
                  201)["address"]
    deposit_tx = node.send_eth(SENDER, address, 2 * ETH)
    node.mine(1)

    def deposit_state() -> str | None:
        r = api.get(f"/v1/deposits/{CHAIN}/{deposit_tx}")
        return None if r.status_code == 404 else str(
            _ok(r)["transfers"][0]["deposit"]["state"])

    _wait("the deposit is credited", lambda: deposit_state() == "credited", node)
    _wait("the funding is booked as capital",
          lambda: _ledger_holdings(install.json("treasury", "show"), CHAIN, "ETH")[1] == ETH,
          node)
    funding = _ok(admin.get(f"/v1/deposits/{CHAIN}/{funding_tx}"))["transfers"][0]["deposit"]
    assert funding["state"] == "capital"

    w = _ok(api.post(f"/v1/users/{user}/withdrawals", headers={"Idempotency-Key": "w-1"},
                     json={"asset": "ETH", "chain": CHAIN, "to": DESTINATION,
                           "amount": str(ETH // 2)}), 201)

    def withdrawal_state() -> str:
        return str(_ok(api.get(f"/v1/withdrawals/{w['id']}"))["withdrawal"]["state"])

    _wait("the withdrawal settles", lambda: withdrawal_state() == "settled", node)
    # Let the node's finalized block pass everything, then compare chain and ledger.
    node.mine(4)
    time.sleep(1)
    install.run("verify")
    show = install.json("treasury", "show")
    custody, treasury, onchain = _ledger_holdings(show, CHAIN, "ETH")
    ours = node.balance(hot) + node.balance(address)
    assert onchain == ours
    assert custody + treasury == ours
    fee = 10**14  # 0.0001 ETH charged to the user and moved to the treasury
    assert custody == 2 * ETH - ETH // 2 - fee
    receipt = node.call("eth_getTransactionReceipt", [
        _ok(api.get(f"/v1/withdrawals/{w['id']}"))["attempts"][-1]["tx_hash"]])
    gas = int(receipt["gasUsed"], 16) * int(receipt["effectiveGasPrice"], 16)
    assert gas > 0
    assert treasury == ETH + fee - gas, "the payout's gas was paid out of the treasury's part"
    balances = _ok(api.get(f"/v1/users/{user}/balances"))["balances"]
    eth = next(b for b in balances if b["asset"] == "ETH")
    assert int(eth["available"]["minor"]) == 2 * ETH - ETH // 2 - fee
