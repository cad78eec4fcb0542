"""The API tests reuse the ledger's test book; HTTP fixtures: an app on a real database.

``api`` is the app on this test's migrated database (runs as custody_app), served by a real
uvicorn on a free local port (in a thread of the test process) and called with httpx, with one
API key per principal below. The configuration is the withdrawal tests' (chain ``devnet``,
USDC scale 6, ETH scale 18; ``devtools.config``) plus an xpub address source (anvil's dev
mnemonic, account 1).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
import uvicorn
from fastapi import FastAPI
from sqlalchemy.engine import Engine

from api.app import create_app
from api.auth import create_key
from api.ratelimit import RateLimits
from api.routes.deps import utc_now
from chains.model import ObservedTransfer
from config.chains import ChainsConfig
from config.uow import UnitOfWork
from config.withdrawals import WithdrawalsConfig
from deposits import scans
from deposits.scanner import Observation
from devtools.config import DEV_TOKEN, dev_config, dev_configs, dev_xpub
from ledger import repository as ledger_repo
from tests.ledger.conftest import book  # noqa: F401  (a fixture, registered by import)
from tests.withdrawals.conftest import TEST_HOT_KEY_ENV, fund, open_book

#: Principals and the scope of their key.
PRINCIPALS = {"acme": "client", "globex": "client", "sam": "support", "carol": "admin",
              "dave": "admin", "alice": "approver", "bob": "approver"}
XPUB = dev_xpub()
DEST = "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC"


def configs() -> tuple[ChainsConfig, WithdrawalsConfig]:
    """Chains and withdrawals configuration of the API tests."""
    return dev_configs(dev_config(hot_key_env=TEST_HOT_KEY_ENV, xpub=True))


@dataclass
class Api:
    """An app on the test database, its HTTP client and a key per principal."""

    engine: Engine
    app: FastAPI
    http: httpx.Client
    keys: dict[str, str] = field(default_factory=dict)

    def headers(self, who: str | None, idem: str | None = None) -> dict[str, str]:
        """Authorization of ``who`` (None: none) and an Idempotency-Key if given."""
        found = {"Authorization": f"Bearer {self.keys[who]}"} if who else {}
        return {**found, "Idempotency-Key": idem} if idem else found

    def call(self, method: str, path: str, who: str | None = None, *, idem: str | None = None,
             json: Any = None, headers: dict[str, str] | None = None,
             **kwargs: Any) -> httpx.Response:
        """One request as ``who`` (extra ``headers`` added)."""
        return self.http.request(method, path, headers={**self.headers(who, idem),
                                                        **(headers or {})}, json=json, **kwargs)

    def new_user(self, who: str = "acme") -> str:
        """A user created by client ``who``."""
        r = self.call("POST", "/v1/users", who, json={})
        assert r.status_code == 201, r.text
        return str(r.json()["id"])

    def funded_user(self, who: str = "acme", amount_minor: int = 150_000_000) -> str:
        """A user of ``who`` holding ``amount_minor`` USDC (as a final deposit would)."""
        user = self.new_user(who)
        fund(self.engine, [user], amount_minor)
        return user

    def withdraw(self, user: str, amount: str = "30000000", who: str = "acme") -> dict[str, Any]:
        """A withdrawal of USDC to DEST (201 expected)."""
        r = self.call("POST", f"/v1/users/{user}/withdrawals", who, idem=uuid.uuid4().hex,
                      json={"asset": "USDC", "chain": "devnet", "to": DEST, "amount": amount})
        assert r.status_code == 201, r.text
        return dict(r.json())


class Server:
    """A real uvicorn serving ``app`` on 127.0.0.1 (a free port) in a background thread."""

    def __init__(self, app: FastAPI) -> None:
        config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning",
                                lifespan="on", ws="none", http="h11")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            assert time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.01)
        port = self.server.servers[0].sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"

    def stop(self) -> None:
        """Shut down and wait for the thread."""
        self.server.should_exit = True
        self.thread.join(timeout=10)


@contextmanager
def serve(engine: Engine, rate_limits: RateLimits | None = None,
          clock: Callable[[], datetime] = utc_now) -> Iterator[Api]:
    """An Api on ``engine``: the book opened, keys for every principal, a server running."""
    open_book(engine)
    chains, wcfg = configs()
    with serve_app(engine, create_app(engine, chains, wcfg, rate_limits=rate_limits,
                                      clock=clock)) as api:
        yield api


@contextmanager
def serve_app(engine: Engine, app: FastAPI) -> Iterator[Api]:
    """``app`` served by uvicorn, as an Api with a key for every principal."""
    server = Server(app)
    try:
        with httpx.Client(base_url=server.url, timeout=30) as http:
            api = Api(engine, app, http)
            for name, scope in PRINCIPALS.items():
                api.keys[name] = create_key(engine, name, scope).key
            yield api
    finally:
        server.stop()


@pytest.fixture
def api(engine: Engine) -> Iterator[Api]:
    """The API on this test's database."""
    with serve(engine) as running:
        yield running


FAKE_TOKEN = DEV_TOKEN
SENDER = "0x" + "11" * 20


def seed_deposit(api: Api, user: str, amount_minor: int = 5_000_000) -> str:
    """A USDC deposit to the user's address, recorded by the deposit service as the watcher
    would (included at block 100, not final); returns its transaction hash."""
    r = api.call("POST", f"/v1/users/{user}/deposit-addresses", "acme",
                 json={"chain": "devnet"})
    assert r.status_code in (200, 201), r.text
    address = r.json()["address"]
    tx_hash = "0x" + uuid.uuid4().hex + uuid.uuid4().hex
    observed = Observation(ObservedTransfer(
        token=FAKE_TOKEN, from_address=SENDER, to_address=address, value=amount_minor,
        tx_hash=tx_hash, block_number=100, block_hash="0x" + "22" * 32, position="log:0",
        log_index=7), tx_from=SENDER, tx_nonce=1)
    chains, _ = configs()
    with UnitOfWork(api.engine) as uow:
        scans.record_scan(uow, chains, chains.chain("devnet"), [], [observed],
                             {address: user}, head_block=100, now=datetime.now(UTC))
        uow.commit()
    return tx_hash


def fund_transaction(api: Api, user: str, amount_minor: int = 150_000_000) -> int:
    """The ledger transaction that funded ``user`` (see ``Api.funded_user``)."""
    with UnitOfWork(api.engine) as uow:
        txid = ledger_repo.get_transaction_id_by_key(
            uow.conn, f"test:fund:{user}:USDC:{amount_minor}")
    assert txid is not None
    return txid


def take_report(api: Api) -> int:
    """A proof-of-reserves report of the ledger now, with no chain configured (on-chain
    holdings zero, no address to sign)."""
    from config.chains import parse_chains_config
    from reserves import service

    no_chains = parse_chains_config({"assets": {"USDC": {"scale": 6}, "ETH": {"scale": 18}}})
    taken = service.take_report(api.engine, no_chains, now=datetime.now(UTC), taken_by="test",
                                signer_of=lambda chain, address, index: None)
    assert taken.report_id is not None, taken.findings
    return taken.report_id
