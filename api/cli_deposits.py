"""Deposit commands of the ``custody`` command line: ``watch``, ``timeline``, ``deposits``.

Mounted into ``api.cli`` with ``app.add_typer(deposits_app)`` (no name: the commands appear at
the top level). Expected errors print one line (``error [code]: ...``) and exit with 2.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.table import Table

from api.console import console, friendly, print_error

deposits_app = typer.Typer(help="Deposits: chain watchers and deposit histories.")




def _agreeing(engine: Any, chains_config: Any, names: list[str]) -> list[str]:
    """The chains whose configuration agrees with their node (``api.jobs.require_agreement``);
    a refused chain is named on stderr and left out, exit 2 when none is left. A node that
    cannot be reached stops the command (exit 2): nothing could be checked."""
    from datetime import UTC, datetime

    from api.jobs import ChainRefused, require_agreement

    agreeing = []
    for name in names:
        try:
            require_agreement(engine, chains_config.chain(name), datetime.now(UTC))
        except ChainRefused as exc:
            print_error(exc.code, exc.message)
            continue
        agreeing.append(name)
    if not agreeing:
        raise typer.Exit(2)
    return agreeing


def _short(value: str | None, keep: int = 10) -> str:
    if not value:
        return ""
    return value if len(value) <= keep + 4 else f"{value[:keep]}…{value[-4:]}"


@deposits_app.command()
@friendly
def watch(
    chain: Annotated[list[str] | None, typer.Option(help="Chain to watch (repeatable); "
                                                          "default: every configured chain.")]
    = None,
    steps: Annotated[int | None, typer.Option(min=1, help="Stop after this many rounds.")]
    = None,
    config: Annotated[str | None, typer.Option(help="Chain configuration file "
                                                    "(default: $CUSTODY_CONFIG).")] = None,
    poll_interval_s: Annotated[float | None, typer.Option(min=0.0, help="Seconds between "
                                                          "rounds once caught up.")] = None,
) -> None:
    """Follow the chains: record deposits, track finality and reorgs, credit final deposits.

    Each chain's configuration is checked against its node first, as "custody config
    check" checks it: a chain that disagrees is refused and the others are watched."""
    from config.chains import load_chains_config
    from config.database import get_engine
    from config.logging import ensure_logging
    from deposits.jobs import run_watch
    from deposits.watcher import StepReport

    ensure_logging("INFO")  # when run as its own group; `custody`'s callback set it up already
    chains_config = load_chains_config(config)
    engine = get_engine()
    chain = _agreeing(engine, chains_config, chain or list(chains_config.chains))
    console.print(f"watching {', '.join(chain)}", highlight=False)

    def show(r: StepReport) -> None:
        if r.new_deposits or r.finals or r.credited or r.rewound_to is not None or r.failed:
            console.print(
                f"{r.chain}: blocks {r.scanned_from}..{r.scanned_to} (head {r.head_block}) "
                f"new {r.new_deposits} final {r.finals} credited {r.credited} "
                f"suspense {r.suspense} held {r.held + r.held_early} failed {r.failed}"
                + (f" rewound to {r.rewound_to}" if r.rewound_to is not None else "")
                + (f" CASES {r.cases_opened}" if r.cases_opened else ""), highlight=False)

    rounds = run_watch(engine, chains_config, chain, steps_max=steps,
                       poll_interval_s=poll_interval_s, on_step=show)
    console.print(f"{rounds} rounds")


@deposits_app.command()
@friendly
def timeline(
    chain: Annotated[str, typer.Argument(help="Chain name.")],
    tx_hash: Annotated[str, typer.Argument(help="Transaction hash.")],
) -> None:
    """Each transfer to us in a transaction: its full history and its ledger transactions."""
    from config.database import get_engine
    from config.uow import UnitOfWork
    from deposits import service

    with UnitOfWork(get_engine()) as uow:
        entries = service.timeline(uow, chain, tx_hash)
        scales = _scales(uow, {e.deposit.asset_code for e in entries if e.deposit.amount_minor})
    for entry in entries:
        d = entry.deposit
        amount = f"{_amount(d.amount_minor, d.asset_code, scales)} {d.asset_code or ''}"
        table = Table(title=f"{d.chain} {d.tx_hash} {d.position}: {amount} to {d.to_address} "
                            f"(user {d.user_id or '-'}, token {d.token or 'native'}, "
                            f"on-chain {d.value}) — {d.state}", title_justify="left")
        for column in ("#", "observed at", "event", "state", "block", "hash", "conf", "rule",
                       "reason", "ledger tx"):
            table.add_column(column)
        for e in entry.events:
            table.add_row(str(e.id), e.observed_at.isoformat(timespec="seconds"), e.event,
                          e.state, "" if e.block_number is None else str(e.block_number),
                          _short(e.block_hash), "" if e.confirmations is None
                          else str(e.confirmations), e.rule or "", e.reason or "",
                          "" if e.ledger_transaction_id is None
                          else str(e.ledger_transaction_id))
        for t in entry.ledger_transactions:
            lines = ", ".join(f"{p.account_id}:{p.amount_minor}" for p in t.postings)
            table.add_row(f"L{t.id}", t.recorded_at.isoformat(timespec="seconds"),
                          f"ledger {t.kind}", "", "", "", "", "", t.idempotency_key, lines)
        for c in entry.cases:
            status = "open" if c.resolved_by is None else f"resolved by {c.resolved_by}"
            table.add_row(f"C{c.id}", c.opened_at.isoformat(timespec="seconds"),
                          f"case {c.kind}", status, "", "", "", "", "", "")
        console.print(table)


def _scales(uow: Any, codes: set[str | None]) -> dict[str, int]:
    from ledger import service as ledger
    from ledger.errors import AssetNotFound

    scales = {}
    for code in codes:
        try:
            if code is not None:
                scales[code] = ledger.get_asset(uow, code).scale
        except AssetNotFound:
            pass  # Not opened in the ledger yet: shown in minor units.
    return scales


def _amount(amount_minor: int | None, asset_code: str | None, scales: dict[str, int]) -> str:
    from ledger.model import format_amount

    if amount_minor is None or asset_code is None:
        return "-"
    if asset_code not in scales:
        return f"{amount_minor} (minor units)"
    return format_amount(amount_minor, scales[asset_code])


@deposits_app.command("deposits")
@friendly
def deposits_command(
    user_id: Annotated[str, typer.Argument(help="User id.")],
    limit: Annotated[int, typer.Option(min=1, max=10_000, help="Newest first, at most.")] = 200,
) -> None:
    """A user's deposits with their current state, newest first."""
    from config.database import get_engine
    from config.uow import UnitOfWork
    from deposits import service

    with UnitOfWork(get_engine()) as uow:
        rows = service.user_deposits(uow, user_id, limit=limit)
        scales = _scales(uow, {d.asset_code for d in rows if d.amount_minor})
    table = Table(title=f"deposits of {user_id}")
    for column in ("chain", "tx", "position", "asset", "amount", "state", "block", "conf",
                   "reason", "updated"):
        table.add_column(column, justify="right" if column == "amount" else "left")
    for d in rows:
        amount = _amount(d.amount_minor, d.asset_code, scales)
        table.add_row(d.chain, _short(d.tx_hash), d.position, d.asset_code or "-", amount,
                      d.state, "" if d.block_number is None else str(d.block_number),
                      "" if d.confirmations is None else str(d.confirmations),
                      d.booking_reason or "", d.updated_at.isoformat(timespec="seconds"))
    console.print(table)
