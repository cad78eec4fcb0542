"""The ``custody`` command line.

Every command opens its own units of work; expected errors print one line and exit with 2,
findings of ``verify`` exit with 1.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from api.cli_audit import audited
from api.cli_reads import JsonOption
from api.console import CommandLine, console, err_console, friendly, print_error

HELP = (
    "Custody engine: deposits, withdrawals and a double-entry ledger on PostgreSQL.\n\n"
    "Without CUSTODY_DATABASE_URL the engine starts an embedded PostgreSQL whose data lives in "
    "var/pg under the project root (the checkout holding pyproject.toml) whatever the current "
    "directory; CUSTODY_DATA_DIR names another (a relative one is taken from the current "
    "directory).\n\n"
    "Expected errors print one line, error \\[code]: ..., and exit 2."
)
app = CommandLine(
    help=HELP,
    no_args_is_help=True,
    add_completion=False,
)
db_app = typer.Typer(help="Database schema.", no_args_is_help=True)
period_app = typer.Typer(help="Accounting periods.", no_args_is_help=True)
app.add_typer(db_app, name="db")
app.add_typer(period_app, name="period")
#: The commands that run the engine: their logs (JSON lines on stderr) are at INFO; the other
#: commands log warnings only (they report on stdout themselves).
SERVICE_COMMANDS = frozenset({"serve", "api", "worker", "watch"})


@app.callback()
def _logging(
    ctx: typer.Context,
    log_format: Annotated[str | None, typer.Option(
        "--log-format", help="Log lines on stderr: json (one object per line, the default) or "
                             "text (for humans); also $CUSTODY_LOG_FORMAT.")] = None,
) -> None:
    """Custody engine: deposits, withdrawals and a double-entry ledger on PostgreSQL."""
    import os

    from config.logging import FORMAT_ENV, FORMATS, LEVEL_ENV, setup_logging

    if log_format is not None and log_format not in FORMATS:
        raise typer.BadParameter(f"one of {', '.join(FORMATS)}", param_hint="--log-format")
    if log_format is not None:
        os.environ[FORMAT_ENV] = log_format  # Read again by `custody api --workers N`'s workers.
    level = os.environ.get(LEVEL_ENV) or (
        "INFO" if ctx.invoked_subcommand in SERVICE_COMMANDS else "WARNING")
    setup_logging(log_format, level=level)





def parse_time(value: str | None) -> datetime | None:
    """Parse an ISO 8601 time; naive times are taken as UTC."""
    if value is None:
        return None
    try:
        at = datetime.fromisoformat(value)
    except ValueError:
        raise typer.BadParameter(f"not an ISO 8601 time: {value!r}") from None
    return at if at.tzinfo else at.replace(tzinfo=UTC)


@db_app.command("upgrade")
@friendly
@audited("db.upgrade")
def db_upgrade() -> None:
    """Apply the due revisions and the changed SQL definitions (functions, triggers), in one
    transaction, to the configured database (the embedded one if none is set)."""
    import migrations
    from config.database import database_url

    url = database_url()
    migrations.upgrade(url)
    console.print("database is at the latest revision and definitions")


@app.command()
@friendly
def verify(
    full: Annotated[
        bool,
        typer.Option(help="Check every posting and every seal, not only those after the newest "
                          "checkpoint."),
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Check the ledger's integrity; exit 1 and name what drifted if anything did (--json:
    ``ok``, ``accounts``, ``checkpoint_id``, ``replayed_from_posting_id``, ``discrepancies``).

    Checks: trial balance per asset, stored balances = replayed postings, account flags,
    custody = customer liabilities per asset, every transaction balanced per asset and
    non-empty, every posting on an existing account of its asset and in an existing
    transaction, reversals within their originals, checkpoint digest, the seal chain. Without
    --full, the replay, the balance per transaction and the posting checks read only the
    postings after the newest verified checkpoint, and the seals after the seal it recorded;
    run --full after any superuser access to the database.
    """
    from config.database import get_engine
    from ledger.integrity import verify as run_verify

    report = run_verify(get_engine(), full=full)
    if as_json:
        from api.cli_reads import discrepancies_json, print_report

        print_report({"ok": report.ok, "accounts": report.accounts,
                      "checkpoint_id": None if report.checkpoint_id is None
                      else str(report.checkpoint_id),
                      "replayed_from_posting_id": str(report.replayed_from_posting_id),
                      "discrepancies": discrepancies_json(report.discrepancies)})
        if not report.ok:
            raise typer.Exit(1)
        return
    start = (
        "first posting" if report.checkpoint_id is None else f"checkpoint {report.checkpoint_id}"
    )
    if report.ok:
        console.print(f"ok: {report.accounts} accounts verified (replayed from {start})")
        return
    from api.render import discrepancies_table, print_grid

    table = discrepancies_table(f"ledger drift (replayed from {start})",
                                report.discrepancies)
    print_grid(console, table)
    raise typer.Exit(1)


@app.command("rebuild-balances")
@friendly
@audited("ledger.rebuild_balances")
def rebuild_balances(
    batch_size: Annotated[int, typer.Option(min=1, max=100_000, help="Accounts per batch.")] = 500,
) -> None:
    """Recompute every stored balance from the postings (from the newest verified checkpoint).

    Safe while postings continue: each batch of accounts is locked as posting locks them. An
    account whose replayed balance breaks its flag (a wallet that would go negative) keeps its
    stored balance, the rest of its batch is rebuilt, and the command ends with one line
    naming the accounts (error [flag_violated]) and exit 1: post a correcting transaction,
    then rebuild again.
    """
    from config.database import get_engine
    from ledger.integrity import rebuild_balances as run_rebuild

    with Progress(
        TextColumn("rebuilding balances"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err_console,
        disable=not err_console.is_terminal,  # piped: nothing but the result and errors
    ) as bar:
        task = bar.add_task("rebuild", total=None)
        report = run_rebuild(
            get_engine(),
            batch_size=batch_size,
            progress=lambda done, total: bar.update(task, completed=done, total=total),
        )
    rebuilt = report.accounts - len(report.refused)
    console.print(f"{rebuilt} accounts rebuilt, {report.corrected} corrected")
    if report.refused:
        print_error("flag_violated", (
            f"{len(report.refused)} account(s) not rebuilt, their replayed balance breaks their "
            f"flag: {'; '.join(map(str, report.refused))}; the postings need a correcting "
            "transaction (custody verify names them too)"))
        raise typer.Exit(1)


@app.command()
@friendly
@audited("ledger.checkpoint")
def checkpoint() -> None:
    """Checkpoint every balance so that verify and rebuild-balances start from here."""
    from config.database import get_engine
    from ledger.integrity import create_checkpoint

    cp = create_checkpoint(get_engine())
    state = "verified" if cp.verified else "NOT verified (stored balances drifted)"
    console.print(
        f"checkpoint {cp.id} through posting {cp.through_posting_id}: {state}, "
        f"{cp.accounts_count} accounts"
    )


@app.command()
@friendly
def balances(
    user_id: Annotated[str, typer.Argument(help="User id.")],
    as_of: Annotated[str | None, typer.Option(help="Effective time bound (ISO 8601).")] = None,
    known_at: Annotated[str | None, typer.Option(help="Recorded time bound (ISO 8601).")] = None,
    as_json: JsonOption = False,
) -> None:
    """Print a user's balances per asset: posted, pending, available, projected (--json: the
    API's ``Balances``). An unknown user is an error (user_not_found)."""
    from api.cli_reads import print_json, require_user
    from api.render import balances_table, print_grid
    from api.routes.users import balance_rows
    from api.schemas import balances_json
    from config.database import get_engine
    from config.uow import UnitOfWork

    at, known = parse_time(as_of), parse_time(known_at)
    with UnitOfWork(get_engine()) as uow:
        require_user(uow, user_id)
        rows = balance_rows(uow, user_id, at, known)
    if as_json:
        print_json(balances_json(user_id, at or datetime.now(UTC), known, rows))
        return
    print_grid(console, balances_table(f"balances of {user_id}", rows))


@app.command()
@friendly
def statement(
    user_id: Annotated[str, typer.Argument(help="User id.")],
    asset: Annotated[str, typer.Option(help="Ledger asset code, e.g. USDC.")],
    cursor: Annotated[int | None, typer.Option(
        min=0, help="next_cursor of the previous page.")] = None,
    limit: Annotated[int, typer.Option(min=1, max=500, help="Postings, oldest first.")] = 100,
    since: Annotated[str | None, typer.Option(
        "--from", help="Lines recorded at or after this time (ISO 8601; naive is UTC).")] = None,
    until: Annotated[str | None, typer.Option(
        "--to", help="Lines recorded before this time (ISO 8601; naive is UTC).")] = None,
    as_json: JsonOption = False,
) -> None:
    """A user's postings in one asset with the balances after each, oldest first, and the
    opening and closing balances of the range (--json: the API's ``StatementPage``). An
    unknown user is an error (user_not_found)."""
    from api.cli_reads import print_json, require_user
    from api.render import grid, print_grid
    from api.routes.users import statement_page
    from api.schemas import parse_instant
    from config.database import get_engine
    from config.uow import UnitOfWork

    start, end = parse_instant(since, what="--from"), parse_instant(until, what="--to")
    with UnitOfWork(get_engine()) as uow:
        require_user(uow, user_id)
        body = statement_page(uow, user_id, asset, after_posting_id=cursor, limit=limit,
                              since=start, until=end)
    if as_json:
        print_json(body)
        return
    table = grid(f"statement of {user_id} in {asset}", "posting", "ledger tx", "effective",
                 "kind", "account", "amount", "available", "posted", "reference", "reason",
                 right=("amount", "available", "posted"))
    for line in body.items:
        table.add_row(str(line.posting_id), str(line.transaction_id),
                      line.effective_at.isoformat(timespec="seconds"), line.kind, line.account,
                      line.amount.decimal, line.available.decimal, line.posted.decimal,
                      line.reference or "", line.reason or "")
    print_grid(console, table)
    console.print(f"opening available {body.opening.available.decimal}, posted "
                  f"{body.opening.posted.decimal}; closing available "
                  f"{body.closing.available.decimal}, posted {body.closing.posted.decimal}",
                  highlight=False, soft_wrap=True)
    if body.next_cursor is not None:
        console.print(f"more: --cursor {body.next_cursor}", highlight=False, soft_wrap=True)


@period_app.command("close")
@friendly
@audited("ledger.period_close", details=("ends_at", "by", "reason"))
def period_close(
    ends_at: Annotated[str, typer.Argument(help="Close everything effective before this time.")],
    by: Annotated[str, typer.Option(help="Who closes it.")],
    reason: Annotated[str | None, typer.Option(help="Why.")] = None,
) -> None:
    """Close the ledger through ENDS_AT at once; later entries there must be out-of-period
    adjustments. An operator's tool (it needs the database's credentials): through the API a
    close takes two people, a proposal and another admin's or an approver's approval."""
    from config.database import get_engine
    from config.uow import UnitOfWork
    from ledger import service

    at = parse_time(ends_at)
    assert at is not None
    with UnitOfWork(get_engine()) as uow:
        period = service.close_period(uow, at, closed_by=by, reason=reason)
        uow.commit()
    console.print(f"closed through {period.ends_at.isoformat()} at {period.closed_at.isoformat()}")


@app.command()
@friendly
@audited("ledger.reversal", ("transaction_id",), details=("key", "reason", "source"))
def reverse(
    transaction_id: Annotated[int, typer.Argument(help="Ledger transaction to reverse.")],
    key: Annotated[str, typer.Option(help="Idempotency key of the reversal.")],
    reason: Annotated[str, typer.Option(help="Why (required).")],
    source: Annotated[str, typer.Option(help="Who reverses it.")] = "cli",
) -> None:
    """Reverse a ledger transaction in full (sides flipped, same effective time)."""
    from config.database import get_engine
    from config.uow import run_in_transaction
    from ledger import service

    posted = run_in_transaction(
        get_engine(),
        lambda uow: service.reverse(
            uow, transaction_id, idempotency_key=key, reason=reason, source=source
        ),
    )
    note = " (replayed)" if posted.replayed else ""
    console.print(f"reversal transaction {posted.transaction_id}{note}")


# The domain command groups live beside their packages' concerns; mounted here, the one place
# that composes the command line.
from api.cli_api import api_cli  # noqa: E402
from api.cli_config import config_app  # noqa: E402
from api.cli_deposits import deposits_app  # noqa: E402
from api.cli_holdings import holdings_cli  # noqa: E402
from api.cli_reconcile import reconcile_cli  # noqa: E402  (also cases list/show)
from api.cli_service import service_cli  # noqa: E402
from api.cli_treasury import treasury_cli  # noqa: E402
from api.cli_withdrawals import withdrawal_app, withdrawals_app  # noqa: E402

app.add_typer(deposits_app)  # watch, timeline, deposits
app.add_typer(withdrawal_app, name="withdrawal")  # show, approve, cancel, write-off
app.add_typer(withdrawals_app, name="withdrawals")  # open, process
app.add_typer(api_cli)  # keys create, api
app.add_typer(service_cli)  # serve, worker, webhooks, demo
app.add_typer(config_app, name="config")  # check
app.add_typer(treasury_cli)  # treasury expect/fundings/show, cases resolve/approve
app.add_typer(holdings_cli)  # holdings
app.add_typer(reconcile_cli)  # reconcile ledger/histories/aging

from api.cli_sweeps import sweeps_cli  # noqa: E402

app.add_typer(sweeps_cli)  # sweeps list/show/run, cold propose/approve/reject/list/show, refills

from api.cli_seal import seal_app  # noqa: E402

app.add_typer(seal_app, name="seal")  # seal export/run/verify

from api.cli_reserves import reserves_app  # noqa: E402

app.add_typer(reserves_app, name="reserves")  # reserves report/show/list/proof/verify/...

from api.cli_addresses import addresses_app  # noqa: E402

app.add_typer(addresses_app, name="addresses")  # addresses assign/list

from api.cli_secrets import secrets_app  # noqa: E402

app.add_typer(secrets_app, name="secrets")  # secrets rotate-key/status

from api.cli_allowlist import allowlist_app  # noqa: E402

app.add_typer(allowlist_app, name="allowlist")  # allowlist list/add/remove

from api.cli_audit import audit_cli  # noqa: E402

app.add_typer(audit_cli)  # audit


def main() -> None:  # pragma: no cover - console entry point
    """Entry point."""
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
