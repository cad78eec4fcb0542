"""Phase (2), sending: signed attempts are broadcast outside any database transaction and the
outcome (accepted, or unconfirmed: never failed, since the node may have taken it before its
answer was lost) is recorded in a new one; ``_resend`` repeats recorded bytes as they are, for
tracking and closing.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy.engine import Engine

from chains.errors import ChainError, RpcError, RpcUnavailable
from config.uow import UnitOfWork, run_in_transaction
from config.withdrawals import WithdrawalsConfig
from withdrawals import repository as repo
from withdrawals import service
from withdrawals.model import Event, State
from withdrawals.processor.context import ACTOR, ChainContext, StepReport, _ids, log
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
    """Broadcast an attempt's signed bytes. Any failure is an unknown outcome, never a
    failure: the node may have taken it before the answer was lost."""
    evidence: dict[str, Any] = {"tx_hash": attempt.tx_hash, "nonce": attempt.nonce}
    try:
        ctx.rpc.send_raw_transaction(attempt.raw_tx)
    except RpcUnavailable as exc:
        return Event.SEND_UNCONFIRMED, {**evidence, "error": f"no answer: {exc.message}"}
    except RpcError as exc:
        return Event.SEND_UNCONFIRMED, {**evidence, "error": f"node error: {exc.message}"}
    return Event.SEND_ACCEPTED, evidence


def _resend(ctx: ChainContext, attempt: AttemptRecord) -> None:
    try:
        ctx.rpc.send_raw_transaction(attempt.raw_tx)
    except ChainError as exc:
        log.info("re-send of %s: %s", attempt.tx_hash, exc.message)
