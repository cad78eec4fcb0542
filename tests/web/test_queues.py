"""The queues page and the case page in Chromium: a withdrawal waiting for approval and an open
case are listed, each linking to its page; support sees no action buttons on either."""

from __future__ import annotations

from datetime import UTC, datetime

from api.cases import record_check
from reconcile.model import CaseType, Finding
from tests.web.conftest import Console


def open_case(console: Console, account: int = 7) -> int:
    """A fresh open case (a reconciliation check's balance drift)."""
    recorded = record_check(console.api.engine, "tests", [Finding(
        CaseType.BALANCE_DRIFT, f"account:{account}", {"account_id": str(account)}, "100", "90",
        {"expected_version": 2})], datetime.now(UTC))
    return recorded.opened[0]


def test_queues_list_a_pending_withdrawal_and_an_open_case(console: Console) -> None:
    user = console.api.funded_user("acme", 2_000_000_000)
    w = console.api.withdraw(user, "1500000000")
    case = open_case(console)
    page = console.sign_in("alice")
    page.goto(f"{console.url}/console/queues")
    row = page.locator(f"#pending tr[data-id='{w['id']}']")
    assert "1500.000000" in row.inner_text()
    assert row.locator(f"a[href='/console/withdrawals/{w['id']}']").count() == 1
    assert row.locator("a.action").count() == 2  # an approver: approve and reject
    assert "None." in page.inner_text("#held-withdrawals + p")
    # Cases are for support and admin (tests/web/test_scopes.py): an admin follows the case.
    page = console.sign_in("carol")
    page.goto(f"{console.url}/console/queues")
    console.shot(page, "queues")
    page.click(f"#cases tr[data-id='{case}'] a")
    page.wait_for_url(f"**/console/cases/{case}")
    assert "balance_drift" in page.inner_text("#case")
    assert "expected_version" in page.inner_text("#evidence")
    console.shot(page, "case")
    assert console.external() == []


def test_support_sees_no_action_buttons(console: Console) -> None:
    user = console.api.funded_user("acme", 2_000_000_000)
    w = console.api.withdraw(user, "1500000000")
    case = open_case(console)
    page = console.sign_in("sam")
    page.goto(f"{console.url}/console/queues")
    assert page.locator(f"#pending tr[data-id='{w['id']}']").count() == 1
    assert page.locator("a.action, main form").count() == 0
    page.goto(f"{console.url}/console/cases/{case}")
    assert "balance_drift" in page.inner_text("#case")
    assert page.locator("a.action, main form").count() == 0
    for path in (f"withdrawals/{w['id']}/approve", f"withdrawals/{w['id']}/reject",
                 f"withdrawals/{w['id']}/write-off-vote", f"cases/{case}/resolve?resolution=x"):
        response = page.goto(f"{console.url}/console/{path}")
        assert response is not None and response.status == 403, path
        assert page.locator("main form, a.action").count() == 0
