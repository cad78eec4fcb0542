"""The deposit and withdrawal timeline pages in Chromium: on the test API (a seeded deposit
and a requested withdrawal), and end to end against anvil (a deposit through a reorg, a
settled withdrawal) reached from the search box as support."""

from __future__ import annotations

from ledger.model import format_amount
from tests.api.conftest import seed_deposit
from tests.web.conftest import Console


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
