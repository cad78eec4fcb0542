"""Recording a scan: what it writes for its new deposits, planned from plain values, and the one
transaction that writes it.

A scan (``deposits.scanner``) returns the accepted headers and the transfers to our addresses.
Recording it is one database transaction (:func:`record_scan_final`): the new deposits with
their history, the deposits seen again after a reorg, the credits of deposits already final,
and the cursor advanced over the headers. After a crash either all of it is there or none, and
the next step scans the same blocks again.

Most of that work is deciding what to write for the new deposits: their rows (``new_rows``),
their history (included or ignored, final, credited or suspense) and the ledger entries of
their credits. It needs no database, only the scan, the finality heads read before it, the
custody record's verdicts, the internal transfers among them, their ledger accounts and ids
reserved from the sequences: :func:`plan_new_deposits` decides it from those and returns a
:class:`NewDeposits`, the statements' arguments ready but for the time of the step (``now``:
the history's ``observed_at`` and the credits' effective time), which the transaction fills
in. The watcher plans outside the transaction; catching up, on its planner thread
(``deposits.readahead``) while the ranges below are written. :func:`record_planned` writes
plans as they are, in one pipeline with the cursor's compare-and-set and the COMMIT, and the
database refuses what a plan assumed wrongly (a deposit that exists, a credit another step
wrote, a cursor that moved): :class:`PlanStale`, and :func:`record_scan_final` records the
scan instead, re-reading under lock what the plan assumed (that none of its deposits exists,
and which of them are internal transfers) and planning again when that changed. A plan with
a transfer sent from one of our own addresses always takes that way. A plan whose ids are
never written leaves gaps in the sequences, nothing else. Every state change still goes
through ``model.transition``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import exc as sa_exc

from chains.model import (
    FinalityPolicy,
    FinalityRule,
    advance_cursor_over,
    evaluate_deposit_finality,
)
from config.chains import ChainConfig, ChainsConfig
from config.database import driver_pipeline, driver_send
from config.errors import CommitInDoubt
from config.uow import UnitOfWork, is_connection_lost, sqlstate
from deposits import model
from deposits import repository as repo
from deposits.attestors import Attestation, Verdict
from deposits.errors import CursorMoved
from deposits.model import Booking, DepositEvent, DepositState
from deposits.repository import DepositRecord, Key
from deposits.scanner import Observation
from deposits.service import AccountCache, HistoryBatch, credit_entry, listing, policy_of
from ledger import service as ledger
from ledger.model import Entry

E, S = DepositEvent, DepositState

#: History rows a new deposit can get in the scan that finds it: seen (or ignored), final,
#: credited. Ids are reserved for that many (``repo.reserve_ids``).
EVENTS_PER_NEW_DEPOSIT = 3


@dataclass(frozen=True)
class ScanFinality:
    """What the node said while the scan read its blocks, to judge finality at once.

    ``head_block`` and ``finalized_block`` were read before the scan's batch; the scan's own
    headers (linked by parent hash from the cursor) give the hash the node reports at each
    height. A catch-up finds most deposits already final: recording ``finality_reached``
    right after ``transfer_included`` spares a second read of the same rows and blocks.
    ``rule`` is the chain's rule or its policy with amount thresholds
    (``service.finality_policy``).
    """

    rule: FinalityRule | FinalityPolicy
    head_block: int
    finalized_block: int | None


@dataclass(frozen=True)
class ScanCredits:
    """Deposits a catch-up credits in the scan's own transaction, with their attestations.

    ``attested``: the custody record's verdict per deposit key, read outside any transaction
    for the deposits :func:`credit_candidates` named; ``accounts`` holds their ledger accounts,
    opened beforehand (``AccountCache.ensure``). A new deposit that is final at first sight and
    whose record AGREED is credited with its ``finality_reached`` row, exactly as
    ``service.settle_final`` would credit it a step later; every other deposit is left to the
    settle phase.
    """

    attested: Mapping[Key, Attestation]
    accounts: AccountCache


# --------------------------------------------------------------------------- new rows


def key_of(chain: ChainConfig, o: Observation) -> Key:
    """The deposit key of an observation."""
    return (chain.name, o.transfer.tx_hash, o.transfer.position)


def new_rows(config: ChainsConfig, chain: ChainConfig, observations: Sequence[Observation],
             users: Mapping[str, str], *, head_block: int,
             internal: frozenset[Key] = frozenset()) -> list[dict[str, Any]]:
    """A new deposit row per observation (ids not set). ``internal``: the keys of movements we
    made to deposit addresses (gas top-ups): booked ``own`` with no user, settled as internal
    at finality like one to a hot address."""
    return [_new_row(config, chain, o, users.get(o.transfer.to_address), head_block,
                     internal=key_of(chain, o) in internal) for o in observations]


def _new_row(config: ChainsConfig, chain: ChainConfig, o: Observation, user_id: str | None,
             head_block: int, *, internal: bool) -> dict[str, Any]:
    t = o.transfer
    kind = chain.address_kind(t.to_address)
    if kind is not None or internal:
        user_id = None
    decision = model.decide_booking(t.value, listing(config, chain, t.token), user_id=user_id,
                                    token_symbol=o.token_symbol,
                                    own=kind is not None or internal)
    ignored = decision.booking is Booking.IGNORE
    return {
        "chain": chain.name, "tx_hash": t.tx_hash, "position": t.position, "token": t.token,
        "from_address": t.from_address, "to_address": t.to_address, "value": str(t.value),
        "tx_from": o.tx_from, "tx_nonce": o.tx_nonce, "user_id": user_id,
        "asset_code": decision.asset_code,
        "amount_minor": None if decision.amount_minor is None else str(decision.amount_minor),
        "booking": decision.booking.value,
        "booking_reason": decision.reason.value if decision.reason else None,
        "state": (S.IGNORED if ignored else S.INCLUDED).value, "log_index": t.log_index,
        "address_kind": kind or "deposit", "block_number": t.block_number,
        "block_hash": t.block_hash, "confirmations": max(0, head_block - t.block_number + 1),
    }


def creditable_at_scan(chain: ChainConfig, row: Mapping[str, Any]) -> bool:
    """Whether a new deposit row may be credited by the scan that finds it (once final and
    attested): to a user's deposit address, not from one of our own addresses (a gas top-up
    is settled as internal), booked to the user or to suspense with a ledger amount. Anything
    else (ours, held for review, ignored) is left to the settle phase."""
    return (row["address_kind"] == "deposit" and row["from_address"] not in chain.own_addresses
            and row["amount_minor"] is not None
            and row["booking"] in (Booking.USER.value, Booking.SUSPENSE.value))


def credit_candidates(chain: ChainConfig, rows: Sequence[Mapping[str, Any]], *,
                      final_height: int | None) -> list[DepositRecord]:
    """The new deposits (``new_rows``) that the scan's own transaction may credit: in a block
    at or below ``final_height`` (final under the chain's strictest rule) and
    :func:`creditable_at_scan`. As the records ``Attestor.attest`` reads, with ids -1, -2, ...
    (they are not written yet): ``ScanCredits`` keys the verdicts by deposit key."""
    if final_height is None:
        return []
    found: list[DepositRecord] = []
    for row in rows:
        if row["block_number"] <= final_height and creditable_at_scan(chain, row):
            found.append(_record(row, -1 - len(found)))
    return found


def _record(row: Mapping[str, Any], deposit_id: int) -> DepositRecord:
    """A deposit row not written yet as the record attestors read."""
    return DepositRecord(
        id=deposit_id, chain=row["chain"], tx_hash=row["tx_hash"], position=row["position"],
        token=row["token"], from_address=row["from_address"], to_address=row["to_address"],
        value=int(row["value"]), tx_from=row["tx_from"], tx_nonce=row["tx_nonce"],
        user_id=row["user_id"], asset_code=row["asset_code"],
        amount_minor=None if row["amount_minor"] is None else int(row["amount_minor"]),
        booking=row["booking"], booking_reason=row["booking_reason"], state=row["state"],
        block_number=row["block_number"], block_hash=row["block_hash"],
        confirmations=row["confirmations"], last_event_id=0, ledger_transaction_id=None,
        first_seen_at=_NOT_WRITTEN, updated_at=_NOT_WRITTEN, address_kind=row["address_kind"])


_NOT_WRITTEN = datetime.min.replace(tzinfo=UTC)


def internal_keys(uow: UnitOfWork, chain: ChainConfig,
                  observations: Sequence[Observation]) -> frozenset[Key]:
    """The keys of transfers from our own addresses to deposit addresses that we made (a gas
    top-up, recorded in ``internal_transfers`` before it was sent): they are not the user's
    deposit. Only transfers sent from one of our own addresses are looked up."""
    own = chain.own_addresses
    keys = [key_of(chain, o) for o in observations
            if o.transfer.from_address in own and chain.address_kind(o.transfer.to_address)
            is None]
    return frozenset(repo.internal_transfer_keys(uow.conn, keys)) if keys else frozenset()


# --------------------------------------------------------------------------- the plan


@dataclass(frozen=True)
class NewDeposits:
    """What recording a scan writes for its new deposits (:func:`plan_new_deposits`).

    ``rows`` and ``events`` are the JSON documents of ``repo.insert_with_history``: the rows
    in the state their history leaves them in, the history rows under reserved ids, without
    the step's time; a credited deposit's row and its settling history row name their
    ledger transaction by its place among the credits (``credit``, from 1). ``post`` holds the
    credits' ledger entries (``ledger.service.prepare_batch``; None: no credit).
    """

    #: Every deposit key planned for, in the scan's order, and the internal transfers among
    #: them that the plan assumed: what the transaction checks under lock.
    keys: tuple[Key, ...]
    internal: frozenset[Key]
    rows: str
    events: str
    post: ledger.PreparedBatch | None
    finals: int
    credited: int
    #: Whether a deposit was sent from one of our own addresses to a deposit address (the
    #: internal transfers among them are then read again in the transaction).
    own_senders: bool = False

    @property
    def count(self) -> int:
        """How many new deposits."""
        return len(self.keys)

    @property
    def credit_keys(self) -> list[str]:
        """The idempotency keys of the credits, in the order the rows name them (``credit``)."""
        return [] if self.post is None else [e.idempotency_key for e in self.post.entries]


def plan_new_deposits(chain: ChainConfig, rows: Sequence[Mapping[str, Any]],
                      ids: Sequence[int], event_ids: Sequence[int], *,
                      headers: Sequence[Any], finality: ScanFinality | None,
                      credits: ScanCredits | None, internal: frozenset[Key]) -> NewDeposits:
    """Plan the writes of new deposits (``new_rows``, one id each from ``ids`` and at most
    ``EVENTS_PER_NEW_DEPOSIT`` history ids each from ``event_ids``, ascending). A deposit is
    seen (or ignored); if its block is final under ``finality`` (judged on the scan's own
    ``headers``), it is final at once, and if ``credits`` holds an agreeing record for it and
    it may be credited at scan (:func:`creditable_at_scan`, not an internal transfer), it is
    credited or booked to suspense. The history rows of the credits come after every other
    row of the scan, as they always were written. Pure: no database, no clock."""
    assert len(ids) >= len(rows), "too few deposit ids reserved"
    canonical = {h.number: h.hash for h in headers}
    policy = policy_of(finality.rule) if finality is not None else None
    move = _Moves()
    planned: list[dict[str, Any]] = []
    events: list[dict[str, Any]] = []
    to_credit: list[tuple[dict[str, Any], DepositEvent, str, dict[str, Any]]] = []
    finals = 0
    for source, deposit_id in zip(rows, ids, strict=False):
        row = {**source, "id": deposit_id}
        planned.append(row)
        first = E.TRANSFER_IGNORED if row["state"] == S.IGNORED else E.TRANSFER_INCLUDED
        row["state"] = move(None, first)
        events.append(_event(row, first, reason=row["booking_reason"],
                             evidence={"log_index": row.pop("log_index")}))
        if first is E.TRANSFER_IGNORED or finality is None or policy is None:
            continue
        amount = row["amount_minor"]
        final, evidence = evaluate_deposit_finality(
            policy, asset=row["asset_code"], amount_minor=None if amount is None else int(amount),
            tx_block=row["block_number"], tx_block_hash=row["block_hash"],
            head_block=finality.head_block, finalized_block=finality.finalized_block,
            canonical_hash=canonical.get(row["block_number"]))
        if not final:
            continue
        row["state"] = move(row["state"], E.FINALITY_REACHED)
        row["confirmations"] = evidence.confirmations
        proof = evidence.to_json()
        events.append(_event(row, E.FINALITY_REACHED, rule=evidence.rule, evidence=proof))
        finals += 1
        settling = _settling(chain, credits, row, internal)
        if settling is not None:
            assert credits is not None
            rest = dict(proof)
            rule = str(rest.pop("rule", ""))
            attestation = credits.attested[_key(row)].evidence
            to_credit.append((row, settling, rule, {**rest, "attestation": attestation}))
    entries: list[Entry] = []
    for row, event, rule, settled in to_credit:
        assert credits is not None
        row["state"] = move(row["state"], event)
        row["credit"] = len(entries) + 1
        events.append(_event(row, event, rule=rule, evidence=settled,
                             reason=row["booking_reason"], credit=row["credit"]))
        entries.append(credit_entry(
            chain, credits.accounts, deposit_id=row["id"], tx_hash=row["tx_hash"],
            position=row["position"], booking=row["booking"], user_id=row["user_id"],
            asset_code=row["asset_code"], amount_minor=int(row["amount_minor"]),
            booking_reason=row["booking_reason"], rule=rule, evidence=settled,
            effective_at=_NOT_WRITTEN))
    assert len(event_ids) >= len(events), "too few history ids reserved"
    last: dict[int, int] = {}
    for event_row, event_id in zip(events, event_ids, strict=False):
        event_row["id"] = last[event_row["deposit_id"]] = event_id
    for row in planned:
        row["last_event_id"] = last[row["id"]]
    own = chain.own_addresses
    return NewDeposits(
        keys=tuple(_key(r) for r in rows), internal=internal, rows=_json(planned),
        events=_json(events), post=ledger.prepare_batch(entries) if entries else None,
        finals=finals, credited=len(entries), own_senders=any(
            r["from_address"] in own and r["address_kind"] == "deposit" for r in rows))


class _Moves:
    """``model.transition`` for each (state, event) pair of a plan, asked once per pair (its
    verdict depends on nothing else): every step of a new deposit goes through it. States are
    their text, as rows hold them."""

    def __init__(self) -> None:
        self._seen: dict[tuple[str | None, DepositEvent], str] = {}

    def __call__(self, state: str | None, event: DepositEvent) -> str:
        found = self._seen.get((state, event))
        if found is None:
            found = self._seen[(state, event)] = model.transition(
                None if state is None else DepositState(state), event,
                now=_NOT_WRITTEN).state.value
        return found


def _key(row: Mapping[str, Any]) -> Key:
    return (row["chain"], row["tx_hash"], row["position"])


def _settling(chain: ChainConfig, credits: ScanCredits | None, row: Mapping[str, Any],
              internal: frozenset[Key]) -> DepositEvent | None:
    """The event that settles ``row`` (new, final at first sight) in the scan's transaction:
    its record agreed and it is a user's or a suspense deposit, the same decision
    ``service.settle_final`` makes; None: left to the settle phase."""
    if credits is None:
        return None
    key = _key(row)
    verdict = credits.attested.get(key)
    if (verdict is None or verdict.verdict is not Verdict.AGREED or key in internal
            or not creditable_at_scan(chain, row)):
        return None
    return _SETTLING_AT_SCAN[row["booking"]]


#: Each event's text (an enum member's ``value`` is a property: slow, per history row).
_EVENT_TEXT = {e: e.value for e in DepositEvent}


#: The event that settles an agreed deposit at scan, by its booking's text (only user and
#: suspense bookings are settled at scan: ``creditable_at_scan``).
_SETTLING_AT_SCAN = {b.value: model.event_at_finality(b, True)
                     for b in (Booking.USER, Booking.SUSPENSE)}


def _event(row: Mapping[str, Any], event: DepositEvent, **fields: Any) -> dict[str, Any]:
    """A history row of ``row`` after ``event`` (``row`` holds the state it leaves)."""
    return {"deposit_id": row["id"], "chain": row["chain"], "tx_hash": row["tx_hash"],
            "position": row["position"], "event": _EVENT_TEXT[event], "state": row["state"],
            "block_number": row["block_number"], "block_hash": row["block_hash"],
            "confirmations": row["confirmations"], "ledger_transaction_id": None, **fields}


def _json(rows: Any) -> str:
    return json.dumps(rows, separators=(",", ":"), default=str)


# --------------------------------------------------------------------------- the transaction


def plan_scan(uow: UnitOfWork, config: ChainsConfig, chain: ChainConfig,
              headers: Sequence[Any], observations: Sequence[Observation],
              users: Mapping[str, str], *, head_block: int, finality: ScanFinality | None,
              credits: ScanCredits | None = None,
              internal: frozenset[Key] | None = None) -> NewDeposits:
    """Plan the scan's deposits as new ones: rows, ids (reserved on ``uow``'s connection,
    which needs no transaction of its own: a sequence never rolls back) and
    :func:`plan_new_deposits`. ``internal`` (read with :func:`internal_keys` when None)."""
    if internal is None:
        internal = internal_keys(uow, chain, observations)
    rows = new_rows(config, chain, observations, users, head_block=head_block,
                    internal=internal)
    ids, event_ids = repo.reserve_ids(uow.conn, len(rows), EVENTS_PER_NEW_DEPOSIT * len(rows)) \
        if rows else ([], [])
    return plan_new_deposits(chain, rows, ids, event_ids, headers=headers, finality=finality,
                             credits=credits, internal=internal)


def record_scan(uow: UnitOfWork, config: ChainsConfig, chain: ChainConfig,
                headers: Sequence[Any], observations: Sequence[Observation],
                users: Mapping[str, str], *, head_block: int, now: datetime) -> int:
    """Record a scan: new deposits, re-inclusions, and the cursor advanced over ``headers``.

    One transaction: after a crash either all of it is there or none, and the next step scans
    the same blocks again. Returns the number of new deposits.
    """
    return record_scan_final(uow, config, chain, headers, observations, users,
                             head_block=head_block, finality=None, now=now)[0]


def record_scan_final(uow: UnitOfWork, config: ChainsConfig, chain: ChainConfig,
                      headers: Sequence[Any], observations: Sequence[Observation],
                      users: Mapping[str, str], *, head_block: int,
                      finality: ScanFinality | None, now: datetime,
                      credits: ScanCredits | None = None,
                      planned: NewDeposits | None = None) -> tuple[int, int, int]:
    """``record_scan``, and new deposits already final under ``finality`` are moved to final
    in the same transaction; those of them in ``credits`` whose record agreed are credited
    there too. ``planned``: the plan of these observations made outside the transaction
    (:func:`plan_scan` with the same arguments); used if what it assumed still holds under
    the locks, else the deposits are planned again here. Returns (new deposits, deposits that
    reached finality, deposits credited or booked to suspense)."""
    cursor = repo.get_cursor(uow.conn, chain.name, for_update=True)
    if cursor and headers and headers[0].parent_hash != cursor[-1][1]:
        # The scan read on from another tip (one the watcher remembered): write nothing.
        raise CursorMoved(f"{chain.name}: the cursor's tip is {cursor[-1]}, the scan started "
                          f"on {headers[0].parent_hash} below block {headers[0].number}")
    keys = [key_of(chain, o) for o in observations]
    existing = repo.lock_deposits(uow.conn, keys)
    internal = internal_keys(uow, chain, observations)
    batch = HistoryBatch(now)
    for o, key in zip(observations, keys, strict=True):
        seen = existing.get(key)
        if seen is None:
            continue
        t = o.transfer
        where = {"block_number": t.block_number, "block_hash": t.block_hash,
                 "confirmations": max(0, head_block - t.block_number + 1)}
        if seen.state == S.UNCONFIRMED:
            batch.add(seen, S.UNCONFIRMED, E.TRANSFER_REINCLUDED, **where,
                      evidence={"log_index": t.log_index})
        elif seen.state in (S.INCLUDED, S.FINAL) and seen.block_hash != t.block_hash:
            # Seen in another block without a rewind in between (the cursor was rebuilt).
            batch.add(seen, DepositState(seen.state), E.BLOCK_REORGED_OUT)
            batch.add(seen, S.UNCONFIRMED, E.TRANSFER_REINCLUDED, **where,
                      evidence={"log_index": t.log_index})
    if (planned is None or existing or planned.internal != internal
            or planned.keys != tuple(keys)):
        fresh = [o for o, key in zip(observations, keys, strict=True) if key not in existing]
        planned = plan_scan(uow, config, chain, headers, fresh, users, head_block=head_block,
                            finality=finality, credits=credits, internal=internal)
    _write_new(uow, planned, now)
    batch.write(uow)
    if headers:
        repo.save_cursor(uow.conn, chain.name, cursor_after(chain, cursor, headers))
    return planned.count, planned.finals, planned.credited


def cursor_after(chain: ChainConfig, cursor: Sequence[tuple[int, str]],
                 headers: Sequence[Any]) -> list[tuple[int, str]]:
    """The cursor once a scan's ``headers`` are recorded over ``cursor``."""
    if not headers:
        return list(cursor)
    return list(advance_cursor_over(cursor, [(h.number, h.hash) for h in headers],
                                    keep=chain.cursor_keep))


def _write_new(uow: UnitOfWork, planned: NewDeposits, now: datetime) -> None:
    """Post the plan's credits at ``now`` and write its deposits with their history. A credit
    that the ledger refuses raises: a deposit credit that the ledger refuses is a bug."""
    fingerprints: list[str] = []
    if planned.post is not None:
        sent = ledger.send_prepared(uow, planned.post, effective_at=now)
        _check_posted(sent.outcomes())
        fingerprints = sent.fingerprints
    if planned.count:
        repo.insert_with_history(uow.conn, planned.rows, planned.events,
                                 credit_keys=planned.credit_keys,
                                 credit_fingerprints=fingerprints, observed_at=now).close()


def _check_posted(outcomes: Sequence[ledger.BatchOutcome]) -> None:
    for outcome in outcomes:
        if outcome.error is not None:
            raise outcome.error  # A refused deposit posting is a bug: stop loudly.


class PlanStale(Exception):
    """What a plan assumed no longer holds (a deposit exists, the cursor moved, an own address
    sent one): the transaction was rolled back; record the scan with ``record_scan_final``."""


#: SQLSTATEs of what ``record_planned``'s statements refuse: a deposit that exists (the unique
#: key), a credit the ledger did not write as planned (``deposits_posted_check``).
UNIQUE_VIOLATION, CHECK_VIOLATION = "23505", "23514"


#: A scan's plan and its headers, as ``record_planned`` takes them.
PlannedScan = tuple[NewDeposits, Sequence[Any]]


def record_planned(uow: UnitOfWork, chain: ChainConfig, scans: Sequence[PlannedScan], *,
                   cursor: Sequence[tuple[int, str]], now: datetime) -> tuple[int, int, int]:
    """Record, and commit, consecutive scans (each a plan and its headers, the first starting
    on ``cursor``'s tip, read before the transaction) whose deposits are all new, as planned
    ahead: each plan's credits and its deposits with their history, the cursor advanced over
    every scan's headers, and the COMMIT, sent in one pipeline: one round trip, one commit
    (several scans: a group commit). The database checks what the plans assumed as it
    writes, so that the COMMIT only happens if it all holds: a deposit that exists fails the
    insert (its unique key), a credit the ledger refused or took as a replay of another
    request leaves its deposit without its transaction (``deposits_posted_check``), a cursor
    moved since ``cursor`` was read is not replaced (``watcher_cursor_swap``). Those (a credit
    taken as another request's replay being one written by another step from a plan of its
    own) and an own address among the senders raise :class:`PlanStale` (the transaction is
    rolled back: record the scans with ``record_scan_final``, which finds what exists); a
    credit the ledger refused raises its error. Returns the sums of what
    ``record_scan_final`` returns, once committed."""
    if any(planned.own_senders for planned, _ in scans):
        raise PlanStale("a deposit was sent from one of our own addresses")
    advanced = list(cursor)
    for _, headers in scans:
        advanced = cursor_after(chain, advanced, headers)
    sent: list[ledger.PendingPost] = []
    results = []
    try:
        with driver_pipeline(uow.conn):
            for planned, _ in scans:
                fingerprints: list[str] = []
                if planned.post is not None:
                    sent.append(ledger.send_prepared(uow, planned.post, effective_at=now))
                    fingerprints = sent[-1].fingerprints
                if planned.count:
                    results.append(repo.insert_with_history(
                        uow.conn, planned.rows, planned.events, credit_keys=planned.credit_keys,
                        credit_fingerprints=fingerprints, observed_at=now))
            results.append(repo.swap_cursor(uow.conn, chain.name, cursor, advanced))
            # COMMIT as a statement of the pipeline (psycopg's commit() inside one would not
            # send the statements still buffered first); the unit of work then knows.
            results.append(driver_send(uow.conn, "COMMIT", None))
    except sa_exc.DBAPIError as exc:
        if is_connection_lost(exc):
            raise CommitInDoubt(f"the connection was lost in the pipeline that held the "
                                f"COMMIT ({exc.orig}): it may or may not have committed") from exc
        code = sqlstate(exc)
        if code == CHECK_VIOLATION and sent:
            outcomes = _outcomes_read(sent)
            if any(o.status == "conflict" for o in outcomes):
                # Another step credited these deposits under other ids since this plan was
                # made (a stale plan, not a bug): record_scan_final sees them and plans again.
                raise PlanStale("a credit of the plan was written by another step") from exc
            _check_posted(outcomes)  # the credit the ledger refused, if it was one
        if code == UNIQUE_VIOLATION:
            raise PlanStale(f"a deposit of the plan exists: {exc.orig}") from exc
        if code == repo.CURSOR_MOVED:
            raise PlanStale("the cursor moved since it was read") from exc
        raise
    for result in results:
        result.close()
    uow.commit()  # Nothing left to send: the unit of work records the pipeline's COMMIT.
    for pending in sent:
        _check_posted(pending.outcomes())  # all posted or replayed (else nothing committed)
    return (sum(p.count for p, _ in scans), sum(p.finals for p, _ in scans),
            sum(p.credited for p, _ in scans))


def _outcomes_read(sent: Sequence[ledger.PendingPost]) -> list[ledger.BatchOutcome]:
    """The verdicts of the posts a failed pipeline ran (those after the failing statement did
    not run: reading them raises)."""
    outcomes: list[ledger.BatchOutcome] = []
    for pending in sent:
        try:
            outcomes += pending.outcomes()
        except sa_exc.DBAPIError:
            break
    return outcomes
