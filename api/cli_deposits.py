"""Deposit commands of the ``custody`` command line: ``watch``, ``timeline``, ``deposits``.

Mounted into ``api.cli`` with ``app.add_typer(deposits_app)`` (no name: the commands appear at
the top level). Expected errors print one line (``error [code]: ...``) and exit with 2.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Annotated, Any

import typer

from api.cli_reads import JsonOption
from api.console import console, friendly, print_error

if TYPE_CHECKING:
    from config.chains import ChainsConfig
    from deposits.service import TimelineEntry
    from ledger.model import Account

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
    from config.database import STARTUP_WAIT_S, get_engine
    from config.logging import ensure_logging
    from deposits.jobs import run_watch
    from deposits.watcher import StepReport

    ensure_logging("INFO")  # when run as its own group; `custody`'s callback set it up already
    chains_config = load_chains_config(config)
    engine = get_engine(wait_s=STARTUP_WAIT_S)
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
    as_json: JsonOption = False,
) -> None:
    """Each transfer to us in a transaction: its full history and its ledger transactions
    (--json: the API's ``DepositTimeline``)."""
    from api.cli_reads import accounts_of, ledger_assets, print_json
    from api.routes.views import transfer_view
    from api.schemas import DepositTimeline
    from config.database import get_engine
    from config.uow import UnitOfWork
    from deposits import service
    from deposits.errors import DepositNotFound

    with UnitOfWork(get_engine()) as uow:
        entries = service.timeline(uow, chain, tx_hash)
        assets = ledger_assets(uow, (e.deposit.asset_code for e in entries))
        accounts = accounts_of(uow, [t for e in entries for t in e.ledger_transactions])
    if not entries:  # The service raises already; the API's answer either way.
        raise DepositNotFound(f"no deposit in transaction {tx_hash} on {chain}")
    if as_json:
        print_json(DepositTimeline(chain=chain, tx_hash=tx_hash.lower(),
                                   transfers=[transfer_view(assets, e) for e in entries]))
        return
    for n, entry in enumerate(entries):
        if n:
            console.print("", soft_wrap=True)
        _print_transfer(entry, assets, accounts)


def _print_transfer(entry: TimelineEntry, assets: ChainsConfig,
                    accounts: dict[int, Account]) -> None:
    """One transfer of a timeline: a head line, its history, its postings and its cases."""
    from api.render import grid, postings_grid, print_grid

    d = entry.deposit
    amount = _amount(d.amount_minor, d.asset_code, assets)
    console.print(f"{d.chain} {d.tx_hash} {d.position}: {amount} to {d.to_address} "
                  f"(user {d.user_id or '-'}, token {d.token or 'native'}, on-chain {d.value}) "
                  f"— {d.state}", highlight=False, markup=False, soft_wrap=True)
    history = grid(None, "#", "observed at", "event", "state", "block", "block hash", "conf",
                   "rule", "reason", "ledger tx")
    for e, block, block_hash in _blocks(entry.events):
        history.add_row(str(e.id), e.observed_at.isoformat(timespec="seconds"), e.event,
                        e.state, block, block_hash,
                        "" if e.confirmations is None else str(e.confirmations), e.rule or "",
                        _reason(e.event, e.reason, e.evidence),
                        "" if e.ledger_transaction_id is None else str(e.ledger_transaction_id))
    for t in entry.ledger_transactions:
        history.add_row(f"L{t.id}", t.recorded_at.isoformat(timespec="seconds"),
                        f"ledger {t.kind}", "", "", "", "", "", t.idempotency_key, str(t.id))
    for c in entry.cases:
        status = "open" if c.resolved_by is None else f"resolved by {c.resolved_by}"
        history.add_row(f"C{c.id}", c.opened_at.isoformat(timespec="seconds"),
                        f"case {c.kind}", status, "", "", "", "", "", "")
    print_grid(console, history)
    if entry.ledger_transactions:
        print_grid(console, postings_grid(entry.ledger_transactions, accounts))


def _blocks(events: Sequence[Any]) -> Iterator[tuple[Any, str, str]]:
    """Each history row with the block it shows: the block the transfer is in, or, from a
    reorg until the transfer lands again, "removed from block N" and no hash (the deposit's
    row keeps the old block for the record; it is not in it any more)."""
    from deposits.model import DepositEvent as E

    out = False
    for e in events:
        if e.event == E.BLOCK_REORGED_OUT:
            out = True
        elif e.event in (E.TRANSFER_INCLUDED, E.TRANSFER_REINCLUDED):
            out = False
        if e.block_number is None:
            yield e, "", ""
        elif out:
            yield e, f"removed from block {e.block_number}", ""
        else:
            yield e, str(e.block_number), e.block_hash or ""


def _reason(event: str, reason: str | None, evidence: dict[str, Any]) -> str:
    """The reason of a history row; a failure names what consumed the sender's nonce: the
    transaction (where the node could name it), the sender, the nonce and the final block at
    which the count had passed it."""
    from deposits.model import DepositEvent as E

    if event != E.NONCE_CONSUMED:
        return reason or ""
    consumer = evidence.get("consumed_by")
    by = f"transaction {consumer}" if consumer else "another transaction"
    return (f"{reason or 'nonce consumed'}: nonce {evidence.get('nonce')} of "
            f"{evidence.get('sender')} used by {by} final by block "
            f"{evidence.get('final_block')} (sender's count there "
            f"{evidence.get('sender_nonce_at_final_block')})")


def _amount(amount_minor: int | None, asset_code: str | None, assets: ChainsConfig, *,
            with_asset: bool = True) -> str:
    """The decimal (with the asset and the minor units beside it unless ``with_asset`` is
    false), or the minor units of an asset the ledger does not have yet."""
    from api.render import ledger_amount
    from ledger.model import format_amount

    if amount_minor is None or asset_code is None:
        return "-"
    found = assets.assets.get(asset_code)
    if found is None:
        return f"{amount_minor} (minor units)"
    if not with_asset:
        return format_amount(amount_minor, found.scale)
    return ledger_amount(amount_minor, found.scale, asset_code)


#: The states of a deposit that is no longer in the block its row names.
OUT_OF_BLOCK = frozenset({"unconfirmed", "failed", "disputed"})


@deposits_app.command("deposits")
@friendly
def deposits_command(
    user_id: Annotated[str, typer.Argument(help="User id.")],
    limit: Annotated[int, typer.Option(min=1, max=10_000, help="Newest first, at most.")] = 200,
    cursor: Annotated[int | None, typer.Option(
        min=1, help="next_cursor of the previous page (--json).")] = None,
    as_json: JsonOption = False,
) -> None:
    """A user's deposits with their current state, newest first (--json: the API's
    ``DepositPage``). An unknown user is an error (user_not_found)."""
    from api.cli_reads import ledger_assets, page, print_json, require_user
    from api.render import grid, print_grid
    from api.routes.views import deposit_view
    from api.schemas import DepositPage
    from config.database import get_engine
    from config.uow import UnitOfWork
    from deposits import service

    with UnitOfWork(get_engine()) as uow:
        require_user(uow, user_id)
        found = service.user_deposits(uow, user_id, limit=limit + 1, before_id=cursor)
        assets = ledger_assets(uow, (d.asset_code for d in found))
    rows, more = found[:limit], len(found) > limit
    if as_json:
        print_json(page(DepositPage, items=[deposit_view(assets, d) for d in rows],
                        has_more=more, next_cursor=str(rows[-1].id) if more else None))
        return
    table = grid(f"deposits of {user_id}", "chain", "tx", "position", "asset", "amount",
                 "state", "block", "conf", "reason", "updated", right=("amount",))
    for d in rows:
        block = "" if d.block_number is None else str(d.block_number)
        if block and d.state in OUT_OF_BLOCK:
            block = f"removed from block {block}"
        table.add_row(d.chain, d.tx_hash, d.position, d.asset_code or "-",
                      _amount(d.amount_minor, d.asset_code, assets, with_asset=False), d.state,
                      block,
                      "" if d.confirmations is None else str(d.confirmations),
                      d.booking_reason or "", d.updated_at.isoformat(timespec="seconds"))
    print_grid(console, table)
    if more:
        console.print(f"more: --cursor {rows[-1].id}", highlight=False, soft_wrap=True)
