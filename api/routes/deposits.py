"""A deposit transaction: every transfer to us in it, with its full history."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Request

from api import auth
from api.auth import ReaderScope
from api.routes.deps import AUTHED, Uow, context, problems
from api.routes.views import transfer_view
from api.schemas import CHAIN_PATTERN, TX_HASH_PATTERN, DepositTimeline
from deposits import service as deposits
from deposits.errors import DepositNotFound

router = APIRouter(prefix="/v1/deposits", tags=["deposits"])


@router.get("/{chain}/{tx_hash}", response_model=DepositTimeline, responses=problems(*AUTHED),
            summary="Every transfer of a transaction with its history and ledger transactions")
def deposit_timeline(
    request: Request,
    chain: Annotated[str, Path(pattern=CHAIN_PATTERN)],
    tx_hash: Annotated[str, Path(pattern=TX_HASH_PATTERN)],
    principal: ReaderScope,
    uow: Uow,
) -> DepositTimeline:
    """For a client, only the transfers to its own users (none: 404)."""
    ctx = context(request)
    ctx.chain(chain)
    entries = deposits.timeline(uow, chain, tx_hash)
    users = {e.deposit.user_id for e in entries if e.deposit.user_id is not None}
    visible = auth.visible_users(uow, principal, users)
    if principal.scope not in auth.STAFF:
        entries = [e for e in entries if e.deposit.user_id in visible]
    if not entries:
        raise DepositNotFound(f"no deposit in transaction {tx_hash} on {chain}")
    return DepositTimeline(chain=chain, tx_hash=tx_hash.lower(),
                           transfers=[transfer_view(ctx.chains, e) for e in entries])
