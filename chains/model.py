"""Pure chain rules: finality, reorg fork-point search, and the chain-level value types.

Nothing here does I/O or reads a clock: callers pass block numbers and hashes in and get plain
values out, so every rule has plain unit tests.

Hashes and addresses are compared lower-case: nodes return lower-case hex, but a hash typed into
a configuration file or copied from an explorer may be mixed-case, and a case difference must
never look like a reorg.
"""

from __future__ import annotations

import collections
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from chains.errors import FinalityRuleInvalid

# --------------------------------------------------------------------------- finality rules


@dataclass(frozen=True, slots=True)
class Confirmations:
    """Proof-of-work style depth rule.

    A transaction in block ``b`` has ``head - b + 1`` confirmations: its own block is the first.
    It is final under ``Confirmations(N)`` iff it has ``N`` or more confirmations, that is when
    ``head >= b + N - 1``. ``Confirmations(1)`` means "included in a canonical block".
    """

    required: int
    name: ClassVar[str] = "confirmations"

    def __post_init__(self) -> None:
        # bool is an int subclass; `Confirmations(True)` is always a configuration mistake.
        if isinstance(self.required, bool) or not isinstance(self.required, int):
            raise FinalityRuleInvalid(f"confirmations must be an int, got {self.required!r}")
        if self.required < 1:
            raise FinalityRuleInvalid(f"confirmations must be >= 1, got {self.required}")

    def __str__(self) -> str:
        return f"confirmations:{self.required}"


@dataclass(frozen=True, slots=True)
class FinalizedTag:
    """Proof-of-stake rule: trust the node's ``finalized`` block.

    A transaction in block ``b`` is final iff ``b <= finalized head number`` AND the block hash
    we hold for it equals the node's canonical hash at height ``b``. The hash check matters: a
    deposit seen in an orphaned block at a height that later became finalized is not final.
    """

    name: ClassVar[str] = "finalized"

    def __str__(self) -> str:
        return "finalized"


FinalityRule = Confirmations | FinalizedTag


def parse_finality_rule(value: str | Mapping[str, Any] | FinalityRule) -> FinalityRule:
    """Parse a finality rule from configuration.

    Accepted forms: ``"confirmations:12"``, ``{"confirmations": 12}``, ``"finalized"`` (also
    ``"finalized_tag"``), ``{"finalized": true}``, ``{"rule": "confirmations", "required": 12}``,
    ``{"rule": "finalized"}``, or an already parsed rule. ``str(rule)`` gives back the canonical
    text form. Raises :class:`FinalityRuleInvalid` on anything else.
    """
    if isinstance(value, Confirmations | FinalizedTag):
        return value
    if isinstance(value, str):
        return _parse_rule_text(value)
    if isinstance(value, Mapping):
        return _parse_rule_mapping(value)
    raise FinalityRuleInvalid(f"finality rule must be a string or a mapping, got {value!r}")


def _parse_rule_text(text: str) -> FinalityRule:
    kind, sep, arg = text.strip().lower().partition(":")
    if kind in ("finalized", "finalized_tag") and not sep:
        return FinalizedTag()
    if kind == "confirmations" and sep:
        # int() accepts "1_000" and " 12 "; only plain digits are a sane configuration value.
        if not arg.strip().isdigit():
            raise FinalityRuleInvalid(f"confirmations needs a positive integer: {text!r}")
        return Confirmations(int(arg))
    raise FinalityRuleInvalid(
        f"unknown finality rule {text!r}: use 'confirmations:<N>' or 'finalized'"
    )


def _parse_rule_mapping(value: Mapping[str, Any]) -> FinalityRule:
    keys = set(value)
    if keys == {"confirmations"}:
        return Confirmations(value["confirmations"])
    if keys == {"finalized"} and value["finalized"] is True:
        return FinalizedTag()
    if keys == {"rule"} and value["rule"] in ("finalized", "finalized_tag"):
        return FinalizedTag()
    if keys == {"rule", "required"} and value["rule"] == "confirmations":
        return Confirmations(value["required"])
    raise FinalityRuleInvalid(f"unknown finality rule {dict(value)!r}")


def confirmations(head_block: int, tx_block: int) -> int:
    """Number of confirmations of a transaction in ``tx_block`` when the head is ``head_block``.

    ``head_block - tx_block + 1``: the transaction's own block is the first confirmation. A head
    below the transaction's block (a lagging node) gives 0, never a negative number.
    """
    return max(0, head_block - tx_block + 1)


def is_final(
    rule: FinalityRule,
    *,
    tx_block: int,
    tx_block_hash: str,
    head_block: int,
    finalized_block: int | None,
    canonical_hash: str | None,
) -> bool:
    """Whether a transaction in ``tx_block`` (hash ``tx_block_hash``) is final under ``rule``.

    ``canonical_hash`` is the node's hash at height ``tx_block`` now (None if the node has no
    such block); ``finalized_block`` is the node's ``finalized`` head (None if it has none).

    Both rules require ``canonical_hash == tx_block_hash``: depth counted on a block that is no
    longer canonical is meaningless, so a deposit whose block was reorged out is never final.
    """
    if canonical_hash is None or not same_hash(canonical_hash, tx_block_hash):
        return False
    if isinstance(rule, Confirmations):
        return confirmations(head_block, tx_block) >= rule.required
    if isinstance(rule, FinalizedTag):
        return finalized_block is not None and tx_block <= finalized_block
    raise TypeError(f"unknown finality rule {rule!r}")


def final_height(rule: FinalityRule, *, head_block: int,
                 finalized_block: int | None) -> int | None:
    """The highest height whose blocks are final under ``rule`` while the head is
    ``head_block`` and the node's ``finalized`` block is ``finalized_block`` (None: no height
    yet). A block at or below it is final once its hash is the canonical one (``is_final``)."""
    if isinstance(rule, Confirmations):
        height = head_block - rule.required + 1
        return height if height >= 0 else None
    if isinstance(rule, FinalizedTag):
        return finalized_block
    raise TypeError(f"unknown finality rule {rule!r}")


@dataclass(frozen=True, slots=True)
class FinalityEvidence:
    """What a finality decision relied on; stored with every credited deposit.

    ``rule`` is the rule's text form (``"confirmations:12"`` or ``"finalized"``; with an
    amount threshold ``"confirmations:64 (amount >= 100 ETH)"``). ``threshold`` is the amount
    threshold that chose the rule (:meth:`AmountThreshold.to_json`), None under the chain's
    own rule.
    """

    rule: str
    tx_block: int
    tx_block_hash: str
    head_block: int
    finalized_block: int | None
    confirmations: int
    threshold: dict[str, str] | None = None

    def to_json(self) -> dict[str, Any]:
        """A plain dict (ints and strings only) for a JSON column or an API answer; the key
        ``threshold`` only when a threshold chose the rule."""
        found: dict[str, Any] = {
            "rule": self.rule,
            "tx_block": self.tx_block,
            "tx_block_hash": self.tx_block_hash,
            "head_block": self.head_block,
            "finalized_block": self.finalized_block,
            "confirmations": self.confirmations,
        }
        if self.threshold is not None:
            found["threshold"] = dict(self.threshold)
        return found


def evaluate_finality(
    rule: FinalityRule,
    *,
    tx_block: int,
    tx_block_hash: str,
    head_block: int,
    finalized_block: int | None,
    canonical_hash: str | None,
) -> tuple[bool, FinalityEvidence]:
    """:func:`is_final` plus the :class:`FinalityEvidence` it was decided on."""
    final = is_final(
        rule,
        tx_block=tx_block,
        tx_block_hash=tx_block_hash,
        head_block=head_block,
        finalized_block=finalized_block,
        canonical_hash=canonical_hash,
    )
    evidence = FinalityEvidence(
        rule=str(rule),
        tx_block=tx_block,
        tx_block_hash=tx_block_hash.lower(),
        head_block=head_block,
        finalized_block=finalized_block,
        confirmations=confirmations(head_block, tx_block),
    )
    return final, evidence


# --------------------------------------------------------------------------- by amount


def rule_strictness(rule: FinalityRule) -> tuple[int, int]:
    """A sort key: a greater key is a stricter rule.

    ``confirmations:N`` grow with N; ``finalized`` is stricter than any number of
    confirmations (the chain's own finality guarantee, which no depth buys on a proof-of-stake
    chain). The same order as ``config.chains.finality_strictness`` on the rule's text.
    """
    if isinstance(rule, Confirmations):
        return (0, rule.required)
    return (1, 0)


@dataclass(frozen=True, slots=True)
class AmountThreshold:
    """From ``at_least_minor`` (ledger minor units of ``asset``) up, deposits of ``asset`` are
    final only under ``rule``, a stricter rule than the chain's own.

    ``at_least`` is the threshold as configured (decimal units of the asset), kept for the
    rule's text and the evidence.
    """

    asset: str
    at_least_minor: int
    at_least: str
    rule: FinalityRule

    def describe(self) -> str:
        """The rule text recorded with a deposit it applied to:
        ``"confirmations:64 (amount >= 100 ETH)"``."""
        return f"{self.rule} (amount >= {self.at_least} {self.asset})"

    def to_json(self) -> dict[str, str]:
        """The evidence field ``threshold`` (strings: amounts never as JSON numbers)."""
        return {"asset": self.asset, "at_least": self.at_least,
                "at_least_minor": str(self.at_least_minor), "rule": str(self.rule)}


@dataclass(frozen=True, slots=True)
class FinalityPolicy:
    """A chain's finality: its own rule, and stricter ones for large amounts per asset.

    A deposit of ``asset`` for ``amount_minor`` is final under the rule of the highest
    threshold it reaches (``amount_minor >= at_least_minor``), else under ``base``. Amounts are
    in the ledger asset's minor units: the same threshold holds whichever token or decimals
    the asset arrived in. A deposit without a ledger amount (not convertible, ignored) is
    judged under ``base``.
    """

    base: FinalityRule
    thresholds: tuple[AmountThreshold, ...] = ()

    def select(self, asset: str | None,
               amount_minor: int | None) -> tuple[FinalityRule, AmountThreshold | None]:
        """The rule a deposit is judged under, and the threshold that chose it (or None)."""
        chosen: AmountThreshold | None = None
        if asset is not None and amount_minor is not None:
            for t in self.thresholds:
                if t.asset == asset and amount_minor >= t.at_least_minor and (
                        chosen is None or t.at_least_minor > chosen.at_least_minor):
                    chosen = t
        return (self.base if chosen is None else chosen.rule), chosen

    @property
    def rules(self) -> tuple[FinalityRule, ...]:
        """Every rule of the policy, the chain's own first."""
        return (self.base, *(t.rule for t in self.thresholds))

    @property
    def needs_finalized(self) -> bool:
        """Whether some rule needs the node's ``finalized`` block."""
        return any(isinstance(r, FinalizedTag) for r in self.rules)

    @property
    def strictest(self) -> FinalityRule:
        """The strictest rule of the policy (the chain's own when there is no threshold)."""
        return max(self.rules, key=rule_strictness)


def evaluate_deposit_finality(
    policy: FinalityPolicy,
    *,
    asset: str | None,
    amount_minor: int | None,
    tx_block: int,
    tx_block_hash: str,
    head_block: int,
    finalized_block: int | None,
    canonical_hash: str | None,
) -> tuple[bool, FinalityEvidence]:
    """:func:`evaluate_finality` under the rule ``policy`` selects for this amount; the
    evidence names the threshold (its ``rule`` text and its ``threshold`` field)."""
    rule, threshold = policy.select(asset, amount_minor)
    final, evidence = evaluate_finality(
        rule, tx_block=tx_block, tx_block_hash=tx_block_hash, head_block=head_block,
        finalized_block=finalized_block, canonical_hash=canonical_hash)
    if threshold is None:
        return final, evidence
    return final, FinalityEvidence(
        rule=threshold.describe(), tx_block=evidence.tx_block,
        tx_block_hash=evidence.tx_block_hash, head_block=evidence.head_block,
        finalized_block=evidence.finalized_block, confirmations=evidence.confirmations,
        threshold=threshold.to_json())


# --------------------------------------------------------------------------- reorgs


def same_hash(a: str, b: str) -> bool:
    """Hex hashes (or addresses) compared case-insensitively."""
    return a.lower() == b.lower()


def detect_reorg(cursor_tip: tuple[int, str], new_block_parent_hash: str) -> bool:
    """Whether the block after the cursor's tip does not build on it.

    ``cursor_tip`` is the (height, hash) the watcher last accepted; ``new_block_parent_hash``
    is the parent hash of the node's block at ``height + 1``. A mismatch means the node
    switched to another branch at or below the tip.
    """
    return not same_hash(cursor_tip[1], new_block_parent_hash)


def find_common_ancestor(
    cursor: Sequence[tuple[int, str]], canonical: Mapping[int, str]
) -> int | None:
    """The highest cursor height whose hash equals the node's canonical hash at that height.

    ``cursor`` holds recent (height, hash) pairs in any order; ``canonical`` maps heights to the
    node's current hashes (heights the node does not know may be absent). Because a block hash
    commits to all its ancestors, the highest match is the fork point: everything above it must
    be rolled back and rescanned. None means no cursor entry matches: the reorg is deeper than
    the cursor, and the watcher must stop and raise an alarm rather than guess.
    """
    best: int | None = None
    for height, block_hash in cursor:
        node_hash = canonical.get(height)
        if node_hash is not None and same_hash(node_hash, block_hash):
            best = height if best is None else max(best, height)
    return best


def cursor_heights(cursor: Sequence[tuple[int, str]]) -> list[int]:
    """The heights to ask the node for when searching the fork point, highest first."""
    return sorted({height for height, _ in cursor}, reverse=True)


def advance_cursor(
    cursor: Sequence[tuple[int, str]], height: int, block_hash: str, *, keep: int
) -> tuple[tuple[int, str], ...]:
    """Append (height, hash) and keep only the ``keep`` highest entries.

    Entries at or above ``height`` are dropped first (they belong to a branch being replaced),
    so the cursor stays a strictly increasing chain of heights. ``keep`` bounds its size and is
    the deepest reorg the watcher can repair by itself.
    """
    return advance_cursor_over(cursor, [(height, block_hash)], keep=keep)


def advance_cursor_over(
    cursor: Sequence[tuple[int, str]], blocks: Iterable[tuple[int, str]], *, keep: int
) -> tuple[tuple[int, str], ...]:
    """``advance_cursor`` with each of ``blocks`` (height, hash) in turn, in one pass: a scan
    of 500 blocks over a cursor of ``cursor_keep`` entries costs 500 steps, not 500 copies."""
    if keep < 1:
        raise ValueError("keep must be >= 1")
    kept = collections.deque(sorted(cursor))
    for height, block_hash in blocks:
        # Strictly increasing: the entries at or above ``height`` are a suffix.
        while kept and kept[-1][0] >= height:
            kept.pop()
        kept.append((height, block_hash.lower()))
        while len(kept) > keep:
            kept.popleft()
    return tuple(kept)


def rewind_cursor(
    cursor: Sequence[tuple[int, str]], ancestor_block: int
) -> tuple[tuple[int, str], ...]:
    """The cursor rolled back to the common ancestor: entries above ``ancestor_block`` dropped."""
    return tuple(sorted((h, x) for h, x in cursor if h <= ancestor_block))


# --------------------------------------------------------------------------- chain values


@dataclass(frozen=True, slots=True)
class BlockHeader:
    """The few header fields the engine uses. Hashes are 0x-prefixed lower-case hex.

    ``transactions`` holds transaction hashes, or raw transaction dicts when the block was
    fetched with ``full=True``; it is empty when the caller asked for headers only.
    """

    number: int
    hash: str
    parent_hash: str
    timestamp: int
    transactions: tuple[Any, ...] = ()


#: Position of a native coin transfer made by the transaction itself (its ``value``).
NATIVE_TOP_LEVEL_POSITION = "call:0"


def log_position(index_in_receipt: int) -> str:
    """Position string of a token transfer: ``"log:<n>"``, n = index in the receipt's logs.

    Together with the chain and the transaction hash this is the deposit key. The block-wide
    ``logIndex`` is never used: it changes when a reorged transaction lands in another block.
    """
    if index_in_receipt < 0:
        raise ValueError("log position must be >= 0")
    return f"log:{index_in_receipt}"


def parse_position(position: str) -> tuple[str, int]:
    """Split a position string into its kind and index: ``"log:2"`` -> ``("log", 2)``.

    Kinds: ``log`` (a token transfer's index in the receipt logs) and ``call`` (``call:0`` is
    the transaction's own value transfer). An internal call's path (``call:0.2.1``) is not
    one index: read it with :func:`chains.traces.parse_call_path` (ValueError here).
    """
    kind, sep, index = position.partition(":")
    if kind not in ("log", "call") or not sep or not index.isdigit():
        raise ValueError(f"invalid transfer position {position!r}")
    return kind, int(index)


@dataclass(frozen=True, slots=True)
class ObservedTransfer:
    """One transfer seen on chain, as the deposit watcher consumes it.

    ``token`` is the token contract address, or None for the native coin. Addresses and hashes
    are lower-case hex. ``value`` is the exact on-chain integer in the token's smallest unit (it
    may exceed 2**127: range checks belong to the ledger side). ``position`` is
    ``"log:<n>"``, ``"call:0"`` or an internal call's ``"call:0.<i>..."``; see
    :func:`log_position` and :mod:`chains.traces`. ``log_index`` is the block-wide
    index, kept only for diagnostics (None for native transfers).
    """

    token: str | None
    from_address: str
    to_address: str
    value: int
    tx_hash: str
    block_number: int
    block_hash: str
    position: str
    log_index: int | None = None
