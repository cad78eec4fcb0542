"""EVM decoding: ERC-20 ``Transfer`` logs and native value transfers, plus small ABI helpers.

Input is the node's raw JSON (receipts, logs, transactions from :mod:`chains.rpc`); output is
:class:`chains.model.ObservedTransfer`. Positions (the third part of the deposit key):

- ERC-20: ``"log:<n>"`` where ``n`` is the log's index inside its transaction receipt's
  ``logs`` list. Never the block-wide ``logIndex``: that one changes when a reorged transaction
  lands again in another block behind other transactions, while the receipt index does not.
- Native coin: ``"call:0"`` for the transaction's own top-level ``value``. Value moved by
  internal calls has the call-tree path ``"call:0.<i>.<j>..."``; it is decoded from traces by
  :mod:`chains.traces`.

Only well-formed ERC-20 ``Transfer`` logs are decoded: topic0 =
``keccak("Transfer(address,address,uint256)")``, exactly three topics (from and to indexed) and
exactly 32 bytes of data (the value). ERC-721 ``Transfer`` has the same topic0 but four topics
(the token id is indexed) and is skipped, as are non-standard layouts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from eth_abi.abi import decode as abi_decode
from eth_abi.abi import encode as abi_encode
from eth_utils.crypto import keccak

from chains.model import NATIVE_TOP_LEVEL_POSITION, ObservedTransfer, log_position

#: topic0 of ``Transfer(address,address,uint256)`` (ERC-20 and ERC-721 alike).
TRANSFER_TOPIC = "0x" + keccak(text="Transfer(address,address,uint256)").hex()


def _hex_int(value: Any) -> int:
    return int(value, 16) if isinstance(value, str) else int(value)


def _topic_address(topic: str) -> str:
    # An indexed address is left-padded to 32 bytes; the address is the last 20.
    return "0x" + topic[-40:].lower()


def is_erc20_transfer_log(log: Mapping[str, Any]) -> bool:
    """Whether a raw log is a well-formed ERC-20 ``Transfer`` (not ERC-721, not removed)."""
    topics = log.get("topics") or []
    data = log.get("data") or "0x"
    return (
        len(topics) == 3
        and str(topics[0]).lower() == TRANSFER_TOPIC
        and len(data) == 2 + 64  # "0x" + one 32-byte word
        and not log.get("removed", False)
    )


def transfer_recipient(log: Mapping[str, Any]) -> str:
    """The recipient of a well-formed ERC-20 ``Transfer`` log (:func:`is_erc20_transfer_log`),
    lower-case: what :func:`transfer_from_log` would say, without decoding the rest."""
    return _topic_address(log["topics"][2])


def transfer_from_log(log: Mapping[str, Any], position_in_receipt: int) -> ObservedTransfer:
    """Decode one raw ERC-20 ``Transfer`` log (check :func:`is_erc20_transfer_log` first).

    ``value`` is parsed straight from the 32-byte word, so any uint256 stays exact.
    """
    topics = log["topics"]
    return ObservedTransfer(
        token=str(log["address"]).lower(),
        from_address=_topic_address(topics[1]),
        to_address=_topic_address(topics[2]),
        value=int(log["data"], 16),
        tx_hash=str(log["transactionHash"]).lower(),
        block_number=_hex_int(log["blockNumber"]),
        block_hash=str(log["blockHash"]).lower(),
        position=log_position(position_in_receipt),
        log_index=_hex_int(log["logIndex"]),
    )


def receipt_succeeded(receipt: Mapping[str, Any]) -> bool:
    """Whether the transaction executed successfully (``status`` 1).

    Pre-Byzantium receipts have no status; they are not expected on supported chains and
    count as failed so that nothing is credited on a guess.
    """
    status = receipt.get("status")
    return status is not None and _hex_int(status) == 1


def decode_receipt_transfers(receipt: Mapping[str, Any]) -> list[ObservedTransfer]:
    """All ERC-20 transfers of one raw receipt, with ``position = "log:<index in logs>"``.

    The preferred source of positions: the receipt's ``logs`` list is exactly the
    transaction's logs, so the index is the in-transaction position. A reverted transaction
    yields nothing (its logs were discarded by the EVM; the check is defensive).
    """
    if not receipt_succeeded(receipt):
        return []
    return [transfer_from_log(log, i) for i, log in enumerate(receipt.get("logs") or [])
            if is_erc20_transfer_log(log)]


def decode_block_logs_transfers(logs: Sequence[Mapping[str, Any]]) -> list[ObservedTransfer]:
    """ERC-20 transfers from ``eth_getLogs`` output, positions computed without receipts.

    The in-receipt position is ``logIndex`` minus the ``logIndex`` of the first log of the
    same transaction in the same block. That is only correct when ``logs`` holds EVERY log of
    the blocks it covers: ``eth_getLogs`` without an address or topic filter. With a filter the
    transaction's earlier logs (an ``Approval``, another token's ``Transfer``) are missing and
    the positions come out too small; use :func:`decode_receipt_transfers` then.
    """
    first_index: dict[tuple[str, str], int] = {}
    for log in logs:
        key = (str(log["blockHash"]).lower(), str(log["transactionHash"]).lower())
        index = _hex_int(log["logIndex"])
        if key not in first_index or index < first_index[key]:
            first_index[key] = index
    transfers = []
    for log in logs:
        if not is_erc20_transfer_log(log):
            continue
        key = (str(log["blockHash"]).lower(), str(log["transactionHash"]).lower())
        transfers.append(transfer_from_log(log, _hex_int(log["logIndex"]) - first_index[key]))
    return transfers


def decode_native_transfer(
    tx: Mapping[str, Any], receipt: Mapping[str, Any]
) -> ObservedTransfer | None:
    """The top-level native value transfer of a transaction (position ``"call:0"``), or None.

    None when the value is zero, the transaction creates a contract (no ``to``), or it
    reverted (the value did not move). Value moved by internal calls needs traces
    (:mod:`chains.traces`).
    """
    value = _hex_int(tx.get("value", "0x0"))
    to = tx.get("to")
    if value == 0 or to is None or not receipt_succeeded(receipt):
        return None
    return ObservedTransfer(
        token=None,
        from_address=str(tx["from"]).lower(),
        to_address=str(to).lower(),
        value=value,
        tx_hash=str(tx["hash"]).lower(),
        block_number=_hex_int(receipt["blockNumber"]),
        block_hash=str(receipt["blockHash"]).lower(),
        position=NATIVE_TOP_LEVEL_POSITION,
    )


# --------------------------------------------------------------------------- ABI helpers


def _abi_type(param: Mapping[str, Any]) -> str:
    kind = str(param["type"])
    if kind.startswith("tuple"):
        inner = ",".join(_abi_type(c) for c in param["components"])
        return f"({inner}){kind[len('tuple'):]}"
    return kind


def find_function(abi: Sequence[Mapping[str, Any]], name: str, arg_count: int) -> Mapping[str, Any]:
    """The ABI entry of function ``name`` taking ``arg_count`` arguments."""
    for entry in abi:
        if (entry.get("type") == "function" and entry.get("name") == name
                and len(entry.get("inputs", [])) == arg_count):
            return entry
    raise KeyError(f"no function {name} with {arg_count} arguments in the ABI")


def encode_call(abi: Sequence[Mapping[str, Any]], name: str, args: Sequence[Any]) -> str:
    """Calldata (0x-hex) for calling ``name(args)``: 4-byte selector + ABI-encoded args."""
    entry = find_function(abi, name, len(args))
    types = [_abi_type(p) for p in entry["inputs"]]
    selector = keccak(text=f"{name}({','.join(types)})")[:4]
    return "0x" + (selector + abi_encode(types, list(args))).hex()


def encode_constructor(
    abi: Sequence[Mapping[str, Any]], bytecode: str, args: Sequence[Any]
) -> str:
    """Deployment data: creation bytecode followed by the ABI-encoded constructor args."""
    ctor: Mapping[str, Any] = next(
        (e for e in abi if e.get("type") == "constructor"), {"inputs": []}
    )
    types = [_abi_type(p) for p in ctor["inputs"]]
    if len(types) != len(args):
        raise ValueError(f"constructor takes {len(types)} arguments, got {len(args)}")
    return bytecode + abi_encode(types, list(args)).hex()


def decode_output(abi: Sequence[Mapping[str, Any]], name: str, arg_count: int,
                  output_hex: str) -> tuple[Any, ...]:
    """Decode the raw ``eth_call`` output of function ``name``."""
    entry = find_function(abi, name, arg_count)
    types = [_abi_type(p) for p in entry["outputs"]]
    return tuple(abi_decode(types, bytes.fromhex(output_hex.removeprefix("0x"))))


def erc20_transfer_calldata(to: str, amount: int) -> str:
    """Calldata of ``transfer(to, amount)`` for any ERC-20 (used to build withdrawals)."""
    selector = keccak(text="transfer(address,uint256)")[:4]
    return "0x" + (selector + abi_encode(["address", "uint256"], [to, amount])).hex()
