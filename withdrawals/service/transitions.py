"""Applying a transition: ``apply`` moves a withdrawal (its row locked by the caller) by one event
through ``model.transition``, posts the transition's ledger effects, updates the current state
and appends the history row, all in the caller's unit of work. The effects are posted by
``_post_effects`` (release, settlement, gas, return; and the reserve, for
``request_withdrawal``), keys ``withdrawal:{id}:{step}``; the settlement and gas entries
(``settle_entry``, ``gas_entry``, with ``Settlement`` and ``Gas``) and the user's accounts
they post to are built here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from config.errors import ConfigurationInvalid
from config.uow import UnitOfWork
from ledger import chart
from ledger import service as ledger
from ledger.model import Account, Entry, Line, credit, debit
from withdrawals import model
from withdrawals import repository as repo
from withdrawals.errors import AmountNotRepresentable
from withdrawals.model import Effect, Event, State, Transition
from withdrawals.repository import WithdrawalRecord
from withdrawals.service.common import SOURCE


def _known_accounts(user_id: str, found: dict[str, Account]) -> tuple[Account, Account] | None:
    """The user's (wallet, withdrawals) accounts among ``found``, if both are there and are
    what the chart says they are (else the ledger opens or refuses them)."""
    pair = []
    for spec in (chart.user_wallet(user_id), chart.user_withdrawals(user_id)):
        account = found.get(spec.code)
        if account is None or (
                account.type, account.debits_must_not_exceed_credits,
                account.credits_must_not_exceed_debits) != (
                spec.type, spec.debits_must_not_exceed_credits,
                spec.credits_must_not_exceed_debits):
            return None
        pair.append(account)
    return pair[0], pair[1]


def _open_accounts(uow: UnitOfWork, w: WithdrawalRecord) -> tuple[Account, Account]:
    """Open the user's accounts through the ledger: the first withdrawal of this user in this
    asset (AssetNotFound, AccountMismatch come from here)."""
    return ledger.open_user_accounts(uow, w.user_id, ledger.get_asset(uow, w.asset_code))


def _accounts(uow: UnitOfWork, w: WithdrawalRecord) -> tuple[Account, Account]:
    """The user's (wallet, withdrawals) accounts: one read, opened through the ledger only if
    missing."""
    _, found = repo.find_accounts(
        uow.conn, w.asset_code,
        [chart.user_wallet(w.user_id).code, chart.user_withdrawals(w.user_id).code])
    return _known_accounts(w.user_id, found) or _open_accounts(uow, w)


def _entry(w: WithdrawalRecord, step: str, kind: str, lines: Sequence[Line], *, now: datetime,
           reason: str | None = None, metadata: dict[str, Any] | None = None) -> Entry:
    return Entry(idempotency_key=f"withdrawal:{w.id}:{step}", kind=kind, effective_at=now,
                 source=SOURCE, lines=tuple(lines), reference=f"withdrawal:{w.id}",
                 reason=reason, metadata=metadata or {})


@dataclass(frozen=True)
class Settlement:
    """What a settlement books: the fee charged (the amount sent is the withdrawal's)."""

    fee_minor: int


@dataclass(frozen=True)
class Gas:
    """Gas a landed attempt paid, as the chain charged it: ``gas_used * effective_gas_price``
    in the native coin's smallest unit (``decimals``: 18 for wei). ``gas_entry`` converts it
    exactly to the ledger asset's scale."""

    attempt_no: int
    native_asset: str
    amount_chain: int
    decimals: int


def apply(uow: UnitOfWork, w: WithdrawalRecord, event: Event, *, now: datetime, actor: str,
          reason: str | None = None, evidence: dict[str, Any] | None = None,
          attempt_id: int | None = None, gas: Gas | None = None,
          return_entry: Entry | None = None,
          accounts: tuple[Account, Account] | None = None, **updates: Any) -> WithdrawalRecord:
    """Move ``w`` (its row locked by the caller) by ``event``: post the ledger effects, update
    the current state and append the history row, all in ``uow``.

    ``accounts``: the user's (wallet, withdrawals) accounts if the caller has them already
    (read when needed otherwise). Returns the withdrawal as updated.
    """
    t = model.transition(w.state, event, now=now)
    # A stored withdrawal is never in ``requested``: its reserve is posted by
    # request_withdrawal, which inserts it in its reserved state.
    assert Effect.POST_RESERVE not in t.effects, "the reserve belongs to request_withdrawal"
    if accounts is None and Effect.POST_RELEASE in t.effects:
        accounts = _accounts(uow, w)
    ledger_tx = _post_effects(uow, w, t, reason=reason, gas=gas, return_entry=return_entry,
                              accounts=accounts)
    if ledger_tx is not None and {Effect.POST_SETTLE, Effect.POST_RELEASE} & set(t.effects):
        updates["closing_transaction_id"] = ledger_tx
    if t.to_state is State.UNKNOWN and w.unknown_since is None:
        updates["unknown_since"] = now
    if t.to_state is not t.from_state:
        updates["state_changed_at"] = now
    updates["state"] = str(t.to_state)
    updates["state_reason"] = reason
    history = repo.HistoryRow(
        from_state=t.from_state, to_state=t.to_state, event=str(event), reason=reason,
        evidence=evidence or {}, actor=actor, occurred_at=now, ledger_transaction_id=ledger_tx,
        attempt_id=attempt_id)
    return repo.record_transition(uow.conn, w.id, updates, history)


def _post_effects(uow: UnitOfWork, w: WithdrawalRecord, t: Transition, *, reason: str | None,
                  gas: Gas | None, return_entry: Entry | None,
                  accounts: tuple[Account, Account] | None) -> int | None:
    """Post the ledger effects of ``t``; return the main transaction id (reserve, settle,
    release or return) if any. ``accounts`` (wallet, withdrawals) are given for a reserve or a
    release."""
    main: int | None = None
    now = t.at
    for effect in t.effects:
        if effect is Effect.POST_RESERVE:
            assert accounts is not None
            wallet, withdrawals = accounts
            main = ledger.post(uow, _entry(
                w, "reserve", "withdrawal_reserve",
                [debit(wallet, w.reserved_minor), credit(withdrawals, w.reserved_minor)],
                now=now, reason=reason,
                metadata={"amount_minor": str(w.amount_minor),
                          "fee_max_minor": str(w.fee_max_minor)})).transaction_id
        elif effect is Effect.POST_RELEASE:
            assert accounts is not None
            wallet, withdrawals = accounts
            main = ledger.post(uow, _entry(
                w, "release", "withdrawal_release",
                [debit(withdrawals, w.reserved_minor, closes_posting_id=w.reserve_posting_id),
                 credit(wallet, w.reserved_minor)], now=now, reason=reason)).transaction_id
        elif effect is Effect.POST_SETTLE:
            main = ledger.post(uow, settle_entry(uow, w, now=now, reason=reason)).transaction_id
        elif effect is Effect.POST_GAS:
            # Only closing a nonce may have no gas: another transaction consumed it.
            assert gas is not None or t.event is Event.NONCE_CLOSED, "a receipt carries gas"
            if gas is not None and gas.amount_chain > 0:
                ledger.post(uow, gas_entry(uow, w, gas, now=now))
        elif effect is Effect.POST_RETURN:
            if return_entry is not None:
                main = ledger.post(uow, return_entry).transaction_id
        elif effect is Effect.BROADCAST:
            pass  # Carried out by the processor after the commit, never inside it.
    return main


def settle_entry(uow: UnitOfWork, w: WithdrawalRecord, *, now: datetime,
                 reason: str | None) -> Entry:
    """The settlement, one transaction: ``DR user:withdrawals (reserved)`` closing the reserve /
    ``CR custody:{chain} (amount)`` / ``CR revenue:withdrawal_fees (fee)`` /
    ``CR user:wallet (unused)``, plus the fee moved out of custody:
    ``DR treasury:{chain}`` / ``CR custody:{chain}`` (same asset)."""
    asset = ledger.get_asset(uow, w.asset_code)
    wallet, withdrawals = ledger.open_user_accounts(uow, w.user_id, asset)
    custody = ledger.open_account(uow, chart.custody(w.chain), asset)
    unused = w.reserved_minor - w.amount_minor - w.fee_minor
    lines = [debit(withdrawals, w.reserved_minor, closes_posting_id=w.reserve_posting_id),
             credit(custody, w.amount_minor)]
    if w.fee_minor:
        revenue = ledger.open_account(uow, chart.revenue_withdrawal_fees(), asset)
        treasury = ledger.open_account(uow, chart.treasury(w.chain), asset)
        lines += [credit(revenue, w.fee_minor), debit(treasury, w.fee_minor),
                  credit(custody, w.fee_minor)]
    if unused:
        lines.append(credit(wallet, unused))
    return _entry(w, "settle", "withdrawal_settle", lines, now=now, reason=reason,
                  metadata={"amount_minor": str(w.amount_minor), "fee_minor": str(w.fee_minor),
                            "unused_minor": str(unused)})


def gas_entry(uow: UnitOfWork, w: WithdrawalRecord, gas: Gas, *, now: datetime) -> Entry:
    """Gas paid by the hot wallet, the company's expense in the native asset:
    ``DR expense:network_fees`` / ``CR treasury:{chain}``. Customer money never pays gas.

    The amount is converted from the chain's decimals to the scale of the ledger asset as
    stored (not as configured), exactly: an inexact amount is a configuration error that the
    loader refuses at startup; if it happens anyway nothing is booked and the step stops.
    """
    asset = ledger.get_asset(uow, gas.native_asset)
    try:
        amount_minor = model.to_ledger_units(gas.amount_chain, gas.decimals, asset.scale)
    except AmountNotRepresentable as exc:
        raise ConfigurationInvalid(
            f"withdrawal {w.id}: gas of attempt {gas.attempt_no} cannot be booked exactly in "
            f"{asset.code} (scale {asset.scale}): {exc.message}") from exc
    expense = ledger.open_account(uow, chart.expense_network_fees(), asset)
    treasury = ledger.open_account(uow, chart.treasury(w.chain), asset)
    return _entry(w, f"gas:{gas.attempt_no}", "withdrawal_gas",
                  [debit(expense, amount_minor), credit(treasury, amount_minor)],
                  now=now, reason="gas paid by the hot wallet",
                  metadata={"amount_chain": str(gas.amount_chain),
                            "chain_decimals": gas.decimals})
