"""``/docs`` (Swagger UI) and ``/redoc`` (ReDoc) with every asset served by the engine: the
scripts and styles shipped in the ``fastapi-offline`` package, mounted at ``/docs/static``. By
default FastAPI loads them from CDNs, so without internet access both pages were blank.

Both pages carry a Content-Security-Policy allowing only the engine itself (and the inline
scripts that start the viewers): ReDoc's footer shows a logo from ``cdn.redoc.ly``, and the
policy keeps the browser from asking for it.
"""

from __future__ import annotations

from pathlib import Path

import fastapi_offline
from fastapi import FastAPI, Request
from fastapi.openapi.docs import (
    get_redoc_html,
    get_swagger_ui_html,
    get_swagger_ui_oauth2_redirect_html,
)
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

ASSETS = Path(fastapi_offline.__file__).parent / "static"
STATIC_URL = "/docs/static"
POLICY = ("default-src 'self'; img-src 'self' data: blob:; style-src 'self' 'unsafe-inline'; "
          "script-src 'self' 'unsafe-inline'; worker-src 'self' blob:; connect-src 'self'; "
          "frame-ancestors 'none'")


def _with_policy(page: HTMLResponse) -> HTMLResponse:
    page.headers["Content-Security-Policy"] = POLICY
    return page


def install(app: FastAPI) -> None:
    """Serve ``/docs`` and ``/redoc`` on ``app`` (created with ``docs_url=None`` and
    ``redoc_url=None``) from the engine's own assets."""
    app.mount(STATIC_URL, StaticFiles(directory=ASSETS), name="docs-static")
    openapi_url = app.openapi_url or "/openapi.json"
    oauth2_redirect = app.swagger_ui_oauth2_redirect_url or "/docs/oauth2-redirect"

    @app.get("/docs", include_in_schema=False)
    def swagger_ui(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return _with_policy(get_swagger_ui_html(
            openapi_url=f"{root}{openapi_url}", title=f"{app.title} - Swagger UI",
            oauth2_redirect_url=oauth2_redirect,
            swagger_js_url=f"{root}{STATIC_URL}/swagger-ui-bundle.js",
            swagger_css_url=f"{root}{STATIC_URL}/swagger-ui.css",
            swagger_favicon_url=f"{root}{STATIC_URL}/favicon.png"))

    @app.get(oauth2_redirect, include_in_schema=False)
    def swagger_ui_redirect() -> HTMLResponse:
        return _with_policy(get_swagger_ui_oauth2_redirect_html())

    @app.get("/redoc", include_in_schema=False)
    def redoc(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return _with_policy(get_redoc_html(
            openapi_url=f"{root}{openapi_url}", title=f"{app.title} - ReDoc",
            redoc_js_url=f"{root}{STATIC_URL}/redoc.standalone.js",
            redoc_favicon_url=f"{root}{STATIC_URL}/favicon.png", with_google_fonts=False))
