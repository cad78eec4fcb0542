"""Use cases of the ledger: open accounts, post, reverse, read balances, close periods.

Every function takes an open unit of work and never commits it (except ``post_entry`` and
``post_entries``, which run alone): the caller decides what else
belongs in the same database transaction (a deposit's "credited" history row, say) and retries
the whole unit of work on serialization failures with ``config.uow.run_in_transaction``.
``post_entry`` is the convenience that does both for a lone entry.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TypeVar

from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import Connection, Engine

from config.database import DriverResult
from config.uow import (
    RECONNECT_S,
    UnitOfWork,
    is_connection_lost,
    is_retryable,
    retry_pause,
    sqlstate,
)
from ledger import chart, model
from ledger import repository as repo
from ledger.chart import AccountSpec
from ledger.errors import (
    AccountMismatch,
    AccountNotFound,
    AssetNotFound,
    AssetScaleMismatch,
    BalanceOutOfRange,
    EntryInvalid,
    IdempotencyConflict,
    InsufficientFunds,
    LedgerError,
    NotOutOfPeriod,
    PeriodClosed,
    PeriodCloseInvalid,
    PeriodProposalNotFound,
    ReversalExceedsOriginal,
    ReversalMismatch,
    SecondApproverRequired,
    TransactionNotFound,
)
from ledger.model import Account, Asset, Entry, Line

#: One INFO line per transaction posted or replayed, with its id and idempotency key: the
#: line carries the correlation id of the request or job step that posted it (set by the
#: caller's logging context), which is how a request is followed to its ledger transaction.
log = logging.getLogger("custody.ledger")

_T = TypeVar("_T")

#: Verdicts of ``ledger_post_arrays`` and ``ledger_post_one`` that refuse an entry, and the error
#: each one means.
REFUSALS: dict[str, type[LedgerError]] = {
    "conflict": IdempotencyConflict,
    "insufficient_funds": InsufficientFunds,
    "period_closed": PeriodClosed,
    "not_out_of_period": NotOutOfPeriod,
    "reversal_exceeds": ReversalExceedsOriginal,
    "mismatch": ReversalMismatch,
    "balance_out_of_range": BalanceOutOfRange,
}


@dataclass(frozen=True)
class Posted:
    """The transaction an entry resolved to; ``replayed`` when it was posted before."""

    transaction_id: int
    replayed: bool


@dataclass(frozen=True)
class BatchOutcome:
    """One item of a batch: posted/replayed with a transaction, or refused with an error."""

    status: str
    transaction_id: int | None
    error: LedgerError | None

    @property
    def ok(self) -> bool:
        """Whether the item resolved to a transaction (posted now or before)."""
        return self.error is None


# --- assets and accounts ----------------------------------------------------------------------


def open_asset(uow: UnitOfWork, code: str, scale: int) -> Asset:
    """Open an asset (idempotent); an existing asset with another scale is an error."""
    if not 0 <= scale <= 38:
        raise EntryInvalid(f"scale must be between 0 and 38, got {scale}")
    repo.insert_asset(uow.conn, code, scale)
    asset = repo.get_asset(uow.conn, code)
    assert asset is not None
    if asset.scale != scale:
        raise AssetScaleMismatch(f"asset {code} has scale {asset.scale}, not {scale}")
    return asset


def get_asset(uow: UnitOfWork, code: str) -> Asset:
    """The asset ``code``, or AssetNotFound."""
    asset = repo.get_asset(uow.conn, code)
    if asset is None:
        raise AssetNotFound(f"no asset {code}")
    return asset


def open_account(uow: UnitOfWork, spec: AccountSpec, asset: Asset) -> Account:
    """Open the account ``spec`` in ``asset`` (idempotent; its balance row comes with it)."""
    repo.insert_account(
        uow.conn,
        spec.code,
        asset.id,
        spec.type.value,
        spec.debits_must_not_exceed_credits,
        spec.credits_must_not_exceed_debits,
    )
    account = get_account(uow, spec.code, asset.code)
    if (
        account.type,
        account.debits_must_not_exceed_credits,
        account.credits_must_not_exceed_debits,
    ) != (spec.type, spec.debits_must_not_exceed_credits, spec.credits_must_not_exceed_debits):
        raise AccountMismatch(f"account {spec.code} ({asset.code}) exists with other type/flags")
    return account


def get_account(uow: UnitOfWork, code: str, asset_code: str) -> Account:
    """The account ``code`` in ``asset_code``, or AccountNotFound."""
    account = repo.get_account(uow.conn, code, asset_code)
    if account is None:
        raise AccountNotFound(f"no account {code} in {asset_code}")
    return account


def accounts_by_ids(uow: UnitOfWork, ids: Sequence[int]) -> dict[int, Account]:
    """The accounts with these ids (with their codes and assets), by id; an unknown id is
    left out."""
    return repo.get_accounts_by_id(uow.conn, sorted(set(ids))) if ids else {}


def open_user_accounts(uow: UnitOfWork, user_id: str, asset: Asset) -> tuple[Account, Account]:
    """The user's wallet and withdrawals accounts in ``asset``, opened if needed."""
    return (
        open_account(uow, chart.user_wallet(user_id), asset),
        open_account(uow, chart.user_withdrawals(user_id), asset),
    )


# --- posting --------------------------------------------------------------------------------


def post(uow: UnitOfWork, entry: Entry) -> Posted:
    """Post one entry: the only way money moves.

    Same key and same request: the first transaction, nothing moves (``replayed``). Same key,
    another request: IdempotencyConflict. A flag that would be violated: InsufficientFunds, and
    nothing is written. Retries on serialization failures belong to the caller's unit of work.
    """
    if repo.is_plain(entry):
        model.validate_entry(entry)
        outcome = _outcome(entry.idempotency_key,
                           *repo.post_one(uow.conn, repo.to_one_params(entry)))
        _log_posted([entry], [outcome], committed=False)
    else:
        outcome = post_batch(uow, [entry])[0]
    return _posted(outcome)


def _log_posted(entries: Sequence[Entry], outcomes: Sequence[BatchOutcome], *,
                committed: bool) -> None:
    """The ``posted`` line of each entry written or replayed (``committed`` False: it commits
    with the caller's unit of work, or not at all)."""
    if not log.isEnabledFor(logging.INFO):
        return
    for entry, outcome in zip(entries, outcomes, strict=True):
        if outcome.transaction_id is not None and outcome.error is None:
            log.info("ledger transaction %s %s (%s)", outcome.transaction_id, outcome.status,
                     entry.kind, extra={
                         "transaction_id": outcome.transaction_id, "status": outcome.status,
                         "kind": entry.kind, "idempotency_key": entry.idempotency_key,
                         "reference": entry.reference, "committed": committed})


def _posted(outcome: BatchOutcome) -> Posted:
    if outcome.error is not None:
        raise outcome.error
    assert outcome.transaction_id is not None
    return Posted(outcome.transaction_id, outcome.status == "replayed")


def post_batch(uow: UnitOfWork, entries: Sequence[Entry]) -> list[BatchOutcome]:
    """Post many independent entries in one database round trip.

    Each entry keeps its own idempotency and its own verdict; a refused entry moves nothing and
    does not fail the others. Entries are judged in order (an earlier credit can fund a later
    debit). A malformed entry raises EntryInvalid before anything is sent.
    """
    outcomes = _post_batch_on(uow.conn, entries)
    _log_posted(entries, outcomes, committed=False)
    return outcomes


#: A batch validated and built ahead of its effective time (:func:`prepare_batch`).
PreparedBatch = repo.PreparedPost


def prepare_batch(entries: Sequence[Entry]) -> PreparedBatch:
    """Validate ``entries`` and build their ``post_batch`` call, except their effective time:
    :func:`post_prepared` posts them all at one effective time (their own is not used). This
    is what the client spends on a batch; a caller that knows its entries before it opens its
    transaction prepares them there. A malformed entry raises EntryInvalid here."""
    metadata = [model.metadata_json(entry) for entry in entries]
    for entry, serialized in zip(entries, metadata, strict=True):
        model.validate_entry(entry, metadata_json=serialized)
    return repo.prepare(entries, metadata)


@dataclass(frozen=True)
class PendingPost:
    """A prepared batch sent (:func:`send_prepared`), its verdicts not read yet."""

    prepared: PreparedBatch
    sent: DriverResult
    #: The fingerprint of each entry, as stored with the transactions it writes.
    fingerprints: list[str]

    def outcomes(self) -> list[BatchOutcome]:
        """The verdict of each entry, as ``post_batch`` gives them."""
        results = repo.prepared_results(self.sent, self.prepared)
        outcomes = [_outcome(e.idempotency_key, status, txid)
                    for e, (status, txid) in zip(self.prepared.entries, results, strict=True)]
        _log_posted(self.prepared.entries, outcomes, committed=False)
        return outcomes


def send_prepared(uow: UnitOfWork, prepared: PreparedBatch, *,
                  effective_at: datetime) -> PendingPost:
    """Send a prepared batch, every entry effective at ``effective_at``; its verdicts are read
    later (``PendingPost.outcomes``). Inside a ``config.database.driver_pipeline`` block the
    call is queued with the statements that follow it in the same transaction, which may read
    what it writes (its transactions, by idempotency key): the caller reads the verdicts
    before it commits, and rolls back unless every entry was posted or replayed (or has the
    following statements check, by key and fingerprint, that each transaction it expects is
    there)."""
    if effective_at.tzinfo is None or effective_at.utcoffset() is None:
        raise EntryInvalid("effective_at must carry a time zone")
    return PendingPost(prepared, *repo.send_prepared(uow.conn, prepared, effective_at))


def post_prepared(uow: UnitOfWork, prepared: PreparedBatch, *,
                  effective_at: datetime) -> list[BatchOutcome]:
    """:func:`post_batch` of a prepared batch, every entry effective at ``effective_at``:
    the same verdicts, transactions and fingerprints as ``post_batch`` of the same entries
    with that effective time."""
    if not prepared.entries:
        if effective_at.tzinfo is None or effective_at.utcoffset() is None:
            raise EntryInvalid("effective_at must carry a time zone")
        return []
    return send_prepared(uow, prepared, effective_at=effective_at).outcomes()


def _post_batch_on(conn: Connection, entries: Sequence[Entry]) -> list[BatchOutcome]:
    return _post_batch_with(lambda arrays: repo.post_batch(conn, arrays), entries)


def _post_batch_with(
    send: Callable[[repo.PostArrays], list[tuple[str, int | None]]],
    entries: Sequence[Entry],
) -> list[BatchOutcome]:
    """Validate ``entries``, ``send`` their payloads and build the outcomes.

    A key repeated inside one batch is judged by the post function like any other: against the
    transaction stored under it, or else against an earlier item of the batch that was posted
    (same request: replayed with that item's transaction; another request: conflict). A repeat
    of a refused item is judged afresh.
    """
    for entry in entries:
        model.validate_entry(entry)
    results = send(repo.to_arrays(entries)) if entries else []
    return [_outcome(e.idempotency_key, status, txid)
            for e, (status, txid) in zip(entries, results, strict=True)]


def _outcome(key: str, status: str, txid: int | None) -> BatchOutcome:
    if status in ("posted", "replayed"):
        return BatchOutcome(status, txid, None)
    error_type = REFUSALS.get(status)
    assert error_type is not None, f"unknown verdict {status!r} from the post function"
    messages = {
        "conflict": f"idempotency key {key} was used for a different request",
        "insufficient_funds": f"{key}: an account would go past its limit",
        "period_closed": f"{key}: effective time falls in a closed period",
        "not_out_of_period": f"{key}: out-of-period adjustment outside any closed period",
        "reversal_exceeds": f"{key}: would reverse or close more than the original",
        "mismatch": f"{key}: reversal or closing does not mirror its original posting",
        "balance_out_of_range": f"{key}: a balance would leave the 128-bit range",
    }
    return BatchOutcome(status, txid, error_type(messages[status]))


def post_entry(engine: Engine, entry: Entry, *, attempts_max: int = 8) -> Posted:
    """Post ``entry`` in its own database transaction, retried on 40001/40P01.

    The entry is sent as one autocommit statement: the post function and the commit happen in a
    single round trip, so the balance rows (hot accounts especially) are not held locked while
    a COMMIT travels from the client. An entry that reverses or closes nothing goes through
    ``ledger_post_one``, the others through ``ledger_post_arrays`` (as a batch of one).
    """
    if not repo.is_plain(entry):
        return _posted(post_entries(engine, [entry], attempts_max=attempts_max)[0])
    model.validate_entry(entry)
    params = repo.to_one_params(entry)
    status, txid = _retried(lambda: repo.post_one_alone(engine, params), attempts_max)
    outcome = _outcome(entry.idempotency_key, status, txid)
    _log_posted([entry], [outcome], committed=True)
    return _posted(outcome)


def post_entries(
    engine: Engine, entries: Sequence[Entry], *, attempts_max: int = 8
) -> list[BatchOutcome]:
    """``post_batch`` in its own database transaction: one autocommit statement, retried whole
    on 40001/40P01 (the function's writes are atomic: all items' verdicts commit together)."""
    outcomes = _retried(
        lambda: _post_batch_with(lambda arrays: repo.post_batch_alone(engine, arrays), entries),
        attempts_max)
    _log_posted(entries, outcomes, committed=True)
    return outcomes


def _retried(call: Callable[[], _T], attempts_max: int) -> _T:
    """``call()``, again after a pause on 40001/40P01, at most ``attempts_max`` times.

    A lost connection is retried too, on a new connection (after a failover, the new
    primary's), for up to ``RECONNECT_S`` seconds. The post was one autocommit statement, so
    its outcome is in doubt when the connection broke after it was sent; the retry resolves it
    by the idempotency key: the post function looks the key up first and returns the first
    transaction (``replayed``) when the lost one committed, and posts it when it did not.
    """
    deadline = time.monotonic() + RECONNECT_S
    attempt = 0
    while True:
        attempt += 1
        try:
            return call()
        except sa_exc.DBAPIError as exc:
            if is_connection_lost(exc) and time.monotonic() < deadline:
                retry_pause(min(attempt, 20), 0.05)
                continue
            if not is_retryable(exc) or attempt >= attempts_max:
                raise
            retry_pause(attempt)


# --- reversals ------------------------------------------------------------------------------


def reverse(
    uow: UnitOfWork,
    transaction_id: int,
    *,
    idempotency_key: str,
    reason: str,
    source: str,
    amounts: Mapping[int, int] | None = None,
    out_of_period: bool = False,
) -> Posted:
    """Reverse a transaction: mirror its postings (sides flipped), keep its effective time.

    ``amounts`` maps original posting ids to the (positive) amount to reverse on that line; None
    reverses everything. A full reversal of a transaction already partly reversed, or a partial
    one beyond what is left, is refused (ReversalExceedsOriginal); the check is repeated under
    the balance locks, so concurrent reversals cannot exceed the original either.
    """
    if not reason:
        raise EntryInvalid("a reversal needs a reason")
    original = repo.get_transaction(uow.conn, transaction_id)
    if original is None:
        raise TransactionNotFound(f"no ledger transaction {transaction_id}")
    by_id = {p.id: p for p in original.postings}
    if amounts is None:
        chosen = {p.id: abs(p.amount_minor) for p in original.postings}
    else:
        unknown = set(amounts) - set(by_id)
        if unknown:
            raise EntryInvalid(
                f"postings {sorted(unknown)} are not in transaction {transaction_id}"
            )
        chosen = {
            pid: model.check_positive(a, what=f"posting {pid} amount") for pid, a in amounts.items()
        }
    accounts = repo.get_accounts_by_id(uow.conn, [by_id[pid].account_id for pid in chosen])
    lines = tuple(
        Line(
            account=accounts[by_id[pid].account_id],
            amount_minor=-amount if by_id[pid].amount_minor > 0 else amount,
            reverses_posting_id=pid,
        )
        for pid, amount in sorted(chosen.items())
    )
    entry = Entry(
        idempotency_key=idempotency_key,
        kind="reversal",
        effective_at=original.effective_at,
        source=source,
        lines=lines,
        reference=original.reference,
        reason=reason,
        reverses_transaction_id=transaction_id,
        out_of_period=out_of_period,
    )
    return post(uow, entry)


def get_transaction(uow: UnitOfWork, transaction_id: int) -> repo.TransactionRecord:
    """A transaction with its postings, or TransactionNotFound."""
    record = repo.get_transaction(uow.conn, transaction_id)
    if record is None:
        raise TransactionNotFound(f"no ledger transaction {transaction_id}")
    return record


# --- balances -------------------------------------------------------------------------------


@dataclass(frozen=True)
class AccountBalance:
    """An account's balance: ``raw`` (debit positive) and on its normal side."""

    account: Account
    raw_minor: int
    version: int

    @property
    def balance_minor(self) -> int:
        """The balance on the account's normal side."""
        return self.account.normal(self.raw_minor)


def account_balances(
    uow: UnitOfWork,
    accounts: Sequence[Account],
    *,
    as_of: datetime | None = None,
    known_at: datetime | None = None,
) -> list[AccountBalance]:
    """Balances of ``accounts``: the stored projection, or replayed as of / as known at.

    ``as_of`` bounds the effective time, ``known_at`` the recorded time (both inclusive). With
    neither, the stored balance (what approves spending) is returned.
    """
    ids = [a.id for a in accounts]
    if as_of is None and known_at is None:
        values = repo.stored_balances(uow.conn, ids)
    else:
        values = repo.balances_at(uow.conn, ids, as_of, known_at)
    return [AccountBalance(a, *values.get(a.id, (0, 0))) for a in accounts]


def account_balance(
    uow: UnitOfWork,
    account: Account,
    *,
    as_of: datetime | None = None,
    known_at: datetime | None = None,
) -> AccountBalance:
    """Balance of one account (see ``account_balances``)."""
    return account_balances(uow, [account], as_of=as_of, known_at=known_at)[0]


@dataclass(frozen=True)
class UserBalance:
    """A user's balances in one asset (DESIGN.md section 4, "three balances").

    posted = wallet + withdrawals in flight; pending outgoing = withdrawals in flight;
    available = posted - pending outgoing (the wallet); pending incoming = deposits seen but not
    final (from the deposit histories, not the ledger); projected = posted + incoming - outgoing.
    """

    asset: Asset
    posted_minor: int
    pending_incoming_minor: int
    pending_outgoing_minor: int
    available_minor: int
    version: int

    @property
    def projected_minor(self) -> int:
        """posted + pending incoming - pending outgoing."""
        return self.posted_minor + self.pending_incoming_minor - self.pending_outgoing_minor

    @property
    def pending_net_minor(self) -> int:
        """pending incoming - pending outgoing."""
        return self.pending_incoming_minor - self.pending_outgoing_minor


def user_balances(
    uow: UnitOfWork,
    user_id: str,
    *,
    as_of: datetime | None = None,
    known_at: datetime | None = None,
    pending_incoming: Mapping[str, int] | None = None,
) -> list[UserBalance]:
    """The user's balances per asset; ``pending_incoming`` (by asset code) comes from deposits."""
    wallet_code = chart.user_wallet(user_id).code
    withdrawals_code = chart.user_withdrawals(user_id).code
    if as_of is None and known_at is None:
        # The hot case (now): the accounts and their stored balances in one statement.
        balances = [AccountBalance(account, raw, version) for account, raw, version
                    in repo.stored_balances_by_code(uow.conn, [wallet_code, withdrawals_code])]
    else:
        found = repo.find_accounts(uow.conn, [wallet_code, withdrawals_code])
        balances = account_balances(uow, found, as_of=as_of, known_at=known_at)
    incoming = dict(pending_incoming or {})
    by_asset: dict[str, dict[str, AccountBalance]] = {}
    for b in balances:
        by_asset.setdefault(b.account.asset.code, {})[b.account.code] = b
    assets = {b.account.asset.code: b.account.asset for b in balances}
    result = []
    for code in sorted(set(by_asset) | set(incoming)):
        pair = by_asset.get(code, {})
        wallet = pair.get(wallet_code)
        outgoing = pair.get(withdrawals_code)
        available = wallet.balance_minor if wallet else 0
        pending_out = outgoing.balance_minor if outgoing else 0
        asset = assets.get(code) or get_asset(uow, code)
        result.append(
            UserBalance(
                asset=asset,
                posted_minor=available + pending_out,
                pending_incoming_minor=incoming.get(code, 0),
                pending_outgoing_minor=pending_out,
                available_minor=available,
                version=(wallet.version if wallet else 0) + (outgoing.version if outgoing else 0),
            )
        )
    return result


# --- periods --------------------------------------------------------------------------------


def _check_period_end(uow: UnitOfWork, ends_at: datetime, actor: str, role: str) -> None:
    """PeriodCloseInvalid unless ``ends_at`` could close now: with a time zone, after the last
    close, and ``actor`` named (the database checks again under its write gate)."""
    if ends_at.tzinfo is None:
        raise PeriodCloseInvalid("ends_at must carry a time zone")
    if not actor:
        raise PeriodCloseInvalid(f"{role} is required")
    latest = repo.latest_period(uow.conn)
    if latest is not None and ends_at <= latest.ends_at:
        raise PeriodCloseInvalid(f"already closed through {latest.ends_at.isoformat()}")


def close_period(
    uow: UnitOfWork, ends_at: datetime, *, closed_by: str, reason: str | None = None
) -> repo.PeriodRecord:
    """Close everything effective before ``ends_at``.

    Waits for postings in flight (the database's write gate), records the close time, and from
    then on refuses entries effective before ``ends_at`` unless they are out-of-period
    adjustments. Balances as of ``ends_at`` as known at the close never change afterwards.
    """
    _check_period_end(uow, ends_at, closed_by, "closed_by")
    try:
        return repo.insert_period(uow.conn, ends_at, closed_by, reason)
    except sa_exc.DBAPIError as exc:
        # The trigger re-checks under the exclusive write gate (a concurrent close, an end in
        # the future by the database's clock) and raises check_violation.
        if sqlstate(exc) in ("23514", "23505"):
            raise PeriodCloseInvalid(str(exc.orig).splitlines()[0]) from exc
        raise


def propose_period_close(
    uow: UnitOfWork, ends_at: datetime, *, proposed_by: str, reason: str | None = None
) -> repo.PeriodProposalRecord:
    """Propose closing everything effective before ``ends_at``; another person must approve
    (``approve_period_close``) before anything is closed. Refused now if it could never be
    approved: no time zone, not after the last close, or in the future."""
    _check_period_end(uow, ends_at, proposed_by, "proposed_by")
    if ends_at > repo.database_now(uow.conn):
        raise PeriodCloseInvalid(f"cannot close a period ending in the future ({ends_at})")
    return repo.insert_period_proposal(uow.conn, ends_at, proposed_by, reason)


def approve_period_close(
    uow: UnitOfWork, proposal_id: int, *, approved_by: str
) -> repo.PeriodRecord:
    """Approve a proposal as someone else than its proposer: the period closes now
    (``close_period``), recorded as closed by the approver, the approval linking the two."""
    proposal = repo.get_period_proposal(uow.conn, proposal_id, lock=True)
    if proposal is None:
        raise PeriodProposalNotFound(f"no period close proposal {proposal_id}")
    if proposal.approved_by is not None:
        raise SecondApproverRequired(
            f"proposal {proposal_id} was approved already, by {proposal.approved_by}")
    if not approved_by or approved_by == proposal.proposed_by:
        raise SecondApproverRequired(
            f"proposal {proposal_id} was made by {proposal.proposed_by}: someone else approves")
    period = close_period(uow, proposal.ends_at, closed_by=approved_by, reason=proposal.reason)
    repo.insert_period_approval(uow.conn, proposal_id, period.id, approved_by)
    return period


# --- statements -----------------------------------------------------------------------------


@dataclass(frozen=True)
class StatementLine:
    """One posting on a user's statement: "why is my balance X?".

    ``account`` is ``wallet`` (available money) or ``withdrawals`` (reserved for withdrawals in
    flight); ``amount_minor`` is on the liability's normal side (positive: the user's balance
    grew). ``available_minor`` and ``posted_minor`` are the running balances after this line.
    """

    posting_id: int
    transaction_id: int
    account: str
    amount_minor: int
    available_minor: int
    posted_minor: int
    kind: str
    reference: str | None
    reason: str | None
    effective_at: datetime
    recorded_at: datetime


def _statement_accounts(uow: UnitOfWork, user_id: str, asset_code: str
                        ) -> tuple[dict[str, str], dict[int, Account]]:
    """The user's wallet and withdrawals account codes (to their statement names), and those
    of the accounts in ``asset_code`` that exist, by id."""
    get_asset(uow, asset_code)
    wanted = {chart.user_wallet(user_id).code: "wallet",
              chart.user_withdrawals(user_id).code: "withdrawals"}
    return wanted, {a.id: a for a in repo.find_accounts(uow.conn, list(wanted))
                    if a.asset.code == asset_code}


@dataclass(frozen=True)
class StatementStart:
    """Where a statement starts: the postings after ``after_posting_id`` are its lines, and the
    available and posted balances before them are its opening balances."""

    after_posting_id: int
    available_minor: int
    posted_minor: int


def statement_start(uow: UnitOfWork, user_id: str, asset_code: str, *,
                    recorded_before: datetime | None = None,
                    after_posting_id: int | None = None) -> StatementStart:
    """The opening of the user's statement in ``asset_code``: before the first posting recorded
    at or after ``recorded_before``, or after the posting ``after_posting_id`` (a next page);
    with neither, the beginning (zero)."""
    wanted, by_id = _statement_accounts(uow, user_id, asset_code)
    if after_posting_id is None:
        after_posting_id = (0 if recorded_before is None or not by_id else
                            repo.last_posting_before(uow.conn, list(by_id), recorded_before))
    if not by_id or after_posting_id == 0:
        return StatementStart(after_posting_id, 0, 0)
    sums = {a: by_id[a].normal(raw)
            for a, raw in repo.sums_through(uow.conn, list(by_id), after_posting_id).items()}
    wallet = sum(v for a, v in sums.items() if wanted[by_id[a].code] == "wallet")
    return StatementStart(after_posting_id, wallet, sum(sums.values()))


def statement(
    uow: UnitOfWork, user_id: str, asset_code: str, *, after_posting_id: int = 0,
    limit: int = 100,
) -> list[StatementLine]:
    """The user's postings in ``asset_code`` after ``after_posting_id``, oldest first, with the
    running available and posted balances (a page: pass the last posting id for the next)."""
    if not 1 <= limit <= 1000:
        raise EntryInvalid("limit must be between 1 and 1000")
    wanted, by_id = _statement_accounts(uow, user_id, asset_code)
    if not by_id:
        return []
    running = {a: by_id[a].normal(raw)
               for a, raw in repo.sums_through(uow.conn, list(by_id), after_posting_id).items()}
    lines = []
    for row in repo.postings_after(uow.conn, list(by_id), after_posting_id, limit):
        account = by_id[row.account_id]
        change = account.normal(row.amount_minor)
        running[row.account_id] += change
        wallet = sum(v for a, v in running.items() if wanted[by_id[a].code] == "wallet")
        lines.append(StatementLine(
            posting_id=row.posting_id, transaction_id=row.transaction_id,
            account=wanted[account.code], amount_minor=change, available_minor=wallet,
            posted_minor=sum(running.values()), kind=row.kind, reference=row.reference,
            reason=row.reason, effective_at=row.effective_at, recorded_at=row.recorded_at))
    return lines
