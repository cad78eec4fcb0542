"""The search box and the user page: each kind of text finds its page, bad input gets a clear
message, and the user page's figures are the API's (balances now, as of and as known at a
time; the statement's running balance ends at the posted balance)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from urllib.parse import quote

import sqlalchemy as sa

from api.web import search
from tests.api.conftest import seed_deposit
from tests.web.conftest import Console


def _search(console: Console, page_url_part: str, text: str, who: str = "sam") -> str:
    page = console.sign_in(who)
    page.fill("main input[name=q]", text)
    page.click("main button[type=submit]")
    page.wait_for_load_state()
    assert page_url_part in page.url, (text, page.url)
    return page.inner_text("main")


def test_search_finds_users_addresses_transactions_and_withdrawals(console: Console) -> None:
    api = console.api
    r = api.call("POST", "/v1/users", "acme", json={"reference": "customer-4711"})
    referenced = r.json()["id"]
    # References are the clients' free text: an e-mail, words, even something like 0x....
    free = {text: api.call("POST", "/v1/users", "globex", json={"reference": text}).json()["id"]
            for text in ("alice@example.com", "order 4711", "0xabc")}
    user = api.funded_user("acme", 2_000_000_000)
    tx_hash = seed_deposit(api, user)
    address = api.call("GET", f"/v1/users/{user}/deposit-addresses", "acme").json()[
        "addresses"][0]["address"]
    withdrawal = api.withdraw(user)
    page = console.sign_in("sam")
    for text, lands in ((user, f"/console/users/{user}"),
                        ("customer-4711", f"/console/users/{referenced}"),
                        (address.upper().replace("0X", "0x"), f"/console/users/{user}"),
                        (f"  {tx_hash.upper().replace('0X', '0x')} ",
                         f"/console/deposits/devnet/{tx_hash}"),
                        (str(withdrawal["id"]), f"/console/withdrawals/{withdrawal['id']}"),
                        *((text, f"/console/users/{user_id}") for text, user_id in free.items())):
        page.goto(f"{console.url}/console")
        page.fill("main input[name=q]", text)
        page.click("main button[type=submit]")
        page.wait_for_url(f"**{lands}")


def test_search_says_what_is_wrong_with_bad_input(console: Console) -> None:
    page = console.sign_in("sam")
    for text, status, words in (
            ("0x1234", 422, "neither a transaction hash"),
            ("0x" + "ab" * 32, 404, "Nothing found"),
            ("usr_nobody", 404, "Nothing found"),
            ("<script>alert(1)</script>", 422, "is not a user id")):
        response = page.goto(f"{console.url}/console/search?q={text}")
        assert response is not None and response.status == status, text
        body = page.inner_text("main")
        assert words in body and "Traceback" not in page.content()
    # The hostile text is shown as text: escaped in the page, no element made of it.
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page.content()
    assert page.locator("main script").count() == 0
    assert console.external() == []


def test_a_user_the_ledger_alone_knows_is_found(console: Console) -> None:
    from tests.withdrawals.conftest import fund

    outside = f"legacy-{uuid.uuid4().hex[:8]}"
    fund(console.api.engine, [outside], 3_000_000)
    with console.api.engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM api_users WHERE id = :i"),
                            {"i": outside}).scalar_one() == 0
    text = _search(console, f"/console/users/{outside}", outside)
    assert "known to the ledger only" in text and "3.000000" in text


def test_user_page_balances_and_statement_agree_with_the_api(console: Console) -> None:
    api = console.api
    user = api.funded_user("acme", 2_000_000_000)
    api.withdraw(user, "30000000")
    before_second = datetime.now(UTC)
    api.withdraw(user, "45000000")
    page = console.sign_in("sam")
    page.goto(f"{console.url}/console/users/{user}")
    console.shot(page, "user")
    balances = api.call("GET", f"/v1/users/{user}/balances", "acme").json()
    for b in balances["balances"]:
        row = page.locator(f"#balances tr[data-asset={b['asset']}]")
        for field in ("posted", "pending_incoming", "pending_outgoing", "available",
                      "projected"):
            assert row.locator(f"td[data-field={field}]").inner_text() == b[field]["decimal"]
    usdc = next(b for b in balances["balances"] if b["asset"] == "USDC")
    last_line = page.locator("#statement tr.line td[data-field=posted]").last.inner_text()
    assert last_line == usdc["posted"]["decimal"]  # The running balance ends at the posted.
    closing = page.locator("#statement tr.closing")
    assert closing.locator("td[data-field=posted]").inner_text() == usdc["posted"]["decimal"]
    assert closing.locator("td[data-field=available]").inner_text() == (
        usdc["available"]["decimal"])
    labels = page.locator("#statement tr.line td:nth-child(3)").all_inner_texts()
    assert labels[0] == "deposit credited"
    assert sum("withdrawal reserved" in t for t in labels) == 4  # Wallet and reserve, twice.
    assert len(page.locator("#withdrawals tr").all()) == 3  # A header and two withdrawals.

    # As known before the second withdrawal: the API's historic balance, on the page too.
    known = before_second.isoformat()
    page.fill("input[name=known_at]", known)
    page.click("#balances-at button[type=submit]")
    page.wait_for_load_state()
    then = api.call("GET", f"/v1/users/{user}/balances", "acme",
                    params={"known_at": known}).json()
    then_usdc = next(b for b in then["balances"] if b["asset"] == "USDC")
    shown = page.locator("#balances tr[data-asset=USDC] td[data-field=available]").inner_text()
    assert shown == then_usdc["available"]["decimal"] != usdc["available"]["decimal"]
    assert "as known at" in page.inner_text("#balances-when")

    # The statement from the second withdrawal on opens at the balance before it.
    page.goto(f"{console.url}/console/users/{user}?asset=USDC&since={quote(known)}")
    opening = page.locator("#statement tr.opening td[data-field=available]").inner_text()
    assert opening == then_usdc["available"]["decimal"]
    assert page.locator("#statement tr.closing td[data-field=posted]").inner_text() == (
        usdc["posted"]["decimal"])


def test_user_page_bad_input_and_unknown_users(console: Console) -> None:
    user = console.api.funded_user("acme")
    page = console.sign_in("sam")
    for path, status, words in (
            (f"/console/users/{user}?as_of=yesterday", 422, "as of is not an ISO 8601 time"),
            (f"/console/users/{user}?since=2026-02-01&until=2026-01-01", 422, "ends before"),
            (f"/console/users/{user}?asset=NOPE", 422, "NOPE"),
            ("/console/users/usr_nobody", 404, "neither the API nor the ledger"),
            ("/console/users/bad%20id", 422, "invalid request")):
        response = page.goto(f"{console.url}{path}")
        assert response is not None and response.status == status, path
        assert words in page.inner_text("main .message.error"), path
        assert "Traceback" not in page.content()


def test_search_classifies_text_before_reading() -> None:
    import pytest

    for bad in ("", " ", "x" * 201):
        with pytest.raises(search.SearchInvalid):
            search.find(None, None, bad)  # type: ignore[arg-type]
