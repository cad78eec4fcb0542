"""What a landed receipt leads to, shared by tracking, holds and closing: the move to ``included``
on the attempt that landed (``_mark_included``), the gas that attempt paid (``_gas``), and the
check that a token payout's receipt pays exactly what was asked (``_check_payout``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from chains.evm import decode_receipt_transfers
from config.uow import UnitOfWork
from outgoing.chain import gas_paid_wei
from outgoing.model import AttemptView
from withdrawals import service
from withdrawals.errors import SettlementMismatch
from withdrawals.model import Event, State
from withdrawals.processor.context import ACTOR, ChainContext
from withdrawals.repository import AttemptRecord, WithdrawalRecord


def _mark_included(uow: UnitOfWork, w: WithdrawalRecord, landed: AttemptView,
                   proof: dict[str, Any], *, now: datetime) -> WithdrawalRecord:
    """Move ``w`` to ``included`` on ``landed`` unless it is there already (from another
    attempt of the same nonce after a reorg: out first)."""
    if w.state is State.INCLUDED and w.landed_attempt_id == landed.attempt_id:
        return w
    if w.state is State.INCLUDED:  # Another attempt of the same nonce, after a reorg.
        w = service.apply(uow, w, Event.REORGED_OUT, now=now, actor=ACTOR,
                          reason="another attempt landed instead", evidence=proof)
    return service.apply(uow, w, Event.RECEIPT_OBSERVED, now=now, actor=ACTOR,
                         reason=f"included in block {landed.receipt_block}", evidence=proof,
                         attempt_id=landed.attempt_id, landed_attempt_id=landed.attempt_id)


def _gas(ctx: ChainContext, attempt: AttemptRecord, receipt: dict[str, Any]) -> service.Gas:
    """What the landed attempt paid, in the chain's smallest unit; the ledger entry converts
    it exactly to the native asset's ledger scale."""
    return service.Gas(attempt.attempt_no, ctx.chain.native_asset, gas_paid_wei(receipt),
                       ctx.chain.native_decimals)


def _check_payout(ctx: ChainContext, w: WithdrawalRecord, receipt: dict[str, Any]) -> None:
    if w.token is None:
        return  # A native payout's value is the signed transaction's own value.
    paid = [t for t in decode_receipt_transfers(receipt)
            if t.token == w.token and t.from_address == ctx.hot.address
            and t.to_address == w.destination]
    if [t.value for t in paid] != [w.chain_amount]:
        raise SettlementMismatch(f"withdrawal {w.id}: receipt pays {[t.value for t in paid]}, "
                                 f"expected [{w.chain_amount}]")
