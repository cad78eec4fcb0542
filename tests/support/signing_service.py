"""A real HTTP signing service for tests, on 127.0.0.1: it holds a development key and answers
``outgoing.signer.RemoteSigner``'s requests (``{raw_tx, tx_hash}``), with knobs to make it
slow, block it until released, fail, hang past the client's timeout or lie.

Knobs (plain attributes, read at each request, so a test flips them while it runs):

- ``delay_s`` / ``random_delay_s``: sleep that long (a fixed delay, plus a uniform random one
  up to ``random_delay_s``) before answering;
- ``block()`` / ``release()``: requests wait (on a ``threading.Event``) until released;
  ``entered`` is set when a request arrives, so that a test knows the signer is being called;
- ``fail``: answer HTTP 503; ``hang_s``: sleep that long before answering (past the client's
  timeout: the client gives up);
- ``tamper``: ``"value"`` signs a different value, ``"hash"`` answers a wrong hash, ``"key"``
  signs with another key.

Every request body is kept in ``requests`` (what the processor asked, in order). With a
``mnemonic``, a request naming a ``derivation_path`` (a deposit address, for a sweep) is signed
with the key at that path.
"""

from __future__ import annotations

import json
import random
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from eth_account import Account
from eth_utils.address import to_checksum_address


class SigningService:
    """The service; ``url`` is where to POST. Use as a context manager, or call ``close``."""

    def __init__(self, key: str, *, seed: int = 0, mnemonic: str | None = None) -> None:
        self._account = Account.from_key(key)
        self.address = str(self._account.address).lower()
        self._mnemonic = mnemonic
        self.delay_s = 0.0
        self.random_delay_s = 0.0
        self.fail = False
        self.hang_s = 0.0
        self.tamper: str | None = None
        self.requests: list[dict[str, Any]] = []
        self.entered = threading.Event()
        self._released = threading.Event()
        self._released.set()
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        service = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                status, answer = service._answer(body)
                data = json.dumps(answer).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:
                    pass  # The client gave up (its timeout): nothing to answer.

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        """The URL to POST signing requests to."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/sign"

    def block(self) -> None:
        """Hold every request until ``release`` (``entered`` is cleared, set on arrival)."""
        self.entered.clear()
        self._released.clear()

    def release(self) -> None:
        """Let held and later requests through."""
        self._released.set()

    def _answer(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        with self._lock:
            self.requests.append(body)
            pause = self.delay_s + self._rng.uniform(0.0, self.random_delay_s)
        self.entered.set()
        self._released.wait(timeout=120)
        time.sleep(pause + self.hang_s)
        if self.fail:
            return 503, {"error": "signing service unavailable"}
        account = self._account
        if self._mnemonic is not None and "derivation_path" in body:
            # A deposit address: the key at the asked path of the service's mnemonic.
            Account.enable_unaudited_hdwallet_features()
            account = Account.from_mnemonic(self._mnemonic,
                                            account_path=str(body["derivation_path"]))
        if body.get("from") != str(account.address).lower():
            return 400, {"error": "not our key"}
        tx = {"type": 2, "chainId": body["chain_id"], "nonce": body["nonce"],
              "to": to_checksum_address(body["to"]), "value": int(body["value"]),
              "data": body["data"], "gas": body["gas_limit"],
              "maxFeePerGas": int(body["max_fee_per_gas"]),
              "maxPriorityFeePerGas": int(body["max_priority_fee_per_gas"])}
        if self.tamper == "value":
            tx["value"] += 1
        elif self.tamper == "key":
            account = Account.create()
        signed = account.sign_transaction(tx)
        tx_hash = "0x" + bytes(signed.hash).hex()
        if self.tamper == "hash":
            tx_hash = "0x" + "ab" * 32
        return 200, {"raw_tx": "0x" + bytes(signed.raw_transaction).hex(), "tx_hash": tx_hash}

    def close(self) -> None:
        """Release held requests and stop serving."""
        self._released.set()
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> SigningService:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
