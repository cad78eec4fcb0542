"""The console's reads follow the API's scopes: support and admin read users, deposits and
cases; an approver reads withdrawals only (the API answers it 403 elsewhere), so its console
shows the withdrawal queues and refuses the other pages with a clear 403 page."""

from __future__ import annotations

from tests.api.conftest import seed_deposit
from tests.api.test_http_authz import _finding_case
from tests.web.conftest import Console


def test_an_approver_reads_withdrawals_only(console: Console) -> None:
    api = console.api
    user = api.funded_user("acme", 2_000_000_000)
    tx_hash = seed_deposit(api, user)
    case_id = _finding_case(api)
    withdrawal = api.withdraw(user, "1500000000")
    # The API's answers to an approver, which the console follows.
    assert api.call("GET", f"/v1/users/{user}/balances", "alice").status_code == 403
    assert api.call("GET", f"/v1/deposits/devnet/{tx_hash}", "alice").status_code == 403
    assert api.call("GET", f"/v1/admin/cases/{case_id}", "alice").status_code == 403
    assert api.call("GET", f"/v1/withdrawals/{withdrawal['id']}", "alice").status_code == 200

    page = console.sign_in("alice")
    for path in (f"/console/users/{user}", f"/console/deposits/devnet/{tx_hash}",
                 f"/console/cases/{case_id}"):
        response = page.goto(f"{console.url}{path}")
        assert response is not None and response.status == 403, path
        assert "an approver key reads withdrawals only" in page.inner_text("main .message")
    response = page.goto(f"{console.url}/console/withdrawals/{withdrawal['id']}")
    assert response is not None and response.status == 200
    # The search names nothing an approver may not read: a user is not found, a withdrawal is.
    response = page.goto(f"{console.url}/console/search?q={user}")
    assert response is not None and response.status == 404
    assert page.locator("main ul.hits li").count() == 0 and "Nothing found" in page.inner_text(
        "main")
    page.goto(f"{console.url}/console/search?q={withdrawal['id']}")
    assert page.url.endswith(f"/console/withdrawals/{withdrawal['id']}")
    page.goto(f"{console.url}/console/queues")
    assert page.locator("#pending-approval").count() == 1
    assert page.locator("#open-cases").count() == 0
    assert page.locator("#open-cases-hidden").count() == 1
    assert page.locator("#held-deposits-hidden").count() == 1

    support = console.sign_in("sam")
    for path in (f"/console/users/{user}", f"/console/deposits/devnet/{tx_hash}",
                 f"/console/cases/{case_id}"):
        response = support.goto(f"{console.url}{path}")
        assert response is not None and response.status == 200, path
    support.goto(f"{console.url}/console/queues")
    assert support.locator("#open-cases").count() == 1
