"""A real local webhook receiver (for the demo and the tests): it checks each delivery's
signature, dedupes by event id, and can be told to fail the next requests.

It is an ``http.server`` on 127.0.0.1 in a thread of its own: deliveries travel over a real
socket, exactly as they would to a client's server.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from api.outbox import EVENT_ID_HEADER, SIGNATURE_HEADER, verify_signature
from devtools.config import DEV_CHAIN


@dataclass(frozen=True)
class Received:
    """One request the receiver got."""

    event_id: str
    event_type: str
    signature_valid: bool
    body: bytes
    status: int
    #: The ``Custody-Signature`` header as received.
    signature: str = ""

    @property
    def document(self) -> dict[str, Any]:
        """The parsed JSON body."""
        return dict(json.loads(self.body))


@dataclass
class WebhookReceiver:
    """Receives webhooks at ``url``; ``secret`` is the endpoint's signing secret."""

    secret: str = ""
    requests: list[Received] = field(default_factory=list)
    #: Answer the next this-many requests with 500 (a receiver that is down).
    fail_next: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _server: ThreadingHTTPServer | None = None

    def start(self) -> WebhookReceiver:
        """Listen on a free port of 127.0.0.1."""
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                length = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(length)
                valid = verify_signature(receiver.secret, self.headers.get(SIGNATURE_HEADER, ""),
                                         body)
                with receiver._lock:
                    failing = receiver.fail_next > 0
                    if failing:
                        receiver.fail_next -= 1
                    status = 500 if failing else (204 if valid else 400)
                    receiver.requests.append(Received(
                        self.headers.get(EVENT_ID_HEADER, ""),
                        self.headers.get("Custody-Event-Type", ""), valid, body, status,
                        self.headers.get(SIGNATURE_HEADER, "")))
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    @property
    def url(self) -> str:
        """Where to send webhooks."""
        assert self._server is not None, "receiver not started"
        return f"http://127.0.0.1:{self._server.server_address[1]}/webhooks"

    def stop(self) -> None:
        """Stop listening."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def accepted(self) -> dict[str, Received]:
        """Accepted deliveries (valid signature, 2xx) deduplicated by event id: the first one."""
        with self._lock:
            seen: dict[str, Received] = {}
            for r in self.requests:
                if r.status < 300 and r.signature_valid:
                    seen.setdefault(r.event_id, r)
            return seen

    def types(self) -> list[str]:
        """Types of the accepted events, in the order they first arrived."""
        return [r.event_type for r in self.accepted().values()]

    def wait_for(self, predicate: Any, timeout_s: float = 30.0) -> bool:
        """Wait until ``predicate(self)`` holds (polling); False on timeout."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if predicate(self):
                return True
            time.sleep(0.05)
        return bool(predicate(self))


# --- a whole engine on a local chain (the demo and the end-to-end test) -----------------------

#: Environment variable holding the demo hot wallet's key (a fresh key per run; dev only).
HOT_KEY_ENV = "CUSTODY_DEMO_HOT_KEY"
CHAIN = DEV_CHAIN
#: Where the demo withdraws to (anvil dev account 2, EIP-55).
DESTINATION = "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC"
USDC = 10**6
ETH = 10**18
#: The environment variable that holds the development mnemonic when the demo sweeps.
MNEMONIC_ENV = "CUSTODY_DEMO_DEPOSIT_MNEMONIC"


@dataclass
class Devchain:
    """An anvil node (automine off), the test token and a funded hot wallet."""

    node: Any
    token: Any
    hot: str
    hot_key: str

    def config_toml(self, *, confirmations: int, poll_interval_s: float = 0.2,
                    sweeps: bool = False) -> str:
        """The whole configuration file (chains, address source, withdrawals). ``sweeps``: deposit
        addresses from the development mnemonic (account 1, read from ``MNEMONIC_ENV``), so the
        sweeper can sign for them, and a ``[sweeps]`` section; otherwise an xpub source."""
        from devtools.config import dev_config, to_toml

        doc = dev_config(rpc_url=self.node.url, token=self.token.address, chain=CHAIN,
                         finality=f"confirmations:{confirmations}", hot_wallet=self.hot,
                         hot_key_env=HOT_KEY_ENV, xpub=not sweeps, chain_options={
                             "native_minimum": "0.001", "poll_interval_s": poll_interval_s,
                             "rpc_timeout_ms": 5000})
        if sweeps:
            doc["address_sources"] = {"evm": {"kind": "mnemonic", "mnemonic_env": MNEMONIC_ENV,
                                              "account": 1}}
            doc["sweeps"] = {"bump_after_s": 600, "assets": [
                {"chain": CHAIN, "asset": "ETH", "threshold": "0.01"},
                {"chain": CHAIN, "asset": "USDC", "threshold": "1"}]}
        return ("# Written by the custody demo: a local chain (anvil), ETH and a test USDC token.\n"
                f"# Finality: confirmations:{confirmations} = the block holding the transfer "
                "counts as the first\n# confirmation; a deposit is final once head - block + 1 "
                f">= {confirmations}.\n" + to_toml(doc))

    def stop(self) -> None:
        """Stop the node."""
        self.node.stop()


def start_devchain() -> Devchain:
    """Start anvil with automine off, deploy the test token (minted to the senders) and draw a
    fresh hot wallet that holds nothing on chain: the story funds it through a declared
    treasury funding, so every wei and token unit on it is accounted for in the ledger."""
    from eth_account import Account
    from eth_utils.address import to_checksum_address

    from devtools.anvil import DEV_ACCOUNTS, AnvilNode

    node = AnvilNode.start(slots_in_an_epoch=2, no_mining=True)
    try:
        token = node.deploy("TestToken", "USD Coin", "USDC", 6)
        account = Account.create()
        node.transact(token, "mint", [to_checksum_address(DEV_ACCOUNTS[0]), 1_000_000 * USDC])
        node.mine(1)
        return Devchain(node, token, str(account.address).lower(),
                        "0x" + bytes(account.key).hex())
    except BaseException:
        node.stop()
        raise


def open_company_book(engine: Any, chains: Any, *, gas_float_minor: int = 10 * ETH) -> None:
    """Assets, the company accounts of every chain and a gas float (equity -> treasury, in the
    chain's native asset) booked without any on-chain transfer behind it. For tests and
    benchmarks whose hot wallet anvil funds directly; the demo funds its treasury on chain
    through a declared funding instead (``Scenario.fund_treasury``). Fixed idempotency keys:
    running it again moves nothing."""
    from datetime import UTC, datetime

    from config.uow import UnitOfWork
    from ledger import chart
    from ledger import service as ledger
    from ledger.model import Entry, credit, debit

    with UnitOfWork(engine) as uow:
        assets = {code: ledger.open_asset(uow, code, a.scale) for code, a in chains.assets.items()}
        for name, chain in chains.chains.items():
            for asset in assets.values():
                for spec in (chart.custody(name), chart.treasury(name), chart.equity_owner(),
                             chart.revenue_withdrawal_fees(), chart.expense_network_fees(),
                             chart.suspense_unattributed()):
                    ledger.open_account(uow, spec, asset)
            native = assets[chain.native_asset]
            treasury = ledger.get_account(uow, chart.treasury(name).code, native.code)
            equity = ledger.get_account(uow, chart.equity_owner().code, native.code)
            ledger.post(uow, Entry(f"setup:gas-float:{name}", "capital",
                                   datetime(2026, 1, 1, tzinfo=UTC), "setup",
                                   (debit(treasury, gas_float_minor),
                                    credit(equity, gas_float_minor))))
        uow.commit()


class ServerThread:
    """uvicorn serving ``app`` on 127.0.0.1 in a thread (its lifespan runs: scheduler)."""

    def __init__(self, app: Any, port: int = 0) -> None:
        import uvicorn

        config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning",
                                lifespan="on", ws="none")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.01)
        self.url = f"http://127.0.0.1:{self.server.servers[0].sockets[0].getsockname()[1]}"

    def stop(self) -> None:
        """Graceful shutdown (the scheduler stops with the lifespan)."""
        self.server.should_exit = True
        self.thread.join(timeout=30)


@dataclass
class Scenario:
    """The story the demo tells and the end-to-end test checks, over HTTP."""

    http: Any  # httpx.Client with the base URL and the client's Authorization header
    admin: Any  # the same with an admin key (declares the treasury funding)
    chain: Devchain
    confirmations: int
    progress: Any = print  # called with one line per step
    timeout_s: float = 60.0
    users: dict[str, str] = field(default_factory=dict)
    addresses: dict[str, str] = field(default_factory=dict)
    deposits: dict[str, str] = field(default_factory=dict)  # name -> tx hash
    withdrawal: dict[str, Any] = field(default_factory=dict)
    fundings: dict[str, str] = field(default_factory=dict)  # asset -> tx hash
    #: Set (by a Ctrl-C handler) to abandon the story at the next wait.
    cancel: threading.Event = field(default_factory=threading.Event)

    # -- helpers

    def _ok(self, response: Any, *codes: int) -> dict[str, Any]:
        if response.status_code not in (codes or (200,)):
            raise RuntimeError(f"{response.request.method} {response.request.url}: "
                               f"{response.status_code} {response.text}")
        return dict(response.json())

    def deposit_state(self, name: str) -> str | None:
        """The state of a deposit as the API reports it (None: not seen yet)."""
        r = self.http.get(f"/v1/deposits/{CHAIN}/{self.deposits[name]}")
        if r.status_code == 404:
            return None
        transfers = self._ok(r)["transfers"]
        return str(transfers[0]["deposit"]["state"]) if transfers else None

    def funding_state(self, asset: str) -> str | None:
        """The state of a treasury funding's transfer to the hot wallet (None: not seen)."""
        r = self.admin.get(f"/v1/deposits/{CHAIN}/{self.fundings[asset]}")
        if r.status_code == 404:
            return None
        return str(self._ok(r)["transfers"][0]["deposit"]["state"])

    def withdrawal_state(self) -> str:
        """The withdrawal's state."""
        r = self.http.get(f"/v1/withdrawals/{self.withdrawal['id']}")
        return str(self._ok(r)["withdrawal"]["state"])

    def wait(self, what: str, done: Any, *, mine: bool = False) -> None:
        """Wait (bounded) until ``done()``; with ``mine``, mine a block every 0.3 s meanwhile."""
        self.progress(f"waiting: {what}")
        deadline = time.monotonic() + self.timeout_s
        while not done():
            if self.cancel.is_set():
                raise KeyboardInterrupt
            if time.monotonic() > deadline:
                raise TimeoutError(f"timed out waiting: {what}")
            if mine:
                self.chain.node.mine(1)
            time.sleep(0.3 if mine else 0.1)

    # -- the story

    def fund_treasury(self) -> None:
        """The company's capital, declared first (admin API, with an Idempotency-Key) and then
        sent on chain to the empty hot wallet: 10 ETH for gas and 1,000 USDC of payout
        liquidity (until sweeps bring the deposits over). Booked ``DR treasury / CR
        equity:owner`` once final; an undeclared transfer would go to suspense with a case."""
        from eth_utils.address import to_checksum_address

        from devtools.anvil import DEV_ACCOUNTS

        node, funder = self.chain.node, DEV_ACCOUNTS[0]
        for asset, amount in (("ETH", 10 * ETH), ("USDC", 1_000 * USDC)):
            self._ok(self.admin.post(
                "/v1/admin/treasury/fundings", headers={"Idempotency-Key": f"demo-capital-{asset}"},
                json={"chain": CHAIN, "asset": asset, "amount": str(amount), "from_address": funder,
                      "reason": "demo: company capital for gas and payouts"}), 201)
        self.fundings["ETH"] = node.send_eth(funder, self.chain.hot, 10 * ETH)
        self.fundings["USDC"] = node.transact(
            self.chain.token, "transfer", [to_checksum_address(self.chain.hot), 1_000 * USDC],
            sender=funder)
        node.mine(1)
        self.progress("declared 10 ETH and 1,000 USDC of company capital, then sent them to the "
                      "hot wallet")

    def run(self) -> None:
        """Treasury funding, users, deposits (one through a reorg), finality, a withdrawal to
        settlement."""
        from eth_utils.address import to_checksum_address

        from devtools.anvil import DEV_ACCOUNTS

        node = self.chain.node
        self.fund_treasury()
        for name in ("alice", "bob"):
            user = self._ok(self.http.post("/v1/users", json={"reference": name}), 200, 201)
            self.users[name] = user["id"]
            addr = self._ok(self.http.post(f"/v1/users/{user['id']}/deposit-addresses",
                                           json={"chain": CHAIN}), 200, 201)
            self.addresses[name] = addr["address"]
            self.progress(f"user {name}: id {user['id']}, deposit address {addr['address']}")
        self.deposits["alice ETH"] = node.send_eth(DEV_ACCOUNTS[0], self.addresses["alice"],
                                                   3 * ETH // 2)
        node.mine(1)
        self.deposits["bob USDC"] = node.transact(
            self.chain.token, "transfer", [to_checksum_address(self.addresses["bob"]),
                                           150 * USDC])
        node.mine(1)
        self.progress("sent 1.5 ETH to alice and 150 USDC to bob (one block each)")
        self.wait("the watcher sees both deposits",
                  lambda: all(self.deposit_state(n) == "included" for n in self.deposits))

        raw = node.raw_transaction(self.deposits["bob USDC"])
        node.reorg(1)
        self.progress("reorg before finality: the block holding bob's deposit was replaced")
        self.wait("the watcher notices the reorg (bob's deposit back to unconfirmed)",
                  lambda: self.deposit_state("bob USDC") == "unconfirmed")
        node.send_raw(raw)
        node.mine(1)
        self.progress("the USDC transfer landed again (same signed bytes, same hash)")
        self.wait(f"finality ({self.confirmations} confirmations) and credit of both deposits",
                  lambda: all(self.deposit_state(n) == "credited" for n in self.deposits),
                  mine=True)
        self.wait("the treasury fundings booked as company capital",
                  lambda: all(self.funding_state(a) == "capital" for a in self.fundings),
                  mine=True)
        self.progress("both fundings final: booked DR treasury / CR equity:owner")

        bob = self.users["bob"]
        created = self.http.post(f"/v1/users/{bob}/withdrawals",
                                 headers={"Idempotency-Key": f"demo-withdrawal-{bob}"},
                                 json={"asset": "USDC", "chain": CHAIN, "to": DESTINATION,
                                       "amount": str(30 * USDC)})
        self.withdrawal = self._ok(created, 201)
        self.progress(f"bob withdraws 30 USDC (fee 0.40, up to 2.00 reserved): withdrawal "
                      f"{self.withdrawal['id']} {self.withdrawal['state']}")
        self.wait("the processor signs and broadcasts it",
                  lambda: self.withdrawal_state() in ("broadcast", "included", "settled"))
        self.wait("the payout reaches finality and settles",
                  lambda: self.withdrawal_state() == "settled", mine=True)
        self.progress("settled: 30 sent, 0.40 fee, 1.60 of the reserve refunded")
        # The treasury report reads the chain at the node's finalized block (4 blocks behind
        # with 2 slots per epoch), which the payout's block must reach first.
        node.mine(5)

    def sweep_all(self) -> None:
        """Wait for the sweeper to move both deposits to the hot wallet: alice's ETH in one
        transfer of the balance minus its gas; bob's USDC after a gas top-up from the hot wallet
        is final. Custody does not change; the gas is the company's."""
        def final() -> bool:
            items = self.sweeps()
            return len(items) == 2 and all(s["state"] == "final" for s in items)

        self.wait("the sweeper moves both deposits to the hot wallet (USDC after its gas "
                  "top-up is final)", final, mine=True)
        for s in sorted(self.sweeps(), key=lambda s: s["id"]):
            self.progress(f"swept {s['swept_amount']['decimal']} {s['asset']} from "
                          f"{s['address']} to the hot wallet (gas {s['gas_paid']['decimal']} "
                          "ETH, booked as a network fee)")
        self.chain.node.mine(5)  # The holdings report reads the chain at the final block.

    def sweeps(self) -> list[dict[str, Any]]:
        """The sweeps of the chain (the admin API's answer)."""
        return list(self._ok(self.admin.get("/v1/admin/sweeps", params={"chain": CHAIN}))[
            "items"])

    def holdings(self) -> dict[str, Any]:
        """The holdings report of the chain (the admin API's answer)."""
        return dict(self._ok(self.admin.get("/v1/admin/holdings", params={"chain": CHAIN}))[
            "chains"][0])

    def balances(self, name: str) -> list[dict[str, Any]]:
        """A user's balances per asset (the API's answer)."""
        return list(self._ok(self.http.get(f"/v1/users/{self.users[name]}/balances"))[
            "balances"])

    def treasury(self) -> list[dict[str, Any]]:
        """The treasury report per asset (the admin API's answer)."""
        return list(self._ok(self.admin.get("/v1/admin/treasury", params={"chain": CHAIN}))[
            "items"])

    def timeline(self, name: str) -> dict[str, Any]:
        """A deposit's timeline (the API's answer)."""
        return self._ok(self.http.get(f"/v1/deposits/{CHAIN}/{self.deposits[name]}"))
