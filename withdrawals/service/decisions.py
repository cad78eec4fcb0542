"""Policy decisions on a withdrawal, each under its row lock: approvals and a rejection by
approvers, a cancel before a nonce is assigned, and the write-off of an undetermined withdrawal
decided by two different admins.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy.engine import Engine

from config.uow import UnitOfWork, run_in_transaction
from withdrawals import repository as repo
from withdrawals.errors import ApprovalRefused, WriteOffRefused
from withdrawals.model import Event, State
from withdrawals.repository import WithdrawalRecord
from withdrawals.service.common import ADMIN, APPROVER, Actor, _locked
from withdrawals.service.transitions import apply


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
