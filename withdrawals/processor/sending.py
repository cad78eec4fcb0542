"""Phase (2), sending: signed attempts are broadcast outside any database transaction and the
outcome (accepted, or unconfirmed: never failed, since the node may have taken it before its
answer was lost) is recorded in a new one; ``_resend`` repeats recorded bytes as they are, for
tracking and closing. Both are the shared mechanism's (``outgoing.chain``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy.engine import Engine

from config.uow import UnitOfWork, run_in_transaction
from config.withdrawals import WithdrawalsConfig
from outgoing import chain as outgoing_chain
from withdrawals import repository as repo
from withdrawals import service
from withdrawals.model import Event, State
from withdrawals.processor.context import ACTOR, ChainContext, StepReport, _ids
from withdrawals.repository import AttemptRecord


def _send_signed(engine: Engine, cfg: WithdrawalsConfig, ctx: ChainContext, *, now: datetime,
                 report: StepReport) -> None:
    for withdrawal_id in _ids(engine, cfg, ctx.chain.name, (State.SIGNED,)):
        with UnitOfWork(engine) as uow:
            attempts = repo.list_attempts(uow.conn, withdrawal_id)
        latest = attempts[-1]
        event, evidence = _send(ctx, latest)
        report.sent += 1

        def record(uow: UnitOfWork, i: int = withdrawal_id, e: Event = event,
                   ev: dict[str, Any] = evidence, a: AttemptRecord = latest) -> None:
            w = repo.get_withdrawal(uow.conn, i, for_update=True)
            # Another step may have moved it meanwhile (it found a receipt): keep that.
            if w is None or w.state is not State.SIGNED:
                return
            service.apply(uow, w, e, now=now, actor=ACTOR, reason=ev.get("error", "accepted"),
                          evidence=ev, attempt_id=a.id)

        run_in_transaction(engine, record)


def _send(ctx: ChainContext, attempt: AttemptRecord) -> tuple[Event, dict[str, Any]]:
    """Broadcast an attempt's signed bytes (``outgoing.chain.send``). Any failure is an unknown
    outcome, never a failure: the node may have taken it before the answer was lost."""
    outcome = outgoing_chain.send(ctx.rpc, attempt)
    return (Event.SEND_ACCEPTED if outcome.accepted else Event.SEND_UNCONFIRMED), outcome.evidence


def _resend(ctx: ChainContext, attempt: AttemptRecord) -> None:
    outgoing_chain.resend(ctx.rpc, attempt)
