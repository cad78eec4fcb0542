"""A small JSON-RPC client for EVM nodes: explicit timeouts, bounded retries, raw results.

Why not web3.py for reads: its result formatters cost about 9x on ``eth_getLogs``, and in its
batch API one failing item loses the whole batch. This client returns the node's JSON as is
(dicts of hex strings) except where a method documents a typed result, and keeps every batch
item's own outcome.

Failure policy: a call either returns the node's answer or raises. It never turns an error into
an empty answer, so a watcher cannot silently skip a block. Transport failures (connection
refused or reset, timeouts, HTTP 5xx and 429) are retried ``retries_max`` times with exponential
backoff, then raise :class:`RpcUnavailable`. JSON-RPC error objects raise :class:`RpcError`
(retried first when the code says a retry may help).

Quantities are ints, hashes and addresses 0x-prefixed lower-case hex strings. A client holds a
pool of HTTP connections (urllib3, the transport under requests, without requests' layers: they
cost 0.3 ms of client CPU per call and 2 ms per megabyte answered, which a catch-up pays dozens
of times a second): use one client per thread. Like requests, it honours the proxy variables of
the environment (``HTTPS_PROXY``, ``NO_PROXY``), sends credentials in the URL as basic
authentication, verifies TLS against certifi's bundle and accepts gzip answers.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import certifi
import msgspec
import urllib3
from urllib3.exceptions import HTTPError as TransportError

from chains.errors import RpcError, RpcResponseInvalid, RpcUnavailable
from chains.model import BlockHeader

_decode_json = msgspec.json.Decoder().decode

#: JSON-RPC error codes after which the same request can succeed later: -32005 is the common
#: "limit exceeded / rate limited" code (EIP-1474).
RETRYABLE_RPC_CODES = frozenset({-32005})
#: HTTP statuses that mean "the node or a proxy is overloaded or restarting".
RETRYABLE_HTTP_STATUSES = frozenset({429, 500, 502, 503, 504})
BLOCK_TAGS = frozenset({"latest", "earliest", "pending", "safe", "finalized"})

BlockId = int | str


def shown_url(url: str) -> str:
    """``url`` as messages show it: scheme, host and port only. Node providers put the API
    key in the path or the query (and basic credentials in the user info), so neither is ever
    shown: ``https://eth.example.com/v3/<key>`` is ``https://eth.example.com/[redacted]``."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return "[redacted url]"
    if ":" in host:
        host = f"[{host}]"
    hidden = "/[redacted]" if (parts.path.strip("/") or parts.query or parts.fragment or
                               parts.username or parts.password) else ""
    return f"{parts.scheme}://{host}{port}{hidden}"


def _scrubbed(text: str, url: str) -> str:
    """``text`` (a transport error's message) without ``url``'s secret parts: the whole URL,
    its path and query (as urllib3 prints them: ``url: /v3/<key>``) and its user info."""
    from urllib.parse import urlsplit

    text = text.replace(url, shown_url(url))
    try:
        parts = urlsplit(url)
    except ValueError:
        return text
    for secret in (parts.path + (f"?{parts.query}" if parts.query else ""), parts.path,
                   parts.query, parts.password, parts.username):
        if secret and secret.strip("/"):
            text = text.replace(secret, "/[redacted]" if secret.startswith("/")
                                else "[redacted]")
    return text


def _transport(url: str) -> tuple[urllib3.PoolManager, str, dict[str, str]]:
    """The connection pool for ``url`` (through the environment's proxy for it, if any), the
    URL to request (without credentials) and the headers of every request (JSON, gzip
    accepted, basic authentication from the URL's credentials)."""
    from urllib.parse import unquote, urlsplit, urlunsplit
    from urllib.request import getproxies, proxy_bypass

    parts = urlsplit(url)
    headers = {"Content-Type": "application/json", "Accept-Encoding": "gzip, deflate",
               "User-Agent": "custody-rpc/1"}
    if parts.username is not None:
        credentials = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
        headers["Authorization"] = urllib3.make_headers(basic_auth=credentials)["authorization"]
        netloc = parts.hostname or ""
        netloc = f"[{netloc}]" if ":" in netloc else netloc
        parts = parts._replace(netloc=netloc + (f":{parts.port}" if parts.port else ""))
    proxy = getproxies().get(parts.scheme)
    options: dict[str, Any] = {"maxsize": 1, "ca_certs": certifi.where(), "retries": False}
    if proxy and not proxy_bypass(parts.hostname or ""):
        return urllib3.ProxyManager(proxy, **options), urlunsplit(parts), headers
    return urllib3.PoolManager(**options), urlunsplit(parts), headers


class _Transient(Exception):
    """A transport failure that a retry may fix (internal: surfaces as RpcUnavailable)."""


@dataclass(frozen=True, slots=True)
class RpcCall:
    """One JSON-RPC call inside a batch."""

    method: str
    params: Sequence[Any] = ()


def to_quantity(value: int) -> str:
    """An int as a JSON-RPC quantity (``0x``-hex, no leading zeros)."""
    if isinstance(value, bool) or value < 0:
        raise ValueError(f"not a quantity: {value!r}")
    return hex(value)


def from_quantity(value: Any) -> int:
    """A JSON-RPC quantity (``0x``-hex string) as an int."""
    if not isinstance(value, str) or not value.startswith("0x"):
        raise RpcResponseInvalid(f"expected a hex quantity, got {value!r}")
    return int(value, 16)


def block_param(block: BlockId) -> str:
    """A block number or tag as a JSON-RPC block parameter."""
    if isinstance(block, int):
        return to_quantity(block)
    if block in BLOCK_TAGS:
        return block
    raise ValueError(f"unknown block tag {block!r}")


def header_from_json(raw: Mapping[str, Any]) -> BlockHeader:
    """Build a :class:`BlockHeader` from an ``eth_getBlockBy*`` result."""
    try:
        return BlockHeader(
            number=from_quantity(raw["number"]),
            hash=str(raw["hash"]).lower(),
            parent_hash=str(raw["parentHash"]).lower(),
            timestamp=from_quantity(raw["timestamp"]),
            transactions=tuple(raw.get("transactions") or ()),
        )
    except KeyError as exc:
        raise RpcResponseInvalid(f"block without {exc}") from exc


class RpcClient:
    """JSON-RPC over HTTP with a per-request timeout and bounded, backed-off retries.

    ``rpc_timeout_ms`` bounds the connect and each socket read of an HTTP attempt (a node
    trickling bytes could stretch an attempt; nodes answer in one piece).
    The worst-case duration of one call is about ``(retries_max + 1) * rpc_timeout_ms`` plus
    the backoff sleeps (``backoff_ms * 2**(n - 1)`` before retry ``n``, capped at
    ``backoff_max_ms``). Batches larger than
    ``batch_size_max`` are sent as several HTTP requests.
    """

    def __init__(
        self,
        url: str,
        *,
        rpc_timeout_ms: int = 10_000,
        retries_max: int = 3,
        backoff_ms: int = 100,
        backoff_max_ms: int = 2_000,
        batch_size_max: int = 1_000,
    ) -> None:
        if rpc_timeout_ms <= 0 or retries_max < 0 or batch_size_max < 1:
            raise ValueError("rpc_timeout_ms > 0, retries_max >= 0, batch_size_max >= 1")
        self.url = url
        self.rpc_timeout_ms = rpc_timeout_ms
        self.retries_max = retries_max
        self.backoff_ms = backoff_ms
        self.backoff_max_ms = backoff_max_ms
        self.batch_size_max = batch_size_max
        self._http, self._target, self._headers = _transport(url)
        self._timeout = urllib3.Timeout(connect=rpc_timeout_ms / 1000, read=rpc_timeout_ms / 1000)
        self._ids = itertools.count(1)

    def close(self) -> None:
        """Close the underlying HTTP connections."""
        self._http.clear()

    def __enter__(self) -> RpcClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ----------------------------------------------------------------- transport

    def _backoff(self, attempt: int) -> None:
        """Sleep before retry number ``attempt`` (1-based): backoff_ms, 2x, 4x... capped."""
        delay_ms = min(self.backoff_max_ms, self.backoff_ms * 2 ** (attempt - 1))
        time.sleep(delay_ms / 1000)

    def _post_once(self, payload: Any) -> Any:
        """One HTTP POST; raise :class:`_Transient` when a retry may help."""
        try:
            response = self._http.request(
                "POST", self._target, body=json.dumps(payload).encode(), headers=self._headers,
                timeout=self._timeout, retries=False, redirect=False)
        except (TransportError, OSError) as exc:
            # Without the cause: its message names the URL (with a provider's API key).
            raise _Transient(_scrubbed(f"{type(exc).__name__}: {exc}", self.url)) from None
        if response.status in RETRYABLE_HTTP_STATUSES:
            raise _Transient(f"HTTP {response.status}")
        body = response.data
        try:
            # The body's bytes straight to the decoder (JSON-RPC answers are UTF-8); msgspec
            # reads integers of any size exactly, as the json module does, twice as fast.
            return _decode_json(body)
        except ValueError as exc:  # msgspec.DecodeError is one
            text = body[:200].decode("utf-8", errors="replace")
            raise RpcResponseInvalid(f"HTTP {response.status}, body is not JSON: {text!r}") \
                from exc

    def _unavailable(self, last: str) -> RpcUnavailable:
        return RpcUnavailable(
            f"{shown_url(self.url)}: no answer after {self.retries_max + 1} attempts ({last})"
        )

    @staticmethod
    def _error_from(obj: Mapping[str, Any]) -> RpcError:
        code = obj.get("code")
        message = str(obj.get("message", "JSON-RPC error"))
        return RpcError(
            f"{message} (code {code})", rpc_code=code if isinstance(code, int) else None,
            data=obj.get("data"), retryable=code in RETRYABLE_RPC_CODES,
        )

    # ----------------------------------------------------------------- generic calls

    def request(self, method: str, params: Sequence[Any] = ()) -> Any:
        """Call one method and return its ``result``.

        Transport failures and retryable JSON-RPC errors share one budget of
        ``retries_max`` retries; then :class:`RpcUnavailable` (transport) or the last
        :class:`RpcError` is raised. Non-retryable JSON-RPC errors raise at once.
        """
        last: RpcError | str = "no attempt"
        for attempt in range(self.retries_max + 1):
            if attempt:
                self._backoff(attempt)
            payload = {"jsonrpc": "2.0", "id": next(self._ids), "method": method,
                       "params": list(params)}
            try:
                answer = self._post_once(payload)
            except _Transient as exc:
                last = str(exc)
                continue
            if not isinstance(answer, dict):
                raise RpcResponseInvalid(f"{method}: unexpected answer {answer!r:.200}")
            if "error" in answer:
                last = self._error_from(answer["error"])
                if last.retryable:
                    continue
                raise last
            if "result" not in answer:
                raise RpcResponseInvalid(f"{method}: answer without result: {answer!r:.200}")
            return answer["result"]
        if isinstance(last, RpcError):
            raise last
        raise self._unavailable(last)

    def batch(self, calls: Sequence[RpcCall]) -> list[Any]:
        """Send calls as JSON-RPC batches; return one outcome per call, in order.

        Each outcome is the call's ``result`` (``None`` for a missing object) or an
        :class:`RpcError` instance: one failing item never loses the others. Chunks that
        fail in transport and items that fail with a retryable error are re-sent (only
        them) within the ``retries_max`` budget; if a chunk still gets no answer,
        :class:`RpcUnavailable` is raised. Each chunk holds at most ``batch_size_max`` calls.
        """
        outcomes: list[Any] = [None] * len(calls)
        pending = list(range(len(calls)))
        last = "no attempt"
        for attempt in range(self.retries_max + 1):
            if attempt:
                self._backoff(attempt)
            unanswered: list[int] = []
            for start in range(0, len(pending), self.batch_size_max):
                chunk = pending[start:start + self.batch_size_max]
                try:
                    answers = self._send_batch([calls[i] for i in chunk])
                except _Transient as exc:
                    last = str(exc)
                    unanswered.extend(chunk)
                    continue
                for index, outcome in zip(chunk, answers, strict=True):
                    outcomes[index] = outcome
            answered = set(pending) - set(unanswered)
            pending = unanswered + [i for i in sorted(answered)
                                    if isinstance(outcomes[i], RpcError) and outcomes[i].retryable]
            if not pending:
                break
            if attempt == self.retries_max:
                if unanswered:
                    raise self._unavailable(last)
                break  # Items still failing keep their RpcError outcome.
        return outcomes

    def _send_batch(self, calls: Sequence[RpcCall]) -> list[Any]:
        ids = [next(self._ids) for _ in calls]
        payload = [{"jsonrpc": "2.0", "id": i, "method": c.method, "params": list(c.params)}
                   for i, c in zip(ids, calls, strict=True)]
        answer = self._post_once(payload)
        if isinstance(answer, dict) and "error" in answer:
            # The node refused the batch as a whole (for example a batch size limit).
            raise self._error_from(answer["error"])
        if not isinstance(answer, list):
            raise RpcResponseInvalid(f"batch: unexpected answer {answer!r:.200}")
        # Batch answers may come in any order: match them by id.
        by_id = {item.get("id"): item for item in answer if isinstance(item, dict)}
        outcomes: list[Any] = []
        for request_id, call in zip(ids, calls, strict=True):
            item = by_id.get(request_id)
            if item is None:
                raise RpcResponseInvalid(f"batch: no answer for {call.method} (id {request_id})")
            outcomes.append(self._error_from(item["error"]) if "error" in item
                            else item.get("result"))
        return outcomes

    def batch_results(self, calls: Sequence[RpcCall]) -> list[Any]:
        """Like :meth:`batch`, but raise the first item's :class:`RpcError` if any failed.

        Use this when a partial answer is useless (scanning blocks: a hole would skip a block).
        Missing objects are still ``None``.
        """
        outcomes = self.batch(calls)
        for call, outcome in zip(calls, outcomes, strict=True):
            if isinstance(outcome, RpcError):
                raise RpcError(f"{call.method}{list(call.params)!r:.120}: {outcome.message}",
                               rpc_code=outcome.rpc_code, data=outcome.data,
                               retryable=outcome.retryable)
        return outcomes

    # ----------------------------------------------------------------- chain state

    def chain_id(self) -> int:
        """``eth_chainId`` as an int."""
        return from_quantity(self.request("eth_chainId"))

    def block_number(self) -> int:
        """``eth_blockNumber``: the node's head height."""
        return from_quantity(self.request("eth_blockNumber"))

    def get_block(self, block: BlockId, full: bool = False) -> BlockHeader | None:
        """The block at a height or tag (``latest``, ``safe``, ``finalized``...), or None.

        ``full=True`` fills ``transactions`` with raw transaction dicts instead of hashes.
        """
        raw = self.request("eth_getBlockByNumber", [block_param(block), full])
        return None if raw is None else header_from_json(raw)

    def get_block_by_hash(self, block_hash: str, full: bool = False) -> BlockHeader | None:
        """The block with this hash (canonical or not, if the node still has it), or None."""
        raw = self.request("eth_getBlockByHash", [block_hash, full])
        return None if raw is None else header_from_json(raw)

    def get_headers(self, numbers: Iterable[int]) -> list[BlockHeader | None]:
        """Headers of the given heights in one batch request (without transactions).

        ``None`` for a height the node does not have yet. An error on any item raises.
        """
        calls = [RpcCall("eth_getBlockByNumber", [to_quantity(n), False]) for n in numbers]
        results = self.batch_results(calls)
        headers: list[BlockHeader | None] = []
        for raw in results:
            if raw is None:
                headers.append(None)
                continue
            header = header_from_json(raw)
            # Headers only: callers of this method never need transaction hashes.
            headers.append(BlockHeader(header.number, header.hash, header.parent_hash,
                                       header.timestamp))
        return headers

    def canonical_hashes(self, numbers: Iterable[int]) -> dict[int, str]:
        """Heights mapped to the node's current block hash; absent heights are left out.

        The ``canonical`` argument of :func:`chains.model.find_common_ancestor`.
        """
        wanted = list(numbers)
        return {n: h.hash for n, h in zip(wanted, self.get_headers(wanted), strict=True)
                if h is not None}

    def get_logs(
        self,
        from_block: BlockId,
        to_block: BlockId,
        addresses: Sequence[str] | None = None,
        topics: Sequence[str | Sequence[str] | None] | None = None,
    ) -> list[dict[str, Any]]:
        """Raw ``eth_getLogs`` over an inclusive block range.

        ``addresses`` filters by emitting contract (None: all); ``topics`` uses the node's
        positional OR-list syntax. The node's log dicts are returned unformatted.
        """
        flt: dict[str, Any] = {"fromBlock": block_param(from_block),
                               "toBlock": block_param(to_block)}
        if addresses is not None:
            flt["address"] = [a.lower() for a in addresses]
        if topics is not None:
            flt["topics"] = list(topics)
        logs = self.request("eth_getLogs", [flt])
        if not isinstance(logs, list):
            raise RpcResponseInvalid(f"eth_getLogs: expected a list, got {logs!r:.200}")
        return logs

    def get_block_receipts(self, numbers: Iterable[int]) -> list[list[dict[str, Any]] | None]:
        """Raw receipts of each given block (``eth_getBlockReceipts``), in one batch request.

        ``None`` for a block the node does not have; an error on any item raises.
        """
        calls = [RpcCall("eth_getBlockReceipts", [to_quantity(n)]) for n in numbers]
        return self.batch_results(calls)

    # ----------------------------------------------------------------- transactions

    def get_receipt(self, tx_hash: str) -> dict[str, Any] | None:
        """Raw receipt of a transaction, or None if it is not (or no longer) mined."""
        result: dict[str, Any] | None = self.request("eth_getTransactionReceipt", [tx_hash])
        return result

    def get_receipts(self, tx_hashes: Iterable[str]) -> list[dict[str, Any] | None]:
        """Raw receipts of several transactions in one batch request (None when missing)."""
        return self.batch_results([RpcCall("eth_getTransactionReceipt", [h])
                                   for h in tx_hashes])

    def get_transaction(self, tx_hash: str) -> dict[str, Any] | None:
        """Raw transaction object, or None if the node does not know it."""
        result: dict[str, Any] | None = self.request("eth_getTransactionByHash", [tx_hash])
        return result

    def get_raw_transaction(self, tx_hash: str) -> str | None:
        """The signed transaction bytes as 0x-hex, or None; re-sending them lands the same hash."""
        result: str | None = self.request("eth_getRawTransactionByHash", [tx_hash])
        return result

    def get_transaction_count(self, address: str, block: BlockId = "latest") -> int:
        """The account's nonce at ``block`` (``pending`` includes the mempool)."""
        return from_quantity(self.request("eth_getTransactionCount",
                                          [address.lower(), block_param(block)]))

    def get_balance(self, address: str, block: BlockId = "latest") -> int:
        """Native balance in wei at ``block``."""
        return from_quantity(self.request("eth_getBalance", [address.lower(), block_param(block)]))

    def send_raw_transaction(self, raw_hex: str) -> str:
        """Broadcast a signed transaction; return its hash (lower-case hex).

        Transport retries are safe: the same signed bytes always carry the same hash, so a
        re-send can never create a second transaction. A retry after a lost answer may get an
        "already known" or "nonce too low" :class:`RpcError` although the first send worked:
        callers settle the outcome by looking the hash up, never by the error alone.
        """
        return str(self.request("eth_sendRawTransaction", [raw_hex])).lower()

    def call(
        self,
        to: str,
        data: str,
        block: BlockId = "latest",
        *,
        from_address: str | None = None,
        value: int | None = None,
        gas: int | None = None,
    ) -> str:
        """``eth_call``: execute without a transaction; return the raw 0x-hex output."""
        tx: dict[str, Any] = {"to": to.lower(), "data": data}
        if from_address is not None:
            tx["from"] = from_address.lower()
        if value is not None:
            tx["value"] = to_quantity(value)
        if gas is not None:
            tx["gas"] = to_quantity(gas)
        return str(self.request("eth_call", [tx, block_param(block)]))
