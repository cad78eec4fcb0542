#!/usr/bin/env python3
"""Check an inclusion proof of a custody proof-of-reserves report, with Python's standard
library alone (nothing to install, nothing of the engine imported, no network).

    python3 verify_proof.py PROOF.json ROOT

``PROOF.json`` is your proof (format ``custody-por-proof/1``); ``ROOT`` is the liabilities root
published with the report (64 hex digits): take it from the report, not from the proof, since
the point is to check the proof against what everyone else sees. Exit status: 0 and a summary
when the proof is valid; 1 and one line ``invalid [reason]: message`` when it is not; 2 and one
line on standard error for a usage error or a file that cannot be read.

As a module: ``verify(doc, root_hex)`` returns the user, the balances and the totals, or raises
``Invalid`` (its ``reason`` is one of ``malformed``, ``negative_value``, ``value_overflow``,
``sum_overflow``, ``root_mismatch``, ``sums_mismatch``).

Every rule here is specified in ``proof-of-reserves.md`` beside this file, and the checks run
in the order that file gives.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from typing import Any

FORMAT = "custody-por-proof/1"
LIMIT = 2**128  # every value and every sum is below this (unsigned 128-bit)
DEPTH_MAX = 40
ASSETS_MAX = 255
ASSET_CODE = re.compile(r"[A-Z0-9][A-Z0-9._-]{0,31}")
USER_ID = re.compile(r"[A-Za-z0-9_.-]{1,100}")
DECIMAL = re.compile(r"0|[1-9][0-9]{0,99}")
HEX32 = re.compile(r"[0-9a-f]{64}")

Node = tuple[bytes, list[int]]  # a node's hash and its sums, one per asset


class Invalid(Exception):
    """The proof does not verify: ``reason`` is a stable code, the message says where."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def sha256(data: bytes) -> bytes:
    """The SHA-256 digest of ``data``."""
    return hashlib.sha256(data).digest()


def u128(value: int) -> bytes:
    """A value (already checked to be in range) as 16 bytes, big-endian."""
    return value.to_bytes(16, "big")


def decimal(text: Any, where: str) -> int:
    """A value written as a decimal string: negative and too large values are named as such,
    since they are what a dishonest proof would use to hide liabilities."""
    if isinstance(text, str) and text.startswith("-") and DECIMAL.fullmatch(text[1:]):
        raise Invalid("negative_value", f"{where} is negative ({text})")
    if not isinstance(text, str) or not DECIMAL.fullmatch(text):
        raise Invalid("malformed", f"{where} is not a decimal string: {text!r}")
    if int(text) >= LIMIT:
        raise Invalid("value_overflow", f"{where} is 2**128 or more ({text})")
    return int(text)


def values(raw: Any, width: int, where: str) -> list[int]:
    """A list of exactly ``width`` values (one per asset)."""
    if not isinstance(raw, list) or len(raw) != width:
        raise Invalid("malformed", f"{where} is not a list of {width} values")
    return [decimal(v, f"{where}[{i}]") for i, v in enumerate(raw)]


def hex32(text: Any, where: str) -> bytes:
    """32 bytes written as 64 lower-case hex digits."""
    if not isinstance(text, str) or not HEX32.fullmatch(text):
        raise Invalid("malformed", f"{where} is not 64 lower-case hex digits")
    return bytes.fromhex(text)


def leaf_hash(user_id: str, salt: bytes, assets: list[str], balances: list[int]) -> bytes:
    """SHA-256(0x00 || salt || u8 len || user id || u8 asset count || per asset: u8 len ||
    code || u128 balance)."""
    uid = user_id.encode("ascii")
    data = b"\x00" + salt + bytes([len(uid)]) + uid + bytes([len(assets)])
    for code, balance in zip(assets, balances, strict=True):
        data += bytes([len(code)]) + code.encode("ascii") + u128(balance)
    return sha256(data)


def parent(left: Node, right: Node, where: str) -> Node:
    """SHA-256(0x01 || left hash || left sums || right hash || right sums), and the sums added
    per asset: both children's sums are hashed, so none can be moved to the other unseen."""
    sums = [a + b for a, b in zip(left[1], right[1], strict=True)]
    for i, total in enumerate(sums):
        if total >= LIMIT:
            raise Invalid("sum_overflow", f"the sum of asset {i} at {where} reaches 2**128")
    data = b"\x01" + left[0] + b"".join(map(u128, left[1])) + right[0] + \
        b"".join(map(u128, right[1]))
    return sha256(data), sums


def verify(doc: Any, root_hex: str) -> dict[str, Any]:
    """Check a proof (parsed JSON) against the published root; return ``user_id``,
    ``balances`` and ``totals`` (per asset, ints in minor units) and ``root``, or raise
    Invalid."""
    published = hex32(root_hex.strip().lower() if isinstance(root_hex, str) else root_hex,
                      "the published root")
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise Invalid("malformed", f"not a proof: format is not {FORMAT!r}")
    assets = doc.get("assets")
    if not isinstance(assets, list) or not all(
            isinstance(a, str) and ASSET_CODE.fullmatch(a) for a in assets) or \
            len(assets) > ASSETS_MAX or assets != sorted(set(assets), key=str.encode):
        raise Invalid("malformed", "assets is not a list of codes in tree order")
    leaf, path, root = doc.get("leaf"), doc.get("path"), doc.get("root")
    if not isinstance(leaf, dict):
        raise Invalid("malformed", "leaf is missing")
    if not isinstance(path, list) or len(path) > DEPTH_MAX:
        raise Invalid("malformed", f"path is not a list of at most {DEPTH_MAX} siblings")
    index, user_id = leaf.get("index"), leaf.get("user_id")
    if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < 2**len(path):
        raise Invalid("malformed", f"leaf index {index!r} does not fit a path of {len(path)} "
                                   "siblings")
    if not isinstance(user_id, str):
        raise Invalid("malformed", "leaf user_id is not a string")
    salt = hex32(leaf.get("salt"), "leaf salt")
    balances = values(leaf.get("balances"), len(assets), "leaf balances")
    siblings: list[Node] = []
    for level, item in enumerate(path):
        if not isinstance(item, dict):
            raise Invalid("malformed", f"path[{level}] is not an object")
        siblings.append((hex32(item.get("hash"), f"path[{level}] hash"),
                         values(item.get("sums"), len(assets), f"path[{level}] sums")))
    if not isinstance(root, dict):
        raise Invalid("malformed", "root is missing")
    claimed = (hex32(root.get("hash"), "root hash"), values(root.get("sums"), len(assets),
                                                            "root sums"))
    if not USER_ID.fullmatch(user_id):
        raise Invalid("malformed", f"user id {user_id!r} is not a user id")

    node: Node = (leaf_hash(user_id, salt, assets, balances), balances)
    for level, sibling in enumerate(siblings):
        # Bit `level` of the index: 0, we are the left child; 1, the right one.
        left_right = (node, sibling) if (index >> level) & 1 == 0 else (sibling, node)
        node = parent(*left_right, f"level {level + 1}")
    if node[0] != published:
        raise Invalid("root_mismatch", f"the path leads to {node[0].hex()}, not to the "
                                       f"published root {published.hex()}")
    if node != claimed:
        raise Invalid("sums_mismatch", "the proof's root member does not match its path")
    return {"user_id": user_id, "balances": dict(zip(assets, balances, strict=True)),
            "totals": dict(zip(assets, node[1], strict=True)), "root": node[0].hex()}


def main(argv: list[str]) -> int:
    """The command line (module docstring); returns the exit status."""
    if len(argv) != 3 or not HEX32.fullmatch(argv[2].strip().lower()):
        print("usage: verify_proof.py PROOF.json ROOT (ROOT: the published liabilities root, "
              "64 hex digits)", file=sys.stderr)
        return 2
    try:
        with open(argv[1], "rb") as f:
            raw = f.read()
    except OSError as e:
        print(f"cannot read {argv[1]}: {e.strerror or e}", file=sys.stderr)
        return 2
    try:
        doc = json.loads(raw)
    except (ValueError, RecursionError):  # not JSON (or not UTF-8): not a proof either
        print(f"invalid [malformed]: {argv[1]} is not a JSON document")
        return 1
    try:
        result = verify(doc, argv[2])
    except Invalid as e:
        print(f"invalid [{e.reason}]: {e}")
        return 1
    print(f"valid: the balances of user {result['user_id']} are included in the liabilities "
          f"root {result['root']}")
    rows = [("asset", "balance", "total of all users")] + [
        (asset, str(balance), str(result["totals"][asset]))
        for asset, balance in result["balances"].items()]
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    for asset, balance, total in rows:
        print(f"  {asset:<{widths[0]}}  {balance:>{widths[1]}}  {total:>{widths[2]}}")
    print("  (amounts in the asset's ledger minor units; compare the totals with the report)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
