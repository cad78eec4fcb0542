"""The Merkle-sum tree of liabilities (reserves.merkle), pure: tampering with any part of a proof
fails it, a proof is bound to its user, negative and overflowing values are refused by the
builder and rejected by the verifier, and every leaf of every tree verifies (also when its proof
is rebuilt from a store's chunk)."""

from __future__ import annotations

import copy
import hashlib
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reserves import merkle
from reserves.merkle import CHUNK_LEVEL, VALUE_LIMIT, Leaf, ProofInvalid

CODES = ["BTC", "DAI.E", "ETH", "USDC", "X-1"]
USER_ALPHABET = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-"
#: Balances small enough that no tree here reaches 2**128 by accident.
BALANCES = st.one_of(st.integers(0, 10**6), st.integers(0, 2**100))

user_ids = st.text(USER_ALPHABET, min_size=1, max_size=20)
salts = st.binary(min_size=32, max_size=32)
asset_lists = st.lists(st.sampled_from(CODES), min_size=1, max_size=3, unique=True).map(
    merkle.asset_order)


@st.composite
def trees(draw: st.DrawFn, min_leaves: int = 0, max_leaves: int = 9) -> merkle.Tree:
    """A tree of random users, salts and balances."""
    assets = draw(asset_lists)
    users = draw(st.lists(user_ids, min_size=min_leaves, max_size=max_leaves, unique=True))
    leaves = [Leaf(u, draw(salts), tuple(draw(BALANCES) for _ in assets)) for u in users]
    return merkle.build(leaves, assets)


def _json(tree: merkle.Tree, index: int) -> dict[str, Any]:
    return merkle.proof(tree, index).to_json()


def _reason(doc: Any, root: str) -> str:
    with pytest.raises(ProofInvalid) as raised:
        merkle.verify(doc, root)
    return raised.value.reason


def _other(value: int) -> int:
    """Another value in range, not too large to overflow a sum."""
    return value + 1 if value < 2**100 else value - 1


class TestTampering:
    @settings(max_examples=100, deadline=None)
    @given(trees(min_leaves=1), st.data())
    def test_any_change_to_the_leaf_inputs_fails(self, tree: merkle.Tree,
                                                 data: st.DataObject) -> None:
        index = data.draw(st.integers(0, len(tree.leaves) - 1))
        doc, root = _json(tree, index), tree.root.hash.hex()
        leaf = doc["leaf"]
        change = data.draw(st.sampled_from(["salt", "user_id", "balance"]))
        if change == "salt":
            salt = bytearray.fromhex(leaf["salt"])
            salt[data.draw(st.integers(0, 31))] ^= data.draw(st.integers(1, 255))
            leaf["salt"] = salt.hex()
        elif change == "user_id":
            leaf["user_id"] = data.draw(user_ids.filter(lambda u: u != leaf["user_id"]))
        else:
            a = data.draw(st.integers(0, len(tree.assets) - 1))
            leaf["balances"][a] = str(_other(int(leaf["balances"][a])))
        assert _reason(doc, root) == "root_mismatch"

    @settings(max_examples=100, deadline=None)
    @given(trees(min_leaves=2), st.data())
    def test_any_change_to_the_index_or_a_sibling_fails(self, tree: merkle.Tree,
                                                        data: st.DataObject) -> None:
        index = data.draw(st.integers(0, len(tree.leaves) - 1))
        doc, root = _json(tree, index), tree.root.hash.hex()
        level = data.draw(st.integers(0, tree.depth - 1))
        change = data.draw(st.sampled_from(["index", "hash", "sum"]))
        if change == "index":
            doc["leaf"]["index"] = data.draw(
                st.integers(0, 2**tree.depth - 1).filter(lambda i: i != index))
        elif change == "hash":
            digest = bytearray.fromhex(doc["path"][level]["hash"])
            digest[data.draw(st.integers(0, 31))] ^= data.draw(st.integers(1, 255))
            doc["path"][level]["hash"] = digest.hex()
        else:
            sums = doc["path"][level]["sums"]
            a = data.draw(st.integers(0, len(tree.assets) - 1))
            sums[a] = str(_other(int(sums[a])))
        assert _reason(doc, root) == "root_mismatch"

    @settings(max_examples=50, deadline=None)
    @given(trees(min_leaves=1), st.data())
    def test_any_change_to_the_root_fails(self, tree: merkle.Tree, data: st.DataObject) -> None:
        index = data.draw(st.integers(0, len(tree.leaves) - 1))
        doc, root = _json(tree, index), tree.root.hash.hex()
        change = data.draw(st.sampled_from(["published", "hash", "sum"]))
        flipped = bytearray(tree.root.hash)
        flipped[data.draw(st.integers(0, 31))] ^= data.draw(st.integers(1, 255))
        if change == "published":
            assert _reason(doc, flipped.hex()) == "root_mismatch"
            return
        if change == "hash":
            doc["root"]["hash"] = flipped.hex()
        else:
            a = data.draw(st.integers(0, len(tree.assets) - 1))
            doc["root"]["sums"][a] = str(_other(int(doc["root"]["sums"][a])))
        assert _reason(doc, root) == "sums_mismatch"

    def test_a_value_with_a_trailing_newline_is_malformed(self) -> None:
        tree = merkle.build([Leaf("alice", b"\x11" * 32, (5,))], ["ETH"])
        doc = _json(tree, 0)
        doc["leaf"]["balances"] = ["5\n"]
        assert _reason(doc, tree.root.hash.hex()) == "malformed"


class TestBoundToItsUser:
    @settings(max_examples=100, deadline=None)
    @given(trees(min_leaves=2), st.data())
    def test_a_proof_never_verifies_for_another_user(self, tree: merkle.Tree,
                                                     data: st.DataObject) -> None:
        i, j = data.draw(st.lists(st.integers(0, len(tree.leaves) - 1), min_size=2,
                                  max_size=2, unique=True))
        doc, other = _json(tree, i), _json(tree, j)["leaf"]
        change = data.draw(st.sampled_from(["user_id", "leaf", "leaf_and_index"]))
        if change == "user_id":
            doc["leaf"]["user_id"] = other["user_id"]
        elif change == "leaf":
            doc["leaf"] = {**other, "index": i}
        else:
            doc["leaf"] = other
        with pytest.raises(ProofInvalid):
            merkle.verify(doc, tree.root.hash.hex())


class TestNegativeAndOverflow:
    @settings(max_examples=50, deadline=None)
    @given(trees(min_leaves=0, max_leaves=5), st.integers(-(2**200), -1), st.data())
    def test_the_builder_refuses_a_negative_leaf(self, tree: merkle.Tree, negative: int,
                                                 data: st.DataObject) -> None:
        balances = [0] * len(tree.assets)
        balances[data.draw(st.integers(0, len(balances) - 1))] = negative
        # A user id longer than any drawn, so that it cannot be a duplicate.
        negative_leaf = Leaf("a-user-id-longer-than-any-drawn", b"\x00" * 32, tuple(balances))
        leaves = [*tree.leaves, negative_leaf]
        with pytest.raises(ProofInvalid) as raised:
            merkle.build(leaves, tree.assets)
        assert raised.value.reason == "negative_value"

    @settings(max_examples=50, deadline=None)
    @given(st.integers(1, VALUE_LIMIT - 1), st.integers(0, 3))
    def test_the_builder_refuses_a_total_that_reaches_2_128(self, value: int,
                                                            others: int) -> None:
        leaves = [Leaf("big", b"\x01" * 32, (value,)),
                  Leaf("rest", b"\x02" * 32, (VALUE_LIMIT - value,))]
        leaves += [Leaf(f"u{k}", bytes([k + 3]) * 32, (0,)) for k in range(others)]
        with pytest.raises(ProofInvalid) as raised:
            merkle.build(leaves, ["ETH"])
        assert raised.value.reason == "sum_overflow"

    def test_the_builder_refuses_a_balance_of_2_128(self) -> None:
        with pytest.raises(ProofInvalid) as raised:
            merkle.build([Leaf("big", b"\x01" * 32, (VALUE_LIMIT,))], ["ETH"])
        assert raised.value.reason == "value_overflow"

    @settings(max_examples=100, deadline=None)
    @given(trees(min_leaves=1), st.data(), st.integers(1, 2**200),
           st.sampled_from(["negative_value", "value_overflow"]))
    def test_the_verifier_rejects_an_out_of_range_value_anywhere(
            self, tree: merkle.Tree, data: st.DataObject, k: int, reason: str) -> None:
        index = data.draw(st.integers(0, len(tree.leaves) - 1))
        doc = _json(tree, index)
        places = [doc["leaf"]["balances"], doc["root"]["sums"]] + \
            [item["sums"] for item in doc["path"]]
        values = data.draw(st.sampled_from(places))
        bad = -k if reason == "negative_value" else VALUE_LIMIT - 1 + k
        values[data.draw(st.integers(0, len(values) - 1))] = str(bad)
        assert _reason(doc, tree.root.hash.hex()) == reason

    @settings(max_examples=100, deadline=None)
    @given(trees(min_leaves=2), st.data())
    def test_the_verifier_rejects_a_sibling_sum_that_makes_a_sum_reach_2_128(
            self, tree: merkle.Tree, data: st.DataObject) -> None:
        positive = [i for i, leaf in enumerate(tree.leaves) if any(leaf.balances)]
        index = data.draw(st.sampled_from(positive or [0]))
        level = data.draw(st.integers(0, tree.depth - 1))
        ours = tree.levels[level][index >> level]  # the node the verifier has at `level`
        a = data.draw(st.sampled_from([i for i, v in enumerate(ours.sums) if v] or [0]))
        doc = _json(tree, index)
        # The sibling's sum alone is in range; with ours it reaches 2**128 (or, when ours
        # is 0, it is 2**128 itself).
        doc["path"][level]["sums"][a] = str(VALUE_LIMIT - ours.sums[a])
        expected = "sum_overflow" if ours.sums[a] else "value_overflow"
        assert _reason(doc, tree.root.hash.hex()) == expected


def _leaves(n: int, width: int) -> list[Leaf]:
    return [Leaf(f"user-{i}", hashlib.sha256(b"salt %d" % i).digest(),
                 tuple((i * 7919 + a) % 10**9 for a in range(width))) for i in range(n)]


class TestTrees:
    @settings(max_examples=60, deadline=None)
    @given(trees(min_leaves=0, max_leaves=40))
    def test_every_leaf_verifies_and_the_root_sums_are_the_column_sums(
            self, tree: merkle.Tree) -> None:
        n = len(tree.leaves)
        assert 2**tree.depth >= n and (tree.depth == 0 or 2 ** (tree.depth - 1) < n)
        columns = tuple(sum(leaf.balances[a] for leaf in tree.leaves)
                        for a in range(len(tree.assets)))
        assert tree.root.sums == columns
        assert [n.hash for n in tree.levels[0][:n]] == sorted(n.hash for n in
                                                               tree.levels[0][:n])
        for index, leaf in enumerate(tree.leaves):
            verified = merkle.verify(_json(tree, index), tree.root.hash.hex())
            assert (verified.user_id, verified.balances, verified.totals) == (
                leaf.user_id, dict(zip(tree.assets, leaf.balances, strict=True)),
                dict(zip(tree.assets, columns, strict=True)))

    @pytest.mark.parametrize("n", [0, 1, 2, 3, 5, 17])
    def test_small_trees_verify(self, n: int) -> None:
        tree = merkle.build(_leaves(n, 2), ["ETH", "USDC"])
        assert tree.depth == merkle.depth_for(n)
        if n == 0:
            assert tree.root == merkle.padding_node(0, 2)
        for index in range(n):
            assert merkle.verify(_json(tree, index), tree.root.hash.hex()).user_id == \
                tree.leaves[index].user_id

    @pytest.mark.parametrize("n", [1, 2, 5, 40, 2**CHUNK_LEVEL, 2**CHUNK_LEVEL + 1, 700])
    def test_a_proof_from_a_chunk_equals_the_proof(self, n: int) -> None:
        tree = merkle.build(_leaves(n, 3), ["BTC", "ETH", "USDC"])
        upper = {(lv, pos): node for lv, pos, node in tree.nodes_from(CHUNK_LEVEL)}
        assert min(lv for lv, _ in upper) == min(CHUNK_LEVEL, tree.depth)
        low = min(CHUNK_LEVEL, tree.depth)
        for index in sorted({0, 1, n // 2, n - 2, n - 1} & set(range(n))):
            base = (index >> low) << low
            chunk = tree.levels[0][base:base + 2**low]
            got = merkle.proof_from_chunk(tree.assets, tree.depth, index, chunk, upper,
                                          tree.leaves[index])
            assert got == merkle.proof(tree, index)

    def test_a_proof_from_a_chunk_works_across_chunks_of_a_deep_tree(self) -> None:
        tree = merkle.build(_leaves(2**CHUNK_LEVEL * 2 + 3, 1), ["ETH"])
        upper = {(lv, pos): node for lv, pos, node in tree.nodes_from(CHUNK_LEVEL)}
        size = 2**CHUNK_LEVEL
        for index in (size - 1, size, 2 * size + 2):
            base = index // size * size
            got = merkle.proof_from_chunk(tree.assets, tree.depth, index,
                                          tree.levels[0][base:base + size], upper,
                                          tree.leaves[index])
            assert got == merkle.proof(tree, index)
            assert merkle.verify(copy.deepcopy(got.to_json()), tree.root.hash.hex())
