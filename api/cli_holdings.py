"""``custody holdings``: per chain, address and asset, the balance at the newest block final
under the chain's rule, what is in flight, and what the ledger says (``sweeps.holdings``).

Mounted by ``api/cli.py`` with ``app.add_typer(holdings_cli)`` (no name: ``holdings`` appears
at the top level). The chain configuration comes from ``$CUSTODY_CONFIG`` (or ``--config``).

Output: per chain a header (block number and hash, what was read and how long it took), a
table per asset (rows: the figures; cells: the decimal with the asset, the minor units below),
then one record per listed address and asset, every figure on its own line with its decimal
and minor units. Nothing is ever cut: the records keep every address, hash and amount whole at
80 columns, and the table is printed as records when it is wider than the terminal. ``--json``
prints ``sweeps.holdings.report_json`` (the API's shape). Exit 1 when a difference is
unexplained (as ``custody verify`` on a finding), 2 with one line on an expected error (an
unknown chain, a node that cannot be read).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Annotated

import typer

from api.console import console, err_console, friendly, print_error
from api.render import Grid, print_grid

if TYPE_CHECKING:
    from sweeps.holdings import (
        AddressHolding,
        ChainHoldings,
        HoldingsReport,
        ProgressCallback,
    )

holdings_cli = typer.Typer(help="The holdings report.")

#: Width of a record's labels.
_LABEL = 13


def _units(value: int, decimals: int) -> tuple[str, str]:
    from sweeps.holdings import units_json

    shown = units_json(value, decimals)
    return shown["decimal"], shown["minor"]


def _cell(value: int, decimals: int, asset: str) -> str:
    """The decimal with the asset, the minor units below (a zero: ``0``)."""
    if value == 0:
        return "0"
    decimal, minor = _units(value, decimals)
    return f"{decimal} {asset}\n{minor}"


def _asset_table(c: ChainHoldings) -> Grid:
    """Rows: the figures; one column per asset."""
    table = Grid(title=f"{c.chain}: per asset, on-chain units (minor units below)")
    table.add_column("figure")
    for a in c.assets:
        table.add_column(a.line.asset, justify="right")

    def row(label: str, values: list[str]) -> None:
        table.add_row(label, *values)

    def amounts(label: str, pick: list[int]) -> None:
        row(label, [_cell(v, a.line.decimals, a.line.asset) for v, a in zip(pick, c.assets,
                                                                             strict=True)])

    assets = c.assets
    amounts("on chain", [a.on_chain for a in assets])
    amounts("custody", [a.custody for a in assets])
    amounts("treasury", [a.treasury for a in assets])
    amounts("custody+treasury", [a.ledger for a in assets])
    amounts("difference", [a.difference for a in assets])
    row("status", [a.status for a in assets])
    amounts("in flight in", [a.flows.incoming for a in assets])
    amounts("in flight out", [a.flows.outgoing for a in assets])
    amounts("held", [a.flows.held for a in assets])
    amounts("deposit addr. expected", [a.deposits_expected for a in assets])
    amounts("hot+cold on chain", [a.group.on_chain for a in assets])
    amounts("hot+cold expected", [a.group.parts.expected for a in assets])
    amounts("  customer", [a.group.parts.customer for a in assets])
    amounts("  treasury", [a.group.parts.treasury for a in assets])
    amounts("hot+cold difference", [a.group.difference for a in assets])
    row("hot+cold status", [a.group.status for a in assets])
    row("ledger scale", [str(a.line.scale) for a in assets])
    row("ledger custody", [_cell(a.custody_minor, a.line.scale, a.line.asset) for a in assets])
    row("ledger treasury", [_cell(a.treasury_minor, a.line.scale, a.line.asset)
                            for a in assets])
    row("exact", ["yes" if a.exact else "NO (rounded down)" for a in assets])
    return table


def _record(h: AddressHolding) -> Iterator[tuple[str, int]]:
    """(label, amount) lines of one address and asset: zero parts and flows left out."""
    yield "on chain", h.on_chain
    if h.parts is not None:
        yield "expected", h.parts.expected
        for label, value in (("  customer", h.parts.customer), ("  treasury", h.parts.treasury),
                             ("  suspense", h.parts.suspense)):
            if value:
                yield label, value
        yield "difference", h.on_chain - h.parts.expected
    for label, value in (("in flight in", h.flows.incoming), ("in flight out", h.flows.outgoing),
                         ("held", h.flows.held)):
        if value:
            yield label, value


def _records(c: ChainHoldings) -> list[str]:
    """The listed addresses, one block each: the address and its kind, then per asset (the
    header names each token's contract) its status and figures (decimal with the asset, then
    the minor units)."""
    out: list[str] = []
    previous = None
    for h in c.addresses:
        if h.address != previous:
            out.append(f"{h.address}  {h.kind}")
            previous = h.address
        sending = ", sending" if h.sending else ""
        out.append(f"  {h.line.asset}: {h.status or 'see hot+cold'}{sending}")
        shown = [(label, *_units(value, h.line.decimals)) for label, value in _record(h)]
        width = max(len(decimal) for _, decimal, _ in shown) + len(h.line.asset) + 1
        out.extend(f"    {label:<{_LABEL}} {f'{decimal} {h.line.asset}':<{width}}  {minor}"
                   for label, decimal, minor in shown)
    return out


def _verdict(c: ChainHoldings) -> list[str]:
    lines = []
    for a in c.assets:
        decimal, minor = _units(a.difference, a.line.decimals)
        if a.status == "ok":
            lines.append(f"{c.chain} {a.line.asset}: on chain = custody + treasury, exactly")
        else:
            lines.append(f"{c.chain} {a.line.asset}: on chain - (custody + treasury) = "
                         f"{decimal} {a.line.asset} ({minor}): {a.status}")
    return lines


def _print_chain(c: ChainHoldings) -> None:
    read = c.deposit_addresses + c.hot_addresses + c.cold_addresses
    head = [f"{c.chain}: block {c.block_number}, the newest final under {c.finality}",
            f"block hash {c.block_hash}",
            f"{read:,} addresses ({c.deposit_addresses:,} deposit, {c.hot_addresses} hot, "
            f"{c.cold_addresses} cold) x {len(c.assets)} assets, read in "
            f"{c.ledger_read_s + c.chain_read_s:.2f} s",
            f"(the ledger {c.ledger_read_s:.2f} s, the chain {c.chain_read_s:.2f} s)"]
    for a in c.assets:
        if a.line.token is not None:
            head.append(f"{a.line.asset}: token {a.line.token}, {a.line.decimals} decimals")
    console.print("\n".join(head), highlight=False, markup=False, soft_wrap=True)
    print_grid(console, _asset_table(c))
    listed = len({h.address for h in c.addresses})
    console.print(f"{listed:,} addresses listed: hot, cold, and deposit addresses with a figure "
                  "not zero", highlight=False, markup=False)
    console.print("\n".join([*_records(c), *_verdict(c)]), highlight=False, markup=False,
                  soft_wrap=True)


@contextmanager
def _progress(shown: bool) -> Iterator[ProgressCallback | None]:
    """A progress bar on stderr (one task per chain) when ``shown``."""
    if not shown:
        yield None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  console=err_console, transient=True) as bar:
        tasks: dict[str, TaskID] = {}

        def update(chain: str, done: int, total: int) -> None:
            if chain not in tasks:
                tasks[chain] = bar.add_task(f"reading {chain}", total=total)
            bar.update(tasks[chain], completed=done, total=total)

        yield update


@holdings_cli.command("holdings")
@friendly
def show_holdings(
    chain: Annotated[str | None, typer.Option(help="Only this chain.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON (amounts as strings).")]
    = False,
    include_empty: Annotated[bool, typer.Option(
        "--include-empty", help="List deposit addresses where every figure is zero too.")]
    = False,
    progress: Annotated[bool | None, typer.Option(
        "--progress/--no-progress", help="Show the chain read's progress on stderr (default: "
                                         "when stderr is a terminal).")] = None,
    config: Annotated[str | None, typer.Option(help="Chain configuration file (default: "
                                                    "$CUSTODY_CONFIG).")] = None,
) -> None:
    """Per chain, address and asset: the balance at the newest block final under the chain's
    rule, the movements in flight, and what the ledger says the address should hold (customer,
    treasury and suspense parts); hot and cold addresses together against the ledger's
    residual; per asset, all our addresses on chain against custody + treasury. Exit 1 when a
    difference is unexplained."""
    from config.chains import load_chains_config
    from config.database import get_engine
    from sweeps.holdings import HoldingsUnavailable, holdings

    chains = load_chains_config(config)
    shown = err_console.is_terminal if progress is None else progress
    try:
        with _progress(shown) as on_progress:
            report = holdings(get_engine(), chains, chain, on_progress=on_progress,
                              include_empty=include_empty)
    except HoldingsUnavailable as exc:
        # One line however long the node's message is, then exit 2.
        print_error(exc.code, exc.message)
        raise typer.Exit(2) from None
    if as_json:
        from pydantic_core import to_json

        from sweeps.holdings import report_json

        sys.stdout.flush()
        sys.stdout.buffer.write(to_json(report_json(report)) + b"\n")
    else:
        for c in report.chains:
            _print_chain(c)
    if _unexplained(report):
        raise typer.Exit(1)


def _unexplained(report: HoldingsReport) -> bool:
    """Whether an asset, a hot+cold group or an address differs with nothing to explain it
    (addresses too: two opposite differences can cancel out in the asset's total)."""
    return any(
        any(a.status == "unexplained" or a.group.status == "unexplained" for a in c.assets)
        or any(h.status == "unexplained" for h in c.addresses) for c in report.chains)

