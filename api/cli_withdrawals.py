"""``custody withdrawal ...`` and ``custody withdrawals ...``: support and operator commands.

Mounted by ``api/cli.py``::

    from api.cli_withdrawals import withdrawal_app, withdrawals_app
    app.add_typer(withdrawal_app, name="withdrawal")
    app.add_typer(withdrawals_app, name="withdrawals")

Actors are named with ``--as``; their roles come from ``[withdrawals.roles]`` of the
configuration (the HTTP API maps authenticated logins instead).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console

from api.cli_audit import audited
from api.cli_reads import JsonOption
from api.console import console, friendly
from api.render import Grid, print_grid

if TYPE_CHECKING:
    from collections.abc import Mapping

    from config.chains import ChainsConfig
    from config.withdrawals import WithdrawalsConfig
    from ledger.model import Account
    from withdrawals.service import Actor, Timeline

withdrawal_app = typer.Typer(help="One withdrawal: timeline, approvals, cancel, write-off, retry.",
                             no_args_is_help=True)
withdrawals_app = typer.Typer(help="Withdrawals: open items, processor.", no_args_is_help=True)
_DURATION = re.compile(r"^(\d+)([smhd])$")




def parse_duration(text: str) -> timedelta:
    """``90s``, ``15m``, ``2h``, ``3d`` as a timedelta."""
    match = _DURATION.match(text.strip())
    if not match:
        raise typer.BadParameter(f"not a duration (like 30m, 2h, 1d): {text!r}")
    value, unit = int(match.group(1)), match.group(2)
    return timedelta(seconds=value * {"s": 1, "m": 60, "h": 3600, "d": 86400}[unit])


def _configs() -> tuple[ChainsConfig, WithdrawalsConfig]:
    from config.chains import load_chains_config
    from config.withdrawals import load_withdrawals_config

    chains = load_chains_config()
    return chains, load_withdrawals_config(chains)


def _actor(name: str) -> Actor:
    from withdrawals.service import ADMIN, APPROVER, Actor

    _, cfg = _configs()
    roles = {APPROVER} if name in cfg.approvers else set()
    if name in cfg.admins:
        roles.add(ADMIN)
    return Actor(name, frozenset(roles))


@withdrawal_app.command("show")
@friendly
def show(withdrawal_id: Annotated[int, typer.Argument(help="Withdrawal id.")],
         as_json: JsonOption = False) -> None:
    """Print the timeline: state changes, attempts, votes, returns and ledger transactions
    (--json: the API's ``WithdrawalTimeline``)."""
    from api.cli_reads import accounts_of, ledger_assets, print_json
    from api.routes.views import timeline_view
    from config.database import get_engine
    from config.uow import UnitOfWork
    from withdrawals.service import timeline

    engine = get_engine()
    tl = timeline(engine, withdrawal_id)
    with UnitOfWork(engine) as uow:
        assets = ledger_assets(uow, [tl.withdrawal.asset_code])
        accounts = accounts_of(uow, tl.transactions)
    if as_json:
        print_json(timeline_view(assets, tl))
        return
    render_timeline(console, tl, assets, accounts)


def render_timeline(out: Console, tl: Timeline, assets: ChainsConfig,
                    accounts: Mapping[int, Account]) -> None:
    """Print a ``withdrawals.service.Timeline``: amounts as decimals with the asset and the
    minor units beside them, accounts by code, every value whole (``api.render``)."""
    from api.render import grid, ledger_amount, postings_grid, print_grid

    w = tl.withdrawal
    found = assets.assets.get(w.asset_code)

    def money(minor: int) -> str:
        if found is None:
            return f"{minor} {w.asset_code} (minor units)"
        return ledger_amount(minor, found.scale, w.asset_code)

    out.print(f"withdrawal {w.id}: {w.state}  user {w.user_id}  {money(w.amount_minor)} "
              f"on {w.chain} to {w.destination}  fee {money(w.fee_minor)} "
              f"(max {money(w.fee_max_minor)})  nonce {w.nonce}", highlight=False,
              markup=False, soft_wrap=True)
    events = grid("state changes", "at", "event", "from", "to", "actor", "reason", "ledger tx")
    for e in tl.events:
        events.add_row(e.occurred_at.isoformat(), e.event, e.from_state or "", e.to_state,
                       e.actor, e.reason or "", str(e.ledger_transaction_id or ""))
    print_grid(out, events)
    if tl.attempts:
        attempts = grid("broadcast attempts", "#", "tx hash", "nonce", "max fee/gas",
                        "tip/gas", "gas limit", "at")
        for a in tl.attempts:
            attempts.add_row(str(a.attempt_no), a.tx_hash, str(a.nonce), str(a.max_fee_per_gas),
                             str(a.max_priority_fee_per_gas), str(a.gas_limit),
                             a.created_at.isoformat())
        print_grid(out, attempts)
    for d in tl.decisions:
        out.print(f"{d.kind}: {d.actor} {d.decision} at {d.decided_at.isoformat()} "
                  f"{d.reason or ''}", highlight=False, markup=False, soft_wrap=True)
    for r in tl.returns:
        out.print(f"returned: {money(r.amount_minor)} via {r.chain}:{r.tx_hash}:{r.position} "
                  f"arrived {r.arrived_at.isoformat()} (linked by {r.linked_by})",
                  highlight=False, markup=False, soft_wrap=True)
    for c in tl.cases:
        status = (f"resolved by {c.resolved_by} at {c.resolved_at.isoformat()}: "
                  f"{c.resolution_reason}" if c.resolved_at else "OPEN")
        out.print(f"case {c.id} ({c.kind}) opened {c.opened_at.isoformat()}: {c.reason}  "
                  f"[{status}]", highlight=False, markup=False, soft_wrap=True)
    ledger = grid("ledger transactions", "id", "key", "kind", "effective")
    for t in tl.transactions:
        ledger.add_row(str(t.id), t.idempotency_key, t.kind, t.effective_at.isoformat())
    print_grid(out, ledger)
    if tl.transactions:
        print_grid(out, postings_grid(tl.transactions, accounts))


@withdrawal_app.command("approve")
@friendly
@audited("withdrawal.approval", ("withdrawal_id",), details=("as_", "reason"))
def approve(withdrawal_id: int, as_: Annotated[str, typer.Option("--as")],
            reason: Annotated[str | None, typer.Option()] = None) -> None:
    """Approve a withdrawal waiting for approval."""
    from config.database import get_engine
    from withdrawals import service

    w = service.approve(get_engine(), withdrawal_id, _actor(as_), now=datetime.now(UTC),
                        reason=reason)
    console.print(f"withdrawal {w.id}: {w.state}")


@withdrawal_app.command("cancel")
@friendly
@audited("withdrawal.cancel", ("withdrawal_id",), details=("as_",))
def cancel(withdrawal_id: int, as_: Annotated[str, typer.Option("--as")]) -> None:
    """Cancel a withdrawal that is not signed yet (releases the reserve)."""
    from config.database import get_engine
    from withdrawals import service

    w = service.cancel(get_engine(), withdrawal_id, as_, now=datetime.now(UTC))
    console.print(f"withdrawal {w.id}: {w.state}")


@withdrawal_app.command("write-off")
@friendly
@audited("withdrawal.write_off_vote", ("withdrawal_id",),
         details=("decision", "as_", "reason"))
def write_off(withdrawal_id: int, decision: Annotated[str, typer.Argument(help="sent|not_sent")],
              as_: Annotated[str, typer.Option("--as")],
              reason: Annotated[str, typer.Option()]) -> None:
    """Vote to treat an undetermined withdrawal as sent or not sent (two admins decide)."""
    from config.database import get_engine
    from withdrawals import service

    w = service.vote_write_off(get_engine(), withdrawal_id, _actor(as_), decision,
                               reason=reason, now=datetime.now(UTC))
    console.print(f"withdrawal {w.id}: {w.state}")


@withdrawal_app.command("retry")
@friendly
@audited("withdrawal.retry", ("withdrawal_id",), details=("by", "reason"))
def retry(withdrawal_id: int, by: Annotated[str, typer.Option("--by", help="Admin's name.")],
          reason: Annotated[str, typer.Option(help="What was fixed.")]) -> None:
    """Lift the hold of a held withdrawal after fixing its cause: the processor books its final
    receipt again (and holds it again with a new case if the cause is still there)."""
    from config.database import get_engine
    from withdrawals import service

    w = service.retry_held(get_engine(), withdrawal_id, _actor(by), reason=reason,
                           now=datetime.now(UTC))
    console.print(f"withdrawal {w.id}: {w.state} (the processor settles it on its next step)")


@withdrawals_app.command("open")
@friendly
def open_items(
    older_than: Annotated[str, typer.Option(help="Only reserves older than this (30m, 2h, 1d).")]
    = "0s",
    as_json: JsonOption = False,
) -> None:
    """List reserves still open; exit 1 if any is past the SLA (an alert). --json: a list of
    {withdrawal_id, user_id, chain, asset, open_minor, age_s, state, state_reason, overdue}."""
    from config.database import get_engine
    from withdrawals import service

    _, cfg = _configs()
    items = service.open_items(get_engine(), cfg, older_than=parse_duration(older_than),
                               now=datetime.now(UTC))
    if as_json:
        from api.cli_reads import print_report

        print_report([{"withdrawal_id": str(i.row.withdrawal_id), "user_id": i.row.user_id,
                       "chain": i.row.chain, "asset": i.row.asset_code,
                       "open_minor": str(i.row.open_minor), "age_s": int(i.age_s),
                       "state": i.row.state, "state_reason": i.row.state_reason,
                       "overdue": i.overdue} for i in items])
    else:
        _open_table(cfg.open_item_sla_s, items)
    if any(i.overdue for i in items):
        raise typer.Exit(1)


def _open_table(sla_s: int, items: Sequence[Any]) -> None:
    table = Grid(title=f"open withdrawal reserves (SLA {sla_s}s)")
    for column in ("withdrawal", "user", "chain", "asset", "open (minor)", "age s", "state",
                   "reason", "overdue"):
        table.add_column(column)
    for i in items:
        r = i.row
        table.add_row(str(r.withdrawal_id), r.user_id, r.chain, r.asset_code, str(r.open_minor),
                      f"{i.age_s:.0f}", r.state, r.state_reason or "",
                      "ALERT" if i.overdue else "")
    print_grid(console, table)


@withdrawals_app.command("process")
@friendly
def process(chain: str, interval_s: Annotated[float, typer.Option()] = 2.0,
            steps: Annotated[int | None, typer.Option(help="Stop after N steps.")] = None) -> None:
    """Run the withdrawal processor of CHAIN (sign, send, track, settle), once the chain's
    configuration agrees with its node (as "custody config check" checks it)."""
    from api.jobs import require_agreement
    from config.database import get_engine
    from withdrawals import processor

    chains, cfg = _configs()
    ctx = processor.build_context(chains, cfg, chain)
    require_agreement(get_engine(), chains.chain(chain), datetime.now(UTC))
    processor.run(get_engine(), cfg, ctx, interval_s=interval_s, steps_max=steps,
                  on_step=lambda r: console.print(r))
