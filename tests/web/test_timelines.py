"""The deposit and withdrawal timeline pages in Chromium: on the test API (a seeded deposit
and a requested withdrawal), and end to end against anvil (a deposit through a reorg, a
settled withdrawal) reached from the search box as support."""

from __future__ import annotations

import tomllib
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Browser
from sqlalchemy.engine import Engine

from api.app import create_app
from api.auth import create_key
from api.jobs import Intervals, Scheduler, build_jobs
from config.chains import parse_chains_config
from config.withdrawals import parse_withdrawals_config
from devtools.e2e import HOT_KEY_ENV, Devchain, Scenario, ServerThread
from ledger.model import format_amount
from tests.api.conftest import Api, seed_deposit
from tests.web.conftest import Console

CONFIRMATIONS = 3


def test_deposit_and_withdrawal_pages_render_in_words_and_decimals(console: Console) -> None:
    user = console.api.funded_user("acme", 100_000_000)
    tx_hash = seed_deposit(console.api, user, 5_250_000)
    withdrawal = console.api.withdraw(user, "30000000")
    page = console.sign_in("sam")

    page.goto(f"{console.url}/console/deposits/devnet/{tx_hash}")
    console.shot(page, "deposit-seeded")
    assert tx_hash in page.inner_text("#tx-hash")
    section = page.locator("section.transfer").first
    assert section.locator("[data-field=amount]").inner_text() == "5.250000 USDC"
    assert "seen in block 100" in section.locator("tr[data-event=transfer_included]").inner_text()
    assert section.locator("[data-field=user]").get_attribute("href") == f"/console/users/{user}"

    page.goto(f"{console.url}/console/withdrawals/{withdrawal['id']}")
    console.shot(page, "withdrawal-requested")
    assert page.inner_text("#state") == withdrawal["state"]
    assert "30.000000 USDC" in page.inner_text("[data-field=amount]")
    reserve = page.locator("#ledger tbody[data-kind=withdrawal_reserve]")
    accounts = reserve.locator("td[data-field=account]").all_inner_texts()
    assert accounts == [f"user:{user}:wallet", f"user:{user}:withdrawals"]
    reserved = int(withdrawal["amount"]["minor"]) + int(withdrawal["fee_max"]["minor"])
    assert reserve.locator("td[data-field=debit]").first.inner_text() == format_amount(reserved, 6)
    assert reserve.locator("td[data-field=credit]").last.inner_text() == format_amount(reserved, 6)

    for path, status, says in (
            ("/console/deposits/devnet/0x1234", 422, "is not a transaction hash"),
            (f"/console/deposits/devnet/0x{'ab' * 32}", 404, "no deposit"),
            ("/console/withdrawals/abc", 422, "is not a withdrawal id"),
            ("/console/withdrawals/999999999", 404, "no withdrawal")):
        response = page.goto(f"{console.url}{path}")
        assert response is not None and response.status == status, path
        text = page.inner_text("main")
        assert says in text and "Traceback" not in text, text
    assert console.external() == []


@pytest.mark.slow
@pytest.mark.anvil
def test_support_follows_a_reorged_deposit_and_a_settled_withdrawal_on_anvil(
        engine: Engine, devchain: Devchain, browser: Browser, screenshots: Path) -> None:
    # The engine of tests/api/test_e2e.py: API and scheduler in one uvicorn, the same story.
    data = tomllib.loads(devchain.config_toml(confirmations=CONFIRMATIONS))
    chains = parse_chains_config(data)
    wcfg = parse_withdrawals_config(data, chains)
    keys = {who: create_key(engine, who, scope).key
            for who, scope in (("acme", "client"), ("ops", "admin"), ("sam", "support"))}
    jobs = build_jobs(engine, chains, wcfg, intervals=Intervals.uniform(0.1),
                      environ={HOT_KEY_ENV: devchain.hot_key})
    app = create_app(engine, chains, wcfg, lifespans=[Scheduler(engine, jobs).lifespan()])
    server = ServerThread(app)
    try:
        with httpx.Client(base_url=server.url, timeout=30,
                          headers={"Authorization": f"Bearer {keys['acme']}"}) as http, \
                httpx.Client(base_url=server.url, timeout=30,
                             headers={"Authorization": f"Bearer {keys['ops']}"}) as admin:
            story = Scenario(http, admin, devchain, CONFIRMATIONS, progress=lambda line: None)
            story.run()
            console = Console(Api(engine, app, http, keys), browser, screenshots)
            try:
                _follow_in_the_console(console, story)
            finally:
                console.close()
    finally:
        server.stop()


def _follow_in_the_console(console: Console, story: Scenario) -> None:
    bob, tx_hash = story.users["bob"], story.deposits["bob USDC"].lower()
    api_balances = {b["asset"]: b for b in story.balances("bob")}
    withdrawal = story.http.get(f"/v1/withdrawals/{story.withdrawal['id']}").json()
    credit = story.timeline("bob USDC")["transfers"][0]["deposit"]["ledger_transaction_id"]

    # Support searches by the transaction hash and lands on the deposit's timeline.
    page = console.sign_in("sam")
    page.fill("main input[name=q]", tx_hash)
    page.click("main button[type=submit]")
    page.wait_for_url(f"**/console/deposits/devnet/{tx_hash}")
    console.shot(page, "e2e-deposit")
    history = page.locator("section.transfer table.history")
    assert "reorged out of block" in history.locator(
        "tr[data-event=block_reorged_out]").inner_text()
    assert "included again in block" in history.locator(
        "tr[data-event=transfer_reincluded]").inner_text()
    assert f"credited to the user by ledger transaction {credit}" in history.locator(
        "tr[data-event=attested_for_user]").inner_text()
    posted = page.locator(f"table.ledger tbody[data-transaction='{credit}']")
    assert posted.locator("td[data-field=account]").all_inner_texts() == [
        "custody:devnet", f"user:{bob}:wallet"]
    assert posted.locator("td[data-field=credit]").last.inner_text() == "150.000000"

    # The user's page agrees with the API's balances; the statement ends at the posted one.
    page.click("section.transfer [data-field=user]")
    page.wait_for_url(f"**/console/users/{bob}")
    console.shot(page, "e2e-user")
    for asset, b in api_balances.items():
        row = page.locator(f"#balances tr[data-asset='{asset}']")
        for fieldname in ("posted", "pending_incoming", "pending_outgoing", "available",
                          "projected"):
            assert row.locator(f"td[data-field={fieldname}]").inner_text() == \
                b[fieldname]["decimal"], (asset, fieldname)
    last_line = page.locator("#statement tr.line td[data-field=posted]").last
    assert page.locator("#statement tr.closing td[data-field=posted]").inner_text() == \
        last_line.inner_text() == api_balances["USDC"]["posted"]["decimal"] == "119.600000"

    # The settled withdrawal, from the user's list: its attempt's hash and its settlement.
    page.click(f"#withdrawals a[href='/console/withdrawals/{story.withdrawal['id']}']")
    page.wait_for_url(f"**/console/withdrawals/{story.withdrawal['id']}")
    console.shot(page, "e2e-withdrawal")
    assert page.inner_text("#state") == "settled"
    attempts = page.inner_text("#attempts")
    assert withdrawal["attempts"] and all(a["tx_hash"] in attempts
                                          for a in withdrawal["attempts"])
    kinds = page.locator("#ledger tbody").evaluate_all(
        "bodies => bodies.map(b => b.dataset.kind)")
    assert {"withdrawal_reserve", "withdrawal_settle", "withdrawal_gas"} <= set(kinds)
    assert console.external() == []
