"""What the read commands print: every character of every value at 80 columns with the output
piped, ``--json`` in the API's shapes, and unknown users as one-line errors."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys

from rich.console import Console

from api.render import Grid, grid, print_grid
from api.schemas import Balances, StatementPage
from ledger import service
from tests.ledger.conftest import Book, transfer

BIG = 2**127 - 1
#: 2^127 - 1 at scale 18, every digit.
BIG_DECIMAL = "170141183460469231731.687303715884105727"


def custody(database_url: str, *args: str, columns: int = 80,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``custody ARGS`` in its own process, stdout and stderr piped (not a terminal)."""
    env = {**os.environ, "CUSTODY_DATABASE_URL": database_url, "COLUMNS": str(columns),
           **(env or {})}
    return subprocess.run([sys.executable, "-m", "api.cli", *args], env=env, text=True,
                          capture_output=True, timeout=120, check=False)


def rendered(g: Grid, width: int) -> str:
    """What ``print_grid`` prints on a console ``width`` columns wide."""
    out = Console(width=width, record=True, file=io.StringIO())
    print_grid(out, g)
    return out.export_text()


class TestGrid:
    def test_a_wide_grid_becomes_records_and_keeps_every_character(self) -> None:
        tx = "0x" + "f5" * 32
        g = grid("deposits", "chain", "tx", "amount", right=("amount",))
        g.add_row("dev", tx, BIG_DECIMAL)
        text = rendered(g, 80)
        assert tx in text and BIG_DECIMAL in text and "…" not in text
        assert f"tx:     {tx}" in text.splitlines()

    def test_a_grid_that_fits_is_a_table(self) -> None:
        g = grid(None, "a", "b")
        g.add_row("1", "[red]x[/red]")
        text = rendered(g, 80)
        assert "│ 1 │ [red]x[/red] │" in text  # Cells are never markup.

    def test_a_grid_exactly_as_wide_as_the_console_is_a_whole_table(self) -> None:
        g = grid(None, "a", "b")
        g.add_row("x" * 40, "y" * 33)
        lines = rendered(g, 80).splitlines()
        assert f"│ {'x' * 40} │ {'y' * 33} │" in lines
        assert max(len(line) for line in lines) == 80
        assert "xxxx:" not in rendered(g, 79) and "a: " + "x" * 40 in rendered(g, 79)

    def test_a_long_title_is_one_line(self) -> None:
        title = "dev " + "0x" + "ab" * 32 + " log:0: 1.5 ETH to somewhere far away"
        g = grid(title, "a")
        text = rendered(g, 60)
        assert text.splitlines()[0] == title


class TestBalances:
    def test_every_digit_at_80_columns_piped(self, book: Book, database_url: str) -> None:
        service.post_entry(book.engine, transfer("big", book.custody_eth,
                                                 book.wallet("u1", book.eth), BIG))
        shown = custody(database_url, "balances", "u1")
        assert shown.returncode == 0, shown.stderr
        assert BIG_DECIMAL in shown.stdout and "…" not in shown.stdout

    def test_json_is_the_api_shape(self, book: Book, database_url: str) -> None:
        service.post_entry(book.engine, transfer("big", book.custody_eth,
                                                 book.wallet("u1", book.eth), BIG))
        shown = custody(database_url, "balances", "u1", "--json")
        assert shown.returncode == 0, shown.stderr
        body = Balances.model_validate(json.loads(shown.stdout))
        [eth] = [b for b in body.balances if b.asset == "ETH"]
        assert eth.posted.minor == str(BIG) and eth.posted.decimal == BIG_DECIMAL
        assert body.user_id == "u1"

    def test_unknown_user_is_one_line_and_exit_2(self, book: Book, database_url: str) -> None:
        for args in (["balances", "nobody"], ["deposits", "nobody"],
                     ["balances", "nobody", "--json"]):
            shown = custody(database_url, *args)
            assert shown.returncode == 2, (args, shown.stdout)
            assert shown.stderr.strip().splitlines() == [
                "error [user_not_found]: no user nobody: neither the API nor the ledger knows "
                "this id"], args
            assert shown.stdout == ""


class TestStatement:
    def test_every_digit_and_the_api_shape(self, book: Book, database_url: str) -> None:
        service.post_entry(book.engine, transfer("big", book.custody_eth,
                                                 book.wallet("u1", book.eth), BIG))
        shown = custody(database_url, "statement", "u1", "--asset", "ETH")
        assert shown.returncode == 0, shown.stderr
        assert BIG_DECIMAL in shown.stdout and "…" not in shown.stdout
        as_json = custody(database_url, "statement", "u1", "--asset", "ETH", "--json")
        assert as_json.returncode == 0, as_json.stderr
        body = StatementPage.model_validate(json.loads(as_json.stdout))
        [line] = body.items
        assert line.amount.minor == str(BIG) and line.posted.decimal == BIG_DECIMAL
        assert body.next_cursor is None and not body.has_more
        assert (body.opening.posted.minor, body.closing.posted.minor) == ("0", str(BIG))
        assert f"closing available {BIG_DECIMAL}" in shown.stdout
        # A range that starts after the posting: no lines, and it is the opening balance.
        later = custody(database_url, "statement", "u1", "--asset", "ETH", "--json",
                        "--from", "9000-01-01T00:00:00Z")
        assert later.returncode == 0, later.stderr
        empty = StatementPage.model_validate(json.loads(later.stdout))
        assert empty.items == [] and empty.opening.posted.minor == str(BIG)
        bad = custody(database_url, "statement", "u1", "--asset", "ETH", "--from", "soon")
        assert bad.returncode == 2 and bad.stderr.startswith("error [request_invalid]")
        unknown = custody(database_url, "statement", "nobody", "--asset", "ETH")
        assert unknown.returncode == 2
        assert unknown.stderr.startswith("error [user_not_found]")


def test_reports_without_an_api_route_take_json_too(book: Book, database_url: str) -> None:
    """verify, seal verify and webhooks log print one JSON document with --json (verify of a
    drifted ledger: tests/api/test_cli.py)."""
    service.post_entry(book.engine, transfer("big", book.custody_eth,
                                             book.wallet("u1", book.eth), BIG))
    verified = custody(database_url, "verify", "--json")
    assert verified.returncode == 0, verified.stderr
    report = json.loads(verified.stdout)
    assert report["ok"] is True and report["discrepancies"] == [] and report["accounts"] >= 2
    assert isinstance(report["replayed_from_posting_id"], str)
    seals = custody(database_url, "seal", "verify", "--json")
    assert seals.returncode == 0, seals.stderr
    assert json.loads(seals.stdout)["ok"] is True
    log = custody(database_url, "webhooks", "log", "--json")
    assert log.returncode == 0 and json.loads(log.stdout) == []
