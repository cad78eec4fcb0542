"""``/docs`` and ``/redoc`` render offline: Swagger UI and ReDoc come from the engine
(fastapi-offline's assets), and the browser asks nothing of another site."""

from __future__ import annotations

from tests.web.conftest import Console


def test_swagger_ui_renders_from_the_engine_alone(console: Console) -> None:
    page = console.page()
    page.goto(f"{console.url}/docs")
    page.wait_for_selector(".swagger-ui .info .title")
    assert "custody" in page.inner_text(".swagger-ui .info .title")
    page.wait_for_selector(".opblock-summary-description:has-text(\"A user's balances\")")
    console.shot(page, "docs")
    assert console.external() == []


def test_redoc_renders_from_the_engine_alone(console: Console) -> None:
    page = console.page()
    page.goto(f"{console.url}/redoc")
    page.wait_for_selector("h1:has-text('custody')")
    page.wait_for_selector("h2:has-text(\"A user's balances per asset\")")
    # The viewport: the whole reference (every field described, the error table, the
    # webhooks) is a page too tall to capture within the screenshot's timeout.
    console.shot(page, "redoc", full_page=False)
    # ReDoc's footer asks for its logo from its CDN; the page's policy refuses it, so nothing
    # leaves the browser.
    assert console.external(refused_too=False) == []
    assert console.external() == console.refused == ["https://cdn.redoc.ly/redoc/logo-mini.svg"]


def test_the_entrances_lead_to_the_console(console: Console) -> None:
    for path, lands in (("/", "/console/login"), ("/admin", "/console/login"),
                        ("/console/", "/console/login")):
        page = console.page()
        page.goto(f"{console.url}{path}")
        assert lands in page.url, path
    signed_in = console.sign_in("carol")
    signed_in.goto(f"{console.url}/admin")
    assert signed_in.url.endswith("/console/queues")
