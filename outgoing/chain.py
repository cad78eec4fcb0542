"""The chain side of the mechanism, shared by every movement we send: fee caps read from the
chain (``fresh_caps``), the signer called outside any database transaction (``sign``),
broadcasting a recorded attempt (``send``, ``resend``), what the chain shows about a movement's
attempts (``observe``: receipts of all of them, the sender's nonce at the final height and at
latest; ``observe_many``: the same for many movements in a few batched requests), the attempt
that landed and its finality under the chain's rule (``landed``, ``landed_in``), and the gas a
receipt paid (``gas_paid_wei``).

None of these touches the database: each movement's step reads its rows, calls these outside
any transaction, and records what they return in a transaction of its own.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from chains.errors import ChainError, RpcError, RpcUnavailable
from chains.evm import receipt_succeeded
from chains.model import Confirmations, FinalityEvidence, FinalityRule, evaluate_finality
from chains.rpc import RpcCall, RpcClient, from_quantity, to_quantity
from outgoing.errors import SignerAnswerInvalid, SignerUnavailable
from outgoing.model import AttemptView, FeeCaps, initial_fee_caps
from outgoing.repository import Attempt
from outgoing.signer import SignedTx, Signer, UnsignedTx

log = logging.getLogger("outgoing")
#: What operations page on (a signer that answers with another transaction).
alerts = logging.getLogger("custody.alerts")


@dataclass(frozen=True)
class FeePolicy:
    """The fee settings of one sender: the tip it offers and the cap on ``max_fee_per_gas``."""

    priority_fee_wei: int
    max_fee_per_gas_cap_wei: int


def fresh_caps(rpc: RpcClient, fees: FeePolicy) -> FeeCaps:
    """Caps for a first attempt from the latest block's base fee."""
    latest = rpc.request("eth_getBlockByNumber", ["latest", False])
    base_fee = from_quantity(latest.get("baseFeePerGas", "0x0"))
    return initial_fee_caps(base_fee, fees.priority_fee_wei, fees.max_fee_per_gas_cap_wei)


def sign(signer: Signer, unsigned: UnsignedTx, what: str) -> SignedTx | None:
    """Call the signer; never inside a database transaction (a remote signer may take its whole
    timeout). None when it cannot sign now: nothing was recorded or sent, so nothing is lost.
    ``what`` names the movement in the log (``withdrawal 5``, ``sweep 3``)."""
    try:
        return signer.sign(unsigned)
    except SignerAnswerInvalid as exc:
        alerts.critical("%s: signer answer refused (nonce %s): %s; check the signer",
                        what, unsigned.nonce, exc.message)
    except SignerUnavailable as exc:
        log.warning("%s: signer unavailable (nonce %s): %s", what, unsigned.nonce, exc.message)
    return None


@dataclass(frozen=True)
class SendOutcome:
    """What broadcasting an attempt gave: accepted by the node, or unconfirmed (no answer or
    an error: never a failure, since the node may have taken it before its answer was lost)."""

    accepted: bool
    evidence: dict[str, Any]

    @property
    def reason(self) -> str:
        """One line for the movement's history."""
        return str(self.evidence.get("error", "accepted"))


def send(rpc: RpcClient, attempt: Attempt) -> SendOutcome:
    """Broadcast a recorded attempt's signed bytes (outside any database transaction)."""
    evidence: dict[str, Any] = {"tx_hash": attempt.tx_hash, "nonce": attempt.nonce}
    try:
        rpc.send_raw_transaction(attempt.raw_tx)
    except RpcUnavailable as exc:
        return SendOutcome(False, {**evidence, "error": f"no answer: {exc.message}"})
    except RpcError as exc:
        return SendOutcome(False, {**evidence, "error": f"node error: {exc.message}"})
    return SendOutcome(True, evidence)


def send_many(rpc: RpcClient, attempts: Sequence[Attempt]) -> list[SendOutcome]:
    """``send`` for many attempts in batched requests, one outcome each, in order: a chunk
    that gets no answer makes all of its attempts unconfirmed (never failed)."""
    if not attempts:
        return []
    try:
        answers = rpc.batch([RpcCall("eth_sendRawTransaction", [a.raw_tx]) for a in attempts])
    except RpcUnavailable as exc:
        answers = [exc] * len(attempts)
    found = []
    for a, answer in zip(attempts, answers, strict=True):
        evidence: dict[str, Any] = {"tx_hash": a.tx_hash, "nonce": a.nonce}
        if isinstance(answer, RpcUnavailable):
            found.append(SendOutcome(False, {**evidence, "error": f"no answer: {answer.message}"}))
        elif isinstance(answer, RpcError):
            found.append(SendOutcome(False, {**evidence,
                                             "error": f"node error: {answer.message}"}))
        else:
            found.append(SendOutcome(True, evidence))
    return found


def nonces(rpc: RpcClient, senders: Sequence[str], block: str = "pending") -> dict[str, int]:
    """Each sender's nonce at ``block`` (``pending`` by default), in one batched request."""
    wanted = sorted(set(senders))
    counts = rpc.batch_results([RpcCall("eth_getTransactionCount", [s, block]) for s in wanted])
    return {s: from_quantity(c) for s, c in zip(wanted, counts, strict=True)}


def resend(rpc: RpcClient, attempt: Attempt) -> None:
    """Send recorded bytes again as they are (same hash); any answer is only logged, since the
    next observation decides."""
    try:
        rpc.send_raw_transaction(attempt.raw_tx)
    except ChainError as exc:
        log.info("re-send of %s: %s", attempt.tx_hash, exc.message)


@dataclass(frozen=True)
class ChainView:
    """The chain as seen for one movement's attempts."""

    attempts: tuple[AttemptView, ...]
    receipts: dict[str, dict[str, Any]]
    head: int
    finalized_block: int | None
    final_height: int
    finalized_nonce: int
    latest_nonce: int
    fresh_caps: FeeCaps


def observe(rpc: RpcClient, rule: FinalityRule, sender: str, attempts: list[Attempt],
            fees: FeePolicy) -> ChainView:
    """Receipts of every attempt (an attempt without one: is it known to the node?), the head,
    the final height under ``rule``, the sender's nonce there and at latest, fresh fee caps."""
    receipts = rpc.get_receipts([a.tx_hash for a in attempts])
    head = rpc.block_number()
    finalized = rpc.get_block("finalized")
    finalized_block = finalized.number if finalized else None
    if isinstance(rule, Confirmations):
        final_height = max(0, head - rule.required + 1)
    else:
        final_height = finalized_block or 0
    views = []
    found: dict[str, dict[str, Any]] = {}
    for a, receipt in zip(attempts, receipts, strict=True):
        if receipt is not None:
            found[a.tx_hash] = receipt
            views.append(AttemptView(
                a.id, a.tx_hash, a.nonce, from_quantity(receipt["blockNumber"]),
                str(receipt["blockHash"]).lower(), receipt_succeeded(receipt), True))
        else:
            known = rpc.get_transaction(a.tx_hash) is not None
            views.append(AttemptView(a.id, a.tx_hash, a.nonce, None, None, None, known))
    return ChainView(tuple(views), found, head, finalized_block, final_height,
                     rpc.get_transaction_count(sender, final_height),
                     rpc.get_transaction_count(sender, "latest"), fresh_caps(rpc, fees))


@dataclass(frozen=True)
class Observed:
    """What ``observe_many`` saw for one movement: its chain view, and the canonical hash of
    the block its landed attempt is in (None: none landed, or that height is gone)."""

    view: ChainView
    canonical_hash: str | None


def observe_many(rpc: RpcClient, rule: FinalityRule,
                 movements: Sequence[tuple[str, list[Attempt]]],
                 fees: FeePolicy) -> list[Observed]:
    """``observe`` for many movements at once, ``(sender, attempts)`` each: the same facts in
    a few batched requests instead of several requests per movement (receipts of every
    attempt; the head, the finalized block and fresh caps once; the transactions without a
    receipt; every sender's nonce at the final height and at latest; the canonical hash of every
    block an attempt landed in). One consistent head for all of them."""
    head = rpc.block_number()
    finalized = rpc.get_block("finalized")
    finalized_block = finalized.number if finalized else None
    if isinstance(rule, Confirmations):
        final_height = max(0, head - rule.required + 1)
    else:
        final_height = finalized_block or 0
    caps = fresh_caps(rpc, fees)
    hashes = [a.tx_hash for _, attempts in movements for a in attempts]
    receipts = dict(zip(hashes, rpc.get_receipts(hashes), strict=True)) if hashes else {}
    missing = [h for h in hashes if receipts[h] is None]
    known = dict(zip(missing, rpc.batch_results(
        [RpcCall("eth_getTransactionByHash", [h]) for h in missing]), strict=True))
    senders = sorted({sender for sender, _ in movements})
    counts = rpc.batch_results(
        [RpcCall("eth_getTransactionCount", [s, to_quantity(final_height)]) for s in senders]
        + [RpcCall("eth_getTransactionCount", [s, "latest"]) for s in senders])
    at_final = {s: from_quantity(c) for s, c in zip(senders, counts[:len(senders)], strict=True)}
    at_latest = {s: from_quantity(c) for s, c in zip(senders, counts[len(senders):],
                                                     strict=True)}
    blocks = sorted({from_quantity(r["blockNumber"]) for r in receipts.values() if r})
    canonical = rpc.canonical_hashes(blocks) if blocks else {}
    found: list[Observed] = []
    for sender, attempts in movements:
        views, got = [], {}
        hit_block: int | None = None
        for a in attempts:
            receipt = receipts[a.tx_hash]
            if receipt is not None:
                got[a.tx_hash] = receipt
                hit_block = from_quantity(receipt["blockNumber"])
                views.append(AttemptView(a.id, a.tx_hash, a.nonce, hit_block,
                                         str(receipt["blockHash"]).lower(),
                                         receipt_succeeded(receipt), True))
            else:
                views.append(AttemptView(a.id, a.tx_hash, a.nonce, None, None, None,
                                         known[a.tx_hash] is not None))
        view = ChainView(tuple(views), got, head, finalized_block, final_height,
                         at_final[sender], at_latest[sender], caps)
        found.append(Observed(view, None if hit_block is None else canonical.get(hit_block)))
    return found


def landed_in(rule: FinalityRule, observed: Observed
              ) -> tuple[AttemptView | None, tuple[bool, FinalityEvidence] | None]:
    """``landed`` from what ``observe_many`` saw (no further request)."""
    view = observed.view
    hit = next((a for a in view.attempts if a.receipt_block is not None), None)
    if hit is None:
        return None, None
    assert hit.receipt_block is not None and hit.receipt_block_hash is not None
    return hit, evaluate_finality(
        rule, tx_block=hit.receipt_block, tx_block_hash=hit.receipt_block_hash,
        head_block=view.head, finalized_block=view.finalized_block,
        canonical_hash=observed.canonical_hash)


def landed(rpc: RpcClient, rule: FinalityRule, view: ChainView
           ) -> tuple[AttemptView | None, tuple[bool, FinalityEvidence] | None]:
    """The attempt with a receipt (at most one: they share a nonce) and its finality."""
    hit = next((a for a in view.attempts if a.receipt_block is not None), None)
    if hit is None:
        return None, None
    assert hit.receipt_block is not None and hit.receipt_block_hash is not None
    canonical = rpc.get_block(hit.receipt_block)
    return hit, evaluate_finality(
        rule, tx_block=hit.receipt_block, tx_block_hash=hit.receipt_block_hash,
        head_block=view.head, finalized_block=view.finalized_block,
        canonical_hash=canonical.hash if canonical else None)


def gas_paid_wei(receipt: dict[str, Any]) -> int:
    """What a receipt's transaction paid for gas, in wei."""
    return from_quantity(receipt["gasUsed"]) * from_quantity(receipt["effectiveGasPrice"])
