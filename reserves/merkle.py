"""The liabilities commitment, the pure part: a Merkle-sum tree over customer liabilities, the
inclusion proof of one leaf, and its verification.

No database, no clock, no settings: plain values in, plain values out. ``docs/proof-of-reserves.md``
specifies every byte computed here, with worked example values; ``docs/verify_proof.py``
implements the same verification with Python's standard library alone, and the tests check
that the two agree.

- **Values** are integers ``0 <= v < 2**128`` (:data:`VALUE_LIMIT`), encoded as 16 bytes
  big-endian. A negative or larger value anywhere (a leaf's balance, a sibling's sum, or a sum
  computed on the way up) makes a leaf or a proof invalid: a negative leaf or a sum that wraps
  around would hide liabilities.
- **Assets**: every leaf and node carries one value per asset, in the order of the report's
  asset codes sorted by their ASCII bytes (:func:`asset_order`).
- **Leaf**: ``SHA-256(0x00 || salt(32) || u8 len(user_id) || user_id || u8 k || for each asset
  (u8 len(code) || code || u128 balance))``; its sums are its balances.
- **Padding leaf** at index ``i``: ``SHA-256(0x02 || u64 i)`` with all sums zero. The leaves are
  padded to ``2**depth``, where ``depth`` is the smallest ``d >= 0`` with ``2**d >= n``.
- **Node**: ``SHA-256(0x01 || left hash || left sums || right hash || right sums)``; its sums are
  the children's sums added per asset, each of which must stay below ``2**128``. Both children's
  sums are inside the hash (not only their total): otherwise a prover could move liabilities
  between siblings unseen.
- **Order**: leaves sorted by their hash (random, since every salt is fresh), so a leaf's
  position says nothing about its user.
- **Proof**: the leaf's inputs and index, and from the leaf level up, each sibling's hash and
  sums; the side of each sibling is the corresponding bit of the index (0: we are the left
  child). It verifies against a root hash given separately (the published one).
"""

from __future__ import annotations

import hashlib
import operator
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

LEAF_PREFIX = b"\x00"
NODE_PREFIX = b"\x01"
PADDING_PREFIX = b"\x02"
#: Every value in the tree is below this (unsigned 128-bit).
VALUE_LIMIT = 2**128
VALUE_BYTES = 16
SALT_BYTES = 32
#: The proof's format name (the ``format`` member of its JSON).
PROOF_FORMAT = "custody-por-proof/1"
#: Levels of the tree above the leaves that a store may keep (``Tree.nodes_from``): below it,
#: a proof recomputes the 2**CHUNK_LEVEL leaves of its chunk.
CHUNK_LEVEL = 8
#: Bounds of the tree's shape (2**40 leaves is far beyond any user count).
DEPTH_MAX = 40
ASSETS_MAX = 255

# Matched whole (``fullmatch``): ``$`` alone would also accept a trailing newline.
_ASSET_CODE = re.compile(r"[A-Z0-9][A-Z0-9._-]{0,31}")
_USER_ID = re.compile(r"[A-Za-z0-9_.-]{1,100}")
_DECIMAL = re.compile(r"0|[1-9][0-9]{0,99}")
_HEX32 = re.compile(r"[0-9a-f]{64}")


class ProofInvalid(ValueError):
    """A proof (or a leaf) that does not verify; ``reason`` is a stable code, the message says
    where. Codes: ``malformed``, ``negative_value``, ``value_overflow``, ``sum_overflow``,
    ``root_mismatch``, ``sums_mismatch``."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class Node(NamedTuple):
    """A node (or leaf) of the tree: its hash and its sums, one per asset."""

    hash: bytes
    sums: tuple[int, ...]


@dataclass(frozen=True)
class Leaf:
    """A leaf's inputs: the user, the salt (32 bytes) and the balances (one per asset, in the
    tree's asset order, minor units)."""

    user_id: str
    salt: bytes
    balances: tuple[int, ...]


def is_user_id(text: str) -> bool:
    """Whether ``text`` fits a leaf's user id (1 to 100 of ``[A-Za-z0-9_.-]``)."""
    return _USER_ID.fullmatch(text) is not None


def asset_order(codes: Sequence[str]) -> tuple[str, ...]:
    """The tree's asset order: the codes sorted by their ASCII bytes, each once."""
    for code in codes:
        if not _ASSET_CODE.fullmatch(code):
            raise ProofInvalid("malformed", f"asset code {code!r} is not a ledger asset code")
    ordered = tuple(sorted(set(codes), key=lambda c: c.encode("ascii")))
    if len(ordered) > ASSETS_MAX:
        raise ProofInvalid("malformed", f"{len(ordered)} assets: at most {ASSETS_MAX}")
    return ordered


def _value(v: int, where: str) -> bytes:
    if v < 0:
        raise ProofInvalid("negative_value", f"{where} is negative ({v})")
    if v >= VALUE_LIMIT:
        raise ProofInvalid("value_overflow", f"{where} is 2**128 or more ({v})")
    return v.to_bytes(VALUE_BYTES, "big")


def _values(values: Sequence[int], where: str, what: str) -> bytes:
    """``values`` as u128s. The fast path converts all at once; only when one is out of range
    (``to_bytes`` refuses negative and too large values) is each checked, to name it: a tree
    of a million leaves encodes six million values."""
    try:
        return b"".join([v.to_bytes(VALUE_BYTES, "big") for v in values])
    except OverflowError:
        for i, v in enumerate(values):
            _value(v, f"{where}, {what}[{i}]")
        raise


def _asset_codes(assets: Sequence[str]) -> list[bytes]:
    """Each asset code as the leaf encodes it: u8 length, then the code."""
    return [bytes([len(c)]) + c.encode("ascii") for c in assets]


def leaf_hash(leaf: Leaf, assets: Sequence[str], codes: Sequence[bytes] | None = None) -> bytes:
    """The leaf's hash (module docstring). ProofInvalid for a negative or too large balance, a
    salt that is not 32 bytes, or a user id or asset list that does not fit the encoding.
    ``codes`` (``_asset_codes(assets)``) saves encoding the codes again for every leaf."""
    if len(leaf.salt) != SALT_BYTES:
        raise ProofInvalid("malformed", f"the salt of {leaf.user_id!r} is not 32 bytes")
    if not _USER_ID.fullmatch(leaf.user_id):
        raise ProofInvalid("malformed", f"user id {leaf.user_id!r} is not a user id")
    if len(leaf.balances) != len(assets):
        raise ProofInvalid("malformed", f"{len(leaf.balances)} balances for {len(assets)} assets")
    encoded = _asset_codes(assets) if codes is None else codes
    uid = leaf.user_id.encode("ascii")
    parts = [LEAF_PREFIX, leaf.salt, bytes([len(uid)]), uid, bytes([len(assets)])]
    try:
        for raw, balance in zip(encoded, leaf.balances, strict=True):
            parts += (raw, balance.to_bytes(VALUE_BYTES, "big"))
    except OverflowError:
        for i, (name, value) in enumerate(zip(assets, leaf.balances, strict=True)):
            _value(value, f"the balance of {leaf.user_id!r} in {name} (asset {i})")
        raise
    return hashlib.sha256(b"".join(parts)).digest()


def leaf_node(leaf: Leaf, assets: Sequence[str]) -> Node:
    """The leaf as a node: its hash, and its balances as its sums."""
    return Node(leaf_hash(leaf, assets), tuple(leaf.balances))


def padding_node(index: int, width: int) -> Node:
    """The padding leaf at ``index`` (``width`` assets): a hash of its own, every sum zero."""
    return Node(hashlib.sha256(PADDING_PREFIX + index.to_bytes(8, "big")).digest(),
                (0,) * width)


def parent(left: Node, right: Node, where: str = "a node") -> Node:
    """The node above ``left`` and ``right``; ProofInvalid when a child's value is out of
    range or a sum reaches ``2**128``."""
    if len(left.sums) != len(right.sums):
        raise ProofInvalid("malformed", f"the children at {where} carry different asset counts")
    sums = tuple(map(operator.add, left.sums, right.sums))
    if sums and max(sums) >= VALUE_LIMIT:
        i = next(i for i, s in enumerate(sums) if s >= VALUE_LIMIT)
        raise ProofInvalid("sum_overflow", f"the sum of asset {i} at {where} reaches 2**128")
    digest = hashlib.sha256(b"".join((
        NODE_PREFIX, left.hash, _values(left.sums, where, "left sums"),
        right.hash, _values(right.sums, where, "right sums")))).digest()
    return Node(digest, sums)


def depth_for(n: int) -> int:
    """The smallest ``d >= 0`` with ``2**d >= n`` (0 for no leaves: the root is then the
    padding leaf 0)."""
    return (n - 1).bit_length() if n > 1 else 0


@dataclass(frozen=True)
class Tree:
    """A built tree. ``levels[0]`` are the leaves with their padding (sorted by hash),
    ``levels[depth]`` is the root alone; ``leaves`` the inputs in the order of ``levels[0]``."""

    assets: tuple[str, ...]
    leaves: tuple[Leaf, ...]
    levels: tuple[tuple[Node, ...], ...]

    @property
    def depth(self) -> int:
        """Levels above the leaves."""
        return len(self.levels) - 1

    @property
    def root(self) -> Node:
        """The root: its hash is published, its sums are the liabilities per asset."""
        return self.levels[-1][0]

    def path(self, index: int) -> list[Node]:
        """The siblings of leaf ``index``, from the leaf level up."""
        if not 0 <= index < len(self.leaves):
            raise IndexError(f"no leaf {index}")
        return [self.levels[level][(index >> level) ^ 1] for level in range(self.depth)]

    def nodes_from(self, level: int) -> list[tuple[int, int, Node]]:
        """Every node at ``level`` and above, as (level, position, node): what a store keeps
        so that a proof needs only its chunk's leaves (``proof_from_chunk``)."""
        return [(lv, pos, node) for lv in range(min(level, self.depth), self.depth + 1)
                for pos, node in enumerate(self.levels[lv])]


def build(leaves: Sequence[Leaf], assets: Sequence[str]) -> Tree:
    """The tree over ``leaves`` (their ``assets`` in tree order, ``asset_order``).

    Refuses (ProofInvalid) a duplicate user, a negative or too large balance, and a total that
    reaches ``2**128``: the caller opens a case and publishes nothing.
    """
    order = tuple(assets)
    if order != asset_order(order):
        raise ProofInvalid("malformed", "the assets are not in tree order")
    seen: set[str] = set()
    for leaf in leaves:
        if leaf.user_id in seen:
            raise ProofInvalid("malformed", f"user {leaf.user_id!r} has two leaves")
        seen.add(leaf.user_id)
    codes = _asset_codes(order)
    hashed = sorted(((leaf_hash(leaf, order, codes), leaf) for leaf in leaves),
                    key=lambda p: p[0])
    depth = depth_for(len(hashed))
    if depth > DEPTH_MAX:
        raise ProofInvalid("malformed", f"{len(hashed)} leaves: at most 2**{DEPTH_MAX}")
    width = len(order)
    level: list[Node] = [Node(h, leaf.balances) for h, leaf in hashed]
    level += [padding_node(i, width) for i in range(len(level), 2**depth)]
    levels = [tuple(level)]
    for lv in range(depth):
        where = f"level {lv + 1}"
        level = [parent(level[i], level[i + 1], where) for i in range(0, len(level), 2)]
        levels.append(tuple(level))
    return Tree(order, tuple(leaf for _, leaf in hashed), tuple(levels))


# --- proofs ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Proof:
    """One leaf's inclusion proof: the leaf's inputs and index, the siblings from the leaf level
    up, and the root it leads to."""

    assets: tuple[str, ...]
    leaf: Leaf
    index: int
    path: tuple[Node, ...]
    root: Node

    def to_json(self, **about: Any) -> dict[str, Any]:
        """The proof as JSON (every value a decimal string, hashes and the salt lower-case
        hex); ``about`` adds members that describe the report (id, time, scales)."""
        return {
            "format": PROOF_FORMAT, **about, "assets": list(self.assets),
            "leaf": {"user_id": self.leaf.user_id, "salt": self.leaf.salt.hex(),
                     "balances": [str(v) for v in self.leaf.balances], "index": self.index},
            "path": [{"hash": n.hash.hex(), "sums": [str(v) for v in n.sums]}
                     for n in self.path],
            "root": {"hash": self.root.hash.hex(), "sums": [str(v) for v in self.root.sums]},
        }


def proof(tree: Tree, index: int) -> Proof:
    """The proof of leaf ``index`` of ``tree``."""
    return Proof(tree.assets, tree.leaves[index], index, tuple(tree.path(index)), tree.root)


def proof_from_chunk(assets: Sequence[str], depth: int, index: int, chunk: Sequence[Node],
                     upper: Mapping[tuple[int, int], Node], leaf: Leaf) -> Proof:
    """The proof of leaf ``index`` from what a store keeps: ``chunk``, the level-0 nodes of its
    chunk (the ``2**min(CHUNK_LEVEL, depth)`` leaves and padding around it, in order), and
    ``upper``, the stored nodes by (level, position) from ``CHUNK_LEVEL`` up."""
    low = min(CHUNK_LEVEL, depth)
    base = (index >> low) << low
    if len(chunk) != 2**low:
        raise ValueError(f"a chunk of {len(chunk)} nodes at depth {depth}")
    level = list(chunk)
    path: list[Node] = []
    for lv in range(low):
        path.append(level[((index - base) >> lv) ^ 1])
        level = [parent(level[i], level[i + 1]) for i in range(0, len(level), 2)]
    for lv in range(low, depth):
        path.append(upper[(lv, (index >> lv) ^ 1)])
    return Proof(tuple(assets), leaf, index, tuple(path), upper[(depth, 0)] if depth >= low
                 else level[0])


@dataclass(frozen=True)
class Verified:
    """A proof that verified: whose leaf, its balances per asset, the root's sums."""

    user_id: str
    balances: dict[str, int]
    totals: dict[str, int]
    root_hash: str


def _decimal(text: Any, where: str) -> int:
    if isinstance(text, str) and text.startswith("-") and _DECIMAL.fullmatch(text[1:]):
        raise ProofInvalid("negative_value", f"{where} is negative ({text})")
    if not isinstance(text, str) or not _DECIMAL.fullmatch(text):
        raise ProofInvalid("malformed", f"{where} is not a decimal string: {text!r}")
    value = int(text)
    if value >= VALUE_LIMIT:
        raise ProofInvalid("value_overflow", f"{where} is 2**128 or more ({text})")
    return value


def _hex32(text: Any, where: str) -> bytes:
    if not isinstance(text, str) or not _HEX32.fullmatch(text):
        raise ProofInvalid("malformed", f"{where} is not 64 lower-case hex digits")
    return bytes.fromhex(text)


def _sums(raw: Any, width: int, where: str) -> tuple[int, ...]:
    if not isinstance(raw, list) or len(raw) != width:
        raise ProofInvalid("malformed", f"{where} is not a list of {width} values")
    return tuple(_decimal(v, f"{where}[{i}]") for i, v in enumerate(raw))


def parse_proof(doc: Any) -> Proof:
    """A proof from its JSON; ProofInvalid naming the first member that is wrong (a negative
    or too large value anywhere included)."""
    if not isinstance(doc, dict) or doc.get("format") != PROOF_FORMAT:
        raise ProofInvalid("malformed", f"not a proof: format is not {PROOF_FORMAT!r}")
    assets = doc.get("assets")
    if not isinstance(assets, list) or not all(isinstance(a, str) for a in assets) or \
            tuple(assets) != asset_order(assets):
        raise ProofInvalid("malformed", "assets is not a list of codes in tree order")
    width = len(assets)
    leaf = doc.get("leaf")
    if not isinstance(leaf, dict):
        raise ProofInvalid("malformed", "leaf is missing")
    index = leaf.get("index")
    path = doc.get("path")
    if not isinstance(path, list) or len(path) > DEPTH_MAX:
        raise ProofInvalid("malformed", "path is not a list of at most 40 siblings")
    if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < 2**len(path):
        raise ProofInvalid("malformed", f"leaf index {index!r} does not fit a path of "
                                        f"{len(path)} siblings")
    user_id = leaf.get("user_id")
    if not isinstance(user_id, str):
        raise ProofInvalid("malformed", "leaf user_id is not a string")
    parsed = Leaf(user_id, _hex32(leaf.get("salt"), "leaf salt"),
                  _sums(leaf.get("balances"), width, "leaf balances"))
    siblings = []
    for level, item in enumerate(path):
        if not isinstance(item, dict):
            raise ProofInvalid("malformed", f"path[{level}] is not an object")
        siblings.append(Node(_hex32(item.get("hash"), f"path[{level}] hash"),
                             _sums(item.get("sums"), width, f"path[{level}] sums")))
    root = doc.get("root")
    if not isinstance(root, dict):
        raise ProofInvalid("malformed", "root is missing")
    return Proof(tuple(assets), parsed, index, tuple(siblings),
                 Node(_hex32(root.get("hash"), "root hash"), _sums(root.get("sums"), width,
                                                                   "root sums")))


def verify(doc: Any, root_hash: str) -> Verified:
    """Check a proof's JSON against a published root hash (64 hex digits): recompute the leaf
    from its inputs, climb the path, and compare. ProofInvalid says why it fails."""
    published = _hex32(root_hash.strip().lower(), "the published root")
    p = parse_proof(doc)
    node = leaf_node(p.leaf, p.assets)
    for level, sibling in enumerate(p.path):
        where = f"level {level + 1}"
        node = parent(node, sibling, where) if (p.index >> level) & 1 == 0 else \
            parent(sibling, node, where)
    if node.hash != published:
        raise ProofInvalid("root_mismatch", f"the path leads to {node.hash.hex()}, not to the "
                                            f"published root {published.hex()}")
    if node.hash != p.root.hash or node.sums != p.root.sums:
        raise ProofInvalid("sums_mismatch", "the proof's root member does not match its path")
    return Verified(p.leaf.user_id, dict(zip(p.assets, p.leaf.balances, strict=True)),
                    dict(zip(p.assets, node.sums, strict=True)), node.hash.hex())
