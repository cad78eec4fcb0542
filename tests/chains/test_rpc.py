"""The JSON-RPC client against a real anvil, and real transport faults (no patching).

Faults are injected with real sockets: a port nobody listens on, a socket that accepts and
never answers, and a small HTTP proxy in front of anvil that fails its first requests.
"""

from __future__ import annotations

import socket
import threading
import time
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from chains.errors import ChainError, RpcError, RpcUnavailable
from chains.evm import TRANSFER_TOPIC, encode_call
from chains.model import BlockHeader
from chains.rpc import RpcCall, RpcClient, shown_url
from devtools.anvil import DEV_ACCOUNTS, AnvilNode, Contract, free_port

pytestmark = pytest.mark.anvil


def _answer(handler: BaseHTTPRequestHandler, body: bytes) -> None:
    """Send ``body`` as a 200 JSON answer."""
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


class _Server:
    """A local HTTP server on a free port, serving ``handler`` on a thread of its own."""

    def _serve(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


class FlakyProxy(_Server):
    """An HTTP proxy to ``upstream`` that answers its first ``fail_first`` requests with
    ``status`` (or drops the connection when ``status`` is None), then forwards."""

    def __init__(self, upstream: str, fail_first: int, status: int | None = 503) -> None:
        self.upstream = upstream
        self.fail_first = fail_first
        self.status = status
        self.requests = 0
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                body = self.rfile.read(int(self.headers["Content-Length"]))
                proxy.requests += 1
                if proxy.requests <= proxy.fail_first:
                    if proxy.status is None:
                        self.close_connection = True
                        self.connection.shutdown(socket.SHUT_RDWR)
                        return
                    self.send_response(proxy.status)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                request = urllib.request.Request(
                    proxy.upstream, data=body, headers={"Content-Type": "application/json"})
                with urllib.request.urlopen(request, timeout=5) as upstream_answer:
                    _answer(self, upstream_answer.read())

            def log_message(self, *args: object) -> None:
                pass

        self._serve(Handler)


@pytest.fixture
def rpc(anvil_session: AnvilNode) -> Iterator[RpcClient]:
    with RpcClient(anvil_session.url, rpc_timeout_ms=5_000) as client:
        yield client


class TestReads:
    def test_chain_id_and_head(self, rpc: RpcClient) -> None:
        assert rpc.chain_id() == 31337
        assert isinstance(rpc.block_number(), int)

    def test_get_block_header(self, rpc: RpcClient, anvil_session: AnvilNode) -> None:
        anvil_session.send_eth(DEV_ACCOUNTS[0], DEV_ACCOUNTS[1], 1)
        latest = rpc.get_block("latest")
        assert latest is not None
        parent = rpc.get_block(latest.number - 1)
        assert parent is not None and latest.parent_hash == parent.hash
        assert latest.hash == latest.hash.lower() and len(latest.hash) == 66
        assert all(isinstance(h, str) for h in latest.transactions)
        full = rpc.get_block(latest.number, full=True)
        assert full is not None and isinstance(full.transactions[0], dict)
        assert rpc.get_block_by_hash(latest.hash) == latest

    def test_unknown_block_is_none(self, rpc: RpcClient) -> None:
        assert rpc.get_block(10**9) is None

    def test_finalized_trails_by_two_epochs(self, rpc: RpcClient) -> None:
        finalized = rpc.get_block("finalized")
        head = rpc.block_number()
        assert finalized is not None and finalized.number == max(0, head - 4)

    def test_headers_batch_with_a_missing_height(self, rpc: RpcClient,
                                                 anvil_session: AnvilNode) -> None:
        anvil_session.send_eth(DEV_ACCOUNTS[0], DEV_ACCOUNTS[1], 1)
        head = rpc.block_number()
        headers = rpc.get_headers([0, head, head + 1_000])
        assert headers[2] is None
        assert headers[0] is not None and headers[0].number == 0
        full = rpc.get_block(head)
        assert full is not None and full.transactions  # get_block carries tx hashes...
        # ...get_headers leaves them out.
        assert headers[1] == BlockHeader(full.number, full.hash, full.parent_hash, full.timestamp)
        assert rpc.canonical_hashes([0, head + 1_000]) == {0: headers[0].hash}

    def test_missing_transaction_objects_are_none(self, rpc: RpcClient) -> None:
        unknown = "0x" + "12" * 32
        assert rpc.get_receipt(unknown) is None
        assert rpc.get_transaction(unknown) is None
        assert rpc.get_raw_transaction(unknown) is None
        assert rpc.get_receipts([unknown]) == [None]


class TestBatches:
    def test_one_failing_item_keeps_the_others(self, rpc: RpcClient) -> None:
        outcomes = rpc.batch([
            RpcCall("eth_chainId"),
            RpcCall("eth_getBlockByNumber", ["not-a-number", False]),
            RpcCall("eth_getBlockByNumber", ["0x0", False]),
            RpcCall("eth_getTransactionReceipt", ["0x" + "34" * 32]),
        ])
        assert outcomes[0] == "0x7a69"
        assert isinstance(outcomes[1], RpcError) and not outcomes[1].retryable
        assert outcomes[2]["number"] == "0x0"
        assert outcomes[3] is None

    def test_batch_results_raises_on_a_failed_item(self, rpc: RpcClient) -> None:
        with pytest.raises(RpcError):
            rpc.batch_results([RpcCall("eth_chainId"), RpcCall("eth_noSuchMethod")])

    def test_chunks_above_batch_size(self, anvil: AnvilNode) -> None:
        anvil.mine(6)
        with RpcClient(anvil.url, batch_size_max=3) as small:
            headers = small.get_headers(range(7))
        assert [h.number for h in headers if h is not None] == list(range(7))

    def test_empty_batch_sends_nothing(self, rpc: RpcClient) -> None:
        assert rpc.batch([]) == []


class TestTransactions:
    def test_send_and_read_back(self, rpc: RpcClient, anvil_session: AnvilNode) -> None:
        sender, receiver = DEV_ACCOUNTS[2], DEV_ACCOUNTS[3]
        nonce = rpc.get_transaction_count(sender)
        balance = rpc.get_balance(receiver)
        tx_hash = anvil_session.send_eth(sender, receiver, 10**18 + 1)
        receipt = rpc.get_receipt(tx_hash)
        assert receipt is not None and receipt["status"] == "0x1"
        tx = rpc.get_transaction(tx_hash)
        assert tx is not None and int(tx["value"], 16) == 10**18 + 1
        assert rpc.get_transaction_count(sender) == nonce + 1
        assert rpc.get_balance(receiver) == balance + 10**18 + 1
        assert rpc.get_balance(receiver, int(receipt["blockNumber"], 16) - 1) == balance
        raw = rpc.get_raw_transaction(tx_hash)
        assert raw is not None and raw.startswith("0x")

    def test_resending_a_mined_transaction_is_an_rpc_error(
        self, rpc: RpcClient, anvil_session: AnvilNode
    ) -> None:
        tx_hash = anvil_session.send_eth(DEV_ACCOUNTS[2], DEV_ACCOUNTS[3], 1)
        with pytest.raises(RpcError):
            rpc.send_raw_transaction(anvil_session.raw_transaction(tx_hash))

    def test_call_and_logs_and_block_receipts(
        self, rpc: RpcClient, anvil_session: AnvilNode, usdc: Contract
    ) -> None:
        holder = DEV_ACCOUNTS[4]
        tx_hash = anvil_session.transact(usdc, "mint", [holder, 5_000_000])
        receipt = rpc.get_receipt(tx_hash)
        assert receipt is not None
        block = int(receipt["blockNumber"], 16)
        output = rpc.call(usdc.address, encode_call(usdc.abi, "balanceOf", [holder]), block)
        assert int(output, 16) >= 5_000_000
        logs = rpc.get_logs(block, block, addresses=[usdc.address], topics=[TRANSFER_TOPIC])
        assert [log["transactionHash"] for log in logs] == [tx_hash]
        assert rpc.get_logs(block, block, addresses=["0x" + "00" * 20]) == []
        receipts = rpc.get_block_receipts([block, 10**9])
        assert receipts[1] is None
        assert receipts[0] is not None and receipts[0][0]["transactionHash"] == tx_hash


class TestFailures:
    def test_dead_port_raises_unavailable_after_backoff(self) -> None:
        client = RpcClient(f"http://127.0.0.1:{free_port()}", rpc_timeout_ms=300,
                           retries_max=3, backoff_ms=20)
        started = time.monotonic()
        with pytest.raises(RpcUnavailable) as caught, client:
            client.block_number()
        elapsed = time.monotonic() - started
        assert caught.value.retryable and caught.value.code == "rpc_unavailable"
        assert "4 attempts" in str(caught.value)
        assert 0.14 <= elapsed < 2.0  # 20 + 40 + 80 ms of backoff, refused at once

    def test_a_node_providers_key_in_the_url_is_never_in_the_error(self) -> None:
        # Providers put the API key in the path or the query (and credentials in the user
        # info); the error shows the scheme, host and port, and the cause is not chained.
        port = free_port()
        url = f"http://user:pass-w0rd@127.0.0.1:{port}/v3/a1b2c3d4e5f6a7b8?apikey=Zq9Xw8Vu7"
        with pytest.raises(RpcUnavailable) as caught, RpcClient(
                url, rpc_timeout_ms=300, retries_max=0) as client:
            client.block_number()
        message = str(caught.value)
        assert message.startswith(f"http://127.0.0.1:{port}/[redacted]: no answer after 1")
        assert "ConnectionError" in message and caught.value.__cause__ is None
        for secret in ("a1b2c3d4e5f6a7b8", "Zq9Xw8Vu7", "pass-w0rd", "user:"):
            assert secret not in message
        assert shown_url("http://127.0.0.1:8545") == "http://127.0.0.1:8545"
        assert shown_url("https://[::1]:8545/") == "https://[::1]:8545"

    def test_silent_server_times_out(self) -> None:
        # A listening socket that never accepts: the TCP connect succeeds (backlog), the
        # answer never comes, so only the read timeout can end the call.
        with socket.socket() as silent:
            silent.bind(("127.0.0.1", 0))
            silent.listen(8)
            url = f"http://127.0.0.1:{silent.getsockname()[1]}"
            started = time.monotonic()
            with pytest.raises(RpcUnavailable), RpcClient(
                url, rpc_timeout_ms=200, retries_max=1, backoff_ms=10
            ) as client:
                client.get_headers([1, 2])
            elapsed = time.monotonic() - started
        assert 0.4 <= elapsed < 2.0

    @pytest.mark.parametrize("status", [503, 429, None])
    def test_transient_failures_are_retried(self, anvil_session: AnvilNode,
                                            status: int | None) -> None:
        proxy = FlakyProxy(anvil_session.url, fail_first=2, status=status)
        try:
            with RpcClient(proxy.url, retries_max=2, backoff_ms=10) as client:
                assert client.chain_id() == 31337
                assert client.get_headers([0])[0] is not None
            assert proxy.requests == 4
        finally:
            proxy.close()

    def test_retry_budget_is_bounded(self, anvil_session: AnvilNode) -> None:
        proxy = FlakyProxy(anvil_session.url, fail_first=100, status=502)
        try:
            with pytest.raises(RpcUnavailable), RpcClient(
                proxy.url, retries_max=2, backoff_ms=10
            ) as client:
                client.get_block_receipts([0, 1])
            assert proxy.requests == 3
        finally:
            proxy.close()

    def test_rpc_error_is_not_retried(self, anvil_session: AnvilNode) -> None:
        proxy = FlakyProxy(anvil_session.url, fail_first=0)
        try:
            with pytest.raises(RpcError) as caught, RpcClient(proxy.url) as client:
                client.request("eth_getBlockByNumber", ["bad", False])
            assert proxy.requests == 1
            assert caught.value.rpc_code == -32602 and not caught.value.retryable
        finally:
            proxy.close()

    def test_killed_node_raises_instead_of_answering_empty(self, anvil: AnvilNode) -> None:
        client = RpcClient(anvil.url, rpc_timeout_ms=500, retries_max=1, backoff_ms=10)
        assert client.get_logs(0, "latest") == []
        anvil.stop()
        with pytest.raises(RpcUnavailable), client:
            client.get_logs(0, "latest")
        with pytest.raises(ChainError):
            client.get_block_receipts([0])


class Recorder(_Server):
    """An HTTP server answering every JSON-RPC call with the result ``0x7``, recording
    each request's target (a proxy receives the absolute URL) and headers."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, dict[str, str]]] = []
        #: The JSON text of every answer's ``result``.
        self.result = '"0x7"'
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                import json

                calls = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                recorder.seen.append((self.path, dict(self.headers)))
                answers = [f'{{"jsonrpc":"2.0","id":{c["id"]},"result":{recorder.result}}}'
                           for c in (calls if isinstance(calls, list) else [calls])]
                _answer(self, ("[" + ",".join(answers) + "]" if isinstance(calls, list)
                               else answers[0]).encode())

            def log_message(self, *args: object) -> None:
                pass

        self._serve(Handler)


@pytest.fixture
def recorder() -> Iterator[Recorder]:
    r = Recorder()
    yield r
    r.close()


class TestTransport:
    def test_credentials_in_the_url_go_as_basic_authentication(self, recorder: Recorder,
                                                               monkeypatch: pytest.MonkeyPatch
                                                               ) -> None:
        import base64

        monkeypatch.delenv("HTTP_PROXY", raising=False)
        monkeypatch.delenv("http_proxy", raising=False)
        url = f"http://us%40er:p%3Ass@127.0.0.1:{recorder.port}/v3/key?x=1"
        with RpcClient(url, rpc_timeout_ms=2_000, retries_max=0) as client:
            assert client.block_number() == 7
        [(target, headers)] = recorder.seen
        assert target == "/v3/key?x=1"  # no credentials in the request line
        assert headers["Authorization"] == "Basic " + base64.b64encode(b"us@er:p:ss").decode()
        assert headers["Content-Type"] == "application/json"
        assert "gzip" in headers["Accept-Encoding"]

    def test_the_environments_proxy_is_used_unless_the_host_is_excluded(
            self, recorder: Recorder, monkeypatch: pytest.MonkeyPatch) -> None:
        # The recorder plays the proxy: a proxied request names the whole URL.
        monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{recorder.port}")
        monkeypatch.setenv("http_proxy", f"http://127.0.0.1:{recorder.port}")
        monkeypatch.setenv("NO_PROXY", "excluded.invalid")
        monkeypatch.setenv("no_proxy", "excluded.invalid")
        with RpcClient("http://node.example.invalid:8545/rpc", rpc_timeout_ms=2_000,
                       retries_max=0) as client:
            assert client.block_number() == 7
        assert recorder.seen[0][0] == "http://node.example.invalid:8545/rpc"
        with pytest.raises(RpcUnavailable), RpcClient(
                "http://excluded.invalid:8545/rpc", rpc_timeout_ms=500, retries_max=0) as client:
            client.block_number()  # not proxied: the name does not resolve
        assert len(recorder.seen) == 1

    def test_integers_of_any_size_are_read_exactly(self, recorder: Recorder,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
        # A node's answer holding a raw JSON integer past 64 bits (quantities are hex strings,
        # but a node or a proxy may not follow that): read as the exact int, never a float.
        monkeypatch.delenv("HTTP_PROXY", raising=False)
        monkeypatch.delenv("http_proxy", raising=False)
        recorder.result = f'{{"value":{2**200 + 1},"small":7,"text":"0x1"}}'
        with RpcClient(f"http://127.0.0.1:{recorder.port}", rpc_timeout_ms=2_000,
                       retries_max=0) as client:
            [answer] = client.batch_results([RpcCall("anything", [])])
        assert answer == {"value": 2**200 + 1, "small": 7, "text": "0x1"}
        assert type(answer["value"]) is int
