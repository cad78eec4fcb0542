"""Compositions across deposits and withdrawals for our own addresses, shared by the routes and
the command line (deposits may not import withdrawals, so the API layer joins them here).

- :class:`DepositTransfers` answers the withdrawal service's ``IncomingTransfers`` from the
  deposit histories: a final transfer booked to suspense (at a hot or cold address, or a
  user's below-minimum deposit) or credited to a user. A transfer to a hot wallet that nobody
  attributed is in state ``suspense``: it shows up here and can be linked as a return.
- :func:`link_return` links a return (``withdrawals.service.link_return``) and then resolves
  the transfer's open ``unattributed_own_address`` case, if it has one.
- :func:`approve_case` carries out a two-admin case decision: ``capital`` in one deposit-side
  transaction; ``return`` links the transfer to the proposed withdrawal first, then records
  the approval. A crash between the two is repaired by approving again: a link that exists
  already for that withdrawal counts as done. ``refund`` (see :func:`refund_request`):
  validates the withdrawal to the sender first (a refusal is RefundRefused and writes
  nothing), then records the resolution with its ledger transaction (``DR suspense / CR
  user:company:refunds:wallet``), then requests the withdrawal of ``own.REFUND_USER`` with the
  key ``case:{id}:refund`` (requested by the approving admin) and records its id on the case.
  A crash after the resolution is repaired by approving again (the approver, or any admin but
  the proposer): the request replays by its key, so the sender is never paid twice.
- A transfer refunded to its sender is no longer an incoming transfer a return can be linked
  to (the money left suspense already).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime

from sqlalchemy.engine import Engine

from config.chains import ChainsConfig
from config.uow import UnitOfWork, run_in_transaction
from config.withdrawals import WithdrawalsConfig
from deposits import own
from deposits import service as deposits
from deposits.errors import CaseResolutionInvalid, DepositNotFound, RefundRefused
from deposits.repository import CaseRecord, DepositRecord
from withdrawals import service as withdrawals
from withdrawals.errors import ReturnLinkInvalid, WithdrawalRefused
from withdrawals.service import IncomingTransfer, WithdrawalRecord, WithdrawalRequest


class DepositTransfers:
    """The withdrawal service's ``IncomingTransfers``, read from the deposit histories."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def find(self, chain: str, tx_hash: str, position: str) -> IncomingTransfer | None:
        """The incoming transfer with this deposit key, as the deposit histories know it."""
        with UnitOfWork(self.engine) as uow:
            try:
                entries = deposits.timeline(uow, chain, tx_hash)
            except DepositNotFound:
                return None
        entry = next((e for e in entries if e.deposit.position == position), None)
        if entry is None:
            return None
        d = entry.deposit
        if d.amount_minor is None or d.asset_code is None or _refunded(entry.cases):
            return None
        credit = next((t for t in entry.ledger_transactions if t.id == d.ledger_transaction_id),
                      None)
        return IncomingTransfer(
            chain=d.chain, tx_hash=d.tx_hash, position=d.position, asset=d.asset_code,
            amount_minor=d.amount_minor, from_address=d.from_address,
            arrived_at=credit.effective_at if credit else d.updated_at,
            booked_to="user" if d.state == "credited" else "suspense",
            final=d.state in ("credited", "suspense"),
        )


def _refunded(cases: list[CaseRecord]) -> int | None:
    """The case that refunded this transfer to its sender, if any."""
    return next((c.id for c in cases if c.kind == own.CASE_KIND and c.outcome == "refund"),
                None)


def link_return(engine: Engine, withdrawal_id: int, *, chain: str, tx_hash: str,
                position: str, amount_minor: int, actor: str, reason: str,
                now: datetime) -> WithdrawalRecord:
    """Link a returned payout (as ``withdrawals.service.link_return``), then resolve the
    transfer's open unattributed own-address case, if any, as a return. A transfer refunded
    to its sender is refused (CaseResolutionInvalid): its money left suspense already."""
    with UnitOfWork(engine) as uow:
        try:
            entries = deposits.timeline(uow, chain, tx_hash.lower())
        except DepositNotFound:
            entries = []
    for e in entries:
        case_id = _refunded(e.cases) if e.deposit.position == position else None
        if case_id is not None:
            raise CaseResolutionInvalid(f"{chain}:{tx_hash}:{position} was refunded to its "
                                        f"sender by case {case_id}: it cannot be a return")
    w = withdrawals.link_return(engine, DepositTransfers(engine), withdrawal_id, chain=chain,
                                tx_hash=tx_hash, position=position, amount_minor=amount_minor,
                                actor=actor, reason=reason, now=now)
    run_in_transaction(engine, lambda uow: own.resolve_by_return(
        uow, (chain, tx_hash.lower(), position), withdrawal_id=withdrawal_id, by=actor,
        reason=reason))
    return w


def _linked_already(engine: Engine, withdrawal_id: int, key: tuple[str, str, str]) -> bool:
    returns = withdrawals.timeline(engine, withdrawal_id).returns
    return any((r.chain, r.tx_hash, r.position) == key for r in returns)


@dataclass(frozen=True)
class Payouts:
    """What paying a refund needs: the chain configuration (our own addresses) and the
    withdrawal policies."""

    chains: ChainsConfig
    withdrawals: WithdrawalsConfig


class OurAddresses:
    """The withdrawal service's ``OwnAddresses``: the configured hot and cold addresses and
    the deposit addresses (as ``ApiContext.is_own``)."""

    def __init__(self, engine: Engine, chains: ChainsConfig) -> None:
        self.engine = engine
        self.chains = chains

    def is_own(self, chain: str, address: str) -> bool:
        """Whether ``address`` is one of our addresses on ``chain``."""
        found = self.chains.chains.get(chain)
        if found is None:
            return False
        if found.address_kind(address) is not None:
            return True
        with UnitOfWork(self.engine) as uow:
            return deposits.is_deposit_address(uow, found.family, address)


def refund_request(engine: Engine, payouts: Payouts, case_id: int, d: DepositRecord, *,
                   by: str) -> WithdrawalRequest:
    """The withdrawal that refunds ``d`` to its sender, validated as any request is (nothing
    is written; RefundRefused names what is wrong).

    The fee rule: the refund is a withdrawal like any other, so its reserve is ``amount +
    fee_max`` and must fit in what arrived: the amount sent back is the amount received minus
    the policy's ``fee_max``. At settlement the fee charged goes to ``revenue:withdrawal_fees``
    (then the treasury) and the unused part of the reserve stays in the company refund wallet
    (``user:company:refunds:wallet``), visible; gas is the treasury's, as for every payout.
    """
    assert d.asset_code is not None and d.amount_minor is not None
    what = (f"case {case_id}: the refund of {d.amount_minor} {d.asset_code} (minor units) to "
            f"{d.from_address} on {d.chain} cannot be paid")
    policy = payouts.withdrawals.policy(d.chain, d.asset_code)
    if policy is None:
        raise RefundRefused(f"{what}: {d.asset_code} cannot be withdrawn on chain {d.chain} "
                            "[asset_not_withdrawable]")
    req = WithdrawalRequest(
        user_id=own.REFUND_USER, chain=d.chain, asset=d.asset_code, destination=d.from_address,
        amount_minor=d.amount_minor - policy.fee_max_minor,
        request_key=f"case:{case_id}:refund", requested_by=by)
    try:
        withdrawals.validate_request(payouts.withdrawals, OurAddresses(engine, payouts.chains),
                                     req)
    except WithdrawalRefused as exc:
        raise RefundRefused(f"{what} (after the fee reserve of {policy.fee_max_minor}): "
                            f"{exc.message} [{exc.code}]") from None
    # The daily limit is checked again, with what the company already withdrew, under the
    # request's lock; a refund larger than the whole limit can never pass: refuse it now.
    if req.amount_minor > policy.daily_limit_minor:
        raise RefundRefused(f"{what}: {req.amount_minor} is above the daily limit "
                            f"{policy.daily_limit_minor} [daily_limit_exceeded]")
    return req


def _approve_refund(engine: Engine, case_id: int, proposal: own.CaseOutcome,
                    d: DepositRecord, replayed: bool, *, by: str, now: datetime,
                    payouts: Callable[[], Payouts] | None) -> own.CaseOutcome:
    """Validate, resolve (with the ledger transaction), request the withdrawal, record it."""
    if payouts is None:
        raise RefundRefused(f"case {case_id}: a refund needs the withdrawal configuration")
    config = payouts()
    req = refund_request(engine, config, case_id, d, by=by)
    decided = proposal if replayed else run_in_transaction(
        engine, lambda uow: own.approve_resolution(uow, case_id, by=by, now=now,
                                                   refund_validated=True))
    # Requested by the admin who approved it (recorded), whoever completes it: the request's
    # fingerprint includes it, so a completion by another admin replays the same request.
    assert decided.approved_by is not None
    requested = withdrawals.request_withdrawal(
        engine, config.withdrawals, OurAddresses(engine, config.chains),
        replace(req, requested_by=decided.approved_by), now=now)
    wid = requested.withdrawal.id
    run_in_transaction(engine, lambda uow: own.record_refund_withdrawal(uow, case_id, wid))
    return replace(decided, withdrawal_id=wid)


def approve_case(engine: Engine, case_id: int, *, by: str, now: datetime,
                 payouts: Callable[[], Payouts] | None = None) -> own.CaseOutcome:
    """The second admin's approval of a case's proposal, carried out (see the module).

    ``payouts`` loads what a ``refund`` needs (called only for a refund)."""
    with UnitOfWork(engine) as uow:
        proposal, d, replayed = own.judge_approval(uow, case_id, by=by)
    if proposal.outcome == "refund":
        return _approve_refund(engine, case_id, proposal, d, replayed, by=by, now=now,
                               payouts=payouts)
    if replayed or proposal.outcome != "return":
        return run_in_transaction(engine, lambda uow: own.approve_resolution(
            uow, case_id, by=by, now=now))
    assert proposal.withdrawal_id is not None and d.amount_minor is not None
    try:
        withdrawals.link_return(
            engine, DepositTransfers(engine), proposal.withdrawal_id, chain=d.chain,
            tx_hash=d.tx_hash, position=d.position, amount_minor=d.amount_minor, actor=by,
            reason=f"case {case_id}: {proposal.reason}", now=now)
    except ReturnLinkInvalid:
        if not _linked_already(engine, proposal.withdrawal_id, d.key):
            raise
    return run_in_transaction(engine, lambda uow: own.approve_resolution(
        uow, case_id, by=by, now=now, return_linked=True))
