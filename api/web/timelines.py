"""The timelines: a deposit transaction (every transfer to us in it, each with its history in
words, its cases and its ledger transactions) and a withdrawal (its state changes with times,
actors and reasons, every attempt, the votes, the returns, the cases and the ledger
transactions: reserve, settlement, gas, release).

Both read through the services the API's timelines read through (``deposits.service.timeline``,
``withdrawals.service.timeline``), so the pages and ``GET /v1/deposits/{chain}/{tx_hash}`` and
``GET /v1/withdrawals/{id}`` always agree. Ledger postings are shown with the code of their
account and in decimals of their account's asset (``ledger_lines``), never with internal ids.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import Response

from api.problems import RequestInvalid
from api.routes.deps import Uow, context
from api.routes.views import scale_of
from api.schemas import CHAIN_PATTERN, TX_HASH_PATTERN
from api.web import templating
from api.web.labels import (
    Said,
    deposit_event_words,
    deposit_reason,
    evidence_words,
    state_class,
    transaction_label,
    withdrawal_event_words,
)
from api.web.session import StaffSession
from config.uow import UnitOfWork
from deposits import service as deposits
from deposits.repository import EventRecord as DepositEventRecord
from ledger import service as ledger
from ledger.repository import TransactionRecord
from withdrawals import service as withdrawals
from withdrawals.repository import AttemptRecord

router = APIRouter(prefix="/console", include_in_schema=False)
_WITHDRAWAL_ID = re.compile(r"^[0-9]{1,18}$")


@dataclass(frozen=True)
class PostingLine:
    """A posting as the page shows it: its account's code and asset, debit or credit."""

    id: int
    account: str
    asset: str
    scale: int
    debit_minor: int | None
    credit_minor: int | None
    closes_posting_id: int | None
    reverses_posting_id: int | None


@dataclass(frozen=True)
class LedgerLines:
    """A ledger transaction with its kind in words and its postings resolved."""

    transaction: TransactionRecord
    label: str
    postings: list[PostingLine]


def ledger_lines(uow: UnitOfWork, transactions: Sequence[TransactionRecord]) -> list[LedgerLines]:
    """``transactions`` with each posting's account id resolved to the account's code, asset
    and scale (one read for all: ``ledger.service.accounts_by_ids``)."""
    accounts = ledger.accounts_by_ids(
        uow, [p.account_id for t in transactions for p in t.postings])
    found = []
    for t in transactions:
        lines = []
        for p in t.postings:
            # A posting's account exists (a foreign key): a missing one is a broken invariant.
            account = accounts[p.account_id]
            lines.append(PostingLine(
                id=p.id, account=account.code, asset=account.asset.code,
                scale=account.asset.scale,
                debit_minor=p.amount_minor if p.amount_minor > 0 else None,
                credit_minor=-p.amount_minor if p.amount_minor < 0 else None,
                closes_posting_id=p.closes_posting_id,
                reverses_posting_id=p.reverses_posting_id))
        found.append(LedgerLines(t, transaction_label(t.kind), lines))
    return found


@dataclass(frozen=True)
class TransferView:
    """One transfer of a deposit transaction, as the page shows it."""

    entry: deposits.TimelineEntry
    scale: int
    events: list[tuple[DepositEventRecord, Said]]
    ledger: list[LedgerLines]


def _check_tx(chain: str, tx_hash: str) -> None:
    if not re.fullmatch(CHAIN_PATTERN, chain):
        raise RequestInvalid(f"{chain!r} is not a chain name (lowercase letters, digits, - and _)")
    if not re.fullmatch(TX_HASH_PATTERN, tx_hash):
        raise RequestInvalid(
            f"{tx_hash!r} is not a transaction hash: a hash is 0x and 64 hex digits "
            f"(this has {max(len(tx_hash) - 2, 0)} characters after 0x)"
            if tx_hash[:2].lower() == "0x" else
            f"{tx_hash!r} is not a transaction hash: a hash is 0x and 64 hex digits")


@router.get("/deposits/{chain}/{tx_hash}")
def deposit_page(
    request: Request,
    staff: StaffSession,
    uow: Uow,
    chain: Annotated[str, Path(max_length=64)],
    tx_hash: Annotated[str, Path(max_length=200)],
) -> Response:
    """Every transfer to us in the transaction (staff see all), each with its history in
    words, its cases and its ledger transactions (422 for a malformed hash, 404 for none; 403
    for an approver, as the API)."""
    staff.require_reader()
    _check_tx(chain, tx_hash)
    ctx = context(request)
    tx_hash = tx_hash.lower()
    entries = deposits.timeline(uow, chain, tx_hash)  # DepositNotFound: 404, said on the page
    transfers = [TransferView(
        entry=e,
        scale=scale_of(ctx.chains, e.deposit.asset_code) if e.deposit.asset_code else 0,
        events=[(x, deposit_event_words(x)) for x in e.events],
        ledger=ledger_lines(uow, e.ledger_transactions)) for e in entries]
    return templating.page(
        request, "deposit.html", chain=chain, tx_hash=tx_hash, transfers=transfers,
        state_class=state_class, deposit_reason=deposit_reason, evidence_words=evidence_words)


@dataclass(frozen=True)
class AttemptView:
    """A broadcast attempt and what is known of its outcome."""

    attempt: AttemptRecord
    outcome: str


def _attempts(tl: withdrawals.Timeline) -> list[AttemptView]:
    """Each attempt with its outcome: the last event naming it, and whether it landed."""
    last: dict[int, str] = {}
    for e in tl.events:
        if e.attempt_id is not None:
            last[e.attempt_id] = withdrawal_event_words(e.event)
    found = []
    for a in tl.attempts:
        outcome = last.get(a.id, "no outcome recorded yet")
        if tl.withdrawal.landed_attempt_id == a.id:
            outcome = f"landed on chain: {outcome}"
        found.append(AttemptView(a, outcome))
    return found


@router.get("/withdrawals/{withdrawal_id}")
def withdrawal_page(
    request: Request,
    staff: StaffSession,
    uow: Uow,
    withdrawal_id: Annotated[str, Path(max_length=64)],
    done: Annotated[str | None, Query(max_length=20)] = None,
) -> Response:
    """The withdrawal's state, its history with times, actors and reasons, every attempt,
    the votes, the returns, the cases and the ledger transactions (422 for an id that is not
    a number, 404 for an unknown one)."""
    if not _WITHDRAWAL_ID.fullmatch(withdrawal_id) or int(withdrawal_id) == 0:
        raise RequestInvalid(f"{withdrawal_id!r} is not a withdrawal id (a positive number)")
    ctx = context(request)
    tl = withdrawals.timeline(ctx.engine, int(withdrawal_id))  # WithdrawalNotFound: 404
    return templating.page(
        request, "withdrawal.html", withdrawal=tl.withdrawal, timeline=tl,
        scale=scale_of(ctx.chains, tl.withdrawal.asset_code),
        events=[(e, withdrawal_event_words(e.event)) for e in tl.events],
        attempts=_attempts(tl), ledger=ledger_lines(uow, tl.transactions),
        state_class=state_class, evidence_words=evidence_words,
        message=_DONE.get(done or ""), message_kind="ok")


#: What the console's actions redirect here with (``api.web.actions``).
_DONE = {"approved": "Your approval is recorded.", "rejected": "The withdrawal is rejected.",
         "voted": "Your write-off vote is recorded."}
