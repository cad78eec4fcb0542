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
  already for that withdrawal counts as done.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy.engine import Engine

from config.uow import UnitOfWork, run_in_transaction
from deposits import own
from deposits import service as deposits
from deposits.errors import DepositNotFound
from withdrawals import service as withdrawals
from withdrawals.errors import ReturnLinkInvalid
from withdrawals.service import IncomingTransfer, WithdrawalRecord


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
        if d.amount_minor is None or d.asset_code is None:
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


def link_return(engine: Engine, withdrawal_id: int, *, chain: str, tx_hash: str,
                position: str, amount_minor: int, actor: str, reason: str,
                now: datetime) -> WithdrawalRecord:
    """Link a returned payout (as ``withdrawals.service.link_return``), then resolve the
    transfer's open unattributed own-address case, if any, as a return."""
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


def approve_case(engine: Engine, case_id: int, *, by: str, now: datetime) -> own.CaseOutcome:
    """The second admin's approval of a case's proposal, carried out (see the module)."""
    with UnitOfWork(engine) as uow:
        proposal, d, replayed = own.judge_approval(uow, case_id, by=by)
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
