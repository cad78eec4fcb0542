"""Use cases of withdrawals that need no chain call: request and reserve, approve, reject,
cancel, write-off votes, returned payouts, the retry of a held withdrawal, open items, what is
waiting for an operator (held withdrawals' cases, payouts waiting for the gas float) and the
timeline.

Every state change goes through ``model.transition`` and is written, with its history row and
its ledger entries (posted with ``ledger.service.post``, keys ``withdrawal:{id}:{step}``), in one
unit of work run by ``config.uow.run_in_transaction``. The chain side (sign, send, track,
settle) lives in ``withdrawals.processor`` and uses ``apply`` and the ``post_*`` helpers here.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, Protocol

from sqlalchemy.engine import Engine

from config.errors import ConfigurationInvalid
from config.uow import UnitOfWork, run_in_transaction
from config.withdrawals import AssetPolicy, WithdrawalsConfig
from ledger import chart
from ledger import service as ledger
from ledger.model import Account, Entry, Line, credit, debit
from ledger.repository import TransactionRecord
from withdrawals import model
from withdrawals import repository as repo
from withdrawals.errors import (
    AddressOwn,
    AmountNotRepresentable,
    ApprovalRefused,
    AssetNotWithdrawable,
    DailyLimitExceeded,
    RetryRefused,
    ReturnLinkInvalid,
    WithdrawalKeyConflict,
    WithdrawalNotFound,
    WriteOffRefused,
)
from withdrawals.model import Effect, Event, State, Transition

# The record this service returns, re-exported for its callers (routes never import a
# repository).
from withdrawals.repository import WithdrawalRecord as WithdrawalRecord

log = logging.getLogger("withdrawals")
SOURCE = "withdrawals"
APPROVER = "approver"
ADMIN = "admin"


class OwnAddresses(Protocol):
    """Answers "is this one of our own addresses on that chain?" (deposit addresses, hot
    wallets). Wired by the API layer; withdrawals does not know where addresses come from."""

    def is_own(self, chain: str, address: str) -> bool:
        """Whether ``address`` (lower-case) belongs to us on ``chain``."""
        ...


@dataclass(frozen=True)
class Actor:
    """Who acts, with the roles the API layer authenticated (``approver``, ``admin``)."""

    id: str
    roles: frozenset[str] = field(default_factory=frozenset)


@dataclass(frozen=True)
class WithdrawalRequest:
    """A request to withdraw: amounts in the ledger asset's minor units."""

    user_id: str
    chain: str
    asset: str
    destination: str
    amount_minor: int
    request_key: str
    requested_by: str | None = None


@dataclass(frozen=True)
class Requested:
    """The withdrawal a request resolved to; ``replayed`` when the key was used before."""

    withdrawal: WithdrawalRecord
    replayed: bool


# --- request and reserve --------------------------------------------------------------------


def _fingerprint(req: WithdrawalRequest, destination: str) -> str:
    canonical = [req.user_id, req.chain, req.asset, destination, str(req.amount_minor),
                 req.requested_by or req.user_id]
    return hashlib.sha256(json.dumps(canonical).encode()).hexdigest()


def validate_request(cfg: WithdrawalsConfig, own: OwnAddresses,
                     req: WithdrawalRequest) -> tuple[AssetPolicy, str, int]:
    """Refuse a malformed request before anything is written: (policy, destination, chain
    amount). Balance and daily limit are checked later, under locks."""
    policy = cfg.policy(req.chain, req.asset)
    if policy is None:
        raise AssetNotWithdrawable(f"{req.asset} cannot be withdrawn on chain {req.chain!r}")
    destination = model.normalize_address(req.destination)
    model.check_amount_bounds(req.amount_minor, policy.minimum_minor, policy.maximum_minor)
    chain_amount = model.to_chain_units(req.amount_minor, policy.scale, policy.decimals)
    hot = cfg.hot_wallets.get(req.chain)
    if (hot is not None and hot.address == destination) or own.is_own(req.chain, destination):
        raise AddressOwn(f"{destination} is one of our own addresses on {req.chain}")
    return policy, destination, chain_amount


def request_withdrawal(engine: Engine, cfg: WithdrawalsConfig, own: OwnAddresses,
                       req: WithdrawalRequest, *, now: datetime) -> Requested:
    """Validate, then post the reserve and insert the withdrawal in one unit of work.

    The reserve (``DR user:wallet amount + fee_max`` / ``CR user:withdrawals``) is checked
    against the wallet's balance under the ledger's row lock: InsufficientFunds refuses it and
    nothing is written. The same (user, key) with the same request returns the first
    withdrawal; with another request, WithdrawalKeyConflict.

    Three statements when the user's accounts exist (a replay: two): the daily-limit lock with
    what the reserve reads under it (``repo.open_reserve``), the ledger post, and the insert of
    the withdrawal in its reserved state with its history row (``repo.record_reserve``).
    """
    policy, destination, chain_amount = validate_request(cfg, own, req)
    fingerprint = _fingerprint(req, destination)
    wallet_code = chart.user_wallet(req.user_id).code
    withdrawals_code = chart.user_withdrawals(req.user_id).code

    def work(uow: UnitOfWork) -> Requested:
        opened = repo.open_reserve(uow.conn, req.user_id, req.asset, req.request_key,
                                   now - timedelta(days=1), wallet_code, withdrawals_code)
        if opened.existing_id is not None:
            existing = repo.get_withdrawal(uow.conn, opened.existing_id)
            assert existing is not None, "read under the lock, withdrawals are never deleted"
            if existing.fingerprint != fingerprint:
                raise WithdrawalKeyConflict(
                    f"key {req.request_key} was used for a different withdrawal request")
            return Requested(existing, True)
        assert opened.withdrawal_id is not None
        # The request as a withdrawal in state ``requested``: never stored as such, it is
        # inserted once its reserve is posted, in its reserved state.
        w = WithdrawalRecord(
            id=opened.withdrawal_id, user_id=req.user_id, request_key=req.request_key,
            fingerprint=fingerprint, requested_by=req.requested_by or req.user_id,
            chain=req.chain, asset_code=req.asset, token=policy.token, destination=destination,
            amount_minor=req.amount_minor, fee_minor=model.fee_charged(
                policy.fee_minor, policy.fee_max_minor),
            fee_max_minor=policy.fee_max_minor, chain_amount=chain_amount,
            approvals_required=model.approvals_required(
                req.amount_minor, policy.approval_threshold_minor,
                policy.dual_approval_threshold_minor),
            state=State.REQUESTED, state_reason=None, hot_wallet=None, nonce=None,
            reserve_transaction_id=None, reserve_posting_id=None, closing_transaction_id=None,
            landed_attempt_id=None, requested_at=now, state_changed_at=now, unknown_since=None)
        return Requested(_reserve(uow, policy, w, opened, now=now), False)

    return run_in_transaction(engine, work)


def _reserve(uow: UnitOfWork, policy: AssetPolicy, w: WithdrawalRecord,
             opened: repo.ReserveOpened, *, now: datetime) -> WithdrawalRecord:
    """Check the limit, post the reserve of the requested withdrawal ``w`` and insert it in
    its reserved state with its history row (2 statements after ``open_reserve`` when the
    user's accounts exist)."""
    accounts = _known_accounts(w.user_id, opened.accounts) or _open_accounts(uow, w)
    # The chain amount was converted with the configured scale: it must be the ledger's.
    stored_scale = accounts[0].asset.scale
    if stored_scale != policy.scale:
        raise ConfigurationInvalid(
            f"{w.asset_code} has scale {stored_scale} in the ledger but {policy.scale} in the "
            "withdrawal configuration")
    # open_reserve read the day's total under the (user, asset) limit lock, held until commit.
    used = opened.used_minor
    if used + w.amount_minor > policy.daily_limit_minor:
        raise DailyLimitExceeded(
            f"{w.user_id}: {used} + {w.amount_minor} {w.asset_code} in 24 h would pass the daily "
            f"limit {policy.daily_limit_minor}")
    event = Event.APPROVAL_REQUIRED if w.approvals_required else Event.RESERVE_POSTED
    reason = (f"{w.approvals_required} approval(s) required" if w.approvals_required
              else "reserved")
    t = model.transition(w.state, event, now=now)
    assert t.effects == (Effect.POST_RESERVE,), t
    ledger_tx = _post_effects(uow, w, t, reason=reason, gas=None, return_entry=None,
                              accounts=accounts)
    assert ledger_tx is not None
    history = repo.HistoryRow(
        from_state=t.from_state, to_state=t.to_state, event=str(event), reason=reason,
        evidence={"daily_used_minor": str(used)}, actor=w.requested_by, occurred_at=now,
        ledger_transaction_id=ledger_tx)
    posting_id = repo.record_reserve(uow.conn, w, history, accounts[1].id)
    return replace(w, state=t.to_state, state_reason=reason, reserve_transaction_id=ledger_tx,
                   reserve_posting_id=posting_id)


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


# --- applying a transition ------------------------------------------------------------------


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


def _locked(uow: UnitOfWork, withdrawal_id: int) -> WithdrawalRecord:
    w = repo.get_withdrawal(uow.conn, withdrawal_id, for_update=True)
    if w is None:
        raise WithdrawalNotFound(f"no withdrawal {withdrawal_id}")
    return w


def get_withdrawal(engine: Engine, withdrawal_id: int) -> WithdrawalRecord:
    """A withdrawal by id, or WithdrawalNotFound."""
    with UnitOfWork(engine) as uow:
        w = repo.get_withdrawal(uow.conn, withdrawal_id)
    if w is None:
        raise WithdrawalNotFound(f"no withdrawal {withdrawal_id}")
    return w


def unknown_outcomes(uow: UnitOfWork, chain: str, *, limit: int) -> list[WithdrawalRecord]:
    """Withdrawals of ``chain`` whose outcome is unknown (``unknown`` or awaiting a write-off),
    oldest first, at most ``limit``."""
    ids = repo.list_ids_in_states(uow.conn, chain, [State.UNKNOWN, State.AWAITING_WRITE_OFF],
                                  limit)
    found = [repo.get_withdrawal(uow.conn, wid) for wid in ids]
    return [w for w in found if w is not None]


# --- approvals, rejection, cancel -----------------------------------------------------------


def approve(engine: Engine, withdrawal_id: int, actor: Actor, *, now: datetime,
            reason: str | None = None) -> WithdrawalRecord:
    """Record an approval; the withdrawal proceeds once enough different approvers agreed.

    Refused: without the approver role, on one's own request, and a second vote by the same
    person (checked here, and by a UNIQUE constraint in the database).
    """
    if APPROVER not in actor.roles:
        raise ApprovalRefused(f"{actor.id} does not have the approver role")

    def work(uow: UnitOfWork) -> WithdrawalRecord:
        # Lock: two approvers at once must both be counted (no lost second approval).
        w = _locked(uow, withdrawal_id)
        if w.state is not State.PENDING_APPROVAL:
            raise ApprovalRefused(f"withdrawal {w.id} is {w.state}, not pending approval")
        if actor.id in (w.user_id, w.requested_by):
            raise ApprovalRefused(f"{actor.id} cannot approve their own withdrawal")
        if not repo.insert_decision(uow.conn, w.id, "approval", "approve", actor.id, reason, now):
            raise ApprovalRefused(f"{actor.id} already voted on withdrawal {w.id}")
        approvers = {d.actor for d in repo.list_decisions(uow.conn, w.id, "approval")
                     if d.decision == "approve"}
        done = len(approvers) >= w.approvals_required
        event = Event.APPROVALS_COMPLETED if done else Event.APPROVAL_RECORDED
        return apply(uow, w, event, now=now, actor=actor.id,
                     reason=f"approved by {actor.id} ({len(approvers)}/{w.approvals_required})",
                     evidence={"approvers": sorted(approvers)})

    return run_in_transaction(engine, work)


def reject(engine: Engine, withdrawal_id: int, actor: Actor, *, now: datetime,
           reason: str) -> WithdrawalRecord:
    """An approver refuses the withdrawal before signing: the reserve is released."""
    if APPROVER not in actor.roles:
        raise ApprovalRefused(f"{actor.id} does not have the approver role")
    if not reason:
        raise ApprovalRefused("a rejection needs a reason")

    def work(uow: UnitOfWork) -> WithdrawalRecord:
        w = _locked(uow, withdrawal_id)
        if actor.id in (w.user_id, w.requested_by):
            raise ApprovalRefused(f"{actor.id} cannot decide on their own withdrawal")
        if not repo.insert_decision(uow.conn, w.id, "approval", "reject", actor.id, reason, now):
            raise ApprovalRefused(f"{actor.id} already voted on withdrawal {w.id}")
        return apply(uow, w, Event.REJECTED, now=now, actor=actor.id, reason=reason)

    return run_in_transaction(engine, work)


def cancel(engine: Engine, withdrawal_id: int, actor: str, *, now: datetime,
           reason: str = "canceled by request") -> WithdrawalRecord:
    """Cancel before a nonce is assigned (``signing``) and release the reserve;
    WithdrawalNotCancelable afterwards.

    The row lock orders cancel and signing: whichever comes second sees the other's state.
    """

    def work(uow: UnitOfWork) -> WithdrawalRecord:
        w = _locked(uow, withdrawal_id)
        return apply(uow, w, Event.CANCELED, now=now, actor=actor, reason=reason)

    return run_in_transaction(engine, work)


# --- write-off ------------------------------------------------------------------------------


def vote_write_off(engine: Engine, withdrawal_id: int, actor: Actor, decision: str, *,
                   reason: str, now: datetime) -> WithdrawalRecord:
    """An admin's vote to treat an undetermined withdrawal as ``sent`` or ``not_sent``.

    Two different admins agreeing decide it: ``sent`` settles (custody pays out, fee charged),
    ``not_sent`` releases the reserve. One vote, or two that disagree, changes nothing else.
    """
    if ADMIN not in actor.roles:
        raise WriteOffRefused(f"{actor.id} does not have the admin role")
    if decision not in ("sent", "not_sent"):
        raise WriteOffRefused("decision must be 'sent' or 'not_sent'")
    if not reason or not reason.strip():
        raise WriteOffRefused("a write-off needs a reason")

    def work(uow: UnitOfWork) -> WithdrawalRecord:
        w = _locked(uow, withdrawal_id)
        if w.state is not State.AWAITING_WRITE_OFF:
            raise WriteOffRefused(f"withdrawal {w.id} is {w.state}, not awaiting a write-off")
        if not repo.insert_decision(uow.conn, w.id, "write_off", decision, actor.id, reason,
                                    now):
            raise WriteOffRefused(f"{actor.id} already voted on withdrawal {w.id}")
        agreeing = sorted(d.actor for d in repo.list_decisions(uow.conn, w.id, "write_off")
                          if d.decision == decision)
        if len(agreeing) < 2:
            return apply(uow, w, Event.WRITE_OFF_VOTED, now=now, actor=actor.id,
                         reason=f"{actor.id} votes {decision}: {reason}",
                         evidence={"decision": decision, "votes": agreeing})
        event = Event.WRITTEN_OFF_AS_SENT if decision == "sent" else Event.WRITTEN_OFF_AS_NOT_SENT
        return apply(uow, w, event, now=now, actor=actor.id,
                     reason=f"written off as {decision} by {' and '.join(agreeing)}: {reason}",
                     evidence={"decision": decision, "admins": agreeing})

    return run_in_transaction(engine, work)


# --- held withdrawals -------------------------------------------------------------------------


def retry_held(engine: Engine, withdrawal_id: int, actor: Actor, *, reason: str,
               now: datetime) -> WithdrawalRecord:
    """An admin lifts the hold of a held withdrawal once its cause is fixed: ``held ->
    included`` (``hold_lifted``), and the open case gets its resolution. Nothing is booked
    here: the processor's next step books the final receipt again (and, if the cause is still
    there, holds it again with a new case). RetryRefused: no admin role, no reason, not held.
    """
    if ADMIN not in actor.roles:
        raise RetryRefused(f"{actor.id} does not have the admin role")
    if not reason or not reason.strip():
        raise RetryRefused("lifting a hold needs a reason (what was fixed)")

    def work(uow: UnitOfWork) -> WithdrawalRecord:
        # Row lock: a retry and the processor's hold are ordered; two retries lift once.
        w = _locked(uow, withdrawal_id)
        if w.state is not State.HELD:
            raise RetryRefused(f"withdrawal {w.id} is {w.state}, not held")
        cases = [c for c in repo.list_cases(uow.conn, w.id) if c.open]
        for case in cases:
            repo.resolve_case(uow.conn, case.id, resolved_by=actor.id, reason=reason, at=now)
        return apply(uow, w, Event.HOLD_LIFTED, now=now, actor=actor.id,
                     reason=f"hold lifted by {actor.id}: {reason}",
                     evidence={"cases": [c.id for c in cases]})

    return run_in_transaction(engine, work)


@dataclass(frozen=True)
class Waiting:
    """What waits for an operator on a chain: the open cases of held withdrawals, the payouts
    waiting for the gas float (``gas_float_low``) and those whose signature the signer has not
    given for ``SIGNING_OVERDUE_S`` (each holds a nonce: every later payout of the hot wallet
    waits behind it), oldest first."""

    cases: list[repo.CaseRecord]
    gas_float_low: list[WithdrawalRecord]
    signing_overdue: list[WithdrawalRecord] = field(default_factory=list)


#: A withdrawal in ``signing`` this long (its nonce taken, the signer not answering) is alerted.
SIGNING_OVERDUE_S = 120


def waiting(engine: Engine, chain: str, *, limit: int, now: datetime) -> Waiting:
    """Open withdrawal cases, payouts waiting for the gas float and payouts the signer has not
    signed for ``SIGNING_OVERDUE_S`` on ``chain`` (at most ``limit`` of each): what the API's
    alerts are raised from."""
    with UnitOfWork(engine) as uow:
        cases = repo.open_cases(uow.conn, chain, limit)
        gas = [repo.get_withdrawal(uow.conn, i)
               for i in repo.ids_waiting_for_gas(uow.conn, chain, limit)]
        signing = [repo.get_withdrawal(uow.conn, i) for i in repo.ids_signing_since(
            uow.conn, chain, now - timedelta(seconds=SIGNING_OVERDUE_S), limit)]
    return Waiting(cases, [w for w in gas if w is not None],
                   [w for w in signing if w is not None])


# --- returned payouts -----------------------------------------------------------------------


@dataclass(frozen=True)
class IncomingTransfer:
    """An incoming transfer as the deposit path recorded it (final).

    ``booked_to``: ``suspense`` when the deposit path credited ``suspense:unattributed`` (it
    arrived at an address with no user, e.g. the hot wallet), ``user`` when it was already
    credited to the user's wallet (it arrived at their deposit address).
    """

    chain: str
    tx_hash: str
    position: str
    asset: str
    amount_minor: int
    from_address: str
    arrived_at: datetime
    booked_to: str
    final: bool


class IncomingTransfers(Protocol):
    """Looks up a deposit by its key; wired by the API layer to the deposit histories."""

    def find(self, chain: str, tx_hash: str, position: str) -> IncomingTransfer | None:
        """The final (or not yet final) incoming transfer with this key, or None."""
        ...


def link_return(engine: Engine, incoming: IncomingTransfers, withdrawal_id: int, *, chain: str,
                tx_hash: str, position: str, amount_minor: int, actor: str, reason: str,
                now: datetime) -> WithdrawalRecord:
    """Link a returned payout (an incoming transfer, by deposit key and amount) to its
    settled withdrawal and credit the user with what actually came back.

    Ledger: the settlement stays as it was (the payout really left), and the return is a new
    transaction effective at its arrival: ``DR suspense:unattributed / CR user:{id}:wallet``
    when the deposit path parked it in suspense (custody already holds it); nothing new when
    the deposit path credited the user directly. The fee is not refunded.
    """
    found = incoming.find(chain, tx_hash.lower(), position)
    if found is None or not found.final:
        raise ReturnLinkInvalid(f"no final incoming transfer {chain}:{tx_hash}:{position}")
    if found.amount_minor != amount_minor:
        raise ReturnLinkInvalid(f"the transfer brought {found.amount_minor}, not {amount_minor}")
    if not reason:
        raise ReturnLinkInvalid("linking a return needs a reason")

    def work(uow: UnitOfWork) -> WithdrawalRecord:
        w = _locked(uow, withdrawal_id)
        if w.state is not State.SETTLED:
            raise ReturnLinkInvalid(f"withdrawal {w.id} is {w.state}: only a settled payout "
                                    "can come back")
        if (found.chain, found.asset) != (w.chain, w.asset_code):
            raise ReturnLinkInvalid("the transfer is not in the payout's chain and asset")
        if repo.find_return(uow.conn, chain, found.tx_hash, position) is not None:
            raise ReturnLinkInvalid("that transfer is linked already")
        returned = sum(r.amount_minor for r in repo.list_returns(uow.conn, w.id))
        if returned + found.amount_minor > w.amount_minor:
            raise ReturnLinkInvalid(f"returns would exceed the {w.amount_minor} paid out")
        entry = None
        if found.booked_to == "suspense":
            asset = ledger.get_asset(uow, w.asset_code)
            suspense = ledger.open_account(uow, chart.suspense_unattributed(), asset)
            wallet, _ = ledger.open_user_accounts(uow, w.user_id, asset)
            entry = _entry(w, f"return:{chain}:{found.tx_hash}:{position}", "withdrawal_return",
                           [debit(suspense, found.amount_minor),
                            credit(wallet, found.amount_minor)],
                           now=found.arrived_at, reason=reason,
                           metadata={"deposit": f"{chain}:{found.tx_hash}:{position}",
                                     "settlement_transaction_id": w.closing_transaction_id})
        updated = apply(uow, w, Event.RETURN_LINKED, now=now, actor=actor, reason=reason,
                        return_entry=entry,
                        evidence={"deposit": f"{chain}:{found.tx_hash}:{position}",
                                  "amount_minor": str(found.amount_minor),
                                  "from": found.from_address, "booked_to": found.booked_to,
                                  "arrived_at": found.arrived_at.isoformat()})
        events = repo.list_events(uow.conn, w.id)
        txid = events[-1].ledger_transaction_id
        repo.insert_return(uow.conn, withdrawal_id=w.id, chain=chain, tx_hash=found.tx_hash,
                           position=position, amount_minor=found.amount_minor,
                           arrived_at=found.arrived_at, booked_to=found.booked_to,
                           ledger_transaction_id=txid, linked_by=actor, reason=reason)
        return updated

    return run_in_transaction(engine, work)


# --- open items and the timeline ------------------------------------------------------------


@dataclass(frozen=True)
class OpenItem:
    """A reserve not closed yet, its age and whether it is past the SLA."""

    row: repo.OpenItemRow
    age_s: float
    overdue: bool


def open_items(engine: Engine, cfg: WithdrawalsConfig, *, older_than: timedelta,
               now: datetime) -> list[OpenItem]:
    """Reserves still open that were posted more than ``older_than`` ago; those past the
    configured SLA are flagged and logged as an alert (a warning on the ``withdrawals``
    logger that the operations alerting picks up)."""
    with UnitOfWork(engine) as uow:
        rows = repo.open_reserves(uow.conn, now - older_than)
    items = []
    for row in rows:
        age = (now - row.reserved_at).total_seconds()
        item = OpenItem(row, age, age > cfg.open_item_sla_s)
        if item.overdue:
            log.warning("withdrawal %s reserve open for %.0fs (SLA %ss): %s %s", row.withdrawal_id,
                        age, cfg.open_item_sla_s, row.state, row.state_reason or "")
        items.append(item)
    return items


@dataclass(frozen=True)
class Timeline:
    """Everything that happened to one withdrawal."""

    withdrawal: WithdrawalRecord
    events: list[repo.EventRecord]
    attempts: list[repo.AttemptRecord]
    decisions: list[repo.DecisionRecord]
    returns: list[repo.ReturnRecord]
    transactions: list[TransactionRecord]
    cases: list[repo.CaseRecord] = field(default_factory=list)


def timeline(engine: Engine, withdrawal_id: int) -> Timeline:
    """The withdrawal with its history, attempts, votes, returns and ledger transactions."""
    with UnitOfWork(engine) as uow:
        w = repo.get_withdrawal(uow.conn, withdrawal_id)
        if w is None:
            raise WithdrawalNotFound(f"no withdrawal {withdrawal_id}")
        return Timeline(
            withdrawal=w, events=repo.list_events(uow.conn, w.id),
            attempts=repo.list_attempts(uow.conn, w.id),
            decisions=repo.list_decisions(uow.conn, w.id),
            returns=repo.list_returns(uow.conn, w.id),
            transactions=[ledger.get_transaction(uow, t)
                          for t in repo.ledger_transaction_ids(uow.conn, w.id)],
            cases=repo.list_cases(uow.conn, w.id),
        )

