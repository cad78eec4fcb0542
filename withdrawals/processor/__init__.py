"""The chain side of withdrawals: sign, send, track to finality, settle, and the unknown ladder.

One ``step`` per chain: (1) sign reserved withdrawals, but only those whose maximum gas the
treasury can pay on top of the maximum gas already in flight on the chain (the gas float,
``model.fit_gas_float``): the others wait, unsigned and with no nonce taken, as
``gas_float_low`` (one history row, an alert on ``custody.alerts``), and go on by themselves
once the treasury is funded, since the balance is read afresh every step. Signing is in three
parts so that no row lock is held while the signer (possibly a remote KMS, HSM or MPC service,
with a timeout) is called: transaction A locks the withdrawal, allocates the nonce under the
nonce row's lock, fixes the gas limit and fee caps in the history and moves it to ``signing``;
the signer is called outside any transaction; transaction B locks the withdrawal again, checks
it still waits in ``signing`` with that nonce and no attempt, records the attempt (hash, nonce,
caps, raw bytes) and moves it to ``signed``. Only recorded attempts are ever sent, so a crash or
a signer timeout between A and B loses nothing: the next step signs the same nonce and caps
again (a signature that was never recorded was never sent). (2) send signed attempts (outside
any database transaction; the outcome is recorded in a new one); (3) track every in-flight
withdrawal: receipts of all its attempts, the hot wallet's nonce at the final height and at
latest, finality under the chain's rule. Settlement happens only on a final receipt; a reorg
before finality sends the withdrawal back to broadcast tracking (and re-sends the same signed
bytes). Nothing is released without proof from the chain or a two-admin write-off. A fee-bumped
replacement is decided from the chain view and an unlocked read, signed outside any
transaction, and recorded under the row lock only if the withdrawal is still in the state the
decision saw and its latest attempt is still the one the bump was computed from (otherwise the
signature is dropped: it was never sent).
(4) close the nonces of written-off withdrawals: a nonce handed out but never consumed blocks
every later payout of the hot wallet, so the processor consumes it with a zero-value transfer
from the hot wallet to itself (same nonce, fees bumped over every earlier attempt: it replaces
a payout still in some mempool), signed outside any transaction like a replacement, recorded as
an attempt before it is sent and tracked to finality; its gas is the company's network fee. A
withdrawal written off as *sent* gets a fee-bumped copy of its payout instead, so that the
chain comes to match the books. The nonce is never handed to another payout: after a send whose
answer was lost, nothing proves that the old payout is not in some mempool, and only a
transaction with higher fees displaces it.

A final receipt whose settlement cannot be posted (a settlement mismatch, a ledger refusal such
as an account past its limit or an idempotency conflict, any broken invariant) is not an
expected error: its transaction rolls back, and a new one moves that withdrawal to ``held``
with the evidence and a case (``withdrawal_cases``), with a CRITICAL alert naming what to do
next; the chain's other withdrawals go on in the same step. Its reserve stays open; an admin's
``custody withdrawal retry`` sends it back to ``included`` once the cause is fixed. Expected,
transient failures (the node or the database away, a busy lock) are retried by the next step
and never hold anything.

Gas is booked exactly: the receipt's wei are converted to the native asset's ledger scale
(``withdrawals.model.to_ledger_units``; a coarser scale is refused when the configuration is
loaded).

A step holds an advisory lock per chain in a transaction kept open on a connection of its own,
so two processes never step one chain at once; a killed process releases it with its
connection. Every phase is safe to repeat after a
crash at any point: signed bytes are re-sent as they are (same hash), a replacement keeps the
withdrawal's nonce, and ledger entries carry idempotency keys.

The package, one module per phase:

- ``context``: ``ChainContext`` and ``build_context``, ``check_configuration`` (the chain
  against its node), ``StepReport``, the loggers and what every phase shares.
- ``signing``: (1), the gas float check, nonce assignment (transaction A), the signer called
  outside any lock, signed attempts recorded (transaction B, and replacements).
- ``sending``: (2), broadcasting recorded attempts and re-sending them.
- ``tracking``: (3), observing the chain, receipts and settlement, reorgs, the unknown ladder
  and fee-bumped replacements.
- ``receipts``: what a landed receipt leads to (``included``, the gas paid, the payout check),
  shared by tracking, holds and closing.
- ``holds``: classifying what refuses a settlement, and holding the withdrawal.
- ``closing``: (4), closing the nonces of written-off withdrawals.

``step``, ``run`` and ``main`` are here; ``python -m withdrawals.processor CHAIN`` runs ``main``
(``__main__``). Every name other code imports is re-exported here.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy.engine import Engine

from config.uow import replication_barrier, run_in_transaction
from config.withdrawals import WithdrawalsConfig
from outgoing.chain import ChainView
from withdrawals import repository as repo
from withdrawals.processor.closing import _close_nonces
from withdrawals.processor.context import (
    ACTOR,
    TRACKED,
    ChainContext,
    StepReport,
    alerts,
    build_context,
    check_configuration,
    log,
)
from withdrawals.processor.sending import _send_signed
from withdrawals.processor.signing import _sign_assigned, _sign_reserved
from withdrawals.processor.tracking import _track

__all__ = [
    "ACTOR",
    "TRACKED",
    "ChainContext",
    "ChainView",
    "StepReport",
    "alerts",
    "build_context",
    "check_configuration",
    "log",
    "main",
    "run",
    "step",
]


def step(engine: Engine, cfg: WithdrawalsConfig, ctx: ChainContext, *,
         now: datetime) -> StepReport:
    """One bounded pass over the chain's withdrawals (see the module docstring)."""
    report = StepReport()
    # The lock is held by lock_conn's transaction, kept open for the step and ended (rolled
    # back: it wrote nothing) to release it.
    with engine.connect() as lock_conn:
        if not repo.try_lock_chain(lock_conn, ctx.chain.name):
            lock_conn.rollback()
            report.skipped_locked = True
            return report
        try:
            # Nothing recorded by an earlier step (a commit in doubt there on the primary only)
            # is signed or broadcast before the synchronous standby holds it too.
            run_in_transaction(engine, replication_barrier)
            _sign_reserved(engine, cfg, ctx, now=now, report=report)  # nonces and caps taken
            _sign_assigned(engine, cfg, ctx, now=now, report=report)  # signed, then recorded
            _send_signed(engine, cfg, ctx, now=now, report=report)
            _track(engine, cfg, ctx, now=now, report=report)
            _send_signed(engine, cfg, ctx, now=now, report=report)  # replacements just signed
            _close_nonces(engine, cfg, ctx, now=now, report=report)
        finally:
            lock_conn.rollback()
    return report


def run(engine: Engine, cfg: WithdrawalsConfig, ctx: ChainContext, *, interval_s: float,
        steps_max: int | None = None, on_step: Any = None) -> None:
    """Step the chain every ``interval_s`` seconds, ``steps_max`` times (None: until killed)."""
    import time
    from datetime import UTC

    done = 0
    while steps_max is None or done < steps_max:
        report = step(engine, cfg, ctx, now=datetime.now(UTC))
        if on_step is not None:
            on_step(report)
        done += 1
        time.sleep(interval_s)


def main(argv: list[str] | None = None) -> None:
    """``python -m withdrawals.processor CHAIN [--interval-s S]``: the processor loop, with the
    configuration from ``CUSTODY_CONFIG`` and the database from the settings."""
    import argparse
    import sys

    from config.chains import load_chains_config
    from config.database import STARTUP_WAIT_S, get_engine
    from config.withdrawals import load_withdrawals_config

    parser = argparse.ArgumentParser(prog="withdrawals.processor")
    parser.add_argument("chain")
    parser.add_argument("--interval-s", type=float, default=1.0)
    args = parser.parse_args(argv)
    chains = load_chains_config()
    cfg = load_withdrawals_config(chains)
    ctx = build_context(chains, cfg, args.chain)
    mismatches = check_configuration(ctx)
    if mismatches:
        for line in mismatches:
            alerts.critical("%s", line)
            print(f"error [config_mismatch]: {line}", file=sys.stderr)
        raise SystemExit(2)
    print("ready", flush=True)
    sys.stdout.flush()
    run(get_engine(wait_s=STARTUP_WAIT_S), cfg, ctx, interval_s=args.interval_s)
