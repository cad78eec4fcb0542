"""Holds: a final receipt whose settlement cannot be posted. What was raised while booking it is
classified (``_transient``: the node or the database away, a busy lock, retried by the next
step and never held; anything else is a broken invariant, described by ``_refusal``), and a
broken invariant holds the withdrawal in a new transaction, with its evidence, a case and a
CRITICAL alert (``_hold_or_log``, ``_hold``).
"""

from __future__ import annotations

from datetime import datetime
from functools import partial
from typing import Any

from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import Engine

from chains.errors import RpcUnavailable
from config.errors import CustodyError, DatabaseUnavailable
from config.uow import UnitOfWork, run_in_transaction, sqlstate
from ledger.errors import LedgerError
from outgoing.model import AttemptView
from withdrawals import repository as repo
from withdrawals import service
from withdrawals.errors import InvariantBroken, SettlementMismatch, SettlementRefused
from withdrawals.model import Event, State
from withdrawals.processor.context import ACTOR, TRACKED, ChainContext, StepReport, alerts
from withdrawals.processor.receipts import _mark_included
from withdrawals.repository import WithdrawalRecord

#: SQLSTATE classes of a database that is away or busy (connection, serialization, resources,
#: operator intervention) and lock_not_available: retried, never a reason to hold.
_TRANSIENT_SQLSTATE_CLASSES = ("08", "40", "53", "57")


def _transient(exc: BaseException) -> bool:
    """Expected and transient (the node or the database away, a lock busy, a serialization
    conflict): the next step tries again and nothing is held. Anything else raised while
    booking a final receipt is a broken invariant."""
    if isinstance(exc, (RpcUnavailable, DatabaseUnavailable)):
        return True
    if isinstance(exc, sa_exc.DBAPIError):
        state = sqlstate(exc)
        if state is None:
            return isinstance(exc, sa_exc.OperationalError) or exc.connection_invalidated
        return state[:2] in _TRANSIENT_SQLSTATE_CLASSES or state == "55P03"
    return False


def _refusal(w: WithdrawalRecord, landed: AttemptView, event: Event, proof: dict[str, Any],
             exc: Exception) -> SettlementRefused:
    """The broken invariant ``exc`` met while booking ``event`` for ``w``, as what the hold
    records: the case kind, the cause's code and message, and the evidence."""
    if isinstance(exc, SettlementMismatch):
        kind, cause, message = "settlement_mismatch", exc.code, exc.message
    elif isinstance(exc, LedgerError):
        kind, cause, message = "ledger_refused", exc.code, exc.message
    elif isinstance(exc, (InvariantBroken, CustodyError)):
        # E.g. gas that cannot be booked exactly (configuration_invalid), a refused transition.
        kind, cause, message = "invariant_broken", exc.code, exc.message
    else:
        kind, cause, message = "invariant_broken", type(exc).__name__, str(exc)
    evidence = {**proof, "booking": str(event), "receipt_block": landed.receipt_block,
                "attempt_id": landed.attempt_id, "error": cause, "message": message[:2000],
                "exception": type(exc).__name__}
    return SettlementRefused(f"withdrawal {w.id}: {event} cannot be booked: {cause}: {message}",
                             kind=kind, cause=cause, attempt_id=landed.attempt_id,
                             evidence=evidence)


def _hold_or_log(engine: Engine, ctx: ChainContext, withdrawal_id: int,
                 refused: SettlementRefused, *, now: datetime, report: StepReport) -> None:
    """Hold the withdrawal and alert; if even that fails, say so loudly and go on with the
    other withdrawals (the next step meets the same refusal and tries the hold again)."""
    try:
        case_id = run_in_transaction(engine, partial(
            _hold, ctx=ctx, withdrawal_id=withdrawal_id, refused=refused, now=now))
    except Exception:
        alerts.critical("withdrawal %s on %s: settlement refused (%s) and the hold could not be "
                        "recorded; retried next step", withdrawal_id, ctx.chain.name,
                        refused.message, exc_info=True)
        return
    if case_id is None:
        return
    report.held += 1
    alerts.critical(
        "withdrawal %s on %s HELD (case %s, %s): %s. A broken invariant: its payout is final on "
        "chain but nothing was booked and its reserve stays open; the chain's other payouts go "
        "on. Next: read the case's evidence (`custody withdrawal show %s`), fix the cause, then "
        "`custody withdrawal retry %s --by NAME --reason TEXT` to settle it again.",
        withdrawal_id, ctx.chain.name, case_id, refused.kind, refused.message, withdrawal_id,
        withdrawal_id)


def _hold(uow: UnitOfWork, ctx: ChainContext, withdrawal_id: int, refused: SettlementRefused,
          now: datetime) -> int | None:
    """Record the hold in a new transaction: ``included`` (if the rolled-back transaction had
    only just observed the receipt) -> ``held``, with its history rows and a case. The id of
    the case, or None when the withdrawal moved meanwhile (held once: held is not tracked)."""
    # Row lock: tracking and a retry are ordered; the second sees the first's state.
    w = repo.get_withdrawal(uow.conn, withdrawal_id, for_update=True)
    if w is None or w.state not in TRACKED:
        return None
    evidence = refused.evidence
    if w.state is not State.INCLUDED or w.landed_attempt_id != refused.attempt_id:
        landed = AttemptView(refused.attempt_id, str(evidence["tx_hash"]),
                             int(str(evidence["nonce"])), int(str(evidence["receipt_block"])),
                             None, None, True)
        w = _mark_included(uow, w, landed, evidence, now=now)
    reason = f"{refused.cause}: {refused.evidence['message']}"
    service.apply(uow, w, Event.SETTLEMENT_HELD, now=now, actor=ACTOR, reason=reason,
                  evidence={**evidence, "kind": refused.kind}, attempt_id=refused.attempt_id)
    return repo.insert_case(uow.conn, withdrawal_id=w.id, kind=refused.kind, reason=reason,
                            evidence=evidence, opened_by=ACTOR, at=now)
