"""Balances at one block (chains.balances): the pure decoders, then reads from a real anvil.

Faults are real: contracts whose code reverts or returns the wrong number of bytes (put in
place with ``anvil_setCode``), blocks that do not exist or are replaced by a reorg in the
middle of a read, and an HTTP proxy in front of anvil that counts requests, throws batch
answers away or rewrites one item of a batch answer. Nothing is patched.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
import requests
from eth_utils.address import to_checksum_address

from chains.balances import (
    UINT256_MAX,
    BalanceBlockMissing,
    BalanceBlockReplaced,
    BalanceUnreadable,
    balance_of_calldata,
    decode_quantity,
    decode_word,
    normalize_hex_address,
    read_balances,
)
from chains.errors import RpcError, RpcResponseInvalid, RpcUnavailable
from chains.evm import encode_call
from chains.rpc import RpcClient
from devtools.anvil import DEV_ACCOUNTS, AnvilNode, Contract, load_artifact

ALICE = DEV_ACCOUNTS[0]
#: Runtime code that reverts on every call: PUSH1 0 PUSH1 0 REVERT.
REVERTING_CODE = "0x60006000fd"
#: Runtime code that returns 64 zero bytes on every call: PUSH1 64 PUSH1 0 RETURN.
TWO_WORDS_CODE = "0x60406000f3"
#: Runtime code that returns 31 zero bytes on every call: PUSH1 31 PUSH1 0 RETURN.
SHORT_WORD_CODE = "0x601f6000f3"

Rewrite = Callable[[list[dict[str, Any]], list[dict[str, Any]]], None]


def fresh_addresses(tag: str, count: int) -> list[str]:
    """``count`` addresses nobody else uses on the shared node (lower-case, from a hash)."""
    return ["0x" + hashlib.sha256(f"balances/{tag}/{i}".encode()).hexdigest()[:40]
            for i in range(count)]


class RecordingProxy:
    """A real HTTP proxy to ``upstream`` that counts requests and can fault batch answers.

    Only batches (JSON arrays) are faulted; single requests (the block header reads) pass.
    ``drop_batches`` batch answers are thrown away after forwarding (the connection is closed
    without an answer); ``rewrite(requests, answers)`` may edit every forwarded batch answer.
    """

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.drop_batches = 0
        self.rewrite: Rewrite | None = None
        self.requests = 0
        self.batch_requests = 0
        self.dropped = 0
        self._lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                body = self.rfile.read(int(self.headers["Content-Length"]))
                proxy._handle(self, body)

            def log_message(self, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"poll_interval": 0.02}, daemon=True)
        self._thread.start()

    def _handle(self, handler: BaseHTTPRequestHandler, body: bytes) -> None:
        payload = json.loads(body)
        is_batch = isinstance(payload, list)
        with self._lock:
            self.requests += 1
            self.batch_requests += is_batch
            drop = is_batch and self.dropped < self.drop_batches
            self.dropped += drop
        answer = requests.post(self.upstream, data=body, timeout=30,
                               headers={"Content-Type": "application/json"})
        if drop:
            handler.close_connection = True
            return  # Forwarded, answer thrown away.
        content = answer.content
        if is_batch and self.rewrite is not None:
            items = answer.json()
            self.rewrite(payload, items)
            content = json.dumps(items).encode()
        handler.send_response(answer.status_code)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(content)))
        handler.end_headers()
        handler.wfile.write(content)

    def close(self) -> None:
        """Stop serving."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


@pytest.fixture
def proxy(anvil_session: AnvilNode) -> Iterator[RecordingProxy]:
    recording = RecordingProxy(anvil_session.url)
    yield recording
    recording.close()


@pytest.fixture
def rpc(anvil_session: AnvilNode) -> Iterator[RpcClient]:
    with RpcClient(anvil_session.url, rpc_timeout_ms=10_000) as client:
        yield client


def _answer_for(requests_: list[dict[str, Any]], answers: list[dict[str, Any]], method: str,
                address: str) -> dict[str, Any] | None:
    """The answer item of the ``method`` call about ``address`` in one batch, if it is there."""
    for request in requests_:
        if request["method"] != method:
            continue
        params = request["params"]
        about = params[0] if method == "eth_getBalance" else "0x" + params[0]["data"][-40:]
        if about == address:
            return next(a for a in answers if a["id"] == request["id"])
    return None


# --------------------------------------------------------------------------- pure functions


class TestDecoding:
    def test_a_word_decodes_exactly(self) -> None:
        assert decode_word("0x" + "00" * 32) == 0
        assert decode_word("0x" + "00" * 31 + "01") == 1
        assert decode_word("0x" + "ff" * 32) == UINT256_MAX
        assert decode_word("0x" + f"{2**200 + 3:064x}") == 2**200 + 3
        assert decode_word("0x" + "AB" * 32) == int("ab" * 32, 16)

    @pytest.mark.parametrize("answer", [
        "0x",  # what an address without code answers
        "0x" + "00" * 31,
        "0x" + "00" * 33,
        "0x" + "00" * 64,
        "00" * 32,  # no 0x
        "0x" + "0" * 62 + "_1",  # int(..., 16) would take it
        "0x" + "0" * 63 + "g",
        " 0x" + "00" * 32,
        None,
        0,
    ])
    def test_anything_but_one_word_is_refused(self, answer: object) -> None:
        with pytest.raises(RpcResponseInvalid):
            decode_word(answer)

    def test_a_quantity_decodes_exactly(self) -> None:
        assert decode_quantity("0x0") == 0
        assert decode_quantity("0x21e19e0c9bab2400000") == 10_000 * 10**18
        assert decode_quantity("0x" + "f" * 64) == UINT256_MAX

    @pytest.mark.parametrize("answer", [
        "0x", "0x" + "1" + "0" * 64, "0x-1", "-0x1", "0x1_0", "12", None, 12,
    ])
    def test_a_bad_quantity_is_refused(self, answer: object) -> None:
        with pytest.raises(RpcResponseInvalid):
            decode_quantity(answer)

    def test_calldata_is_the_abi_encoding_of_balance_of(self) -> None:
        abi = load_artifact("TestToken")["abi"]
        address = fresh_addresses("calldata", 1)[0]
        assert balance_of_calldata(address) == encode_call(abi, "balanceOf", [address])
        assert balance_of_calldata(address).startswith("0x70a08231")

    def test_addresses_are_kept_lower_case(self) -> None:
        address = fresh_addresses("case", 1)[0]
        assert normalize_hex_address(to_checksum_address(address)) == address
        assert normalize_hex_address(address.upper().replace("0X", "0x")) == address
        for bad in ("0x123", address[2:], address + "0", "0x" + "zz" * 20, None):
            with pytest.raises(ValueError):
                normalize_hex_address(bad)  # type: ignore[arg-type]

    def test_bad_arguments_are_refused_before_any_call(self) -> None:
        # Nothing listens on port 9: any call would fail with RpcUnavailable, not ValueError.
        ok = fresh_addresses("arguments", 1)
        with RpcClient("http://127.0.0.1:9", rpc_timeout_ms=200, retries_max=0) as nowhere:
            for block in (-1, "latest", True, 1.0):
                with pytest.raises(ValueError):
                    read_balances(nowhere, block, ok)  # type: ignore[arg-type]
            with pytest.raises(ValueError):
                read_balances(nowhere, 1, ["0x1234"])
            with pytest.raises(ValueError):
                read_balances(nowhere, 1, ok, ["not-a-token"])
            with pytest.raises(ValueError):
                read_balances(nowhere, 1, ok, batch_calls_max=0)


# --------------------------------------------------------------------------- reads on anvil


@pytest.mark.anvil
class TestRead:
    def test_exact_values_at_one_block(self, anvil_session: AnvilNode, rpc: RpcClient,
                                       usdc: Contract, weth: Contract) -> None:
        one, two, three = fresh_addresses("exact", 3)
        anvil_session.send_eth(ALICE, one, 1)
        anvil_session.send_eth(ALICE, two, 10**18 + 7)
        anvil_session.transact(usdc, "mint", [one, 5_000_000])
        anvil_session.transact(usdc, "mint", [three, 2**200 + 1])
        anvil_session.transact(weth, "mint", [two, UINT256_MAX - 2**255])
        head = anvil_session.head()
        # Checksummed input, as chains.addresses hands it out: keys come back lower-case.
        balances = read_balances(rpc, head, [to_checksum_address(a) for a in (one, two, three)],
                                 [to_checksum_address(usdc.address), weth.address])
        header = rpc.get_block(head)
        assert header is not None
        assert (balances.block_number, balances.block_hash) == (head, header.hash)
        assert balances.native_minor == {one: 1, two: 10**18 + 7, three: 0}
        assert balances.tokens_minor == {
            (one, usdc.address): 5_000_000, (one, weth.address): 0,
            (two, usdc.address): 0, (two, weth.address): 2**255 - 1,
            (three, usdc.address): 2**200 + 1, (three, weth.address): 0,
        }
        assert all(type(v) is int for v in [*balances.native_minor.values(),
                                             *balances.tokens_minor.values()])

    def test_a_later_transfer_is_not_visible_at_an_earlier_block(
        self, anvil_session: AnvilNode, rpc: RpcClient, usdc: Contract
    ) -> None:
        holder = fresh_addresses("later", 1)[0]
        anvil_session.send_eth(ALICE, holder, 100)
        anvil_session.transact(usdc, "mint", [holder, 1_000])
        block_n = anvil_session.head()
        anvil_session.send_eth(ALICE, holder, 23)
        anvil_session.transact(usdc, "mint", [holder, 45])
        later = anvil_session.head()
        assert later >= block_n + 2

        at_n = read_balances(rpc, block_n, [holder], [usdc.address])
        at_later = read_balances(rpc, later, [holder], [usdc.address])
        assert (at_n.native_minor[holder], at_n.tokens_minor[(holder, usdc.address)]) == (
            100, 1_000)
        assert (at_later.native_minor[holder],
                at_later.tokens_minor[(holder, usdc.address)]) == (123, 1_045)
        # Read again at N after more blocks: still the state of block N.
        anvil_session.send_eth(ALICE, holder, 1)
        assert read_balances(rpc, block_n, [holder], [usdc.address]) == at_n

    def test_an_untouched_address_reads_a_real_zero(self, anvil_session: AnvilNode,
                                                    rpc: RpcClient, usdc: Contract,
                                                    proxy: RecordingProxy) -> None:
        holder = fresh_addresses("zero", 1)[0]
        answers: list[dict[str, Any]] = []
        proxy.rewrite = lambda _requests, items: answers.extend(items)
        with RpcClient(proxy.url) as through_proxy:
            balances = read_balances(through_proxy, anvil_session.head(), [holder],
                                     [usdc.address])
        assert balances.native_minor == {holder: 0}
        assert balances.tokens_minor == {(holder, usdc.address): 0}
        # The zeros are the node's own answers, one quantity and one 32-byte word.
        assert sorted(a["result"] for a in answers) == ["0x0", "0x" + "00" * 32]

    def test_duplicates_in_any_case_are_read_once(self, anvil_session: AnvilNode,
                                                  rpc: RpcClient, usdc: Contract) -> None:
        holder = fresh_addresses("duplicates", 1)[0]
        anvil_session.send_eth(ALICE, holder, 5)
        balances = read_balances(rpc, anvil_session.head(),
                                 [holder, to_checksum_address(holder), holder],
                                 [usdc.address, to_checksum_address(usdc.address)])
        assert balances.native_minor == {holder: 5}
        assert balances.tokens_minor == {(holder, usdc.address): 0}

    def test_no_addresses_read_nothing(self, anvil_session: AnvilNode, rpc: RpcClient,
                                       usdc: Contract) -> None:
        balances = read_balances(rpc, anvil_session.head(), [], [usdc.address])
        assert (balances.native_minor, balances.tokens_minor) == ({}, {})


@pytest.mark.anvil
class TestManyAddresses:
    def test_2500_addresses_in_a_few_batches(self, anvil_session: AnvilNode, usdc: Contract,
                                             proxy: RecordingProxy) -> None:
        holders = fresh_addresses("many", 2_500)
        token_holders = holders[::50]  # 50 of them, amounts 1..50 plus a huge one
        amounts = [i + 1 for i in range(len(token_holders))]
        amounts[-1] = 2**200
        anvil_session.transact(usdc, "mint", [ALICE, sum(amounts)])
        anvil_session.transact(usdc, "batchTransfer", [token_holders, amounts])
        eth_holders = {holders[7]: 1, holders[1_234]: 10**18, holders[2_499]: 3 * 10**17 + 9}
        for holder, wei in eth_holders.items():
            anvil_session.send_eth(ALICE, holder, wei)
        head = anvil_session.head()

        progress: list[tuple[int, int]] = []
        with RpcClient(proxy.url, rpc_timeout_ms=30_000, batch_size_max=1_000) as client:
            balances = read_balances(client, head, holders, [usdc.address],
                                     on_progress=lambda done, total: progress.append(
                                         (done, total)))
        # 2 calls per address, 1,000 calls per request: 5 batches, plus the block hash read
        # before and after; not 5,000 requests.
        assert (proxy.batch_requests, proxy.requests) == (5, 7)
        assert progress == [(500 * i, 2_500) for i in range(1, 6)]
        assert len(balances.native_minor) == 2_500 and len(balances.tokens_minor) == 2_500
        for holder, amount in zip(token_holders, amounts, strict=True):
            assert balances.tokens_minor[(holder, usdc.address)] == amount
        assert balances.tokens_minor[(holders[1], usdc.address)] == 0
        assert balances.tokens_minor[(holders[2_498], usdc.address)] == 0
        for holder in (holders[7], holders[1_234], holders[2_499], holders[0], holders[1_000]):
            assert balances.native_minor[holder] == eth_holders.get(holder, 0)
        assert sum(balances.native_minor.values()) == sum(eth_holders.values())
        assert sum(balances.tokens_minor.values()) == sum(amounts)

    def test_a_smaller_batch_limit_makes_more_requests(self, anvil_session: AnvilNode,
                                                       usdc: Contract, weth: Contract,
                                                       proxy: RecordingProxy) -> None:
        holders = fresh_addresses("small-batches", 10)
        with RpcClient(proxy.url) as client:
            balances = read_balances(client, anvil_session.head(), holders,
                                     [usdc.address, weth.address], batch_calls_max=7)
        # 3 calls per address, at most 7 per request: 2 addresses (6 calls) per batch.
        assert proxy.batch_requests == 5
        assert len(balances.tokens_minor) == 20


@pytest.mark.anvil
class TestFailures:
    def test_a_token_address_without_code_raises(self, anvil_session: AnvilNode,
                                                 rpc: RpcClient, usdc: Contract) -> None:
        holder, not_a_contract = fresh_addresses("no-code", 2)
        with pytest.raises(BalanceUnreadable, match="no contract at that address") as caught:
            read_balances(rpc, anvil_session.head(), [holder], [usdc.address, not_a_contract])
        assert (caught.value.address, caught.value.token) == (holder, not_a_contract)
        assert not caught.value.retryable
        assert "0 bytes" in caught.value.message

    def test_a_reverting_token_raises(self, anvil_session: AnvilNode, rpc: RpcClient) -> None:
        holder, token = fresh_addresses("reverting", 2)
        anvil_session.rpc.request("anvil_setCode", [token, REVERTING_CODE])
        with pytest.raises(BalanceUnreadable, match="execution reverted") as caught:
            read_balances(rpc, anvil_session.head(), [holder], [token])
        assert isinstance(caught.value.__cause__, RpcError)
        assert caught.value.block_number == anvil_session.head()

    @pytest.mark.parametrize("code", [TWO_WORDS_CODE, SHORT_WORD_CODE])
    def test_an_answer_that_is_not_one_word_raises(self, anvil_session: AnvilNode,
                                                   rpc: RpcClient, code: str) -> None:
        holder, token = fresh_addresses(f"not-one-word-{code}", 2)
        anvil_session.rpc.request("anvil_setCode", [token, code])
        with pytest.raises(BalanceUnreadable, match="expected one 32-byte word"):
            read_balances(rpc, anvil_session.head(), [holder], [token])

    def test_a_block_the_node_does_not_have_raises_before_reading(
        self, anvil_session: AnvilNode, proxy: RecordingProxy, usdc: Contract
    ) -> None:
        with RpcClient(proxy.url) as client, pytest.raises(BalanceBlockMissing):
            read_balances(client, anvil_session.head() + 1_000, fresh_addresses("future", 3),
                          [usdc.address])
        assert (proxy.requests, proxy.batch_requests) == (1, 0)

    def test_a_null_result_raises(self, anvil_session: AnvilNode, usdc: Contract,
                                  proxy: RecordingProxy) -> None:
        holders = fresh_addresses("null", 4)

        def erase_one(requests_: list[dict[str, Any]], answers: list[dict[str, Any]]) -> None:
            item = _answer_for(requests_, answers, "eth_getBalance", holders[2])
            if item is not None:
                item["result"] = None

        proxy.rewrite = erase_one
        with RpcClient(proxy.url) as client:
            with pytest.raises(BalanceUnreadable, match="got None") as caught:
                read_balances(client, anvil_session.head(), holders, [usdc.address])
        assert (caught.value.address, caught.value.token) == (holders[2], None)

    def test_an_item_that_keeps_failing_raises_after_retries(
        self, anvil_session: AnvilNode, usdc: Contract, proxy: RecordingProxy
    ) -> None:
        holders = fresh_addresses("rate-limited", 3)

        def rate_limit_one(requests_: list[dict[str, Any]],
                           answers: list[dict[str, Any]]) -> None:
            item = _answer_for(requests_, answers, "eth_call", holders[1])
            if item is not None:
                item.pop("result", None)
                item["error"] = {"code": -32005, "message": "limit exceeded"}

        proxy.rewrite = rate_limit_one
        with RpcClient(proxy.url, retries_max=2, backoff_ms=10) as client:
            with pytest.raises(BalanceUnreadable, match="limit exceeded") as caught:
                read_balances(client, anvil_session.head(), holders, [usdc.address])
        assert caught.value.retryable and caught.value.token == usdc.address
        assert proxy.batch_requests == 3  # the batch, then the failing item twice more

    def test_dropped_answers_are_retried_and_the_figures_stay_exact(
        self, anvil_session: AnvilNode, usdc: Contract, proxy: RecordingProxy
    ) -> None:
        holders = fresh_addresses("dropped", 6)
        anvil_session.send_eth(ALICE, holders[3], 777)
        anvil_session.transact(usdc, "mint", [holders[5], 888])
        head = anvil_session.head()
        proxy.drop_batches = 2
        with RpcClient(proxy.url, retries_max=3, backoff_ms=10, batch_size_max=4) as client:
            balances = read_balances(client, head, holders, [usdc.address])
        assert proxy.dropped == 2
        assert balances.native_minor == {h: 777 if h == holders[3] else 0 for h in holders}
        assert balances.tokens_minor == {(h, usdc.address): 888 if h == holders[5] else 0
                                         for h in holders}

    def test_a_node_that_never_answers_raises_unavailable(
        self, anvil_session: AnvilNode, usdc: Contract, proxy: RecordingProxy
    ) -> None:
        proxy.drop_batches = 1_000
        with RpcClient(proxy.url, retries_max=2, backoff_ms=10) as client:
            with pytest.raises(RpcUnavailable):
                read_balances(client, anvil_session.head(), fresh_addresses("silent", 3),
                              [usdc.address])
        assert proxy.dropped == 3  # one attempt and two retries, then no figures at all


@pytest.mark.anvil
class TestReorgDuringRead:
    """Fresh nodes: these tests replace blocks."""

    def _funded(self, anvil: AnvilNode) -> tuple[list[str], int]:
        holders = fresh_addresses("reorg", 6)
        anvil.send_eth(ALICE, holders[0], 10**18)
        return holders, anvil.head()

    def test_a_block_replaced_mid_read_raises(self, anvil: AnvilNode) -> None:
        holders, block_n = self._funded(anvil)
        progress: list[int] = []

        def reorg_after_first_chunk(done: int, total: int) -> None:
            progress.append(done)
            if len(progress) == 1:
                anvil.reorg(1)  # block N again, new hash, without our transfer

        with RpcClient(anvil.url) as client:
            with pytest.raises(BalanceBlockReplaced, match=f"block {block_n} changed"):
                read_balances(client, block_n, holders, batch_calls_max=2,
                              on_progress=reorg_after_first_chunk)
            assert progress == [2, 4, 6]
            # Read again: consistent figures of the new block N (the transfer was dropped).
            again = read_balances(client, block_n, holders)
        assert again.native_minor == {h: 0 for h in holders}

    def test_a_block_rolled_back_mid_read_raises(self, anvil: AnvilNode) -> None:
        holders, block_n = self._funded(anvil)

        def roll_back(done: int, total: int) -> None:
            if done == 2:
                anvil.rollback(1)

        with RpcClient(anvil.url) as client:
            with pytest.raises(BalanceBlockReplaced, match="disappeared"):
                read_balances(client, block_n, holders, batch_calls_max=2,
                              on_progress=roll_back)
