"""Reading blocks for the watcher: headers and receipts in batches, transfers to our addresses.

Everything here is node I/O and decoding; nothing touches the database except through the
``lookup_users`` callable the caller passes (a short read). Our own hot and cold addresses
(``own_addresses``, from the configuration) are ours too: transfers to them are observed like
deposits, with no user. A scan returns only a consistent
prefix of the range asked for: each header must build on the previous one (parent hash) and
every receipt must belong to the header's block hash. A tip that is no longer canonical is
reported as a reorg, never papered over.

With ``trace_internal`` the blocks are also traced (``debug_traceBlockByHash`` with the
``callTracer``, by the hash of the header just read, so the trace is of that very block; or
``trace_block``, whose entries each name their block hash) to find
ETH paid to our addresses by internal calls (``chains.traces``: position ``call:0.<i>...``).
Only blocks holding a successful transaction that ran code are traced (gas used above 21,000:
a plain transfer has no internal calls). A trace that does not match the block's receipts
(the node switched branches between the calls) ends the accepted prefix like a receipt would.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from eth_abi.abi import decode as abi_decode
from eth_utils.crypto import keccak

from chains.errors import RpcError
from chains.evm import (
    decode_native_transfer,
    is_erc20_transfer_log,
    receipt_succeeded,
    transfer_from_log,
    transfer_recipient,
)
from chains.model import BlockHeader, ObservedTransfer, same_hash
from chains.rpc import RpcCall, RpcClient, from_quantity, header_from_json, to_quantity
from chains.traces import block_trace_by_tx, internal_transfers, trees_from_parity

log = logging.getLogger("custody.deposits.scanner")
SYMBOL_CALLDATA = "0x" + keccak(text="symbol()")[:4].hex()
#: Gas of a plain value transfer: a transaction that used no more ran no code, so no calls.
PLAIN_TRANSFER_GAS = 21_000
#: The tracer options of every trace request (geth, reth, erigon, nethermind and anvil agree).
CALL_TRACER = {"tracer": "callTracer"}
#: JSON-RPC "method not found" (EIP-1474): the node offers no such tracer.
METHOD_NOT_FOUND = -32601
LookupUsers = Callable[[Iterable[str]], Mapping[str, str]]


@dataclass(frozen=True)
class Observation:
    """A transfer to one of our addresses, with the facts of its transaction."""

    transfer: ObservedTransfer
    tx_from: str
    #: None for a token or internal transfer first seen in a block already final (see
    #: ``scan_blocks``' ``final_height``): its transaction was not read.
    tx_nonce: int | None
    #: ``symbol()`` of an unlisted token contract (to recognise fakes), else None.
    token_symbol: str | None = None


@dataclass
class ScanResult:
    """What one scan found: the accepted headers (ascending) and the transfers to us."""

    reorg: bool
    headers: list[BlockHeader] = field(default_factory=list)
    observations: list[Observation] = field(default_factory=list)
    users: dict[str, str] = field(default_factory=dict)


def _header(raw: Mapping[str, Any]) -> BlockHeader:
    h = header_from_json(raw)
    return BlockHeader(h.number, h.hash, h.parent_hash, h.timestamp)


def scan_blocks(
    rpc: RpcClient,
    tip: tuple[int, str] | None,
    start: int,
    end: int,
    *,
    lookup_users: LookupUsers,
    is_listed: Callable[[str], bool],
    own_addresses: frozenset[str] = frozenset(),
    trace_internal: bool = False,
    trace_method: str = "debug_traceBlockByHash",
    final_height: int | None = None,
) -> ScanResult:
    """Scan heights ``start..end`` (inclusive) building on ``tip`` (None: first scan).

    Transfers to deposit addresses (``lookup_users``) and to ``own_addresses`` are returned;
    with ``trace_internal``, internal native transfers too (see the module docstring).

    ``final_height``: blocks at or below it are final under the chain's strictest rule (read
    before the scan). A token or internal transfer in such a block is taken from the receipt
    alone, sender from the receipt's ``from`` and no nonce: the transaction is read only to
    prove a deposit failed (its nonce used by another), which a deposit final at first sight
    can no longer be. A catch-up then reads no transaction per deposit (the slowest call of a
    scan on anvil: bench/RESULTS.md, "Deposit catch-up"). A top-level native transfer still
    reads its transaction: the value is there only.
    """
    heights = list(range(start, end + 1))
    calls = [RpcCall("eth_getBlockByNumber", [to_quantity(h), False]) for h in heights]
    calls += [RpcCall("eth_getBlockReceipts", [to_quantity(h)]) for h in heights]
    if tip is not None:
        calls.append(RpcCall("eth_getBlockByNumber", [to_quantity(tip[0]), False]))
    answers = rpc.batch_results(calls)
    if tip is not None:
        tip_now = answers[-1]
        if tip_now is None or not same_hash(str(tip_now["hash"]), tip[1]):
            return ScanResult(reorg=True)
    accepted: list[tuple[BlockHeader, list[dict[str, Any]]]] = []
    previous = tip[1] if tip is not None else None
    for i in range(len(heights)):
        raw_header, receipts = answers[i], answers[len(heights) + i]
        if raw_header is None or receipts is None:
            break
        header = _header(raw_header)
        if previous is not None and not same_hash(header.parent_hash, previous):
            if not accepted:
                return ScanResult(reorg=True)
            break  # The node switched branches while we read: keep the consistent prefix.
        if any(not same_hash(str(r["blockHash"]), header.hash) for r in receipts):
            break
        accepted.append((header, receipts))
        previous = header.hash
    traces: dict[str, Mapping[str, Any]] = {}
    if trace_internal:
        accepted, traces = _trace_blocks(rpc, accepted, trace_method)
    return _decode(rpc, accepted, lookup_users, is_listed, own_addresses, traces, final_height)


def _needs_trace(receipt: Mapping[str, Any]) -> bool:
    return receipt_succeeded(receipt) and from_quantity(receipt["gasUsed"]) > PLAIN_TRANSFER_GAS


def trace_call(method: str, header: BlockHeader) -> RpcCall:
    """The node call reading one block's traces with ``method`` (``config.chains``'
    ``TRACE_METHODS``): by hash with the callTracer, or ``trace_block`` by height (each of its
    entries names its block hash, checked by :func:`match_traces`)."""
    if method == "trace_block":
        return RpcCall("trace_block", [to_quantity(header.number)])
    return RpcCall("debug_traceBlockByHash", [header.hash, CALL_TRACER])


def match_traces(method: str, answer: Any, header: BlockHeader,
                 tx_hashes: Sequence[str]) -> dict[str, Mapping[str, Any]] | None:
    """One block's traces as call trees by tx hash, or None if they are not of this block
    (another hash, other transactions)."""
    if not isinstance(answer, list):
        return None
    if method == "trace_block":
        trees = trees_from_parity(answer, header.hash)
        if trees is None or set(trees) != {h.lower() for h in tx_hashes}:
            return None
        return dict(trees)
    return block_trace_by_tx(answer, tx_hashes)


def _trace_blocks(
    rpc: RpcClient, blocks: list[tuple[BlockHeader, list[dict[str, Any]]]], method: str
) -> tuple[list[tuple[BlockHeader, list[dict[str, Any]]]], dict[str, Mapping[str, Any]]]:
    """The call trees of the blocks' transactions (by tx hash) and the prefix of ``blocks``
    whose traces match their receipts. A node without the tracer (method not found) raises
    its RpcError; any other error on a block (its hash no longer known) ends the prefix."""
    wanted = [(i, header) for i, (header, receipts) in enumerate(blocks)
              if any(_needs_trace(r) for r in receipts)]
    if not wanted:
        return blocks, {}
    answers = rpc.batch([trace_call(method, header) for _, header in wanted])
    traces: dict[str, Mapping[str, Any]] = {}
    for (i, header), answer in zip(wanted, answers, strict=True):
        receipts = blocks[i][1]
        if isinstance(answer, RpcError) and (answer.rpc_code == METHOD_NOT_FOUND
                                             or answer.retryable):
            # No tracer on this node (or rate limited past every retry): nothing to cut to.
            raise RpcError(f"{method}: {answer.message}", rpc_code=answer.rpc_code,
                           data=answer.data, retryable=answer.retryable)
        matched = None if isinstance(answer, RpcError) else match_traces(
            method, answer, header, [str(r["transactionHash"]) for r in receipts])
        if matched is None:
            # Another block than the one read (a reorg between the calls: the hash is gone,
            # or other transactions): keep the prefix, the next step reads on from there.
            # Said, because a node whose traces never match would stop the scan here.
            log.warning("block %d %s: no traces matching its receipts (%s); the scan stops "
                        "below it", header.number, header.hash,
                        answer.message if isinstance(answer, RpcError) else "other block")
            return blocks[:i], traces
        traces.update(matched)
    return blocks, traces


def _internal(receipt: Mapping[str, Any], traces: Mapping[str, Mapping[str, Any]]
              ) -> list[ObservedTransfer]:
    """Every internal native transfer of one traced receipt (to anyone: filtered later)."""
    tx_hash = str(receipt["transactionHash"]).lower()
    tree = traces.get(tx_hash)
    if tree is None or not receipt_succeeded(receipt):
        return []
    return [ObservedTransfer(
        token=None, from_address=t.from_address, to_address=t.to_address, value=t.value,
        tx_hash=tx_hash, block_number=from_quantity(receipt["blockNumber"]),
        block_hash=str(receipt["blockHash"]).lower(), position=t.position)
        for t in internal_transfers(tree)]


def _decode(
    rpc: RpcClient,
    blocks: Sequence[tuple[BlockHeader, list[dict[str, Any]]]],
    lookup_users: LookupUsers,
    is_listed: Callable[[str], bool],
    own_addresses: frozenset[str] = frozenset(),
    traces: Mapping[str, Mapping[str, Any]] | None = None,
    final_height: int | None = None,
) -> ScanResult:
    # Two passes over the receipts: the recipients first (an ERC-20 Transfer's is its third
    # topic), then a transfer is built only for those that are ours (a catch-up meets as many
    # transfers to others as to us).
    logs: list[tuple[str, int, dict[str, Any]]] = []  # (recipient, position, log)
    internal: list[ObservedTransfer] = []
    native_receipts: list[dict[str, Any]] = []
    senders: dict[str, str] = {}
    for _, receipts in blocks:
        for receipt in receipts:
            senders[str(receipt["transactionHash"]).lower()] = str(receipt["from"]).lower()
            if not receipt_succeeded(receipt):
                continue  # A reverted transaction moved nothing (its logs were discarded).
            for i, log in enumerate(receipt.get("logs") or []):
                if is_erc20_transfer_log(log):
                    logs.append((transfer_recipient(log), i, log))
            if receipt.get("to"):
                native_receipts.append(receipt)
            if traces:
                # Internal native transfers ride with the token transfers: same filtering
                # by recipient, same transaction checks, their own call-tree positions.
                internal.extend(_internal(receipt, traces))
    candidates = ({to for to, _, _ in logs} | {t.to_address for t in internal}
                  | {str(r["to"]).lower() for r in native_receipts})
    users = dict(lookup_users(candidates - own_addresses))
    mine = set(users) | (candidates & own_addresses)
    ours = [transfer_from_log(log, i) for to, i, log in logs if to in mine]
    ours += [t for t in internal if t.to_address in mine]
    native = [r for r in native_receipts if str(r["to"]).lower() in mine]
    unread = [t for t in ours if final_height is not None and t.block_number <= final_height]
    needed = [t for t in ours if final_height is None or t.block_number > final_height]
    hashes = sorted({t.tx_hash for t in needed} | {str(r["transactionHash"]).lower()
                                                     for r in native})
    headers = [h for h, _ in blocks]
    if not ours and not native:
        return ScanResult(reorg=False, headers=headers, users=users)
    txs: dict[str, Any] = dict(zip(hashes, rpc.batch_results(
        [RpcCall("eth_getTransactionByHash", [h]) for h in hashes]), strict=True)) \
        if hashes else {}
    block_of = {h.hash: h.number for h in headers}
    bad_heights = [int(from_quantity(r["blockNumber"])) for r in native
                   if not _same_block(txs.get(str(r["transactionHash"]).lower()), block_of)]
    bad_heights += [t.block_number for t in needed
                    if not _same_block(txs.get(t.tx_hash), block_of)]
    if bad_heights:
        # A transaction moved while we read (a reorg between the calls): keep blocks below it.
        cut = min(bad_heights)
        headers = [h for h in headers if h.number < cut]
        ours = [t for t in ours if t.block_number < cut]
        native = [r for r in native if from_quantity(r["blockNumber"]) < cut]
    transfers = list(ours)
    for receipt in native:
        moved = decode_native_transfer(txs[str(receipt["transactionHash"]).lower()], receipt)
        if moved is not None:
            transfers.append(moved)
    symbols = _symbols(rpc, {t.token for t in transfers if t.token and not is_listed(t.token)})
    from_receipt = {(t.tx_hash, t.position) for t in unread}
    observations = [
        Observation(t, senders[t.tx_hash], None, symbols.get(t.token) if t.token else None)
        if (t.tx_hash, t.position) in from_receipt else
        Observation(t, str(txs[t.tx_hash]["from"]).lower(),
                    from_quantity(txs[t.tx_hash]["nonce"]),
                    symbols.get(t.token) if t.token else None)
        for t in sorted(transfers, key=lambda t: (t.block_number, t.tx_hash, t.position))
    ]
    return ScanResult(reorg=False, headers=headers, observations=observations, users=users)


def _same_block(tx: Mapping[str, Any] | None, block_of: Mapping[str, int]) -> bool:
    return tx is not None and str(tx.get("blockHash") or "").lower() in block_of


def _symbols(rpc: RpcClient, contracts: set[str]) -> dict[str, str]:
    """``symbol()`` of each contract; contracts that do not answer a string are left out."""
    wanted = sorted(contracts)
    if not wanted:
        return {}
    outcomes = rpc.batch([RpcCall("eth_call", [{"to": c, "data": SYMBOL_CALLDATA}, "latest"])
                          for c in wanted])
    found: dict[str, str] = {}
    for contract, output in zip(wanted, outcomes, strict=True):
        symbol = decode_symbol(output) if isinstance(output, str) else None
        if symbol:
            found[contract] = symbol
    return found


def decode_symbol(output_hex: str) -> str | None:
    """A ``symbol()`` answer: an ABI string, or a bytes32 (older tokens); None if neither."""
    data = bytes.fromhex(output_hex.removeprefix("0x"))
    try:
        (text,) = abi_decode(["string"], data)
        return str(text)
    except Exception:  # noqa: BLE001 - any malformed answer means "no usable symbol"
        pass
    if len(data) == 32:
        return data.rstrip(b"\x00").decode("utf-8", errors="replace") or None
    return None
