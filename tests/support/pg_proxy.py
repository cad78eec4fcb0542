"""Fault injection for tests: a real TCP proxy in front of PostgreSQL that can cut a connection
at a chosen protocol message.

``PgCutProxy`` forwards the PostgreSQL wire protocol byte for byte between clients on 127.0.0.1
and a server (a Unix socket or a TCP address), reading the client's messages as it goes. While
a cut is armed, the first client message whose text contains ``trigger`` (a simple query such
as psycopg's ``COMMIT``, or an extended-protocol Parse or Bind naming a function) is handled
by ``mode``:

- ``after_answer``: the message is forwarded, the server's answer is read and thrown away, and
  both sockets are closed: the server did it (a COMMIT committed) but the client never learns.
- ``before``: both sockets are closed without forwarding it: the server never saw it (a
  transaction waiting for its COMMIT is rolled back).

Nothing is patched: the engine speaks to the proxy exactly as it would to a server.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from dataclasses import dataclass


@dataclass
class Cut:
    """An armed cut: the trigger text, the mode, and how many times it fired."""

    trigger: bytes
    mode: str
    fired: int = 0


class PgCutProxy:
    """A PostgreSQL proxy on 127.0.0.1 with an armable cut."""

    def __init__(self, server_host: str, server_port: int = 5432, *, port: int = 0) -> None:
        self._target = (f"{server_host}/.s.PGSQL.{server_port}" if server_host.startswith("/")
                        else (server_host, server_port))
        self.cut: Cut | None = None
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", port))  # 0: a free one
        self.port = int(self._listener.getsockname()[1])
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def arm(self, trigger: str, mode: str) -> Cut:
        """Cut the next connection that sends ``trigger`` (see the module docstring)."""
        assert mode in ("after_answer", "before")
        with self._lock:
            self.cut = Cut(trigger.encode(), mode)
            return self.cut

    def close(self) -> None:
        """Stop accepting connections."""
        self._closed = True
        self._listener.close()

    def _server_socket(self) -> socket.socket:
        if isinstance(self._target, str):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        else:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.connect(self._target)
        return s

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = self._server_socket()
            pair = _Pair(client, server)
            threading.Thread(target=self._client_to_server, args=(pair,), daemon=True).start()
            threading.Thread(target=self._server_to_client, args=(pair,), daemon=True).start()

    def _take(self, message: bytes) -> Cut | None:
        """The armed cut if ``message`` (a typed client message) triggers it; disarms it."""
        with self._lock:
            cut = self.cut
            if cut is None or message[:1] not in (b"Q", b"P", b"B") or cut.trigger not in message:
                return None
            cut.fired += 1
            self.cut = None
            return cut

    def _client_to_server(self, pair: _Pair) -> None:
        try:
            # Untyped messages first: an SSL or GSS request (answered by one byte), then the
            # startup message; every later message is a type byte and an int32 length.
            typed = False
            while True:
                if typed:
                    head = _read(pair.client, 5)
                    body = _read(pair.client, struct.unpack("!I", head[1:])[0] - 4)
                    message = head + body
                else:
                    head = _read(pair.client, 4)
                    message = head + _read(pair.client, struct.unpack("!I", head)[0] - 4)
                    code = struct.unpack("!I", message[4:8])[0]
                    typed = code not in (80877103, 80877104)  # SSLRequest, GSSENCRequest
                cut = self._take(message) if typed else None
                if cut is not None and cut.mode == "before":
                    pair.close()
                    return
                if cut is not None:
                    pair.drop_next_answer.set()
                pair.server.sendall(message)
        except OSError:
            pair.close()

    def _server_to_client(self, pair: _Pair) -> None:
        try:
            while True:
                data = pair.server.recv(65536)
                if not data:
                    break
                if pair.drop_next_answer.is_set():
                    # The server answered the cut message: the client never gets it.
                    break
                pair.client.sendall(data)
        except OSError:
            pass
        pair.close()


class _Pair:
    def __init__(self, client: socket.socket, server: socket.socket) -> None:
        self.client, self.server = client, server
        self.drop_next_answer = threading.Event()

    def close(self) -> None:
        for s in (self.client, self.server):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()


def _read(s: socket.socket, n: int) -> bytes:
    chunks, left = [], n
    while left:
        chunk = s.recv(left)
        if not chunk:
            raise OSError("closed")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)
