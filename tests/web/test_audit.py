"""The console's audit rows (issue 19): its actions and refusals are recorded once each with
channel ``console``, and so are support's visits of a user's page; a client key refused at
sign-in is recorded with its reason."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from tests.web.conftest import Console
from tests.web.test_actions import confirm, csrf_of


def rows(console: Console, action: str) -> list[dict[str, Any]]:
    with console.api.engine.connect() as conn:
        return [dict(r) for r in conn.execute(sa.text(
            "SELECT actor, scope, channel, target, status, error_code FROM api_audit "
            "WHERE action = :a ORDER BY id"), {"a": action}).mappings()]


def test_an_approval_and_a_forged_vote_are_one_console_row_each(console: Console) -> None:
    user = console.api.funded_user("acme", 2_000_000_000)
    w = console.api.withdraw(user, "1500000000")
    page = console.sign_in("alice")
    page.goto(f"{console.url}/console/withdrawals/{w['id']}/approve")
    confirm(page)
    forger = console.sign_in("sam")
    form: dict[str, str | float | bool] = {"csrf": csrf_of(forger), "idempotency_key": "f" * 32,
                                           "decision": "approve", "reason": ""}
    r = forger.request.post(f"{console.url}/console/withdrawals/{w['id']}/approvals",
                            form=form)
    assert r.status == 403
    target = f"withdrawal_id={w['id']}"
    found = rows(console, "withdrawal.approval")
    assert [(x["actor"], x["scope"], x["channel"], x["target"], x["status"]) for x in found] == [
        ("alice", "approver", "console", target, 201),
        ("sam", "support", "console", target, 403)]
    assert found[0]["error_code"] is None and found[1]["error_code"] is not None


def test_supports_visit_of_a_user_page_is_recorded(console: Console) -> None:
    user = console.api.funded_user("acme")
    page = console.sign_in("sam")
    page.goto(f"{console.url}/console/users/{user}")
    assert rows(console, "user.read") == [{
        "actor": "sam", "scope": "support", "channel": "console", "target": f"user_id={user}",
        "status": 200, "error_code": None}]


def test_a_client_key_refused_at_sign_in_is_recorded(console: Console) -> None:
    page = console.page()
    page.goto(f"{console.url}/console/login")
    page.fill("input[name=key]", console.api.keys["acme"])
    page.click("button[type=submit]")
    page.wait_for_selector("text=only support, admin and approver")
    assert rows(console, "console.sign_in") == [{
        "actor": "acme", "scope": "client", "channel": "console", "target": "",
        "status": 403, "error_code": "forbidden"}]
