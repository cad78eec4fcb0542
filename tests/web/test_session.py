"""Signing in and out of the console: staff keys only, a signed session cookie that expires
and ends at sign-out, the sign-in form's own token, and the audit rows of both."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import sqlalchemy as sa
from playwright.sync_api import Browser
from sqlalchemy.engine import Engine

from api.web.session import COOKIE, SESSION_TTL
from tests.web.conftest import Console, serve


def _audit(console: Console, action: str) -> list[tuple[str, str]]:
    with console.api.engine.connect() as conn:
        rows = conn.execute(sa.text("SELECT actor, scope FROM api_audit WHERE action = :a "
                                    "ORDER BY id"), {"a": action}).all()
    return [(r.actor, r.scope) for r in rows]


def test_staff_sign_in_sets_a_strict_http_only_cookie(console: Console) -> None:
    page = console.sign_in("sam")
    cookie = next(c for c in page.context.cookies() if c["name"] == COOKIE)
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and cookie["path"] == "/console"
    assert not cookie["secure"]  # Served over plain HTTP here; Secure over HTTPS.
    assert page.inner_text("header .who").startswith("sam")
    assert _audit(console, "console.sign_in") == [("sam", "support")]
    # The key itself is nowhere in the browser.
    assert all(console.api.keys["sam"] not in c["value"] for c in page.context.cookies())


def test_a_client_key_and_a_wrong_key_cannot_sign_in(console: Console) -> None:
    page = console.page()
    for key, words in ((console.api.keys["acme"], "only support, admin and approver"),
                       ("cust_000000000000_" + "x" * 43, "Unknown or revoked"),
                       ("not a key", "Unknown or revoked")):
        page.goto(f"{console.url}/console/login")
        page.fill("input[name=key]", key)
        page.click("button[type=submit]")
        assert words in page.inner_text("main .message.error")
        assert "/console/login" in page.url
        assert all(c["name"] != COOKIE for c in page.context.cookies())
    page.goto(f"{console.url}/console")
    assert "/console/login" in page.url  # Still not signed in.


def test_pages_without_a_session_lead_to_the_sign_in_and_back(console: Console) -> None:
    user = console.api.funded_user("acme")
    page = console.page()
    page.goto(f"{console.url}/console/users/{user}")
    assert "/console/login" in page.url
    page.fill("input[name=key]", console.api.keys["carol"])
    page.click("button[type=submit]")
    page.wait_for_url(f"**/console/users/{user}")
    assert user in page.inner_text("h1")


def test_sign_out_ends_the_session_even_for_a_kept_cookie(console: Console) -> None:
    page = console.sign_in("alice")
    kept = [c for c in page.context.cookies() if c["name"] == COOKIE]
    page.click("header .who button[type=submit]")
    page.wait_for_url(re.compile(r"/console/login\?reason=signed_out"))
    assert "You signed out" in page.inner_text("main")
    assert _audit(console, "console.sign_out") == [("alice", "approver")]
    # Replaying the old cookie does not sign anyone in.
    other = console.page()
    other.context.add_cookies(kept)  # type: ignore[arg-type]
    other.goto(f"{console.url}/console")
    assert "/console/login" in other.url and "reason=expired" in other.url
    assert "session expired or ended" in other.inner_text("main")


def test_signing_in_again_ends_the_previous_session(console: Console) -> None:
    page = console.sign_in("sam")
    first = [c for c in page.context.cookies() if c["name"] == COOKIE]
    console.sign_in("carol", page)
    assert "carol" in page.inner_text("header .who")
    other = console.page()
    other.context.add_cookies(first)  # type: ignore[arg-type]
    other.goto(f"{console.url}/console")
    assert "/console/login" in other.url  # The first session ended with the second sign-in.
    with console.api.engine.connect() as conn:
        live = conn.execute(sa.text("SELECT count(*) FROM console_sessions "
                                    "WHERE ended_at IS NULL")).scalar_one()
    assert live == 1


def test_an_expired_session_asks_to_sign_in_again(engine: Engine, browser: Browser,
                                                  screenshots: Path) -> None:
    later = timedelta(0)

    def clock() -> datetime:
        return datetime.now(UTC) + later

    with serve(engine, clock=clock) as api:
        console = Console(api, browser, screenshots)
        try:
            page = console.sign_in("sam")
            later = SESSION_TTL + timedelta(seconds=1)
            page.goto(f"{console.url}/console/search?q=abc")
            assert "/console/login" in page.url
            assert "next=%2Fconsole%2Fsearch%3Fq%3Dabc" in page.url
            assert "session expired" in page.inner_text("main .message")
            assert "Traceback" not in page.content()
            assert all(c["name"] != COOKIE for c in page.context.cookies())
        finally:
            console.close()


def test_a_revoked_key_ends_its_sessions(console: Console) -> None:
    page = console.sign_in("sam")
    with console.api.engine.begin() as conn:
        conn.execute(sa.text("UPDATE api_keys SET revoked_at = now() WHERE prefix = :p"),
                     {"p": console.api.keys["sam"].split("_")[1]})
    page.goto(f"{console.url}/console")
    assert "/console/login" in page.url


def test_an_expired_key_ends_its_sessions(console: Console) -> None:
    page = console.sign_in("sam")
    with console.api.engine.begin() as conn:
        conn.execute(sa.text("UPDATE api_keys SET expires_at = now() WHERE prefix = :p"),
                     {"p": console.api.keys["sam"].split("_")[1]})
    page.goto(f"{console.url}/console")
    assert "/console/login" in page.url


def test_a_forged_or_tampered_cookie_is_refused(console: Console) -> None:
    page = console.sign_in("sam")
    cookie = next(c for c in page.context.cookies() if c["name"] == COOKIE)
    page.context.clear_cookies()
    tampered = {"name": COOKIE, "value": cookie["value"][:-2] + "xx",
                "url": console.url + "/console"}
    page.context.add_cookies([tampered])  # type: ignore[list-item]
    page.goto(f"{console.url}/console")
    assert "/console/login" in page.url
    # The same cookie, untampered, set the same way, is a session.
    page.context.clear_cookies()
    untampered = {**tampered, "value": cookie["value"]}
    page.context.add_cookies([untampered])  # type: ignore[list-item]
    page.goto(f"{console.url}/console")
    assert page.url.endswith("/console")


def test_the_sign_in_form_needs_its_own_token(console: Console) -> None:
    page = console.page()
    page.goto(f"{console.url}/console/login")
    response = page.request.post(f"{console.url}/console/login",
                                 form={"key": console.api.keys["sam"], "csrf": "forged"},
                                 max_redirects=0)
    assert response.status == 403
    assert "reload the page" in response.text()
    assert all(c["name"] != COOKIE for c in page.context.cookies())
    assert _audit(console, "console.sign_in") == []


def test_the_sign_out_form_needs_the_session_token(console: Console) -> None:
    page = console.sign_in("sam")
    response = page.request.post(f"{console.url}/console/logout", form={"csrf": "nope"},
                                 max_redirects=0)
    assert response.status == 403
    page.goto(f"{console.url}/console")
    assert page.url.endswith("/console")  # Still signed in.
