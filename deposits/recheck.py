"""Re-checks past the reorg window: settled deposits whose block left the canonical chain.

The watcher repairs reorgs it can see: its cursor keeps the ``cursor_keep`` newest block
hashes, and a rewind finds the fork point among them. A deposit credited in a block below the
cursor's bottom is never looked at again by the watcher: if a reorg deeper than the cursor
replaces its block (a 51% attack, a chain's emergency rollback, a node that served a minority
fork), the watcher stops with ``ReorgTooDeep`` and names no deposit.

``Rechecker.step`` (the ``deposits.recheck:<chain>`` job) re-reads, in bounded batches, the
blocks of the chain's settled deposits (credited, suspense, capital, internal) within the
configured horizon (``recheck_blocks`` of the head, or settled within ``recheck_age_s``):

1. read up to ``recheck_batch_max`` deposits after the last one checked (id order; the
   position wraps to the start once the horizon is exhausted), outside any transaction;
2. one JSON-RPC batch: each block by its hash (``eth_getBlockByHash``), the node's block at
   each height, each transaction's receipt, and native transfers' transactions;
3. a deposit is gone when the node's block at its height has another hash, or its receipt is
   missing, in another block, or no longer holds the transfer at its position (token,
   recipient, value); a node that has no block at that height (lagging) proves nothing;
4. in one transaction, each gone deposit that is still settled with the same block (re-read
   under lock) becomes disputed with the existing ``deep_reorg`` case and alert
   (``service.record_deep_reorgs``). No money moves: an admin resolves the case.

Idempotent: a disputed deposit is no longer settled, so it is never selected again, and the
write re-checks that under the row lock. Node calls happen between transactions.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.engine import Engine

from chains.model import same_hash
from chains.rpc import RpcCall, RpcClient, from_quantity, to_quantity
from config.chains import ChainConfig, ChainsConfig
from config.uow import UnitOfWork, run_in_transaction
from deposits import model, service
from deposits import repository as repo
from deposits.attestors import transfer_mismatch
from deposits.repository import DepositRecord, Key

log = logging.getLogger("custody.deposits.recheck")


@dataclass
class RecheckReport:
    """What one re-check step did."""

    chain: str
    #: Deposits whose block and receipt were read again.
    checked: int = 0
    #: Deposits found gone (before the write re-checked them under lock).
    gone: int = 0
    #: Deposits the node could not judge (no block at that height yet).
    unknown: int = 0
    cases_opened: list[int] = field(default_factory=list)
    #: The step reached the end of the horizon (a short batch, or nothing was left after the
    #: last deposit checked and it started over): the horizon was covered once more.
    wrapped: bool = False


def judge(d: DepositRecord, *, canonical_hash: str | None, known_by_hash: bool,
          receipt: Mapping[str, Any] | None, tx: Mapping[str, Any] | None) -> str | None:
    """Why a settled deposit is no longer on the canonical chain, or None (still there, or the
    node cannot tell). Pure: the node's answers in, a reason out.

    ``canonical_hash`` is the node's block hash at the deposit's height (None: the node has
    no block there); ``known_by_hash`` whether the node still serves the deposit's block by
    its hash; ``receipt`` the transaction's receipt now; ``tx`` the transaction (read for
    native transfers only).
    """
    assert d.block_hash is not None
    if canonical_hash is None:
        return None  # A lagging node proves nothing.
    if not same_hash(canonical_hash, d.block_hash):
        return "block_not_canonical" if known_by_hash else "block_unknown"
    if receipt is None:
        return "receipt_missing"
    if not same_hash(str(receipt.get("blockHash", "")), d.block_hash):
        return "receipt_in_other_block"
    try:
        return transfer_mismatch(d, receipt, tx or {})
    except ValueError:
        return None  # A position this check cannot decode: the block check above holds.


class Rechecker:
    """Re-checks one chain's settled deposits; see the module docstring.

    The position in the horizon (the last deposit id checked) is kept in memory: a restarted
    process starts from the beginning of the horizon again, which only re-reads.
    """

    def __init__(self, engine: Engine, config: ChainsConfig, chain: str, *,
                 rpc: RpcClient | None = None) -> None:
        self.engine = engine
        self.chain: ChainConfig = config.chain(chain)
        self.rpc = rpc or RpcClient(self.chain.rpc_url, rpc_timeout_ms=self.chain.rpc_timeout_ms,
                                    retries_max=self.chain.rpc_retries_max)
        self.after_id = 0

    @property
    def enabled(self) -> bool:
        """Whether the chain has a horizon (``recheck_blocks`` or ``recheck_age_s``)."""
        return self.chain.recheck_blocks > 0 or self.chain.recheck_age_s > 0

    def close(self) -> None:
        """Close the node client."""
        self.rpc.close()

    def step(self, *, now: datetime) -> RecheckReport:
        """Re-check the next batch of the horizon (at most ``recheck_batch_max`` deposits)."""
        report = RecheckReport(self.chain.name)
        if not self.enabled:
            return report
        batch = self._batch(now)
        if not batch and self.after_id:
            # Nothing after the last one checked: the horizon starts over in this step.
            self.after_id, report.wrapped = 0, True
            batch = self._batch(now)
        if len(batch) < self.chain.recheck_batch_max:
            report.wrapped = True
        if not batch:
            return report
        findings = self._gone(batch, report)
        # Move past this batch only once its findings are written: a failed write re-reads it.
        if findings:
            report.cases_opened = run_in_transaction(
                self.engine, lambda uow: service.record_deep_reorgs(uow, findings, now=now))
        self.after_id = 0 if len(batch) < self.chain.recheck_batch_max else batch[-1].id
        if report.cases_opened:
            log.warning("%s: re-check found %d settled deposit(s) off the canonical chain; "
                        "cases %s", self.chain.name, len(report.cases_opened),
                        report.cases_opened)
        return report

    def _batch(self, now: datetime) -> list[DepositRecord]:
        chain = self.chain
        min_block = None
        if chain.recheck_blocks > 0:
            min_block = max(0, self.rpc.block_number() - chain.recheck_blocks)
        since = now - timedelta(seconds=chain.recheck_age_s) if chain.recheck_age_s > 0 else None
        with UnitOfWork(self.engine) as uow:
            return repo.deposits_to_recheck(
                uow.conn, chain.name, sorted(model.SETTLED_STATES), min_block=min_block,
                since=since, after_id=self.after_id, limit=chain.recheck_batch_max)

    def _gone(self, batch: Sequence[DepositRecord],
              report: RecheckReport) -> dict[Key, dict[str, Any]]:
        """The node's answers for ``batch`` in one JSON-RPC batch, judged deposit by deposit."""
        hashes = sorted({str(d.block_hash) for d in batch})
        heights = sorted({int(d.block_number or 0) for d in batch})
        txs = sorted({d.tx_hash for d in batch})
        natives = sorted({d.tx_hash for d in batch if d.position.startswith("call:")})
        answers = self.rpc.batch_results(
            [RpcCall("eth_getBlockByHash", [h, False]) for h in hashes]
            + [RpcCall("eth_getBlockByNumber", [to_quantity(n), False]) for n in heights]
            + [RpcCall("eth_getTransactionReceipt", [t]) for t in txs]
            + [RpcCall("eth_getTransactionByHash", [t]) for t in natives])
        it = iter(answers)
        by_hash = {h: next(it) is not None for h in hashes}
        at_height = {n: (None if (b := next(it)) is None else str(b["hash"]).lower())
                     for n in heights}
        receipts = {t: next(it) for t in txs}
        transactions = {t: next(it) for t in natives}
        findings: dict[Key, dict[str, Any]] = {}
        for d in batch:
            report.checked += 1
            assert d.block_number is not None and d.block_hash is not None
            canonical = at_height[d.block_number]
            receipt = receipts[d.tx_hash]
            reason = judge(d, canonical_hash=canonical, known_by_hash=by_hash[d.block_hash],
                           receipt=receipt, tx=transactions.get(d.tx_hash))
            if canonical is None:
                report.unknown += 1
            if reason is None:
                continue
            report.gone += 1
            findings[d.key] = {
                "block_hash": d.block_hash, "check": "recheck", "reason": reason,
                "canonical_hash_at_block": canonical,
                "receipt_block_hash": None if receipt is None else receipt.get("blockHash"),
                "receipt_block": None if receipt is None else from_quantity(
                    receipt["blockNumber"]),
            }
        return findings
