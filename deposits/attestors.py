"""Custody records that must agree, deposit by deposit, before a final deposit is credited.

Two implementations of :class:`Attestor`:

- :class:`NodeReceiptAttestor` (default) re-reads each receipt from a node (ideally an
  independent one) and checks that its block is final there too (at or below the node's
  finalized block, or deep enough) and that the transfer at the deposit's position has the
  same token, recipient and value. An internal transfer (``call:0.<i>...``) is checked in the
  transaction's call trace, re-read from that node (``debug_traceTransaction``, callTracer).
- :class:`ProviderAttestor` compares with the custody provider's per-deposit record, delivered
  as notifications stored in ``provider_inbox`` (unique event id) before processing.

Never against an aggregate balance: a second deposit could mask a missing one.
``attest`` runs outside any database transaction (node calls) or in its own short read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

from sqlalchemy.engine import Engine

from chains.evm import (
    decode_native_transfer,
    is_erc20_transfer_log,
    receipt_succeeded,
    transfer_from_log,
)
from chains.model import (
    BlockHeader,
    FinalityPolicy,
    FinalityRule,
    ObservedTransfer,
    evaluate_deposit_finality,
    parse_position,
    same_hash,
)
from chains.rpc import RpcCall, RpcClient, from_quantity, to_quantity
from chains.traces import find_transfer, parse_call_path, trees_from_parity
from config.uow import UnitOfWork
from deposits import repository as repo
from deposits.repository import DepositRecord


class Verdict(StrEnum):
    """What the custody record says about one deposit."""

    AGREED = "agreed"
    DISAGREED = "disagreed"
    PENDING = "pending"  # no record yet (or not final there yet): ask again next step


@dataclass(frozen=True)
class Attestation:
    """A verdict with its reason and evidence (stored in the history)."""

    verdict: Verdict
    reason: str | None = None
    evidence: dict[str, Any] = field(default_factory=dict)


class Attestor(Protocol):
    """A custody record source."""

    name: str

    def attest(self, deposits: Sequence[DepositRecord]) -> dict[int, Attestation]:
        """A verdict per deposit id."""
        ...


class NodeReceiptAttestor:
    """Re-read the receipt at the finalized block from a node and compare field by field."""

    name = "node"

    def __init__(self, rpc: RpcClient, rule: FinalityRule | FinalityPolicy, *,
                 trace_method: str = "debug_traceBlockByHash") -> None:
        self.rpc = rpc
        #: The chain's rule and its amount thresholds: a deposit must be final on the
        #: attesting node under the rule its amount selects.
        self.policy = rule if isinstance(rule, FinalityPolicy) else FinalityPolicy(rule)
        #: The chain's ``trace_method``: internal transfers are re-read with its per-
        #: transaction form (``debug_traceTransaction`` or ``trace_transaction``).
        self.trace_method = trace_method

    def attest(self, deposits: Sequence[DepositRecord]) -> dict[int, Attestation]:
        """See the class docstring.

        The receipts are re-read by block (``eth_getBlockReceipts`` at each deposit's height,
        all heights in one JSON-RPC batch): the receipts' block hash is the hash the node
        reports at that height, so the same answer tells which block is canonical there.
        Transactions are read only for native deposits (a log's position needs its receipt).
        """
        if not deposits:
            return {}
        head = self.rpc.block_number()
        finalized = self.rpc.get_block("finalized")
        heights = sorted({d.block_number for d in deposits if d.block_number is not None})
        natives = sorted({d.tx_hash for d in deposits if d.position.startswith("call:")})
        internal = sorted({d.tx_hash for d in deposits if parse_call_path(d.position)})
        answers = self.rpc.batch_results(
            [RpcCall("eth_getBlockReceipts", [to_quantity(h)]) for h in heights]
            + [RpcCall("eth_getTransactionByHash", [h]) for h in natives]
            + [self._trace_call(h) for h in internal])
        txs = dict(zip(natives, answers[len(heights):len(heights) + len(natives)], strict=True))
        traces = {h: self._tree(h, answer) for h, answer
                  in zip(internal, answers[len(heights) + len(natives):], strict=True)}
        receipts: dict[str, dict[str, Any]] = {}
        canonical: dict[int, str] = {}
        for height, block_receipts in zip(heights, answers[:len(heights)], strict=True):
            for r in block_receipts or []:
                receipts[str(r["transactionHash"]).lower()] = r
                canonical[height] = str(r["blockHash"])
        verdicts = {}
        for d in deposits:
            receipt = receipts.get(d.tx_hash)
            tx = txs.get(d.tx_hash) if d.position.startswith("call:") else {}
            if receipt is None or tx is None:
                # Not in the canonical block at the deposit's height (any more): wait.
                verdicts[d.id] = Attestation(Verdict.PENDING, "receipt_missing")
                continue
            verdicts[d.id] = self._judge(d, receipt, tx, head, finalized,
                                         canonical.get(from_quantity(receipt["blockNumber"])),
                                         traces.get(d.tx_hash))
        return verdicts

    def _trace_call(self, tx_hash: str) -> RpcCall:
        if self.trace_method == "trace_block":
            return RpcCall("trace_transaction", [tx_hash])
        return RpcCall("debug_traceTransaction", [tx_hash, {"tracer": "callTracer"}])

    def _tree(self, tx_hash: str, answer: Any) -> dict[str, Any] | None:
        """The transaction's call tree from the answer (None: no usable trace)."""
        if self.trace_method != "trace_block":
            return answer if isinstance(answer, dict) else None
        if not isinstance(answer, list) or not answer:
            return None
        trees = trees_from_parity(answer, str(answer[0].get("blockHash", "")))
        return None if trees is None else trees.get(tx_hash.lower())

    def _judge(self, d: DepositRecord, receipt: dict[str, Any], tx: dict[str, Any], head: int,
               finalized: BlockHeader | None, canonical_hash: str | None,
               trace: dict[str, Any] | None = None) -> Attestation:
        block = from_quantity(receipt["blockNumber"])
        final, evidence = evaluate_deposit_finality(
            self.policy, asset=d.asset_code, amount_minor=d.amount_minor,
            tx_block=block, tx_block_hash=str(receipt["blockHash"]),
            head_block=head, finalized_block=None if finalized is None else finalized.number,
            canonical_hash=canonical_hash,
        )
        proof = {"attestor": self.name, **evidence.to_json()}
        if d.block_hash is None or not same_hash(str(receipt["blockHash"]), d.block_hash):
            return Attestation(Verdict.PENDING, "other_block", proof)
        if not final:
            return Attestation(Verdict.PENDING, "not_final_on_attestor", proof)
        mismatch = transfer_mismatch(d, receipt, tx, trace, traced=True)
        return Attestation(Verdict.DISAGREED if mismatch else Verdict.AGREED, mismatch, proof)


def transfer_mismatch(d: DepositRecord, receipt: Mapping[str, Any], tx: Mapping[str, Any],
                      trace: dict[str, Any] | None = None, *,
                      traced: bool = False) -> str | None:
    """Which field of the chain's transfer differs from the deposit (None: all agree):
    ``transfer_missing``, ``asset_mismatch``, ``address_mismatch`` or ``amount_mismatch``.
    ``tx`` is needed for a native transfer (``call:0``) only; an internal transfer
    (``call:0.<i>...``) is looked up in ``trace``, the transaction's call tree, when the caller
    ``traced`` it (a missing or unusable trace then counts as the transfer missing).
    ValueError on a position this module cannot decode, and on an internal transfer whose
    trace was not read (the re-check job reads no traces: its block check stands alone)."""
    path = parse_call_path(d.position)
    if path:
        if not traced:
            raise ValueError(f"{d.position}: an internal transfer is checked in its trace")
        # An internal call: the transfer at that path of the attestor's own trace (a failed
        # transaction's tree yields nothing, so a reverted transfer is "missing").
        found = find_transfer(trace, path) if trace is not None and receipt_succeeded(receipt) \
            else None
        moved = None if found is None else ObservedTransfer(
            None, found.from_address, found.to_address, found.value, d.tx_hash,
            from_quantity(receipt["blockNumber"]), str(receipt["blockHash"]).lower(),
            found.position)
        return _compare(d, moved)
    kind, index = parse_position(d.position)
    if kind == "call":
        moved = decode_native_transfer(tx, receipt) if index == 0 else None
    else:
        logs = receipt.get("logs") or []
        log = logs[index] if index < len(logs) else None
        moved = (transfer_from_log(log, index) if log is not None and is_erc20_transfer_log(log)
                 else None)
    return _compare(d, moved)


def _compare(d: DepositRecord, moved: ObservedTransfer | None) -> str | None:
    """The first field of the chain's transfer that differs from the deposit (None: none)."""
    if moved is None:
        return "transfer_missing"
    if (moved.token or None) != (d.token or None):
        return "asset_mismatch"
    if moved.to_address != d.to_address:
        return "address_mismatch"
    if moved.value != d.value:
        return "amount_mismatch"
    return None


class ProviderAttestor:
    """The custody provider's per-deposit record, from the stored notifications."""

    name = "provider"

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def attest(self, deposits: Sequence[DepositRecord]) -> dict[int, Attestation]:
        """The newest ``complete`` notification of each deposit, compared field by field."""
        with UnitOfWork(self.engine) as uow:
            inbox = repo.inbox_for(uow.conn, [d.key for d in deposits])
        verdicts = {}
        for d in deposits:
            complete = [n for n in inbox.get(d.key, []) if n.status == "complete"]
            if not complete:
                verdicts[d.id] = Attestation(Verdict.PENDING, "no_provider_record")
                continue
            note = complete[-1]
            evidence = {"attestor": self.name, "inbox_event_id": note.event_id,
                        "provider": note.provider}
            if note.asset_code != d.asset_code:
                reason: str | None = "asset_mismatch"
            elif note.to_address.lower() != d.to_address:
                reason = "address_mismatch"
            elif note.amount_minor != d.amount_minor:
                reason = "amount_mismatch"
            else:
                reason = None
            verdicts[d.id] = Attestation(Verdict.DISAGREED if reason else Verdict.AGREED,
                                         reason, evidence)
        return verdicts
