"""The sweeper of one chain: ``step`` plans due sweeps (``planner``), then takes every gas
top-up, sweep and cold transfer one phase further on the shared mechanism (``sending``).

A step holds an advisory lock per chain (``sweeps:<chain>``) in a transaction kept open on a
connection of its own, so two sweeper processes never step one chain at once; a killed process
releases it with its connection.
Every phase is safe to repeat after a crash at any point: a nonce is taken once per movement
and kept, only recorded attempts are sent, recorded bytes are re-sent as they are, and ledger
entries carry idempotency keys (``<kind>:<id>:gas``). Even without the lock, two planners
cannot both sweep one address (the partial unique index) and two signers cannot record two
first attempts (the row lock and the re-check under it).

``python -m sweeps CHAIN [--interval-s S]`` runs ``main``; the scheduler of ``custody serve``
runs ``step`` as the job ``sweeps.run:<chain>``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime

from sqlalchemy.engine import Engine

from chains.errors import ChainError
from chains.model import parse_finality_rule
from chains.rpc import RpcClient
from config.chains import ChainsConfig
from config.errors import CustodyError
from config.sweeps import SweepsConfig
from config.uow import replication_barrier, run_in_transaction
from config.withdrawals import WithdrawalsConfig
from outgoing import repository as outgoing
from outgoing.signer import AddressSigners, Signer, address_signers_for, signer_for
from sweeps import planner, sending
from sweeps.model import Kind
from sweeps.sending import StepReport, SweepContext, log

#: The order of the phases: top-ups first (a sweep waits for its top-up), then sweeps, then
#: cold transfers.
KINDS = (Kind.GAS_TOP_UP, Kind.SWEEP, Kind.COLD_TRANSFER)


def build_context(chains: ChainsConfig, wcfg: WithdrawalsConfig, cfg: SweepsConfig,
                  chain_name: str, *, environ: dict[str, str] | None = None,
                  rpc_url: str | None = None) -> SweepContext:
    """The sweeper's context of one chain: the hot wallet's signer (None if it cannot be built:
    top-ups and cold transfers then wait, logged) and the deposit addresses' signers (None for
    an address source without keys: sweeps are proposed only)."""
    from deposits.service import address_source

    chain = chains.chain(chain_name)
    hot = wcfg.hot_wallet(chain_name)
    rpc = RpcClient(rpc_url or chain.rpc_url, rpc_timeout_ms=chain.rpc_timeout_ms,
                    retries_max=chain.rpc_retries_max, backoff_ms=20, backoff_max_ms=200)
    hot_signer: Signer | None
    try:
        hot_signer = signer_for(hot, environ=environ)
    except CustodyError as exc:
        log.warning("sweeper on %s: no hot wallet signer (%s): top-ups and cold transfers "
                    "wait", chain_name, exc.message)
        hot_signer = None
    signers: AddressSigners | None = None
    source_cfg = chains.address_sources.get(chain.family)
    if source_cfg is not None:
        try:
            signers = address_signers_for(address_source(source_cfg), source_cfg,
                                          environ=environ)
        except CustodyError as exc:
            log.warning("sweeper on %s: no signer for deposit addresses (%s): sweeps wait",
                        chain_name, exc.message)
    return SweepContext(chain, hot, cfg, rpc, hot_signer, signers,
                        parse_finality_rule(chain.finality))


def step(engine: Engine, ctx: SweepContext, *, now: datetime) -> StepReport:
    """One bounded pass over the chain's movements (see the module docstring)."""
    report = StepReport()
    key = f"sweeps:{ctx.chain.name}"
    # The lock is held by lock_conn's transaction, kept open for the step and ended (rolled
    # back: it wrote nothing) to release it.
    with engine.connect() as lock_conn:
        if not outgoing.try_lock(lock_conn, key):
            lock_conn.rollback()
            report.skipped_locked = True
            return report
        try:
            # Nothing recorded by an earlier step (a commit in doubt there on the primary only)
            # is signed or broadcast before the synchronous standby holds it too.
            run_in_transaction(engine, replication_barrier)
            planner.plan(engine, ctx, now=now, report=report)
            for kind in KINDS:
                sending.assign(engine, ctx, kind, now=now)
                sending.sign(engine, ctx, kind, now=now, report=report)
                sending.send(engine, ctx, kind, now=now, report=report)
            for kind in KINDS:
                sending.track(engine, ctx, kind, now=now, report=report)
                sending.send(engine, ctx, kind, now=now, report=report)  # replacements
        finally:
            lock_conn.rollback()
    if report.dust:
        log.info("sweeper on %s: %s address(es) left as dust: %s", ctx.chain.name,
                 len(report.dust), report.dust[:5])
    return report


def run(engine: Engine, ctx: SweepContext, *, interval_s: float, steps_max: int | None = None,
        on_step: Callable[[StepReport], object] | None = None) -> None:
    """Step every ``interval_s`` seconds, ``steps_max`` times (None: until killed)."""
    done = 0
    while steps_max is None or done < steps_max:
        try:
            report = step(engine, ctx, now=datetime.now(UTC))
        except ChainError as exc:
            # The node away (or answering nonsense): nothing was decided without it; every
            # phase is safe to repeat, so the loop waits and steps again.
            log.warning("sweeper on %s: step abandoned, the node failed: %s", ctx.chain.name,
                        exc.message)
        else:
            if on_step is not None:
                on_step(report)
        done += 1
        time.sleep(interval_s)


def main(argv: list[str] | None = None) -> None:
    """``python -m sweeps CHAIN [--interval-s S]``: the sweeper loop, with the configuration
    from ``CUSTODY_CONFIG`` and the database from the settings."""
    import argparse
    import sys

    from config.chains import load_chains_config
    from config.database import get_engine
    from config.sweeps import load_sweeps_config
    from config.withdrawals import load_withdrawals_config

    parser = argparse.ArgumentParser(prog="sweeps", description="Run the sweeper of one chain.")
    parser.add_argument("chain")
    parser.add_argument("--interval-s", type=float, default=1.0)
    args = parser.parse_args(argv)
    chains = load_chains_config()
    wcfg = load_withdrawals_config(chains)
    cfg = load_sweeps_config(chains, wcfg)
    if cfg is None:
        print("error [sweeps_not_configured]: the configuration has no [sweeps] section",
              file=sys.stderr)
        raise SystemExit(2)
    ctx = build_context(chains, wcfg, cfg, args.chain)
    print("ready", flush=True)
    run(get_engine(), ctx, interval_s=args.interval_s)
