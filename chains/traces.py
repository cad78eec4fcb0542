"""Internal native transfers: ETH moved by calls inside a transaction, from the node's tracer.

Batch payout contracts, smart-contract wallets (Safe) and routers pay ETH with internal calls:
the transaction's own ``value`` goes to the contract (or is zero) and no log is emitted, so
neither ``call:0`` nor ``log:N`` sees the deposit. The node's ``callTracer``
(``debug_traceBlockByHash`` / ``debug_traceTransaction`` with ``{"tracer": "callTracer"}``)
returns each transaction's call tree; this module walks it. It is pure: raw JSON in, values out.

Positions. The top frame (the transaction itself) is ``call:0``; the children of a frame are
numbered from 0 in the order the tracer lists them (execution order), and a frame's position is
its parent's followed by ``.<index>``: the top call's third child's second child is
``call:0.2.1``. The path depends only on the transaction's own execution, not on the block it
landed in, so it stays the same when a reorged transaction is included again elsewhere (as
long as it executes the same way). The top frame is never reported here: its value is the
transaction's own ``value``, already the ``call:0`` deposit of
:func:`chains.evm.decode_native_transfer`, and must not be counted twice. Parity-style
``trace_block`` output (flat, each entry with its ``traceAddress``, the same 0-based path) is
turned into the same trees by :func:`trees_from_parity`.

What counts as a value transfer (``callTracer`` frame types):

- ``CALL`` with a non-zero ``value``: ``value`` wei from ``from`` to ``to``;
- ``CREATE`` / ``CREATE2`` with a non-zero ``value``: the new contract (``to``) is endowed;
- ``SELFDESTRUCT``: the destroyed contract's balance (``value``) goes to the beneficiary (``to``).
- ``DELEGATECALL``, ``STATICCALL`` and ``CALLCODE`` move no value of their own (a delegate call
  runs in the caller's context and some tracers repeat the caller's value on it; ``CALLCODE``
  pays the caller itself). They are walked (their children may transfer) but never reported.

A frame with an ``error`` (reverted, out of gas, ...) is dropped with its whole subtree: the
EVM undid everything under it, yet the children of a reverted frame do not carry the error
themselves. A transaction whose top frame failed yields nothing.
"""

from __future__ import annotations

from collections.abc import Container, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: Frame types whose ``value`` is a transfer to ``to``.
VALUE_FRAME_TYPES = frozenset({"CALL", "CREATE", "CREATE2", "SELFDESTRUCT"})
#: The prefix of every call-tree position; ``call:0`` alone is the top-level value transfer.
TOP_CALL_POSITION = "call:0"
#: Deepest call tree walked: the EVM's call depth limit is 1024.
CALL_DEPTH_MAX = 1025


@dataclass(frozen=True, slots=True)
class InternalTransfer:
    """One value transfer inside a transaction's call tree.

    ``path`` is the frame's child indices below the top call (``(2, 1)`` for ``call:0.2.1``);
    ``kind`` is the tracer's frame type (``CALL``, ``CREATE``, ``CREATE2``, ``SELFDESTRUCT``).
    Addresses are lower-case hex, ``value`` exact wei.
    """

    path: tuple[int, ...]
    kind: str
    from_address: str
    to_address: str
    value: int

    @property
    def position(self) -> str:
        """The deposit position: ``call:0.<i>.<j>...``."""
        return call_position(self.path)


def call_position(path: Sequence[int]) -> str:
    """``call:0`` followed by ``.<i>`` for each child index of ``path`` (0-based)."""
    if any(i < 0 for i in path):
        raise ValueError(f"negative child index in {list(path)!r}")
    return TOP_CALL_POSITION + "".join(f".{i}" for i in path)


def parse_call_path(position: str) -> tuple[int, ...] | None:
    """The child indices of a call-tree position (``"call:0.2.1"`` -> ``(2, 1)``; ``"call:0"``
    -> ``()``), or None when ``position`` is not one (``log:N``, malformed)."""
    if not position.startswith(TOP_CALL_POSITION):
        return None
    rest = position[len(TOP_CALL_POSITION):]
    if not rest:
        return ()
    parts = rest.split(".")
    if parts[0] != "" or not all(p.isdigit() and p.isascii() for p in parts[1:]):
        return None
    return tuple(int(p) for p in parts[1:])


def is_internal_position(position: str) -> bool:
    """Whether ``position`` names an internal call (``call:0.<i>...``, not ``call:0``)."""
    return bool(parse_call_path(position))


def _quantity(value: Any) -> int:
    if value is None:
        return 0
    if isinstance(value, str):
        return int(value, 16)
    return int(value)


def _frames(frame: Mapping[str, Any], path: tuple[int, ...]
            ) -> Iterator[tuple[tuple[int, ...], Mapping[str, Any]]]:
    """The successful frames below ``frame`` (pre-order), with their paths; failed frames and
    their subtrees are skipped. Iterative, so a deep tree cannot exhaust Python's stack."""
    stack: list[tuple[tuple[int, ...], Mapping[str, Any]]] = [(path, frame)]
    while stack:
        at, current = stack.pop()
        if current.get("error"):
            continue
        if at:
            yield at, current
        if len(at) >= CALL_DEPTH_MAX:
            raise ValueError("call tree deeper than the EVM allows")
        children = current.get("calls") or []
        stack.extend((at + (i,), child) for i, child in reversed(list(enumerate(children))))


def internal_transfers(tree: Mapping[str, Any],
                       recipients: Container[str] | None = None) -> list[InternalTransfer]:
    """Value transfers inside one transaction's ``callTracer`` tree, in execution order.

    ``recipients``: keep only transfers to these (lower-case) addresses; None keeps all. The
    top frame is not reported (it is ``call:0``); failed subtrees and zero values are dropped.
    """
    found = []
    for path, frame in _frames(tree, ()):
        kind = str(frame.get("type", "")).upper()
        value = _quantity(frame.get("value"))
        to = frame.get("to")
        if kind not in VALUE_FRAME_TYPES or value == 0 or not to:
            continue
        to_address = str(to).lower()
        if recipients is not None and to_address not in recipients:
            continue
        found.append(InternalTransfer(path, kind, str(frame.get("from", "")).lower(),
                                      to_address, value))
    return found


def recipients_of(tree: Mapping[str, Any]) -> set[str]:
    """Every address an internal transfer of ``tree`` pays (to look up which are ours)."""
    return {t.to_address for t in internal_transfers(tree)}


def find_transfer(tree: Mapping[str, Any], path: Sequence[int]) -> InternalTransfer | None:
    """The transfer at ``path`` in ``tree`` (None: no such successful value transfer)."""
    wanted = tuple(path)
    return next((t for t in internal_transfers(tree) if t.path == wanted), None)


def block_trace_by_tx(block_trace: Sequence[Mapping[str, Any]],
                      tx_hashes: Sequence[str]) -> dict[str, Mapping[str, Any]] | None:
    """Map ``debug_traceBlockBy*`` output (one ``{"txHash", "result"}`` per transaction, in
    block order) to transaction hashes, checked against the block's ``tx_hashes`` (from its
    receipts, in order). None when they do not match (another block was traced: a reorg
    while reading). Nodes that omit ``txHash`` are matched by order.
    """
    if len(block_trace) != len(tx_hashes):
        return None
    traces: dict[str, Mapping[str, Any]] = {}
    for entry, tx_hash in zip(block_trace, tx_hashes, strict=True):
        named = entry.get("txHash")
        if named is not None and str(named).lower() != tx_hash.lower():
            return None
        result = entry.get("result")
        if not isinstance(result, Mapping):
            return None
        traces[tx_hash.lower()] = result
    return traces


# --------------------------------------------------------------------------- trace_block


def _parity_frame(entry: Mapping[str, Any]) -> dict[str, Any]:
    """One ``trace_block`` entry as a ``callTracer`` frame (without children)."""
    action = entry.get("action") or {}
    kind = str(entry.get("type", "")).lower()
    frame: dict[str, Any]
    if kind == "call":
        frame = {"type": str(action.get("callType", "call")).upper(), "from": action.get("from"),
                 "to": action.get("to"), "value": action.get("value")}
    elif kind == "create":
        result = entry.get("result") or {}
        frame = {"type": str(action.get("creationMethod") or "create").upper(),
                 "from": action.get("from"), "to": result.get("address"),
                 "value": action.get("value")}
    elif kind == "suicide":
        frame = {"type": "SELFDESTRUCT", "from": action.get("address"),
                 "to": action.get("refundAddress"), "value": action.get("balance")}
    else:
        frame = {"type": kind.upper()}
    if entry.get("error"):
        frame["error"] = entry["error"]
    return frame


def trees_from_parity(traces: Sequence[Mapping[str, Any]], block_hash: str
                      ) -> dict[str, dict[str, Any]] | None:
    """``trace_block`` output (flat, one entry per call with its ``traceAddress``) as one
    ``callTracer``-shaped tree per transaction hash, so that :func:`internal_transfers` walks
    both the same way. ``traceAddress`` is the same 0-based child path as ours.

    None when an entry belongs to another block than ``block_hash`` (the node switched
    branches) or a transaction's paths do not form one tree (a child index skipped).
    Entries without a transaction (block rewards) are ignored.
    """
    frames: dict[str, dict[tuple[int, ...], dict[str, Any]]] = {}
    for entry in traces:
        tx_hash = entry.get("transactionHash")
        if tx_hash is None:
            continue
        if str(entry.get("blockHash", "")).lower() != block_hash.lower():
            return None
        path = tuple(int(i) for i in entry.get("traceAddress") or [])
        frames.setdefault(str(tx_hash).lower(), {})[path] = _parity_frame(entry)
    trees: dict[str, dict[str, Any]] = {}
    for tx_hash, by_path in frames.items():
        if () not in by_path:
            return None
        for path in sorted(by_path, key=lambda p: (len(p), p)):
            if not path:
                continue
            parent = by_path.get(path[:-1])
            if parent is None:
                return None
            children = parent.setdefault("calls", [])
            if path[-1] != len(children):
                return None
            children.append(by_path[path])
        trees[tx_hash] = by_path[()]
    return trees
