from tests.web.conftest import Console


def test_sign_in_search_user(console: Console) -> None:
    user = console.api.funded_user("acme", 7_000_000)
    page = console.sign_in("sam")
    page.fill("main input[name=q]", user)
    page.click("main button[type=submit]")
    page.wait_for_url(f"**/console/users/{user}")
    console.shot(page, "user")
    print(page.inner_text("#balances"))
    assert "7.000000" in page.inner_text("#balances")
    assert console.external() == []
