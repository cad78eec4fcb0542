"""The console's actions in Chromium: an approver approves through the confirmation form and the
API shows it (audited as the API's own approval); the same person cannot approve twice, nor a
requester their own request; support sees no action and a forged POST from its session is
refused; a form without its CSRF token is refused; an admin resolves a case. Refusals change
nothing."""

from __future__ import annotations

import re
from types import SimpleNamespace
from typing import Any

import sqlalchemy as sa
from playwright.sync_api import Page

from api.auth import Principal, create_key
from api.web.session import Session
from api.web.templating import environment
from tests.web.conftest import Console
from tests.web.test_queues import open_case
from withdrawals.model import State


def decisions(console: Console, withdrawal_id: int) -> list[tuple[str, str, str]]:
    """The withdrawal's votes as the API shows them."""
    r = console.api.call("GET", f"/v1/withdrawals/{withdrawal_id}", "acme")
    assert r.status_code == 200, r.text
    return [(d["kind"], d["decision"], d["actor"]) for d in r.json()["decisions"]]


def confirm(page: Page) -> Any:
    """Submit the confirmation form; the response of the page it leads to."""
    with page.expect_navigation() as nav:
        page.click("#confirm button[type=submit]")
    return nav.value


def csrf_of(page: Page) -> str:
    """The session's CSRF token, as every form of the page carries it."""
    token = page.get_attribute("form.who input[name=csrf]", "value")
    assert token
    return token


def test_approver_approves_through_the_form(console: Console) -> None:
    user = console.api.funded_user("acme", 2_000_000_000)
    w = console.api.withdraw(user, "1500000000")
    page = console.sign_in("alice")
    page.goto(f"{console.url}/console/withdrawals/{w['id']}/approve")
    assert "1500.000000 USDC" in page.inner_text("#facts")
    console.shot(page, "confirm-approve")
    confirm(page)
    assert re.search(rf"/console/withdrawals/{w['id']}\?done=approved$", page.url)
    assert decisions(console, w["id"]) == [("approval", "approve", "alice")]
    r = console.api.call("GET", f"/v1/withdrawals/{w['id']}", "acme")
    assert r.json()["withdrawal"]["state"] == "reserved"
    with console.api.engine.connect() as conn:
        rows = conn.execute(sa.text(
            "SELECT actor, scope, status FROM api_audit WHERE action = 'withdrawal.approval' "
            "AND target = :t"), {"t": f"withdrawal_id={w['id']}"}).all()
    assert [tuple(r) for r in rows] == [("alice", "approver", 201)]


def test_the_same_person_cannot_approve_twice(console: Console) -> None:
    user = console.api.funded_user("acme", 7_000_000_000)
    w = console.api.withdraw(user, "6000000000")  # above the dual threshold: two approvers
    page = console.sign_in("alice")
    for _ in range(2):
        page.goto(f"{console.url}/console/withdrawals/{w['id']}/approve")
        response = confirm(page)
    assert response.status == 409
    assert "alice already voted" in page.inner_text("main .message.error")
    console.shot(page, "approval-refused")
    assert decisions(console, w["id"]) == [("approval", "approve", "alice")]


def test_a_requester_cannot_approve_their_own_request(console: Console) -> None:
    console.api.keys["acme-approver"] = create_key(console.api.engine, "acme", "approver").key
    user = console.api.funded_user("acme", 2_000_000_000)
    w = console.api.withdraw(user, "1500000000")
    page = console.sign_in("acme-approver")
    page.goto(f"{console.url}/console/withdrawals/{w['id']}/approve")
    assert confirm(page).status == 409
    assert "cannot approve their own withdrawal" in page.inner_text("main .message.error")
    assert decisions(console, w["id"]) == []


def test_a_forged_post_from_support_is_refused(console: Console) -> None:
    user = console.api.funded_user("acme", 2_000_000_000)
    w = console.api.withdraw(user, "1500000000")
    page = console.sign_in("sam")
    form: dict[str, str | float | bool] = {
        "csrf": csrf_of(page), "idempotency_key": "f" * 32, "decision": "approve", "reason": ""}
    r = page.request.post(f"{console.url}/console/withdrawals/{w['id']}/approvals", form=form)
    assert r.status == 403 and "only an approver" in r.text()
    r = page.request.post(f"{console.url}/console/withdrawals/{w['id']}/write-off-votes",
                          form={**form, "decision": "sent", "reason": "forged"})
    assert r.status == 403
    assert decisions(console, w["id"]) == []


def test_a_form_without_its_csrf_token_is_refused(console: Console) -> None:
    user = console.api.funded_user("acme", 2_000_000_000)
    w = console.api.withdraw(user, "1500000000")
    page = console.sign_in("alice")
    url = f"{console.url}/console/withdrawals/{w['id']}/approvals"
    r = page.request.post(url, form={"idempotency_key": "a" * 32, "decision": "approve"})
    assert r.status == 403 and "CSRF" in r.text()
    r = page.request.post(url, form={"csrf": "wrong", "idempotency_key": "a" * 32,
                                     "decision": "approve"})
    assert r.status == 403
    assert decisions(console, w["id"]) == []


def test_an_admin_resolves_a_case(console: Console) -> None:
    case = open_case(console, 8)
    page = console.sign_in("carol")
    page.goto(f"{console.url}/console/cases/{case}")
    page.fill("#resolve textarea[name=resolution]", "drift explained by a late posting")
    page.click("#resolve button[type=submit]")
    page.wait_for_url(f"**/console/cases/{case}/resolve?**")
    assert "drift explained by a late posting" in page.inner_text("#facts")
    console.shot(page, "confirm-resolve")
    confirm(page)
    assert page.url.endswith(f"/console/cases/{case}?done=resolved")
    assert "Case resolved." in page.inner_text("main .message")
    assert "carol" in page.inner_text("#resolution")
    r = console.api.call("GET", f"/v1/admin/cases/{case}", "sam").json()
    assert (r["status"], r["resolved_by"]) == ("resolved", "carol")


def test_withdrawal_actions_partial_offers_each_scope_its_own() -> None:
    partial = environment.get_template("withdrawal_actions.html")

    def links(scope: str, state: State) -> list[str]:
        session = Session(1, Principal(1, "k", 1, "x", scope), "t")
        html = partial.render(session=session, withdrawal=SimpleNamespace(id=5, state=state))
        return re.findall(r'href="([^"]+)"', html)

    assert links("approver", State.PENDING_APPROVAL) == [
        "/console/withdrawals/5/approve", "/console/withdrawals/5/reject"]
    assert links("admin", State.AWAITING_WRITE_OFF) == ["/console/withdrawals/5/write-off-vote"]
    assert links("admin", State.PENDING_APPROVAL) == []
    assert links("approver", State.AWAITING_WRITE_OFF) == []
    assert links("support", State.PENDING_APPROVAL) == []
    assert links("support", State.AWAITING_WRITE_OFF) == []


def test_write_off_votes_go_to_the_engine_and_admins_do_not_approve(console: Console) -> None:
    user = console.api.funded_user("acme", 2_000_000_000)
    w = console.api.withdraw(user, "1500000000")
    page = console.sign_in("carol")
    page.goto(f"{console.url}/console/withdrawals/{w['id']}/write-off-vote")
    assert "not awaiting a write-off" in page.inner_text("#refusal")
    assert page.locator("#confirm").count() == 0
    form = {"csrf": csrf_of(page), "idempotency_key": "v" * 32}
    r = page.request.post(f"{console.url}/console/withdrawals/{w['id']}/write-off-votes",
                          form={**form, "decision": "sent", "reason": "seen on chain"})
    assert r.status == 409 and "not awaiting a write-off" in r.text()  # the engine refuses
    r = page.request.post(f"{console.url}/console/withdrawals/{w['id']}/approvals",
                          form={**form, "decision": "approve"})
    assert r.status == 403 and "only an approver" in r.text()
    refused = page.goto(f"{console.url}/console/withdrawals/{w['id']}/approve")
    assert refused is not None and refused.status == 403
    assert decisions(console, w["id"]) == []


def test_a_fixing_transaction_id_is_ascii_digits() -> None:
    import pytest

    from api.problems import RequestInvalid
    from api.web.actions import _transaction_id

    assert _transaction_id(" 42 ") == 42 and _transaction_id("") is None
    for bad in ("²", "٣", "0", "-1", "1e3", "9" * 20):
        with pytest.raises(RequestInvalid):
            _transaction_id(bad)
