"""Rendering for people: tables that never hide a character, amounts as exact decimal strings.

Every table of the ``custody`` command line is a ``Grid`` printed by ``print_grid``. Operators
paste hashes, addresses, ids and amounts from these tables into the next command, so no cell
is ever shortened: a grid that fits the console's width is printed as a table at its natural
width; one that does not is printed as records, one ``column: value`` line per non-empty cell
and a blank line after each record, each line whole (a terminal may wrap it visually, but no
character is dropped and no line break is inserted inside a value). Titles are printed the
same way, above the table.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from rich.cells import cell_len
from rich.console import Console
from rich.table import Table
from rich.text import Text

from ledger.integrity import Discrepancy
from ledger.model import Account, format_amount
from ledger.repository import TransactionRecord
from ledger.service import UserBalance

Justify = Literal["left", "right"]


@dataclass
class Grid:
    """A table of plain strings: a title, named columns and rows (no markup in cells)."""

    title: str | None = None
    columns: list[str] = field(default_factory=list)
    justify: list[Justify] = field(default_factory=list)
    rows: list[tuple[str, ...]] = field(default_factory=list)

    def add_column(self, name: str, justify: Justify = "left") -> None:
        """Append a column."""
        self.columns.append(name)
        self.justify.append(justify)

    def add_row(self, *cells: str) -> None:
        """Append a row: one string per column."""
        assert len(cells) == len(self.columns), (cells, self.columns)
        self.rows.append(tuple(cells))


def grid(title: str | None, *columns: str, right: Sequence[str] = ()) -> Grid:
    """A ``Grid`` with these columns; those named in ``right`` are right-aligned."""
    made = Grid(title=title)
    for name in columns:
        made.add_column(name, "right" if name in right else "left")
    return made


def _table(g: Grid) -> Table:
    table = Table()
    for name, justify in zip(g.columns, g.justify, strict=True):
        table.add_column(Text(name), justify=justify, no_wrap=True, overflow="fold")
    for row in g.rows:
        table.add_row(*(Text(cell, justify=justify)
                        for cell, justify in zip(row, g.justify, strict=True)))
    return table


def natural_width(g: Grid) -> int:
    """The width of ``g`` as a table with every cell whole: the widest cell of each column,
    one space of padding either side, and a border between and around the columns."""
    widths = [cell_len(name) for name in g.columns]
    for row in g.rows:
        widths = [max(w, max((cell_len(line) for line in cell.splitlines()), default=0))
                  for w, cell in zip(widths, row, strict=True)]
    return sum(widths) + 3 * len(widths) + 1


def print_grid(out: Console, g: Grid) -> None:
    """Print ``g`` whole: as a table if it fits ``out``'s width, else as records."""
    if g.title:
        out.print(g.title, highlight=False, markup=False, soft_wrap=True)
    if natural_width(g) <= out.width:
        out.print(_table(g), highlight=False, markup=False)
        return
    if not g.rows:
        out.print("(none)", highlight=False, markup=False, soft_wrap=True)
    key_width = max(len(name) for name in g.columns) + 1
    for row in g.rows:
        for name, cell in zip(g.columns, row, strict=True):
            if cell:  # An empty cell says nothing in a record.
                first, *more = cell.splitlines()
                out.print(f"{name + ':':<{key_width}} {first}", highlight=False, markup=False,
                          soft_wrap=True)
                for line in more:  # The lines of a cell, aligned under its first.
                    out.print(f"{'':<{key_width}} {line}", highlight=False, markup=False,
                              soft_wrap=True)
        out.print("", soft_wrap=True)


def ledger_amount(amount_minor: int, scale: int, asset_code: str) -> str:
    """An amount for people: the exact decimal with its asset, the minor units beside it
    (``1.500000000000000000 ETH (1500000000000000000)``)."""
    return f"{format_amount(amount_minor, scale)} {asset_code} ({amount_minor})"


def postings_grid(transactions: Sequence[TransactionRecord],
                  accounts: Mapping[int, Account]) -> Grid:
    """The postings of ledger transactions: the account by code, the signed amount (debit
    positive) as a decimal with its asset and the minor units beside it."""
    table = grid("postings (debit positive)", "ledger tx", "kind", "account", "amount",
                 right=("amount",))
    for t in transactions:
        for p in t.postings:
            account = accounts.get(p.account_id)
            if account is None:  # Not expected: every posting is on an existing account.
                table.add_row(str(t.id), t.kind, f"account {p.account_id}",
                              f"{p.amount_minor} (minor units)")
                continue
            table.add_row(str(t.id), t.kind, account.code,
                          ledger_amount(p.amount_minor, account.asset.scale, account.asset.code))
    return table


def balances_table(title: str, rows: Sequence[UserBalance]) -> Grid:
    """A table of a user's balances per asset, in decimal units."""
    table = grid(title, "asset", "posted", "pending in", "pending out", "available", "projected",
                 right=("posted", "pending in", "pending out", "available", "projected"))
    for b in rows:
        s = b.asset.scale
        table.add_row(
            b.asset.code,
            format_amount(b.posted_minor, s),
            format_amount(b.pending_incoming_minor, s),
            format_amount(b.pending_outgoing_minor, s),
            format_amount(b.available_minor, s),
            format_amount(b.projected_minor, s),
        )
    return table


def discrepancies_table(title: str, found: Sequence[Discrepancy]) -> Grid:
    """A table of ``verify``'s findings: kind, subject, expected, observed."""
    table = grid(title, "kind", "subject", "expected", "observed")
    for d in found:
        table.add_row(d.kind, d.subject, d.expected, d.observed)
    return table
