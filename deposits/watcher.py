"""The watcher of one chain: one bounded step at a time, safe to kill at any point.

A step (``Watcher.step``) holds the chain's advisory lock (one step per chain across processes)
and runs these phases; node calls always happen between database transactions, never inside:

1. scan: read up to ``scan_blocks_max`` blocks above the cursor tip (headers and
   ``eth_getBlockReceipts`` in one batch, with ``trace_internal`` the call traces of the blocks
   that ran code in a second, transactions of our transfers in another); if the tip
   is no longer canonical, find the common ancestor and rewind instead (deposits above it go
   back to unconfirmed; credited ones open a case). Record the transfers to our addresses and
   advance the cursor in ONE transaction; a new deposit whose block is already final under the
   rule (head and finalized read before the scan, hash from the scan's own headers) gets its
   ``finality_reached`` row in that same transaction, and, if the custody record agreed (the
   attestor is asked right after the scan, outside any transaction), its credit too: a
   catch-up credits each range in the transaction that records it. What that transaction
   writes for the new deposits is planned right after the attestation, outside it
   (``deposits.scans``: rows, history, ledger entries, ids reserved) and sent as planned
   with the cursor's compare-and-set and the COMMIT in one round trip; if the database
   refuses what the plan assumed (a deposit that exists, a credit written by another step, a
   moved cursor) the scan is recorded again, checking under lock and planning again. A token
   or internal transfer in a block already final under the strictest rule is taken from its
   receipt (no transaction read, no nonce: such a deposit can no longer fail).
2. progress: confirmations and finality of included deposits, each under the rule its
   amount selects (the chain's rule, or a stricter one of ``finality_by_amount``).
3. failures: an unconfirmed deposit whose sender's nonce was consumed at a height final under
   the chain's strictest rule by another transaction is failed.
4. provider: deposits the provider calls complete before our rule is met are held.
5. settle: the final deposits left (not final at first sight, or their record was pending,
   or they are held or ours) are checked against the custody record (attestor, outside any
   transaction) and credited (``ledger.service.post_batch``, up to 500 deposits per call)
   with their history rows in one transaction.

Catching up (a step that did not reach the head), two things overlap: the ranges above the one
being written are read from the node, attested and planned ahead (``deposits.readahead``: a
reader, a checker and a planner thread, at most ``READ_AHEAD_DEPTH`` ranges waiting), so that
the step's own thread mostly waits on its transaction (a range read ahead is used only if the
step starts from the tip it was read from, within ``AHEAD_AGE_MAX_S``; up to
``WRITE_GROUP_MAX`` ranges already planned are written in one transaction), and the next
step settles the deposits this one left final on a settle thread while it scans. The settle
thread finishes inside the step's chain lock, and nothing read ahead is written but by a
step holding it; a step that reaches the head stops reading ahead and settles at its end as
before, so a following watcher credits in the step that sees finality. While catching up, a
report's ``credited`` counts the deposits its scan credited and those the previous step left
final.

Every write is idempotent against a crash right before or after its commit: the cursor moves
with the observations, a state is re-read under lock before it moves, and a credit is keyed by
the deposit (the ledger replays, it never posts twice).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy.engine import Engine

from chains.errors import RpcUnavailable
from chains.model import (
    FinalityPolicy,
    FinalityRule,
    cursor_heights,
    final_height,
    find_common_ancestor,
    parse_finality_rule,
)
from chains.rpc import RpcCall, RpcClient, from_quantity, to_quantity
from config.chains import ChainConfig, ChainsConfig
from config.uow import UnitOfWork, run_in_transaction
from deposits import repository as repo
from deposits import scans, service
from deposits.attestors import Attestation, Attestor, NodeReceiptAttestor, ProviderAttestor, Verdict
from deposits.errors import ReorgTooDeep, WatcherBusy
from deposits.model import Booking, DepositState
from deposits.readahead import ReadAhead, Stages
from deposits.scanner import ScanResult, scan_blocks

log = logging.getLogger("custody.deposits.watcher")
S = DepositState


@dataclass
class StepReport:
    """What one step did."""

    chain: str
    scanned_from: int | None = None
    scanned_to: int | None = None
    head_block: int = 0
    #: Height of the cursor's tip after the step (None: nothing accepted yet).
    cursor_block: int | None = None
    new_deposits: int = 0
    rewound_to: int | None = None
    cases_opened: list[int] = field(default_factory=list)
    finals: int = 0
    failed: int = 0
    held_early: int = 0
    credited: int = 0
    suspense: int = 0
    held: int = 0

    @property
    def caught_up(self) -> bool:
        """Whether the scan reached the node's head."""
        return self.cursor_block is not None and self.cursor_block >= self.head_block


#: A range read ahead is used only if the step that wants it starts within this many seconds.
AHEAD_AGE_MAX_S = 10.0
#: Included deposits a step brings forward, unconfirmed ones it checks for failure, at most.
PROGRESS_MAX = 50_000
FAILURES_MAX = 10_000
#: Ranges written in one transaction at most, when the ranges behind the first are planned
#: already (a group commit: bench/RESULTS.md, "Deposit catch-up").
WRITE_GROUP_MAX = 2
#: Ranges read and planned ahead of the one being written, at most (memory: a few ranges of
#: ``scan_blocks_max`` blocks, whatever the backlog).
READ_AHEAD_DEPTH = 2


@dataclass(frozen=True)
class _Fetched:
    """A scan read from the node: (head, finalized) read before it, and the scan (None:
    nothing to read yet)."""

    heads: tuple[int, int | None]
    result: ScanResult | None
    #: The attestations, by deposit key, of the deposits the scan's transaction may credit
    #: (``scans.credit_candidates``), read right after the scan.
    attested: dict[repo.Key, Attestation] = field(default_factory=dict)
    #: What the scan's transaction writes for its deposits if they are all new
    #: (``scans.plan_new_deposits``), planned right after the attestations.
    planned: scans.NewDeposits | None = None


@dataclass(frozen=True)
class _Read:
    """A range read from the node and attested (the reader's stage): what ``_plan_range``
    plans. ``rows``: the observations as new deposit rows; ``attested``: the verdicts of
    those the scan's transaction may credit."""

    heads: tuple[int, int | None]
    result: ScanResult | None
    internal: frozenset[repo.Key] = frozenset()
    rows: list[dict[str, Any]] = field(default_factory=list)
    candidates: list[repo.DepositRecord] = field(default_factory=list)
    attested: dict[repo.Key, Attestation] = field(default_factory=dict)


def _groupable(fetched: _Fetched) -> bool:
    """Whether a range read ahead can join a group write: planned, no reorg, blocks read."""
    return (fetched.planned is not None and fetched.result is not None
            and not fetched.result.reorg and bool(fetched.result.headers))


def rpc_for(url: str, chain: ChainConfig) -> RpcClient:
    """An RPC client with the chain's timeout and retry budget."""
    return RpcClient(url, rpc_timeout_ms=chain.rpc_timeout_ms, retries_max=chain.rpc_retries_max)


class Watcher:
    """Follows one chain; see the module docstring."""

    def __init__(self, engine: Engine, config: ChainsConfig, chain: str, *,
                 rpc: RpcClient | None = None, attestor: Attestor | None = None,
                 settle_batch_max: int = 1_000) -> None:
        self.engine = engine
        self._autocommit = engine.execution_options(isolation_level="AUTOCOMMIT")
        self.config = config
        self.chain = config.chain(chain)
        self.rule: FinalityRule = parse_finality_rule(self.chain.finality)
        #: The rule with its amount thresholds: each deposit is judged under its own.
        self.policy: FinalityPolicy = service.finality_policy(self.chain)
        self.rpc = rpc or rpc_for(self.chain.rpc_url, self.chain)
        if attestor is None:
            if self.chain.attestor == "provider":
                attestor = ProviderAttestor(engine)
            else:
                url = self.chain.attestor_rpc_url or self.chain.rpc_url
                attestor = NodeReceiptAttestor(rpc_for(url, self.chain), self.policy,
                                               trace_method=self.chain.trace_method)
        self.attestor = attestor
        # The checker thread attests what was read ahead while the settle thread may attest
        # too: an attestor (its node client) serves one thread at a time.
        self._attest_lock = threading.Lock()
        self.accounts = service.AccountCache()
        self.settle_batch_max = settle_batch_max
        # Catching up, the ranges above the one being written are read and planned ahead
        # (deposits.readahead), the reader with its own RPC client: an HTTP session is not
        # shared across threads.
        self._reader = ThreadPoolExecutor(max_workers=1,
                                          thread_name_prefix=f"scan-{self.chain.name}")
        self._checker = ThreadPoolExecutor(max_workers=1,
                                           thread_name_prefix=f"attest-{self.chain.name}")
        self._planner = ThreadPoolExecutor(max_workers=1,
                                           thread_name_prefix=f"plan-{self.chain.name}")
        self._ahead_rpc = rpc_for(self.rpc.url, self.chain)
        self._ahead: ReadAhead[_Read, _Fetched] | None = None
        #: The cursor this watcher's last step wrote (None: read it).
        self._cursor: list[tuple[int, str]] | None = None
        self._pool_settle = ThreadPoolExecutor(max_workers=1,
                                               thread_name_prefix=f"settle-{self.chain.name}")
        #: The last step did not reach the head: the next one settles while it scans.
        self._behind = False
        if not self.chain.trace_internal:
            log.warning("%s: trace_internal is off: ETH paid by internal calls (batch payouts, "
                        "contract wallets, routers) is not detected on this chain",
                        self.chain.name)

    def close(self) -> None:
        """Stop the read-ahead and settle threads and close the node client they own."""
        self._stop_ahead()
        self._reader.shutdown(wait=True, cancel_futures=True)
        self._checker.shutdown(wait=True, cancel_futures=True)
        self._planner.shutdown(wait=True, cancel_futures=True)
        self._pool_settle.shutdown(wait=True)
        self._ahead_rpc.close()

    # ----------------------------------------------------------------- the step

    def step(self, *, now: datetime) -> StepReport:
        """Run one bounded step (raises WatcherBusy if another process runs one)."""
        report = StepReport(self.chain.name)
        with self._chain_lock():
            # While catching up, the deposits the previous step left final are settled on a
            # thread of their own while this step reads and records the next range: node
            # reads, history writes and ledger posts overlap. Both run under the chain lock
            # and touch disjoint deposits (settle: final ones, re-read under lock; the scan:
            # new ones); a rewind meeting a deposit being settled waits for its row lock.
            settling = self._pool_settle.submit(self._settle, report, now) if self._behind \
                else None
            try:
                self._observe(report, now)
            except BaseException:
                if settling is not None:
                    wait([settling])  # Never leave a settle running outside the chain lock.
                raise
            if settling is not None:
                settling.result()
            self._behind = report.rewound_to is None and not report.caught_up
            if report.rewound_to is None and not self._behind:
                self._settle(report, now)
        return report

    def _observe(self, report: StepReport, now: datetime) -> None:
        """The phases before settling: scan (or rewind), progress, failures, provider."""
        self._scan(report, now)
        if report.rewound_to is None:
            # The deposits both phases work on, in one read (a catch-up step meets none).
            waiting = self._read(lambda uow: repo.deposits_waiting(
                uow.conn, self.chain.name,
                {S.INCLUDED: PROGRESS_MAX, S.UNCONFIRMED: FAILURES_MAX}))
            self._progress(report, now, [d for d in waiting if d.state == S.INCLUDED])
            self._failures(report, now, [d for d in waiting if d.state == S.UNCONFIRMED])
            if self.chain.attestor == "provider":
                report.held_early = run_in_transaction(
                    self.engine,
                    lambda uow: service.record_early_completions(uow, self.chain, now=now))

    @contextlib.contextmanager
    def _chain_lock(self) -> Iterator[None]:
        # An advisory lock held by a transaction kept open on a connection of its own: two
        # processes never run a step of the same chain at once (they would both scan and race
        # on the cursor). It is not a row lock: node calls while holding it block nobody else's
        # writes. Ending the transaction releases it (also behind a transaction pooler).
        with self.engine.connect() as conn:
            try:
                if not repo.lock_chain(conn, self.chain.name):
                    raise WatcherBusy(f"another watcher step of {self.chain.name} is running")
                yield
            finally:
                conn.rollback()

    def _read(self, fn: Any) -> Any:
        """``fn``'s reads (or a sequence's ``nextval``), each statement its own transaction:
        no BEGIN and ROLLBACK round trips around them (a catch-up step makes several such
        reads, on the threads that are its critical path)."""
        with UnitOfWork(self._autocommit) as uow:
            return fn(uow)

    def _scan(self, report: StepReport, now: datetime) -> None:
        # The cursor this watcher wrote last, if its last step ended with that write: no read
        # (record_planned swaps it only if it is still that one; record_scan_final checks that
        # a scan starts on the tip it locks). Any other end of a step forgets it.
        known, self._cursor = self._cursor, None
        cursor = known if known is not None else self._read(
            lambda uow: repo.get_cursor(uow.conn, self.chain.name))
        tip = cursor[-1] if cursor else None
        fetched = self._take_ahead(tip) or self._fetch(self.rpc, tip)
        head, result = fetched.heads[0], fetched.result
        report.head_block = head
        report.cursor_block = tip[0] if tip else None
        if result is None:
            return
        if result.reorg:
            self._rewind(cursor, report, now)
            return
        if not result.headers:
            return
        last = result.headers[-1]
        if last.number >= head:
            self._stop_ahead()
        elif self._ahead is None or not self._ahead.active:
            self._read_ahead_from((last.number, last.hash))
        # Catching up, the ranges already planned behind this one are written with it, in
        # one transaction (a group commit: the step's lock, writes and commit once for all).
        group = [fetched]
        while self._ahead is not None and len(group) < WRITE_GROUP_MAX:
            following = self._ahead.take_ready((last.number, last.hash), _groupable)
            if following is None:
                break
            group.append(following)
            assert following.result is not None
            last = following.result.headers[-1]
        report.head_block = group[-1].heads[0]
        report.scanned_from, report.scanned_to = result.headers[0].number, last.number
        report.cursor_block = report.scanned_to
        report.new_deposits, report.finals, credited = self._record(group, cursor, now)
        report.credited += credited

    def _record(self, group: list[_Fetched], cursor: list[tuple[int, str]],
                now: datetime) -> tuple[int, int, int]:
        """Record consecutive scans (the first on the cursor's tip) and commit: as planned, all
        in one pipeline, if what the plans assumed holds (``scans.record_planned``), else each
        with ``scans.record_scan_final`` in a transaction of its own."""
        if all(f.planned is not None for f in group):
            planned = [(f.planned, f.result.headers) for f in group
                       if f.planned is not None and f.result is not None]
            try:
                counts = run_in_transaction(self.engine, lambda uow: scans.record_planned(
                    uow, self.chain, planned, cursor=cursor, now=now))
            except scans.PlanStale as stale:
                log.info("%s: %s; recording the scans again", self.chain.name, stale)
            else:
                for _, headers in planned:
                    cursor = scans.cursor_after(self.chain, cursor, headers)
                self._cursor = cursor
                return counts
        totals = (0, 0, 0)
        for fetched in group:
            counts = self._record_one(fetched, now)
            totals = (totals[0] + counts[0], totals[1] + counts[1], totals[2] + counts[2])
        return totals

    def _record_one(self, fetched: _Fetched, now: datetime) -> tuple[int, int, int]:
        """``scans.record_scan_final`` of one scan, in a transaction of its own."""
        result = fetched.result
        assert result is not None
        finality = scans.ScanFinality(self.policy, fetched.heads[0], fetched.heads[1])
        # The accounts of the credits were opened when they were planned (_plan_range).
        credits = scans.ScanCredits(fetched.attested, self.accounts) if fetched.attested \
            else None
        return run_in_transaction(self.engine, lambda uow: scans.record_scan_final(
            uow, self.config, self.chain, result.headers, result.observations, result.users,
            head_block=fetched.heads[0], finality=finality, now=now, credits=credits,
            planned=fetched.planned))

    def _fetch(self, rpc: RpcClient, tip: tuple[int, str] | None) -> _Fetched:
        """Read, attest and plan the range above ``tip`` on the step's own thread; if the
        head is further, the ranges after it are read ahead from then on."""
        read, following = self._read_range(rpc, tip)
        if following is not None:
            self._read_ahead_from(following)
        return self._plan_range(self._attest_range(read))

    def _read_ahead_from(self, tip: tuple[int, str]) -> None:
        """Catching up: read, attest and plan the ranges above ``tip`` while the step writes
        the ones below (``deposits.readahead``)."""
        self._stop_ahead()
        self._ahead = ReadAhead(
            Stages(lambda tip: self._read_range(self._ahead_rpc, tip), self._plan_range,
                   self._attest_range),
            tip, reader=self._reader, planner=self._planner, checker=self._checker,
            depth=READ_AHEAD_DEPTH, max_age_s=AHEAD_AGE_MAX_S)

    def _read_range(self, rpc: RpcClient, tip: tuple[int, str] | None
                    ) -> tuple[_Read, tuple[int, str] | None]:
        """Read the blocks above ``tip`` (node calls and short reads of our addresses and
        internal transfers only), and attest the deposits already final; with the tip the
        next range starts from (None: the head is reached, or nothing to read further).

        Runs on the step's thread or, reading ahead, on the reader thread with its own RPC
        client; it writes nothing, so a result nobody uses is simply dropped.
        """
        # Read before the blocks: a block the scan finds at or below them is judged final on
        # the headers the scan reads next (the hash the node reports at that height).
        heads = self._finality_heads(rpc)
        start = tip[0] + 1 if tip else self.chain.start_block
        end = min(heads[0], start + self.chain.scan_blocks_max - 1)
        if end < start and tip is None:
            return _Read(heads, None), None
        family = self.chain.family

        def lookup(addresses: Any) -> dict[str, str]:
            return dict(self._read(lambda uow: repo.users_of_addresses(uow.conn, family,
                                                                       addresses)))

        final = final_height(self.policy.strictest, head_block=heads[0],
                             finalized_block=heads[1])
        result = scan_blocks(rpc, tip, start, max(end, start - 1), lookup_users=lookup,
                             own_addresses=self.chain.own_addresses,
                             trace_internal=self.chain.trace_internal,
                             trace_method=self.chain.trace_method,
                             is_listed=lambda c: self.chain.token(c) is not None,
                             final_height=final)
        following = None
        if not result.reorg and result.headers and result.headers[-1].number < heads[0]:
            following = (result.headers[-1].number, result.headers[-1].hash)
        if result.reorg or not result.observations:
            return _Read(heads, result), following
        # Deposits already final are attested now, outside any transaction (reading ahead,
        # on the reader thread), so that the scan's transaction credits them.
        internal = self._read(lambda uow: scans.internal_keys(uow, self.chain,
                                                              result.observations))
        rows = scans.new_rows(self.config, self.chain, result.observations, result.users,
                              head_block=heads[0], internal=internal)
        candidates = scans.credit_candidates(self.chain, rows, final_height=final)
        return _Read(heads, result, internal, rows, candidates), following

    def _attest_range(self, read: _Read) -> _Read:
        """``read`` with the custody record's verdicts on the deposits the scan's transaction
        may credit (the checker's stage when reading ahead)."""
        if not read.candidates:
            return read
        return dataclasses.replace(read, attested=self._attest_candidates(read.candidates))

    def _plan_range(self, read: _Read) -> _Fetched:
        """Plan what the scan's transaction writes for a range's deposits, outside it (on the
        planner thread when reading ahead): their accounts opened, ids reserved,
        ``scans.plan_new_deposits``; the transaction checks the plan and uses it."""
        result = read.result
        if result is None or result.reorg:
            return _Fetched(read.heads, result)
        finality = scans.ScanFinality(self.policy, read.heads[0], read.heads[1])
        if not result.observations:  # Blocks without deposits: the plan moves the cursor.
            return _Fetched(read.heads, result, planned=scans.plan_new_deposits(
                self.chain, [], [], [], headers=result.headers, finality=finality,
                credits=None, internal=frozenset()))
        credits = None
        if read.attested:
            self._ensure_accounts(service.accounts_needed(self.chain, read.candidates))
            credits = scans.ScanCredits(read.attested, self.accounts)
        count = len(read.rows)
        ids, event_ids = self._read(lambda uow: repo.reserve_ids(
            uow.conn, count, scans.EVENTS_PER_NEW_DEPOSIT * count))
        planned = scans.plan_new_deposits(
            self.chain, read.rows, ids, event_ids, headers=result.headers, finality=finality,
            credits=credits, internal=read.internal)
        return _Fetched(read.heads, result, read.attested, planned)

    def _attest_candidates(self, candidates: list[repo.DepositRecord]
                           ) -> dict[repo.Key, Attestation]:
        """The attestations of ``candidates`` by deposit key (empty if the attestor failed)."""
        if not candidates:
            return {}
        try:
            with self._attest_lock:
                verdicts = self.attestor.attest(candidates)
        except Exception:  # noqa: BLE001 - the settle phase asks again, where errors count
            # An attestor that fails (its node down) must not stop the scan: the deposits are
            # recorded as final, and the settle phase asks the attestor again.
            log.warning("%s: attesting %d deposits right after the scan failed; the settle "
                        "phase asks again", self.chain.name, len(candidates), exc_info=True)
            return {}
        return {d.key: verdicts[d.id] for d in candidates if d.id in verdicts}

    def _take_ahead(self, tip: tuple[int, str] | None) -> _Fetched | None:
        """The range above ``tip`` read ahead, if it starts there, is recent and worked; else
        the read-ahead ends (the cursor moved otherwise: a failed write, a rewind, another
        process) and the step reads itself."""
        if self._ahead is None or tip is None:
            return None
        try:
            taken = self._ahead.take(tip, timeout_s=self.rpc.rpc_timeout_ms / 1000 * 4)
        except Exception:  # noqa: BLE001 - read again, where errors count
            log.info("%s: range read ahead failed; reading again", self.chain.name,
                     exc_info=True)
            taken = None
        if taken is None:
            self._stop_ahead()
        return taken

    def _stop_ahead(self) -> None:
        if self._ahead is not None:
            self._ahead.stop()
            self._ahead = None

    def _rewind(self, cursor: list[tuple[int, str]], report: StepReport, now: datetime) -> None:
        canonical = self.rpc.canonical_hashes(cursor_heights(cursor))
        ancestor = find_common_ancestor(cursor, canonical)
        if ancestor is None:
            service.alerts.critical("%s: reorg deeper than the cursor (%d blocks); watcher "
                                    "stopped", self.chain.name, len(cursor))
            raise ReorgTooDeep(f"{self.chain.name}: no block of the cursor is canonical any "
                               f"more (cursor {cursor[0][0]}..{cursor[-1][0]})")
        tip = cursor[-1]
        observed = {"old_tip_block": tip[0], "old_tip_hash": tip[1],
                    "new_hash_at_old_tip": canonical.get(tip[0])}
        log.warning("%s: reorg, rewinding from %d to %d", self.chain.name, tip[0], ancestor)
        report.rewound_to = report.cursor_block = ancestor
        report.cases_opened = run_in_transaction(self.engine, lambda uow: service.record_rewind(
            uow, self.chain, ancestor, observed, now=now))

    def _finality_heads(self, rpc: RpcClient | None = None) -> tuple[int, int | None]:
        rpc = rpc or self.rpc
        head = rpc.block_number()
        if self.policy.needs_finalized:
            finalized = rpc.get_block("finalized")
            return head, None if finalized is None else finalized.number
        return head, None

    def _progress(self, report: StepReport, now: datetime,
                  open_: list[repo.DepositRecord]) -> None:
        """Confirmations and finality of ``open_``, the included deposits (oldest first)."""
        if not open_:
            return
        head, finalized = self._finality_heads()
        heights = sorted({d.block_number for d in open_ if d.block_number is not None})
        canonical = self.rpc.canonical_hashes(heights)
        report.finals += run_in_transaction(self.engine, lambda uow: service.record_progress(
            uow, self.chain, self.policy, [d.key for d in open_], head_block=head,
            finalized_block=finalized, canonical=canonical, now=now))

    def _final_height(self) -> int | None:
        # A deposit is proven gone only by a transaction final under the strictest rule of
        # the chain: with amount thresholds, a small deposit waits as long as a large one
        # before it is called failed (never sooner than under the chain's own rule).
        head, finalized = self._finality_heads()
        return final_height(self.policy.strictest, head_block=head, finalized_block=finalized)

    def _failures(self, report: StepReport, now: datetime,
                  unconfirmed: list[repo.DepositRecord]) -> None:
        """Fail those of ``unconfirmed`` (oldest first) proven gone."""
        waiting = [d for d in unconfirmed if d.tx_from is not None and d.tx_nonce is not None]
        height = self._final_height() if waiting else None
        if not waiting or height is None:
            return
        senders = sorted({d.tx_from for d in waiting if d.tx_from})
        counts = dict(zip(senders, self.rpc.batch_results(
            [RpcCall("eth_getTransactionCount", [s, to_quantity(height)]) for s in senders]),
            strict=True))
        consumed = [d for d in waiting
                    if from_quantity(counts[str(d.tx_from)]) > (d.tx_nonce or 0)]
        if not consumed:
            return
        # Read the receipts AFTER the nonces: if our own transaction consumed the nonce at a
        # final height, its receipt is there and it is not failed (the scan re-includes it).
        receipts = self.rpc.get_receipts([d.tx_hash for d in consumed])
        proofs = {d.key: {"sender": d.tx_from, "nonce": d.tx_nonce, "final_block": height,
                          "sender_nonce_at_final_block": from_quantity(counts[str(d.tx_from)]),
                          "rule": str(self.policy.strictest)}
                  for d, r in zip(consumed, receipts, strict=True) if r is None}
        if proofs:
            self._consumers(proofs)
            report.failed = run_in_transaction(
                self.engine, lambda uow: service.record_failures(uow, proofs, now=now))

    def _consumers(self, proofs: dict[repo.Key, dict[str, Any]]) -> None:
        """Name the transaction that used each failed deposit's nonce (``consumed_by``), where
        the node answers Otterscan's ``ots_getTransactionBySenderAndNonce`` (anvil, Erigon and
        Reth do; geth does not). Best effort, before any database transaction: the nonce count
        at a final height is the proof, the hash only tells people which transaction it was."""
        keys = list(proofs)
        try:
            answers = self.rpc.batch([RpcCall("ots_getTransactionBySenderAndNonce", [
                proofs[k]["sender"], to_quantity(int(proofs[k]["nonce"]))]) for k in keys])
        except RpcUnavailable:
            return
        for key, answer in zip(keys, answers, strict=True):
            if isinstance(answer, str) and answer.lower() != key[1].lower():
                proofs[key]["consumed_by"] = answer.lower()

    def _settle(self, report: StepReport, now: datetime) -> None:
        finals = self._read(lambda uow: repo.deposits_in_states(
            uow.conn, self.chain.name, [S.FINAL], limit=self.settle_batch_max))
        if not finals:
            return
        self._ensure_accounts(service.accounts_needed(self.chain, finals))
        attestable = [d for d in finals if d.booking != Booking.REVIEW]
        with self._attest_lock:
            verdicts: dict[int, Attestation] = self.attestor.attest(attestable)
        verdicts.update({d.id: Attestation(Verdict.PENDING) for d in finals
                         if d.booking == Booking.REVIEW})
        finality = self._read(lambda uow: repo.finality_evidence(uow.conn,
                                                                 [d.id for d in finals]))
        chunk = 500
        for i in range(0, len(finals), chunk):
            keys = [d.key for d in finals[i:i + chunk]]

            def settle(uow: UnitOfWork, keys: list[repo.Key] = keys) -> dict[str, int]:
                return service.settle_final(uow, self.chain, verdicts, finality, self.accounts,
                                            keys, now=now)

            counts = run_in_transaction(self.engine, settle)
            report.credited += counts["credited"]
            report.suspense += counts["suspense"]
            report.held += counts["held"]

    def _ensure_accounts(self, needed: list[Any]) -> None:
        """Open the ledger accounts ``needed`` in a committed transaction of their own."""
        try:
            run_in_transaction(self.engine,
                               lambda uow: self.accounts.ensure(uow, self.config, needed))
        except BaseException:
            self.accounts.forget(needed)
            raise
