"""Fault injection for tests and drills: a real HTTP proxy in front of a JSON-RPC node.

``FaultProxy`` forwards every JSON-RPC request to the node unchanged, except
``eth_sendRawTransaction`` while a fault is armed:

- ``drop_answer``: the request is forwarded (the node takes the transaction) but the
  connection is closed without an answer: the engine cannot know it worked.
- ``drop_request``: the connection is closed without forwarding: the node never saw it.

Nothing is patched: the engine talks HTTP to the proxy exactly as it would to a node.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import requests

SEND = "eth_sendRawTransaction"


class FaultProxy:
    """A JSON-RPC proxy on 127.0.0.1 with an armable fault on ``eth_sendRawTransaction``."""

    def __init__(self, target_url: str) -> None:
        self.target_url = target_url
        self.fault: str | None = None
        self.forwarded_sends = 0
        self.dropped_sends = 0
        self._lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # quiet
                return

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                proxy._handle(self, body)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def _handle(self, handler: BaseHTTPRequestHandler, body: bytes) -> None:
        try:
            payload = json.loads(body)
        except ValueError:
            payload = None
        items = payload if isinstance(payload, list) else [payload]
        is_send = any(isinstance(i, dict) and i.get("method") == SEND for i in items)
        fault = self.fault if is_send else None
        if fault == "drop_request":
            with self._lock:
                self.dropped_sends += 1
            handler.close_connection = True
            return  # No answer, nothing forwarded.
        answer = requests.post(self.target_url, data=body, timeout=10,
                               headers={"Content-Type": "application/json"})
        if is_send:
            with self._lock:
                self.forwarded_sends += 1
        if fault == "drop_answer":
            with self._lock:
                self.dropped_sends += 1
            handler.close_connection = True
            return  # Forwarded, answer thrown away.
        handler.send_response(answer.status_code)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(answer.content)))
        handler.end_headers()
        handler.wfile.write(answer.content)

    def close(self) -> None:
        """Stop serving."""
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> FaultProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
