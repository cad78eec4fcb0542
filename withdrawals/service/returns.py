"""Returned payouts: an incoming transfer as the deposit path recorded it (``IncomingTransfer``,
looked up through ``IncomingTransfers``, wired by the API layer) is linked to its settled
withdrawal, and the user is credited with what came back (``link_return``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from sqlalchemy.engine import Engine

from config.uow import UnitOfWork, run_in_transaction
from ledger import chart
from ledger import service as ledger
from ledger.model import credit, debit
from withdrawals import repository as repo
from withdrawals.errors import ReturnLinkInvalid
from withdrawals.model import Event, State
from withdrawals.repository import WithdrawalRecord
from withdrawals.service.common import _locked
from withdrawals.service.transitions import _entry, apply


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
