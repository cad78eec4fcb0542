"""Request and reserve: a request (``WithdrawalRequest``) is validated before anything is written
(``validate_request``), then its reserve is posted and the withdrawal inserted in its reserved
state in one unit of work (``request_withdrawal``); a replayed key answers with the first
withdrawal (``Requested``). Whether a destination is one of our own addresses is asked of
``OwnAddresses``, wired by the API layer.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Protocol

from sqlalchemy.engine import Engine

from config.errors import ConfigurationInvalid
from config.uow import UnitOfWork, replication_barrier, run_in_transaction
from config.withdrawals import AssetPolicy, WithdrawalsConfig
from ledger import chart
from withdrawals import model
from withdrawals import repository as repo
from withdrawals.errors import (
    AddressOwn,
    AssetNotWithdrawable,
    DailyLimitExceeded,
    WithdrawalKeyConflict,
)
from withdrawals.model import Effect, Event, State
from withdrawals.repository import WithdrawalRecord
from withdrawals.service.transitions import _known_accounts, _open_accounts, _post_effects


class OwnAddresses(Protocol):
    """Answers "is this one of our own addresses on that chain?" (deposit addresses, hot
    wallets). Wired by the API layer; withdrawals does not know where addresses come from."""

    def is_own(self, chain: str, address: str) -> bool:
        """Whether ``address`` (lower-case) belongs to us on ``chain``."""
        ...


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

    Three statements when the user's accounts exist (a replay: three too, the last the
    replication barrier): the daily-limit lock with
    what the reserve reads under it (``repo.open_reserve``), the ledger post, and the insert of
    the withdrawal in its reserved state with its history row (``repo.record_reserve``); one
    more, after the first, when allowlists or velocity limits apply (``_check_limits``:
    DestinationNotAllowed, VelocityLimitExceeded, nothing written).
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
            # Found on the primary: the request it replays (or an earlier run whose commit
            # was in doubt) is acknowledged only once the standby holds it too.
            replication_barrier(uow)
            return Requested(existing, True)
        assert opened.withdrawal_id is not None
        _check_limits(uow, cfg, req, destination, now=now)
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

    # A commit whose answer was lost is resolved by the request key: ``work`` looks it up first
    # (under the limit lock) and returns the withdrawal if the lost commit made it.
    return run_in_transaction(engine, work, in_doubt=work)


def _check_limits(uow: UnitOfWork, cfg: WithdrawalsConfig, req: WithdrawalRequest,
                  destination: str, *, now: datetime) -> None:
    """Refuse a new request that the client's allowlist or a velocity limit does not allow,
    read in the reserve's transaction after ``open_reserve`` (``repo.reserve_limits``: client
    windows under the (client, asset) lock, the live allowlist entries locked FOR SHARE, both
    until commit). No statement when nothing applies: no client has allowlisting on and the
    asset has no velocity limit."""
    limits = cfg.velocity_of(req.asset)
    if not cfg.allowlist.clients and not limits:
        return
    read = repo.reserve_limits(uow.conn, req.user_id, req.asset, req.chain, destination, now,
                               sorted(cfg.allowlist.clients),
                               [(v.per, v.window_s) for v in limits])
    model.check_destination(read.allow_state, read.allow_at, client=read.client,
                            chain=req.chain, destination=destination)
    model.check_velocity([model.VelocityWindow(v.per, v.window_s, v.count_max,
                                               v.amount_max_minor, u.count, u.amount_minor)
                          for v, u in zip(limits, read.windows, strict=True)],
                         req.amount_minor, req.asset)


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
