"""The pure part of sealing (ledger.sealing), and docs/sealing.md's worked example recomputed
with hashlib and json alone."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from ledger import sealing
from ledger.sealing import PostingFacts, TransactionFacts

DOC = Path(__file__).resolve().parents[2] / "docs" / "sealing.md"
T = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
R = datetime(2026, 11, 1, 12, 0, 1, 250000, tzinfo=UTC)
SEALED_AT = datetime(2026, 11, 1, 12, 0, 10, tzinfo=UTC)

#: The transactions of the doc's worked example.
EXAMPLE = [
    TransactionFacts(1, "deposit:eth:0xab12:0", "9f" * 32, "deposit", "eth:0xab12", T, R, None,
                     "watcher:eth", None, False, (
                         PostingFacts(1, 1, 1, "custody:eth", "USDC", 30000000, None, None),
                         PostingFacts(2, 2, 4, "user:42:wallet", "USDC", -30000000, None, None))),
    TransactionFacts(2, "withdrawal:7:reserve", "0e" * 32, "withdrawal_reserve", "withdrawal:7",
                     T, R.replace(second=2), None, "api:exchange-a", None, False, (
                         PostingFacts(3, 1, 4, "user:42:wallet", "USDC", 12000000, None, None),
                         PostingFacts(4, 2, 5, "user:42:withdrawals", "USDC", -12000000, None,
                                      None))),
    TransactionFacts(3, "reverse:1", "5c" * 32, "reversal", None, T, R.replace(second=3),
                     "booked to the wrong user", "cli:alice", 1, False, (
                         PostingFacts(5, 1, 4, "user:42:wallet", "USDC", 30000000, None, 2),
                         PostingFacts(6, 2, 1, "custody:eth", "USDC", -30000000, None, 1))),
]


def _doc_value(name: str, text: str) -> str:
    match = re.search(rf"^- {re.escape(name)} = .*?`([0-9a-f]{{64}})`$", text, re.M)
    assert match, f"{name} not found in {DOC}"
    return match.group(1)


class TestDocExample:
    def test_recomputes_with_hashlib_alone(self) -> None:
        text = DOC.read_text()
        block = re.search(r"```canonical\n(.*?)```", text, re.S)
        header_block = re.search(r"```seal-header\n(.*?)\n```", text, re.S)
        assert block and header_block
        lines = block.group(1).splitlines()

        def h(b: bytes) -> bytes:
            return hashlib.sha256(b).digest()

        leaves = [h(b"\x00" + line.encode()) for line in lines]
        for i, leaf in enumerate(leaves, 1):
            assert leaf.hex() == _doc_value(f"leaf {i}", text)
        node = h(b"\x01" + leaves[0] + leaves[1])
        root = h(b"\x01" + node + leaves[2])
        assert node.hex() == _doc_value("node 1-2", text)
        assert root.hex() == _doc_value("root", text)
        header = {"previous_hash": "0" * 64, "from_transaction_id": "1",
                  "through_transaction_id": "3", "transactions_count": "3",
                  "postings_count": "6", "merkle_root": root.hex(),
                  "sealed_at": "2026-11-01T12:00:10.000000Z"}
        body = json.dumps(header, sort_keys=True, separators=(",", ":")).encode()
        assert body.decode() == header_block.group(1)
        assert hashlib.sha256(b"\x02" + body).hexdigest() == _doc_value("seal hash", text)

    def test_the_code_produces_the_doc_bytes_and_hashes(self) -> None:
        text = DOC.read_text()
        block = re.search(r"```canonical\n(.*?)```", text, re.S)
        assert block
        assert [sealing.canonical_transaction(tx).decode() for tx in EXAMPLE] == \
            block.group(1).splitlines()
        seal = sealing.compute_seal(sealing.GENESIS_HASH, 1, EXAMPLE, SEALED_AT)
        assert seal.header.merkle_root == _doc_value("root", text)
        assert seal.seal_hash == _doc_value("seal hash", text)
        assert seal.transaction_ids == (1, 2, 3)
        assert seal.leaf_prefixes == b"".join(sealing.leaf_hash(tx)[:8] for tx in EXAMPLE)


class TestCanonicalForm:
    def test_every_sealed_field_changes_the_leaf(self) -> None:
        tx = EXAMPLE[2]
        p = tx.postings[0]
        variants = [
            tx._replace(id=4), tx._replace(idempotency_key="k"), tx._replace(fingerprint="f"),
            tx._replace(kind="k"), tx._replace(reference="r"), tx._replace(reason=None),
            tx._replace(source="s"), tx._replace(reverses_transaction_id=2),
            tx._replace(out_of_period=True),
            tx._replace(effective_at=T + timedelta(microseconds=1)),
            tx._replace(recorded_at=R), tx._replace(postings=tx.postings[:1]),
            tx._replace(postings=tx.postings[::-1]),
        ] + [tx._replace(postings=(p._replace(**change), tx.postings[1])) for change in (
            {"id": 9}, {"line_no": 3}, {"account_id": 9}, {"account_code": "x"},
            {"asset_code": "ETH"}, {"amount_minor": 30000001}, {"closes_posting_id": 1},
            {"reverses_posting_id": None})]
        leaves = {sealing.leaf_hash(v) for v in variants}
        assert len(leaves) == len(variants) and sealing.leaf_hash(tx) not in leaves

    def test_times_are_utc_with_microseconds(self) -> None:
        at = datetime(2026, 11, 1, 15, 30, tzinfo=timezone(timedelta(hours=3, minutes=30)))
        assert sealing.format_time(at) == "2026-11-01T12:00:00.000000Z"
        with pytest.raises(AssertionError):
            sealing.format_time(datetime(2026, 11, 1))  # noqa: DTZ001 - naive on purpose

    def test_text_is_utf8_and_escaped_as_jcs(self) -> None:
        tx = EXAMPLE[0]._replace(reason='Zürich "\n\x01', postings=())
        assert b'"reason":"Z\xc3\xbcrich \\"\\n\\u0001"' in sealing.canonical_transaction(tx)

    def test_amounts_beyond_64_bits_are_exact(self) -> None:
        big = 2**126 + 1
        p = EXAMPLE[0].postings[0]._replace(amount_minor=-big)
        tx = EXAMPLE[0]._replace(postings=(p,))
        assert f'"amount":"-{big}"'.encode() in sealing.canonical_transaction(tx)


class TestMerkle:
    def test_odd_node_is_carried_up_not_duplicated(self) -> None:
        a, b, c = (hashlib.sha256(bytes([i])).digest() for i in range(3))

        def node(x: bytes, y: bytes) -> bytes:
            return hashlib.sha256(b"\x01" + x + y).digest()

        assert sealing.merkle_root([a]) == a
        assert sealing.merkle_root([a, b]) == node(a, b)
        assert sealing.merkle_root([a, b, c]) == node(node(a, b), c)
        assert sealing.merkle_root([a, b, c]) != sealing.merkle_root([a, b, c, c])

    def test_order_matters(self) -> None:
        leaves = [hashlib.sha256(bytes([i])).digest() for i in range(5)]
        assert sealing.merkle_root(leaves) != sealing.merkle_root(leaves[::-1])


class TestSealHash:
    def test_chains_and_covers_every_header_field(self) -> None:
        seal = sealing.compute_seal(sealing.GENESIS_HASH, 1, EXAMPLE, SEALED_AT)
        h = seal.header
        changed = [replace(h, previous_hash="1" * 64), replace(h, from_transaction_id=2),
                   replace(h, through_transaction_id=4), replace(h, transactions_count=2),
                   replace(h, postings_count=5), replace(h, merkle_root="2" * 64),
                   replace(h, sealed_at=SEALED_AT + timedelta(seconds=1))]
        assert seal.seal_hash == sealing.seal_hash(h)
        assert len({sealing.seal_hash(c) for c in changed} | {seal.seal_hash}) == 8
        after = sealing.compute_seal(seal.seal_hash, 4, EXAMPLE[:1], SEALED_AT)
        assert after.header.previous_hash == seal.seal_hash


class TestDiagnose:
    def _sealed(self) -> sealing.SealContent:
        return sealing.compute_seal(sealing.GENESIS_HASH, 1, EXAMPLE, SEALED_AT)

    def test_names_each_kind(self) -> None:
        s = self._sealed()
        ids, prefixes = s.transaction_ids, s.leaf_prefixes
        assert sealing.diagnose(ids, prefixes, EXAMPLE) == []
        changed = [EXAMPLE[0], EXAMPLE[1]._replace(reason="x"), EXAMPLE[2]]
        assert sealing.diagnose(ids, prefixes, changed) == [sealing.SealFinding("changed", (2,))]
        assert sealing.diagnose(ids, prefixes, [EXAMPLE[0], EXAMPLE[2]]) == [
            sealing.SealFinding("missing", (2,))]
        extra = EXAMPLE[0]._replace(id=9)
        assert sealing.diagnose(ids, prefixes, [*EXAMPLE, extra]) == [
            sealing.SealFinding("inserted", (9,))]
        swapped = [EXAMPLE[1]._replace(id=1), EXAMPLE[0]._replace(id=2), EXAMPLE[2]]
        assert sealing.diagnose(ids, prefixes, swapped) == [
            sealing.SealFinding("reordered", (1, 2))]

    def test_altered_lists_are_unusable(self) -> None:
        s = self._sealed()
        assert sealing.diagnose(s.transaction_ids, s.leaf_prefixes[:-1], EXAMPLE) is None
