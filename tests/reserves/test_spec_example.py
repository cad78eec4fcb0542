"""docs/proof-of-reserves.md's worked example, recomputed twice: with ``hashlib`` alone from the
rules the page states (so the page is enough to write a verifier), and by ``reserves.merkle``
(so the page says what the engine computes). Neither can drift from the other."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

from eth_account import Account
from eth_account.messages import defunct_hash_message, encode_defunct

from reserves import merkle
from reserves.model import AssetReserves

DOC = Path(__file__).resolve().parents[2] / "docs" / "proof-of-reserves.md"
TEXT = DOC.read_text()
ASSETS = ["ETH", "USDC"]


def _value(name: str) -> str:
    """The value of a ``- {name} = `...``` line of the page."""
    match = re.search(rf"^\s*- {re.escape(name)} = `([0-9a-fx]+)`", TEXT, re.M)
    assert match, f"{name!r} not found in {DOC}"
    return match.group(1)


def _json_block(format_name: str) -> Any:
    for block in re.findall(r"```json\n(.*?)\n```", TEXT, re.S):
        doc = json.loads(block)
        if doc.get("format") == format_name:
            return doc
    raise AssertionError(f"no {format_name} block in {DOC}")


def _users() -> list[tuple[str, bytes, list[int]]]:
    rows = re.findall(r"^- (\w+): salt = 32 bytes of 0x([0-9a-f]{2}), balances ETH (\d+), "
                      r"USDC (\d+)$", TEXT, re.M)
    assert len(rows) == 3
    return [(u, bytes.fromhex(s) * 32, [int(eth), int(usdc)]) for u, s, eth, usdc in rows]


def _u128(v: int) -> bytes:
    return v.to_bytes(16, "big")


def _sha(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


def _leaf_bytes(user_id: str, salt: bytes, balances: list[int]) -> bytes:
    out = b"\x00" + salt + bytes([len(user_id)]) + user_id.encode() + bytes([len(ASSETS)])
    for code, v in zip(ASSETS, balances, strict=True):
        out += bytes([len(code)]) + code.encode() + _u128(v)
    return out


def _node(left: tuple[bytes, list[int]], right: tuple[bytes, list[int]]
          ) -> tuple[bytes, bytes, list[int]]:
    data = b"\x01" + left[0] + b"".join(map(_u128, left[1])) + right[0] + \
        b"".join(map(_u128, right[1]))
    return data, _sha(data), [a + b for a, b in zip(left[1], right[1], strict=True)]


class TestWorkedExample:
    def test_the_tree_recomputes_with_hashlib_alone(self) -> None:
        leaves = []
        for user_id, salt, balances in _users():
            data = _leaf_bytes(user_id, salt, balances)
            assert data.hex() == _value(f"leaf bytes ({user_id})")
            assert _sha(data).hex() == _value(f"leaf hash ({user_id})")
            leaves.append((_sha(data), balances))
        padding = b"\x02" + (3).to_bytes(8, "big")
        assert padding.hex() == _value("padding bytes (3)")
        level0 = sorted(leaves) + [(_sha(padding), [0, 0])]
        rows = re.findall(r"^\| (\d) \| \w+ \| `([0-9a-f]{64})` \| (\d+) \| (\d+) \|$", TEXT,
                          re.M)
        assert [(h, [int(a), int(b)]) for _, h, a, b in rows] == \
            [(h.hex(), s) for h, s in level0]
        level1 = [_node(level0[0], level0[1]), _node(level0[2], level0[3])]
        root = _node((level1[0][1], level1[0][2]), (level1[1][1], level1[1][2]))
        for name, (data, digest, sums) in [("node 1.0", level1[0]), ("node 1.1", level1[1]),
                                           ("root", root)]:
            assert data.hex() == _value(f"{name} bytes")
            assert digest.hex() == _value(f"{name} hash")
            assert f"- {name} hash = `{digest.hex()}`, sums ETH {sums[0]}, USDC {sums[1]}" in TEXT

    def test_the_proof_climbs_to_the_root_with_hashlib_alone(self) -> None:
        proof = _json_block("custody-por-proof/1")
        leaf = proof["leaf"]
        balances = [int(v) for v in leaf["balances"]]
        node = (_sha(_leaf_bytes(leaf["user_id"], bytes.fromhex(leaf["salt"]), balances)),
                balances)
        for level, item in enumerate(proof["path"]):
            sibling = (bytes.fromhex(item["hash"]), [int(v) for v in item["sums"]])
            pair = (node, sibling) if (leaf["index"] >> level) & 1 == 0 else (sibling, node)
            _, digest, sums = _node(*pair)
            node = (digest, sums)
        assert node[0].hex() == _value("root hash") == proof["root"]["hash"]
        assert [str(v) for v in node[1]] == proof["root"]["sums"]

    def test_the_engine_builds_the_same_tree_and_proof(self) -> None:
        tree = merkle.build([merkle.Leaf(u, s, tuple(b)) for u, s, b in _users()], ASSETS)
        assert tree.root.hash.hex() == _value("root hash")
        assert tree.levels[1][0].hash.hex() == _value("node 1.0 hash")
        proof = _json_block("custody-por-proof/1")
        index = proof["leaf"]["index"]
        about = {k: proof[k] for k in ("report_id", "taken_at", "scales")}
        assert merkle.proof(tree, index).to_json(**about) == proof
        assert merkle.verify(proof, _value("root hash")).user_id == proof["leaf"]["user_id"]


class TestWorkedReport:
    def test_its_figures_follow_the_definitions(self) -> None:
        report = _json_block("custody-por-report/1")
        proof = _json_block("custody-por-proof/1")
        liabilities = report["liabilities"]
        assert (liabilities["root"], liabilities["sums"]) == (proof["root"]["hash"],
                                                              proof["root"]["sums"])
        assert liabilities["depth"] == len(proof["path"])
        holdings: dict[str, int] = {}
        for address in report["addresses"]:
            for h in address["holdings"]:
                holdings[h["asset"]] = holdings.get(h["asset"], 0) + int(h["balance"])
        for i, row in enumerate(report["assets"]):
            figures = AssetReserves(row["asset"], row["scale"], int(row["liabilities_users"]),
                                    int(row["liabilities_other"]), int(row["custody"]),
                                    int(row["treasury"]), int(row["on_chain"]))
            assert row["liabilities_users"] == liabilities["sums"][i]
            assert int(row["on_chain"]) == holdings[row["asset"]]  # decimals == scale here
            assert (int(row["liabilities"]), int(row["ledger"]), int(row["difference"]),
                    int(row["surplus"]), row["ratio"]) == (
                figures.liabilities, figures.ledger, figures.difference, figures.surplus,
                figures.ratio)

    def test_the_ownership_message_is_the_specified_text_and_its_signature_recovers(
            self) -> None:
        report = _json_block("custody-por-report/1")
        (entry,) = report["addresses"]
        (chain,) = report["chains"]
        message = "\n".join([
            "custody proof of reserves", f"report: {report['id']}",
            f"chain: {chain['chain']} (chain id {chain['chain_id']})",
            f"block: {chain['block_number']} {chain['block_hash']}",
            f"liabilities root: {report['liabilities']['root']}",
            f"address: {entry['address']}"])
        block = re.search(r"```ownership-message\n(.*?)\n```", TEXT, re.S)
        assert block
        assert message == entry["message"] == block.group(1)
        assert str(len(message.encode())) == _value("message length")
        assert defunct_hash_message(text=message).hex().removeprefix("0x") == \
            _value("signed hash")
        assert entry["signature"] == _value("signature")
        signer = Account.recover_message(encode_defunct(text=message),
                                         signature=entry["signature"])
        assert signer.lower() == entry["address"] == _value("recovered address")
