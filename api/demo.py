"""``custody demo``: the ledger at work on the embedded database.

It opens accounts, credits two deposits, reserves and settles a withdrawal with a fee and a
refund (the DESIGN.md example: reserve 32, send 30, fee 0.40, refund 1.60), books the gas in ETH,
reverses a booking error, shows an idempotent replay, prints balances and runs ``verify``.
Keys are fixed, so a second run replays every entry and moves nothing.
"""

from __future__ import annotations

from datetime import UTC, datetime

from rich.console import Console
from rich.table import Table

import migrations
from config.database import database_url, get_engine
from config.uow import UnitOfWork, run_in_transaction
from ledger import chart, integrity, service
from ledger.model import Account, Entry, Line, format_amount

USDC = 10**6  # one USDC in minor units (scale 6)
GWEI = 10**9
#: The demo's value date: fixed, so that a second run sends the same requests and replays them.
EFFECTIVE_AT = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)


def _entry(
    key: str, kind: str, lines: list[tuple[Account, int, dict[str, int]]], reason: str | None = None
) -> Entry:
    return Entry(
        idempotency_key=f"demo:{key}",
        kind=kind,
        effective_at=EFFECTIVE_AT,
        source="demo",
        reason=reason,
        lines=tuple(Line(a, amount, **refs) for a, amount, refs in lines),
    )


def run_demo(console: Console) -> None:
    """Run the demo and print what happened."""
    with console.status("starting the embedded PostgreSQL and applying migrations"):
        url = database_url()
        migrations.upgrade(url)
    engine = get_engine()
    console.print(f"database: {engine.url.render_as_string(hide_password=True)}")

    with UnitOfWork(engine) as uow:
        usdc = service.open_asset(uow, "USDC", 6)
        eth = service.open_asset(uow, "ETH", 18)
        custody = service.open_account(uow, chart.custody("ethereum"), usdc)
        treasury = service.open_account(uow, chart.treasury("ethereum"), usdc)
        treasury_eth = service.open_account(uow, chart.treasury("ethereum"), eth)
        equity_eth = service.open_account(uow, chart.equity_owner(), eth)
        fees = service.open_account(uow, chart.revenue_withdrawal_fees(), usdc)
        gas = service.open_account(uow, chart.expense_network_fees(), eth)
        alice, alice_out = service.open_user_accounts(uow, "alice", usdc)
        bob, _ = service.open_user_accounts(uow, "bob", usdc)
        uow.commit()

    def post(entry: Entry) -> int:
        posted = service.post_entry(engine, entry)
        state = "replayed" if posted.replayed else "posted"
        console.print(
            f"  {state:8} #{posted.transaction_id:<5} {entry.kind:18} {entry.idempotency_key}"
        )
        return posted.transaction_id

    console.rule("deposits (DR custody / CR user wallet)")
    post(_entry("deposit:alice", "deposit", [(custody, 150 * USDC, {}), (alice, -150 * USDC, {})]))
    booked = post(
        _entry("deposit:bob", "deposit", [(custody, 75 * USDC, {}), (bob, -75 * USDC, {})])
    )

    console.rule("a booking error, corrected by a reversal")
    reversal = run_in_transaction(
        engine,
        lambda u: service.reverse(
            u,
            booked,
            idempotency_key="demo:reverse:deposit:bob",
            reason="credited twice by mistake",
            source="demo",
        ),
    )
    console.print(f"  reversal #{reversal.transaction_id} of #{booked}")
    post(_entry("deposit:bob:fixed", "deposit", [(custody, 70 * USDC, {}), (bob, -70 * USDC, {})]))

    console.rule("withdrawal: reserve 32, send 30, fee 0.40, refund 1.60")
    reserve_id = post(
        _entry(
            "withdrawal:1:reserve",
            "withdrawal_reserve",
            [(alice, 32 * USDC, {}), (alice_out, -32 * USDC, {})],
        )
    )
    with UnitOfWork(engine) as uow:
        reserve_posting = service.get_transaction(uow, reserve_id).postings[1].id
    _show_balances(console, engine, ["alice"], "while the withdrawal is in flight")
    post(
        _entry(
            "withdrawal:1:settle",
            "withdrawal_settle",
            [
                (alice_out, 32 * USDC, {"closes_posting_id": reserve_posting}),
                (custody, -30 * USDC, {}),
                (fees, -400_000, {}),
                (alice, -1_600_000, {}),
            ],
        )
    )
    post(
        _entry(
            "withdrawal:1:fee-out", "fee_sweep", [(treasury, 400_000, {}), (custody, -400_000, {})]
        )
    )
    post(
        _entry(
            "treasury:fund",
            "treasury_funding",
            [(treasury_eth, 10**17, {}), (equity_eth, -(10**17), {})],
        )
    )
    post(
        _entry(
            "withdrawal:1:gas",
            "network_fee",
            [(gas, 52_000 * 3 * GWEI, {}), (treasury_eth, -52_000 * 3 * GWEI, {})],
        )
    )

    console.rule("idempotency: the same request again moves nothing")
    post(_entry("deposit:alice", "deposit", [(custody, 150 * USDC, {}), (alice, -150 * USDC, {})]))

    _show_balances(console, engine, ["alice", "bob"], "after settlement")
    with UnitOfWork(engine) as uow:
        rows = service.account_balances(uow, [custody, treasury, fees, treasury_eth, gas])
    table = Table(title="company accounts")
    for col in ("account", "asset", "balance"):
        table.add_column(col, justify="right" if col == "balance" else "left")
    for b in rows:
        table.add_row(
            b.account.code,
            b.account.asset.code,
            format_amount(b.balance_minor, b.account.asset.scale),
        )
    console.print(table)

    report = integrity.verify(engine)
    if report.ok:
        console.print(
            f"[green]verify: ok[/] ({report.accounts} accounts; trial balance zero, "
            "stored = replayed, custody = customer liabilities)"
        )
    else:
        for d in report.discrepancies:
            console.print(f"[red]verify: {d}[/]")
    console.print(
        "Run [bold]custody verify[/], [bold]custody balances alice[/] or "
        "[bold]custody rebuild-balances[/] next (data stays in var/pg)."
    )


def _show_balances(console: Console, engine: object, users: list[str], title: str) -> None:
    from api.render import balances_table

    with UnitOfWork(engine) as uow:  # type: ignore[arg-type]
        for user in users:
            console.print(balances_table(f"{user}: {title}", service.user_balances(uow, user)))
