"""Rendering for people: tables of balances and amounts as exact decimal strings."""

from __future__ import annotations

from collections.abc import Sequence

from rich.table import Table

from ledger.integrity import Discrepancy
from ledger.model import format_amount
from ledger.service import UserBalance


def balances_table(title: str, rows: Sequence[UserBalance]) -> Table:
    """A table of a user's balances per asset, in decimal units."""
    table = Table(title=title)
    for column in ("asset", "posted", "pending in", "pending out", "available", "projected"):
        table.add_column(column, justify="left" if column == "asset" else "right")
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


def discrepancies_table(title: str, found: Sequence[Discrepancy]) -> Table:
    """A table of ``verify``'s findings: kind, subject, expected, observed."""
    table = Table(title=title)
    for column in ("kind", "subject", "expected", "observed"):
        table.add_column(column)
    for d in found:
        table.add_row(d.kind, d.subject, d.expected, d.observed)
    return table
