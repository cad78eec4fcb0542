"""Balances of many addresses at one block: the native coin and ERC-20 tokens, exact, batched.

Why: the holdings report compares what the ledger says we hold with what the chain says, for
every deposit address (100,000 and more). The chain side must be exact (a uint256 read as an
``int``, never a float, never a 0 standing in for "could not read") and fast (JSON-RPC batches,
not one HTTP request per address per asset).

How :func:`read_balances` reads:

- Every call names the same explicit block number, never ``latest``: all figures describe one
  state of the chain, however long the read takes and however many blocks arrive meanwhile.
- Native balances are ``eth_getBalance``; token balances are ``eth_call`` of
  ``balanceOf(address)`` (selector ``0x70a08231``) on each token contract.
- Calls go through :meth:`chains.rpc.RpcClient.batch` in chunks of at most the client's
  ``batch_size_max`` calls (all calls of one address in the same chunk when they fit). Chunks
  are built, sent and decoded one after the other, so memory holds one chunk's requests and
  answers plus the results, never one giant payload. Transport failures are retried by the
  client; a chunk that still gets no answer raises :class:`chains.errors.RpcUnavailable`.
- A block number does not name one block forever: a reorg can replace it. The block's hash is
  read before the first chunk and after the last; if the node has no block at that height, or
  the hash changed, the read raises instead of returning figures that may mix two chains. Pick
  a final block (``finalized`` or enough confirmations) to make that rare.

Nothing is ever guessed: an item the node answered with an error, a missing (``null``) result,
a quantity that is not ``0x``-hex or exceeds uint256, or a ``balanceOf`` answer that is not
exactly one 32-byte word (``0x`` is what a call to an address without code returns) raises
:class:`BalanceUnreadable` naming the address, the token and the block.

Addresses and token contracts are taken in any case and kept lower-case, as everywhere in the
chain layer (:mod:`chains`): keys of the result are ``0x`` + 40 lower-case hex digits.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from chains.errors import ChainError, RpcError, RpcResponseInvalid
from chains.rpc import RpcCall, RpcClient, block_param

#: ``balanceOf(address)``: the first 4 bytes of ``keccak("balanceOf(address)")``.
BALANCE_OF_SELECTOR = "0x70a08231"
UINT256_MAX = 2**256 - 1

_ADDRESS = re.compile(r"0x[0-9a-fA-F]{40}")
# One ABI word: exactly 64 hex digits. Checked by pattern because int(text, 16) also accepts
# underscores, signs and surrounding spaces.
_WORD = re.compile(r"0x[0-9a-fA-F]{64}")
_QUANTITY = re.compile(r"0x[0-9a-fA-F]{1,64}")

#: ``on_progress(addresses_done, addresses_total)``, called after each chunk.
ProgressCallback = Callable[[int, int], None]


class BalanceUnreadable(ChainError):
    """One balance could not be read: the node refused the call or answered nonsense.

    ``token`` is None for the native balance. ``retryable`` is the node error's own flag (a
    rate limit can pass); a malformed answer (no contract at the token address, a result that
    is not one 32-byte word) is not retryable. The underlying error is the ``__cause__``.
    """

    code = "balance_unreadable"

    def __init__(self, message: str, *, address: str, token: str | None, block_number: int,
                 retryable: bool = False) -> None:
        super().__init__(message)
        self.address = address
        self.token = token
        self.block_number = block_number
        self.retryable = retryable


class BalanceBlockMissing(ChainError):
    """The node has no block at the requested height (not mined yet, or the node lags)."""

    code = "balance_block_missing"
    retryable = True


class BalanceBlockReplaced(ChainError):
    """The block at the requested height changed during the read (a reorg): the figures could
    mix two chains, so none are returned. Reading again gives a consistent answer."""

    code = "balance_block_replaced"
    retryable = True


@dataclass(frozen=True, slots=True)
class Balances:
    """Balances at one block. Every requested pair has an entry; a real zero reads ``0``.

    Keys are lower-case hex. The mappings are read-only views.
    """

    #: The height every call named.
    block_number: int
    #: The hash of that block, the same before and after the read.
    block_hash: str
    #: Address -> native balance in wei.
    native_minor: Mapping[str, int]
    #: (address, token contract) -> the token's ``balanceOf`` in its minor units.
    tokens_minor: Mapping[tuple[str, str], int]


def normalize_hex_address(text: str) -> str:
    """``0x`` + 40 hex digits in any case, as lower-case; ValueError for anything else.

    The checksum of a mixed-case address is not checked here: these are addresses the engine
    already holds (its own deposit addresses and configured tokens), not user input
    (user input goes through :func:`withdrawals.model.normalize_address`).
    """
    if not isinstance(text, str) or not _ADDRESS.fullmatch(text):
        raise ValueError(f"not an EVM address: {text!r}")
    return text.lower()


def balance_of_calldata(address: str) -> str:
    """Calldata of ``balanceOf(address)``: the selector, then the address left-padded to 32
    bytes. ``address`` must already be lower-case ``0x`` hex."""
    return BALANCE_OF_SELECTOR + "0" * 24 + address[2:]


def decode_quantity(value: Any) -> int:
    """An ``eth_getBalance`` result (a JSON-RPC quantity) as an int within uint256.

    Raises :class:`RpcResponseInvalid` for ``None``, a non-string, anything that is not
    ``0x`` followed by 1 to 64 hex digits.
    """
    if not isinstance(value, str) or not _QUANTITY.fullmatch(value):
        raise RpcResponseInvalid(f"expected a uint256 hex quantity, got {value!r:.80}")
    return int(value, 16)


def decode_word(value: Any) -> int:
    """A ``balanceOf`` ``eth_call`` result: exactly one 32-byte word, as an unsigned int.

    Raises :class:`RpcResponseInvalid` for ``None``, a non-string, a short or long answer
    (``0x``, the answer of an address without code, included) and non-hex digits.
    """
    if not isinstance(value, str) or not _WORD.fullmatch(value):
        shown = f"{(len(value) - 2) // 2} bytes" if isinstance(value, str) else repr(value)
        raise RpcResponseInvalid(f"expected one 32-byte word, got {shown}: {value!r:.80}")
    return int(value, 16)


def read_balances(
    rpc: RpcClient,
    block_number: int,
    addresses: Sequence[str],
    tokens: Sequence[str] = (),
    *,
    on_progress: ProgressCallback | None = None,
    batch_calls_max: int | None = None,
) -> Balances:
    """Native and token balances of ``addresses`` at ``block_number``, in JSON-RPC batches.

    ``tokens`` are ERC-20 contracts; each address gets one ``eth_getBalance`` and one
    ``balanceOf`` per token. Duplicates (also in different case) are read once. Each HTTP
    request holds at most ``batch_calls_max`` calls (default and upper bound: the client's
    ``batch_size_max``). ``on_progress(done, total)`` counts addresses after each chunk.

    Raises :class:`BalanceUnreadable` for any item that failed or made no sense,
    :class:`BalanceBlockMissing` / :class:`BalanceBlockReplaced` when the block is not on the
    node or changed during the read, :class:`chains.errors.RpcUnavailable` when the node does
    not answer; ValueError for a malformed address or block number.
    """
    if isinstance(block_number, bool) or not isinstance(block_number, int) or block_number < 0:
        raise ValueError(f"block_number must be an int >= 0, got {block_number!r}")
    limit = rpc.batch_size_max if batch_calls_max is None else batch_calls_max
    if limit < 1:
        raise ValueError(f"batch_calls_max must be >= 1, got {batch_calls_max!r}")
    holders = list(dict.fromkeys(normalize_hex_address(a) for a in addresses))
    contracts = list(dict.fromkeys(normalize_hex_address(t) for t in tokens))
    block_hash = _block_hash(rpc, block_number)
    # All calls of one address stay in one chunk; with more tokens than the limit allows,
    # one address per chunk (the client then splits it into several requests).
    per_chunk = max(1, min(limit, rpc.batch_size_max) // (1 + len(contracts)))
    native: dict[str, int] = {}
    held: dict[tuple[str, str], int] = {}
    try:
        for start in range(0, len(holders), per_chunk):
            chunk = holders[start:start + per_chunk]
            _read_chunk(rpc, block_number, chunk, contracts, native, held)
            if on_progress is not None:
                on_progress(start + len(chunk), len(holders))
    except BalanceUnreadable:
        # A block that vanished in a reorg makes the remaining items fail ("block out of
        # range"): say so rather than blame one address.
        _check_unchanged(rpc, block_number, block_hash)
        raise
    _check_unchanged(rpc, block_number, block_hash)
    return Balances(block_number, block_hash, MappingProxyType(native), MappingProxyType(held))


def _block_hash(rpc: RpcClient, block_number: int) -> str:
    header = rpc.get_block(block_number)
    if header is None:
        raise BalanceBlockMissing(f"the node has no block {block_number} yet")
    return header.hash


def _check_unchanged(rpc: RpcClient, block_number: int, block_hash: str) -> None:
    """Raise BalanceBlockReplaced unless the node's block at the height still has the hash."""
    header = rpc.get_block(block_number)
    if header is None:
        raise BalanceBlockReplaced(
            f"block {block_number} disappeared during the balance read (a rollback): "
            "read again")
    if header.hash != block_hash:
        raise BalanceBlockReplaced(
            f"block {block_number} changed during the balance read ({block_hash} became "
            f"{header.hash}): read again")


def _read_chunk(rpc: RpcClient, block_number: int, chunk: Sequence[str],
                contracts: Sequence[str], native: dict[str, int],
                held: dict[tuple[str, str], int]) -> None:
    """Read one chunk of addresses in one batch and add the figures to ``native``/``held``."""
    block = block_param(block_number)
    calls: list[RpcCall] = []
    for address in chunk:
        calls.append(RpcCall("eth_getBalance", [address, block]))
        data = balance_of_calldata(address)
        calls.extend(RpcCall("eth_call", [{"to": token, "data": data}, block])
                     for token in contracts)
    outcomes = iter(rpc.batch(calls))
    for address in chunk:
        native[address] = _decoded(next(outcomes), decode_quantity, address, None, block_number)
        for token in contracts:
            held[(address, token)] = _decoded(next(outcomes), decode_word, address, token,
                                              block_number)


def _decoded(outcome: Any, decode: Callable[[Any], int], address: str, token: str | None,
             block_number: int) -> int:
    """One batch outcome as an int, or BalanceUnreadable naming what could not be read."""
    if isinstance(outcome, RpcError):
        raise BalanceUnreadable(
            f"{_what(address, token, block_number)}: the node answered {outcome.message}",
            address=address, token=token, block_number=block_number,
            retryable=outcome.retryable) from outcome
    try:
        return decode(outcome)
    except RpcResponseInvalid as exc:
        hint = " (no contract at that address?)" if token is not None and outcome == "0x" else ""
        raise BalanceUnreadable(
            f"{_what(address, token, block_number)}: {exc.message}{hint}",
            address=address, token=token, block_number=block_number) from exc


def _what(address: str, token: str | None, block_number: int) -> str:
    if token is None:
        return f"native balance of {address} at block {block_number}"
    return f"balanceOf({address}) on token {token} at block {block_number}"
