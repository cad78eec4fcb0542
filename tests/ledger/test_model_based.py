"""Model-based test of the ledger: random posts, batches, reversals, periods, rebuilds, checkpoints.

A hypothesis ``RuleBasedStateMachine`` drives the real ledger (real PostgreSQL, real migrations,
the application role) and a small in-memory model side by side. The model knows only the rules of
DESIGN.md section 4, written out independently here: idempotency by key, flags as limits on the
raw (debit-positive) balance, the signed 128-bit range, per-line reversal limits, closed periods.
It predicts every outcome (posted, replayed, or which refusals may apply) and every balance.

Rules: transfers of one to three legs between the wallets (``debits_must_not_exceed_credits``),
custody (``credits_must_not_exceed_debits``) and equity of two assets; replays and reused keys;
refused requests sent again; ``reverse`` in full, by legs or line by line; batches mixing all of
these with hand-built reversals (some mismatched, some exceeding) and repeated keys, judged in
order; period closes; and the integrity jobs (rebuild, checkpoint, a corrupted balance row that
``verify`` must spot and ``rebuild_balances`` must repair).

Each hypothesis example runs on its own database, cloned from the migrated template, so every
example starts from an empty ledger and ``verify`` (which looks at the whole ledger) can be
compared with the model exactly. After every step the invariants check: ``verify`` finds exactly
what the model expects (only custody-vs-liabilities gaps that the random transfers created on
purpose; never drift, a trial balance off zero or a violated flag), the stored balances and
versions equal the model's, flagged accounts stay within their limits, balances "as of" every
value date and "as known at" every period close equal the model's, and so do the users' balances.
"""

from __future__ import annotations

import itertools
import os
from collections import defaultdict
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)
from sqlalchemy.engine import Engine

from config.database import make_engine, owner_engine, with_database
from config.uow import UnitOfWork, run_in_transaction
from ledger import chart, service
from ledger.errors import (
    BalanceOutOfRange,
    EntryInvalid,
    IdempotencyConflict,
    InsufficientFunds,
    LedgerError,
    NotOutOfPeriod,
    PeriodClosed,
    PeriodCloseInvalid,
    ReversalExceedsOriginal,
    ReversalMismatch,
)
from ledger.integrity import create_checkpoint, rebuild_balances, verify
from ledger.model import Account, Entry, Line
from tests.ledger.conftest import T0, Book, transfer

# --- the model's world --------------------------------------------------------------------------

ASSETS = {"USDC": 6, "ETH": 18}
USERS = ("u1", "u2", "u3")
CUSTODY = "custody"
EQUITY = "equity"
NAMES = (*USERS, CUSTODY, EQUITY)
SPECS = {
    **{u: chart.user_wallet(u) for u in USERS},
    CUSTODY: chart.custody("eth"),
    EQUITY: chart.equity_owner(),
}
#: |balance| < LIMIT for every account (signed 128-bit, DESIGN.md section 4).
LIMIT = 2**127
SOURCE = "model-test"
REASON = "booking error"

# Value dates in the past (a period can only be closed up to now). Closes land on a value date
# (entries effective exactly at the end stay open), between two, and after all but the last.
DAY0 = (datetime.now(UTC) - timedelta(days=30)).replace(hour=12, minute=0, second=0, microsecond=0)
DATES = tuple(DAY0 + timedelta(days=i) for i in range(4))
CLOSE_ENDS = (DATES[1], DATES[1] + timedelta(hours=6), DATES[2] + timedelta(hours=1))

Acct = tuple[str, str]  # (asset code, model name)
Ref = tuple[int, int]  # (transaction id, line index) of a line being reversed
ALL_ACCTS: tuple[Acct, ...] = tuple((a, n) for a in ASSETS for n in NAMES)


def over_limit(acct: Acct, raw: int) -> bool:
    """Whether a raw (debit-positive) balance breaks the account's flag.

    Wallets may not be debited past their credits (raw <= 0); custody may not be credited past
    its debits (raw >= 0); equity has no flag.
    """
    name = acct[1]
    return (name in USERS and raw > 0) or (name == CUSTODY and raw < 0)


def normal_side(acct: Acct, raw: int) -> int:
    """The balance on the account's normal side: custody is an asset, the rest credit-normal."""
    return raw if acct[1] == CUSTODY else -raw


def sign(x: int) -> int:
    return (x > 0) - (x < 0)


@dataclass(frozen=True)
class MLine:
    """A line of a request: signed amount (debit positive), maybe reversing an earlier line."""

    account: Acct
    amount: int
    reverses: Ref | None = None


@dataclass(frozen=True)
class Req:
    """A request as the model sees it. Two requests are "the same" when all but the key agree."""

    key: str
    kind: str
    eff: datetime
    lines: tuple[MLine, ...]
    reason: str | None = None
    reverses: int | None = None
    oop: bool = False
    memo: str = ""
    # Pairs of line indices that balance each other (not part of the request).
    legs: tuple[tuple[int, int], ...] = field(default=(), compare=False)

    def body(self) -> tuple[Any, ...]:
        return (self.kind, self.eff, self.lines, self.reason, self.reverses, self.oop, self.memo)

    def well_formed(self) -> bool:
        """At least two lines, amounts non-zero and in the signed 128-bit range, balanced per
        asset."""
        totals: dict[str, int] = defaultdict(int)
        for line in self.lines:
            totals[line.account[0]] += line.amount
        return (len(self.lines) >= 2 and all(0 < abs(ln.amount) < LIMIT for ln in self.lines)
                and not any(totals.values()))


@dataclass
class MTxn:
    """A posted transaction of the model, with how much of each line has been reversed."""

    txid: int
    req: Req
    reversed: list[int]


@dataclass(frozen=True)
class Expect:
    """What the model predicts: "posted", "replayed" (of ``txid``) or refused with one of
    ``errors`` (several refusals may apply at once; the ledger reports one of them)."""

    outcome: str
    txid: int | None = None
    errors: frozenset[type[LedgerError]] = frozenset()


# --- one database per example ---------------------------------------------------------------------

_databases = itertools.count()


class Databases:
    """Clones the migrated template into a fresh database per hypothesis example.

    Cloning (and dropping) takes a good part of a second on a busy machine, so a worker thread
    clones the next database while the current example runs, and drops the finished ones.
    """

    def __init__(self, server_url: str, template_url: str) -> None:
        self.server_url = server_url
        self.template = sa.make_url(template_url).database
        self._worker = ThreadPoolExecutor(max_workers=1)
        self._next: Future[tuple[str, str]] | None = None
        self._drops: list[Future[None]] = []

    def _admin(self, statement: str) -> None:
        eng = owner_engine(self.server_url)
        try:
            with eng.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
                conn.exec_driver_sql(statement)
        finally:
            eng.dispose()

    def _clone(self) -> tuple[str, str]:
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        name = f"mb_{worker}_{os.getpid()}_{next(_databases)}"
        self._admin(f'CREATE DATABASE "{name}" TEMPLATE "{self.template}"')
        return name, with_database(self.server_url, name)

    def create(self) -> tuple[str, str]:
        """(name, URL) of a fresh database."""
        ready = self._next or self._worker.submit(self._clone)
        self._next = self._worker.submit(self._clone)
        return ready.result()

    def drop(self, name: str) -> None:
        self._drops.append(
            self._worker.submit(self._admin, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))

    def close(self) -> None:
        """Drop the database cloned ahead and wait for every drop."""
        if self._next is not None:
            self.drop(self._next.result()[0])
        self._worker.shutdown(wait=True)
        for dropped in self._drops:
            dropped.result()


# --- strategies -----------------------------------------------------------------------------------

SMALL = st.integers(1, 120)
# Two of these reach the signed 128-bit range exactly (2 * 2^126) or past it.
BIG = st.sampled_from([2**126, LIMIT - 1]) | st.integers(2**126, LIMIT - 1)
# Mostly small amounts (funds run out often); now and then one near the 128-bit range.
AMOUNTS = st.integers(0, 9).flatmap(lambda r: BIG if r >= 8 else SMALL)
OOP = st.sampled_from([False, False, False, False, True])


class LedgerMachine(RuleBasedStateMachine):
    """The ledger and its model, step by step."""

    def __init__(self, databases: Databases) -> None:
        super().__init__()
        self.databases = databases
        self.db_name, self.url = databases.create()
        self.engine: Engine = make_engine(self.url, pool_size=2)
        self.owner: Engine = owner_engine(self.url)
        self.accounts: dict[Acct, Account] = {}
        try:
            with UnitOfWork(self.engine) as uow:
                for code, scale in ASSETS.items():
                    asset = service.open_asset(uow, code, scale)
                    for name in NAMES:
                        self.accounts[(code, name)] = service.open_account(
                            uow, SPECS[name], asset)
                uow.commit()
        except BaseException:
            self.teardown()  # hypothesis only tears down machines it finished building
            raise
        self.raw: dict[Acct, int] = defaultdict(int)
        self.version: dict[Acct, int] = defaultdict(int)
        self.txns: dict[int, MTxn] = {}
        self.stored: dict[str, int] = {}  # idempotency key -> transaction id
        self.pids: dict[int, list[int]] = {}  # transaction id -> posting ids, by line
        self.refused: list[Req] = []
        self.reverse_args: dict[str, tuple[int, dict[int, int] | None, bool]] = {}
        self.closed: datetime | None = None
        self.snapshots: list[tuple[datetime, datetime, dict[Acct, tuple[int, int]]]] = []
        self.checkpoint: tuple[int, int] | None = None  # (id, transactions at the time)
        self.keys = itertools.count()

    def teardown(self) -> None:
        self.engine.dispose()
        self.owner.dispose()
        self.databases.drop(self.db_name)

    # --- the model's judgement ----------------------------------------------------------------

    def new_key(self) -> str:
        return f"k{next(self.keys)}"

    def refusals(self, req: Req) -> set[type[LedgerError]]:
        """Every rule ``req`` breaks, judged against the model's current state."""
        found: set[type[LedgerError]] = set()
        if req.oop and (self.closed is None or req.eff >= self.closed):
            found.add(NotOutOfPeriod)
        if not req.oop and self.closed is not None and req.eff < self.closed:
            found.add(PeriodClosed)
        reversing: dict[Ref, int] = defaultdict(int)  # per original line, in this request
        for line in req.lines:
            if line.reverses is None:
                continue
            txid, idx = line.reverses
            orig = self.txns[txid]
            o = orig.req.lines[idx]
            reversing[line.reverses] += abs(line.amount)
            if (txid != req.reverses or o.account != line.account
                    or sign(o.amount) == sign(line.amount)):
                found.add(ReversalMismatch)
            elif reversing[line.reverses] > abs(o.amount) - orig.reversed[idx]:
                found.add(ReversalExceedsOriginal)
        after = dict(self.raw)
        for line in req.lines:
            after[line.account] = after.get(line.account, 0) + line.amount
        touched = {line.account for line in req.lines}
        if any(abs(after[a]) >= LIMIT for a in touched):
            found.add(BalanceOutOfRange)
        if any(over_limit(a, after[a]) for a in touched):
            found.add(InsufficientFunds)
        return found

    def expect(self, req: Req) -> Expect:
        """The predicted outcome of posting ``req`` alone, now."""
        if not req.well_formed():
            return Expect("refused", errors=frozenset({EntryInvalid}))
        if req.key in self.stored:
            txid = self.stored[req.key]
            if self.txns[txid].req.body() == req.body():
                return Expect("replayed", txid)
            return Expect("refused", errors=frozenset({IdempotencyConflict}))
        found = self.refusals(req)
        return Expect("refused", errors=frozenset(found)) if found else Expect("posted")

    def apply(self, req: Req, txid: int) -> None:
        """Record a posted transaction in the model."""
        assert txid not in self.txns, f"transaction id {txid} handed out twice"
        for line in req.lines:
            self.raw[line.account] += line.amount
            if line.reverses is not None:
                orig_txid, idx = line.reverses
                self.txns[orig_txid].reversed[idx] += abs(line.amount)
        for acct in {line.account for line in req.lines}:
            self.version[acct] += 1
        self.txns[txid] = MTxn(txid, req, [0] * len(req.lines))
        self.stored[req.key] = txid
        self.check_stored_transaction(txid)

    def check_stored_transaction(self, txid: int) -> None:
        """The stored transaction is the request, line for line; remember its posting ids."""
        req = self.txns[txid].req
        with UnitOfWork(self.engine) as uow:
            record = service.get_transaction(uow, txid)
        assert record.idempotency_key == req.key
        assert record.effective_at == req.eff
        assert (record.reverses_transaction_id, record.out_of_period) == (req.reverses, req.oop)
        expected = [(self.accounts[ln.account].id, ln.amount,
                     None if ln.reverses is None else self.pids[ln.reverses[0]][ln.reverses[1]])
                    for ln in req.lines]
        actual = [(p.account_id, p.amount_minor, p.reverses_posting_id) for p in record.postings]
        assert actual == expected
        self.pids[txid] = [p.id for p in record.postings]

    def as_of(self, when: datetime) -> dict[Acct, tuple[int, int]]:
        """(raw balance, transactions) per account from the transactions effective by ``when``."""
        bal: dict[Acct, int] = defaultdict(int)
        count: dict[Acct, int] = defaultdict(int)
        for t in self.txns.values():
            if t.req.eff <= when:
                for line in t.req.lines:
                    bal[line.account] += line.amount
                for acct in {line.account for line in t.req.lines}:
                    count[acct] += 1
        return {a: (bal[a], count[a]) for a in ALL_ACCTS}

    # --- talking to the ledger ----------------------------------------------------------------

    def to_entry(self, req: Req) -> Entry:
        lines = tuple(
            Line(self.accounts[ln.account], ln.amount,
                 reverses_posting_id=None if ln.reverses is None
                 else self.pids[ln.reverses[0]][ln.reverses[1]])
            for ln in req.lines
        )
        return Entry(
            idempotency_key=req.key, kind=req.kind, effective_at=req.eff, source=SOURCE,
            lines=lines, reason=req.reason, reverses_transaction_id=req.reverses,
            out_of_period=req.oop, metadata={"memo": req.memo} if req.memo else {},
        )

    def submit(self, req: Req, call: Callable[[], service.Posted]) -> None:
        """Run ``call`` (which posts ``req``) and check it against the model's prediction."""
        exp = self.expect(req)
        try:
            posted = call()
        except LedgerError as exc:
            assert exp.outcome == "refused", f"{req.key}: expected {exp}, got {exc!r}"
            assert isinstance(exc, tuple(exp.errors)), f"{req.key}: expected {exp}, got {exc!r}"
            if IdempotencyConflict not in exp.errors and EntryInvalid not in exp.errors:
                self.refused.append(req)
            return
        assert exp.outcome != "refused", f"{req.key}: expected {exp}, got {posted}"
        if exp.outcome == "replayed":
            assert posted == service.Posted(exp.txid, True)  # type: ignore[arg-type]
        else:
            assert not posted.replayed
            self.apply(req, posted.transaction_id)

    def post(self, req: Req) -> None:
        self.submit(req, lambda: service.post_entry(self.engine, self.to_entry(req)))

    # --- building requests --------------------------------------------------------------------

    def draw_transfer(self, data: st.DataObject, key: str) -> Req:
        """One to three legs (debit one account, credit another of the same asset)."""
        lines: list[MLine] = []
        legs = []
        for _ in range(data.draw(st.sampled_from([1, 1, 2, 3]), label="legs")):
            asset = data.draw(st.sampled_from(sorted(ASSETS)), label="asset")
            if data.draw(st.integers(0, 9), label="edge?") == 9:
                debit, credit, amount = self.draw_edge_leg(data, asset)
            else:
                debit = data.draw(st.sampled_from(NAMES), label="debit")
                credit = data.draw(st.sampled_from(NAMES), label="credit")
                amount = data.draw(AMOUNTS, label="amount")
            legs.append((len(lines), len(lines) + 1))
            lines += [MLine((asset, debit), amount), MLine((asset, credit), -amount)]
        return Req(
            key=key, kind="transfer", eff=data.draw(st.sampled_from(DATES), label="eff"),
            lines=tuple(lines), oop=data.draw(OOP, label="oop"),
            memo=data.draw(st.sampled_from(["", "a", "b"]), label="memo"), legs=tuple(legs),
        )

    def draw_edge_leg(self, data: st.DataObject, asset: str) -> tuple[str, str, int]:
        """A leg the flags allow (custody or equity to a wallet or equity) whose amount takes
        one of its accounts exactly to the edge of the signed 128-bit range, or one past it
        (the one already furthest out in the direction the leg moves it)."""
        debit = data.draw(st.sampled_from([CUSTODY, EQUITY]), label="debit")
        credit = data.draw(st.sampled_from([*USERS, EQUITY]), label="credit")
        away = max(self.raw[(asset, debit)], -self.raw[(asset, credit)])
        amount = LIMIT - 1 - away + data.draw(st.integers(0, 1), label="past")
        return debit, credit, max(1, min(amount, LIMIT - 1))

    def draw_altered(self, data: st.DataObject, req: Req) -> Req:
        """A request under the same key that differs from ``req`` in one field (or is new)."""
        how = data.draw(st.sampled_from(["memo", "eff", "amount", "new"]), label="alter")
        if how == "memo":
            return replace(req, memo=req.memo + "x")
        if how == "eff":
            return replace(req, eff=req.eff + timedelta(seconds=1))
        if how == "amount":
            i, j = req.legs[0] if req.legs else (0, 1)
            lines = list(req.lines)
            lines[i] = MLine(lines[i].account, lines[i].amount + sign(lines[i].amount),
                             lines[i].reverses)
            lines[j] = MLine(lines[j].account, lines[j].amount + sign(lines[j].amount),
                             lines[j].reverses)
            return replace(req, lines=tuple(lines))
        return self.draw_transfer(data, req.key)

    def draw_leg_reversal(self, data: st.DataObject, txid: int, variant: str) -> Req:
        """A hand-built reversal of some legs of ``txid``: mirrored, same-signed (mismatch),
        claiming to reverse another transaction (mismatch), or each line reversed in two parts
        ("split"); amounts up to one past what is left."""
        orig = self.txns[txid]
        chosen = data.draw(st.lists(st.sampled_from(orig.req.legs), min_size=1, unique=True),
                           label="legs")
        lines: list[MLine] = []
        legs = []
        for i, j in chosen:
            left = min(abs(orig.req.lines[k].amount) - orig.reversed[k] for k in (i, j))
            parts = 2 if variant == "split" else 1
            for _ in range(parts):
                amount = data.draw(st.integers(1, left + 1), label="amount")
                legs.append((len(lines), len(lines) + 1))
                for k in (i, j):
                    o = orig.req.lines[k]
                    signed = amount * sign(o.amount) * (1 if variant == "same_sign" else -1)
                    lines.append(MLine(o.account, signed, (txid, k)))
        reverses = txid
        if variant == "other_txn":
            reverses = data.draw(st.sampled_from(sorted(self.txns)), label="claimed")
        return Req(key=self.new_key(), kind="reversal", eff=orig.req.eff, lines=tuple(lines),
                   reason=REASON, reverses=reverses, oop=data.draw(OOP, label="oop"),
                   legs=tuple(legs))

    def reversal_req(self, key: str, txid: int, amounts: dict[int, int] | None,
                     oop: bool) -> Req:
        """The request ``service.reverse`` makes: chosen lines mirrored, in line order."""
        orig = self.txns[txid]
        if amounts is None:
            amounts = {k: abs(ln.amount) for k, ln in enumerate(orig.req.lines)}
        order = sorted(amounts)
        lines = tuple(
            MLine(orig.req.lines[k].account,
                  -amounts[k] if orig.req.lines[k].amount > 0 else amounts[k], (txid, k))
            for k in order
        )
        legs = tuple((order.index(i), order.index(j)) for i, j in orig.req.legs
                     if i in amounts and j in amounts)
        return Req(key=key, kind="reversal", eff=orig.req.eff, lines=lines, reason=REASON,
                   reverses=txid, oop=oop, legs=legs)

    def call_reverse(self, key: str, txid: int, amounts: dict[int, int] | None,
                     oop: bool) -> service.Posted:
        by_posting = None if amounts is None else {
            self.pids[txid][k]: a for k, a in amounts.items()}
        return run_in_transaction(self.engine, lambda uow: service.reverse(
            uow, txid, idempotency_key=key, reason=REASON, source=SOURCE,
            amounts=by_posting, out_of_period=oop))

    # --- rules: single posts ------------------------------------------------------------------

    @rule(data=st.data())
    def post_transfer(self, data: st.DataObject) -> None:
        """A fresh transfer of one to three legs between random accounts of either asset."""
        self.post(self.draw_transfer(data, self.new_key()))

    @precondition(lambda self: self.stored)
    @rule(data=st.data())
    def replay(self, data: st.DataObject) -> None:
        """The same key with the same request: the first transaction, nothing moves."""
        key = data.draw(st.sampled_from(sorted(self.stored)), label="key")
        req = self.txns[self.stored[key]].req
        if key in self.reverse_args and data.draw(st.booleans(), label="via reverse"):
            txid, amounts, oop = self.reverse_args[key]
            self.submit(req, lambda: self.call_reverse(key, txid, amounts, oop))
        else:
            self.post(req)

    @precondition(lambda self: self.stored)
    @rule(data=st.data())
    def reuse_key(self, data: st.DataObject) -> None:
        """The same key with a different request: IdempotencyConflict, nothing moves."""
        key = data.draw(st.sampled_from(sorted(self.stored)), label="key")
        self.post(self.draw_altered(data, self.txns[self.stored[key]].req))

    @precondition(lambda self: self.refused)
    @rule(data=st.data())
    def resubmit_refused(self, data: st.DataObject) -> None:
        """A refused request left its key unused: sent again, it is judged afresh."""
        self.post(data.draw(st.sampled_from(self.refused), label="refused"))

    # --- rules: reversals ---------------------------------------------------------------------

    @precondition(lambda self: self.txns)
    @rule(data=st.data())
    def reverse(self, data: st.DataObject) -> None:
        """``service.reverse``: full, by whole legs, or line by line (which may not balance)."""
        txid = data.draw(st.sampled_from(sorted(self.txns)), label="txid")
        orig = self.txns[txid]
        modes = ["full", "legs", "lines"] if orig.req.legs else ["full", "lines"]
        mode = data.draw(st.sampled_from(modes), label="mode")
        amounts: dict[int, int] | None = None
        if mode == "legs":
            amounts = {}
            for i, j in data.draw(st.lists(st.sampled_from(orig.req.legs), min_size=1,
                                           unique=True), label="legs"):
                left = min(abs(orig.req.lines[k].amount) - orig.reversed[k] for k in (i, j))
                amount = data.draw(st.integers(1, left + 1), label="amount")
                amounts[i] = amounts[j] = amount
        elif mode == "lines":
            indices = data.draw(st.lists(st.integers(0, len(orig.req.lines) - 1), min_size=1,
                                         unique=True), label="lines")
            amounts = {k: data.draw(st.integers(0, 3), label="amount") for k in indices}
        oop = data.draw(OOP, label="oop")
        key = self.new_key()
        req = self.reversal_req(key, txid, amounts, oop)
        self.reverse_args[key] = (txid, amounts, oop)
        self.submit(req, lambda: self.call_reverse(key, txid, amounts, oop))

    # --- rules: batches -----------------------------------------------------------------------

    @rule(data=st.data())
    def post_batch(self, data: st.DataObject) -> None:
        """Several entries in one call, judged in order: an earlier item can fund a later one;
        each item keeps its own verdict."""
        reqs: list[Req] = []
        for _ in range(data.draw(st.integers(2, 6), label="items")):
            reqs.append(self.draw_batch_item(data, reqs))
        if not all(r.well_formed() for r in reqs):
            # Malformed entries are refused before anything is sent: nothing moves.
            with pytest.raises(EntryInvalid):
                run_in_transaction(self.engine, lambda uow: service.post_batch(
                    uow, [self.to_entry(r) for r in reqs]))
            return
        outcomes = run_in_transaction(
            self.engine, lambda uow: service.post_batch(uow, [self.to_entry(r) for r in reqs]))
        assert len(outcomes) == len(reqs)
        # Items are judged in order against the model, which applies each posted one: a key
        # repeated in the batch is then a replay or a conflict of the posted item, and a repeat
        # of a refused item is judged afresh (a refused request does not use its key).
        for req, outcome in zip(reqs, outcomes, strict=True):
            self.check_batch_item(req, outcome)

    def draw_batch_item(self, data: st.DataObject, earlier: list[Req]) -> Req:
        kinds = ["fresh", "fresh"]
        if self.stored:
            kinds += ["replay", "conflict"]
        with_legs = sorted(t for t, txn in self.txns.items() if txn.req.legs)
        if with_legs:
            kinds += ["reversal", "reversal"]
        # Reversing again what an earlier item of this batch reverses: together they may
        # exceed the original although each alone does not.
        again = sorted({ln.reverses[0] for r in earlier for ln in r.lines if ln.reverses}
                       & set(with_legs))
        if again:
            kinds += ["reversal again", "reversal again"]
        if earlier:
            kinds += ["duplicate", "duplicate"]
        kind = data.draw(st.sampled_from(kinds), label="item")
        if kind == "fresh":
            return self.draw_transfer(data, self.new_key())
        if kind.startswith("reversal"):
            txid = data.draw(st.sampled_from(again if kind == "reversal again" else with_legs),
                             label="txid")
            variants = ["mirror", "mirror", "mirror", "same_sign", "other_txn", "split"]
            variant = data.draw(st.sampled_from(variants), label="variant")
            return self.draw_leg_reversal(data, txid, variant)
        if kind == "duplicate":
            req = data.draw(st.sampled_from(earlier), label="duplicate of")
            if data.draw(st.booleans(), label="altered"):
                req = self.draw_altered(data, req)
        else:
            key = data.draw(st.sampled_from(sorted(self.stored)), label="key")
            req = self.txns[self.stored[key]].req
            if kind == "conflict":
                req = self.draw_altered(data, req)
        return req

    def check_batch_item(self, req: Req, outcome: service.BatchOutcome) -> None:
        """One item's verdict against the model (which has applied the earlier items)."""
        exp = self.expect(req)
        if exp.outcome == "refused":
            assert isinstance(outcome.error, tuple(exp.errors)), (req.key, exp, outcome)
            if IdempotencyConflict not in exp.errors:
                self.refused.append(req)
        elif exp.outcome == "replayed":
            assert (outcome.status, outcome.transaction_id) == ("replayed", exp.txid), (
                req.key, outcome)
        else:
            assert outcome.status == "posted" and outcome.transaction_id is not None, (
                req.key, exp, outcome)
            self.apply(req, outcome.transaction_id)

    # --- rules: periods, rebuilds, checkpoints --------------------------------------------------

    @precondition(lambda self: len(self.txns) >= 3
                  and (self.closed is None or self.closed < CLOSE_ENDS[-1]))
    @rule(ends=st.sampled_from(CLOSE_ENDS))
    def close_period(self, ends: datetime) -> None:
        """Close the books through ``ends`` (only forward); remember the figures as known now."""
        def close(uow: UnitOfWork) -> Any:
            return service.close_period(uow, ends, closed_by=SOURCE, reason="month end")

        if self.closed is not None and ends <= self.closed:
            with pytest.raises(PeriodCloseInvalid):
                run_in_transaction(self.engine, close)
            return
        record = run_in_transaction(self.engine, close)
        assert record.ends_at == ends
        self.closed = ends
        self.snapshots.append((ends, record.closed_at, self.as_of(ends)))

    @rule(data=st.data())
    def maintenance(self, data: st.DataObject) -> None:
        """One of the integrity jobs (one rule, so that they do not crowd out the postings)."""
        job = data.draw(st.sampled_from(["rebuild", "checkpoint", "checkpoint", "corrupt"]),
                        label="job")
        if job == "rebuild":
            self.rebuild()
        elif job == "checkpoint":
            self.take_checkpoint()
        else:
            self.corrupt_then_rebuild(data)
        self.check_verify(full=True)

    def rebuild(self) -> None:
        """Rebuilding the projection of a correct ledger changes nothing."""
        report = rebuild_balances(self.engine, batch_size=3)  # several batches of accounts
        assert (report.accounts, report.corrected) == (len(ALL_ACCTS), 0)

    def corrupt_then_rebuild(self, data: st.DataObject) -> None:
        """Break one stored balance behind the ledger's back (as the owner): ``verify`` reports
        exactly that drift, and ``rebuild_balances`` repairs exactly that row."""
        acct = data.draw(st.sampled_from(ALL_ACCTS), label="account")
        delta = data.draw(st.integers(0, 3), label="delta")
        # Stay within the flags and the range (the table's CHECKs would refuse otherwise).
        delta = -delta if acct[1] in USERS or (acct[1] == EQUITY and self.raw[acct] > 0) else delta
        if abs(self.raw[acct] + delta) >= LIMIT:
            delta = 0
        bump = data.draw(st.integers(0 if delta else 1, 2), label="version bump")
        with self.owner.begin() as conn:
            conn.execute(sa.text("UPDATE account_balances SET balance = balance + :d,"
                                 " version = version + :v WHERE account_id = :id"),
                         {"d": delta, "v": bump, "id": self.accounts[acct].id})
        code = self.accounts[acct].code
        expected = {(kind, subject) for kind, subject, _, _ in self.expected_findings()}
        expected.add(("balance_drift", code))
        if delta:
            expected.add(("trial_balance", acct[0]))
        found = {(d.kind, d.subject.split()[0]) for d in verify(self.engine).discrepancies}
        assert found == expected
        report = rebuild_balances(self.engine)
        assert report.corrected == 1

    def take_checkpoint(self) -> None:
        """A checkpoint of a correct ledger is verified; with nothing new, the last one returns."""
        record = create_checkpoint(self.engine)
        if self.checkpoint is not None and self.checkpoint[1] == len(self.txns):
            assert record.id == self.checkpoint[0]
        else:
            assert self.checkpoint is None or record.id > self.checkpoint[0]
        assert record.verified
        nonzero = [a for a in ALL_ACCTS if self.raw[a] or self.version[a]]
        assert record.accounts_count == len(nonzero)
        self.checkpoint = (record.id, len(self.txns))

    # --- invariants -----------------------------------------------------------------------------

    def expected_findings(self) -> set[tuple[str, str, str, str]]:
        """What ``verify`` must report: only custody gaps made on purpose by the transfers
        (custody must equal what is owed to the users, per asset)."""
        found = set()
        for asset in ASSETS:
            custody = self.raw[(asset, CUSTODY)]
            owed = -sum(self.raw[(asset, u)] for u in USERS)
            if custody != owed:
                found.add(("custody_mismatch", asset, str(owed), str(custody)))
        return found

    def check_verify(self, *, full: bool = False) -> None:
        report = verify(self.engine, full=full)
        found = {(d.kind, d.subject.split()[0], d.expected, d.observed)
                 for d in report.discrepancies}
        assert found == self.expected_findings(), report.discrepancies
        assert report.accounts == len(ALL_ACCTS)
        expected_base = None if full or self.checkpoint is None else self.checkpoint[0]
        assert report.checkpoint_id == expected_base

    @invariant()
    def verify_agrees_with_model(self) -> None:
        """Trial balance zero, stored = replayed (balance and version), flags respected, every
        transaction balanced, reversals within their originals: only the expected findings.
        (Replayed from the newest checkpoint; the maintenance steps also replay from zero.)"""
        self.check_verify()

    @invariant()
    def stored_balances_equal_model(self) -> None:
        """Every stored balance and version is the model's; flags hold; trial balance is zero."""
        accts = list(ALL_ACCTS)
        with UnitOfWork(self.engine) as uow:
            balances = service.account_balances(uow, [self.accounts[a] for a in accts])
        trial: dict[str, int] = defaultdict(int)
        for acct, b in zip(accts, balances, strict=True):
            assert (b.raw_minor, b.version) == (self.raw[acct], self.version[acct]), acct
            assert b.balance_minor == normal_side(acct, self.raw[acct]), acct
            assert not over_limit(acct, b.raw_minor), acct
            assert abs(b.raw_minor) < LIMIT, acct
            trial[acct[0]] += b.raw_minor
        assert all(total == 0 for total in trial.values()), trial

    @invariant()
    def balances_in_time_equal_model(self) -> None:
        """As of every value date (rebuilt today), and as of each close as known at the close
        (those figures never change afterwards)."""
        accounts = [self.accounts[a] for a in ALL_ACCTS]
        with UnitOfWork(self.engine) as uow:
            for when in DATES:
                got = service.account_balances(uow, accounts, as_of=when)
                assert _figures(got) == self.as_of(when), when
            for ends, closed_at, figures in self.snapshots:
                got = service.account_balances(uow, accounts, as_of=ends, known_at=closed_at)
                assert _figures(got) == figures, ends

    @invariant()
    def user_balances_equal_model(self) -> None:
        """available = the wallet; nothing in flight, so posted = available."""
        with UnitOfWork(self.engine) as uow:
            for user in USERS:
                got = {b.asset.code: (b.available_minor, b.posted_minor, b.pending_outgoing_minor)
                       for b in service.user_balances(uow, user)}
                want = {a: (-self.raw[(a, user)], -self.raw[(a, user)], 0) for a in ASSETS}
                assert got == want, user


_NAME_BY_CODE = {spec.code: name for name, spec in SPECS.items()}


def _figures(balances: Iterable[service.AccountBalance]) -> dict[Acct, tuple[int, int]]:
    """(raw balance, version or transactions counted) per model account."""
    return {(b.account.asset.code, _NAME_BY_CODE[b.account.code]): (b.raw_minor, b.version)
            for b in balances}


@pytest.mark.slow
def test_ledger_matches_model(server_url: str, template_url: str) -> None:
    """Random posts, batches, reversals, period closes, rebuilds and checkpoints agree with the
    model after every step.

    Takes the server and the template rather than ``engine``: every example needs a database of
    its own, and the ``engine`` fixture gives one per test."""
    databases = Databases(server_url, template_url)

    class Machine(LedgerMachine):
        def __init__(self) -> None:
            super().__init__(databases)

    try:
        run_state_machine_as_test(
            Machine,
            settings=settings(
                max_examples=15,
                stateful_step_count=30,
                deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.filter_too_much],
            ),
        )
    finally:
        databases.close()


class TestFoundByTheModel:
    """Minimal reproductions of two bugs the machine found (both fixed in ledger_post_batch:
    reversal lines of one item are judged together; repeated keys in a batch are judged
    against the stored transaction)."""

    def test_batch_item_reversing_one_posting_twice_is_refused_alone(self, book: Book) -> None:
        wallet = book.wallet("u1")
        deposit = service.post_entry(book.engine, transfer("d1", book.custody, wallet, 100))
        service.post_entry(book.engine, transfer("d2", book.custody, wallet, 1000))
        with UnitOfWork(book.engine) as uow:
            record = service.get_transaction(uow, deposit.transaction_id)
        custody_line, wallet_line = record.postings
        # 60 + 60 reverses 120 of a 100 line; each line alone is within the original.
        twice = Entry(
            idempotency_key="r1", kind="reversal", effective_at=T0, source=SOURCE, reason=REASON,
            reverses_transaction_id=deposit.transaction_id,
            lines=(Line(book.custody, -60, reverses_posting_id=custody_line.id),
                   Line(book.custody, -60, reverses_posting_id=custody_line.id),
                   Line(wallet, 60, reverses_posting_id=wallet_line.id),
                   Line(wallet, 60, reverses_posting_id=wallet_line.id)),
        )
        other = transfer("d3", book.custody, wallet, 5)
        outcomes = run_in_transaction(
            book.engine, lambda uow: service.post_batch(uow, [twice, other]))
        assert isinstance(outcomes[0].error, ReversalExceedsOriginal)
        assert outcomes[1].status == "posted"

    def test_batch_duplicate_matching_the_stored_request_is_replayed(self, book: Book) -> None:
        wallet = book.wallet("u1")
        first = service.post_entry(book.engine, transfer("k1", book.custody, wallet, 100))
        different = transfer("k1", book.custody, wallet, 50)
        same = transfer("k1", book.custody, wallet, 100)
        outcomes = run_in_transaction(
            book.engine, lambda uow: service.post_batch(uow, [different, same]))
        assert isinstance(outcomes[0].error, IdempotencyConflict)
        assert (outcomes[1].status, outcomes[1].transaction_id) == (
            "replayed", first.transaction_id)
