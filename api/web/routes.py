"""Mount the console on the API app: its routers, its static files, and the entrances ``/``
(the console) and ``/admin`` (its queues)."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import RedirectResponse
from fastapi.staticfiles import StaticFiles

from api.web import actions, pages, queues, timelines, users

STATIC = Path(__file__).parent / "static"
ROUTERS = (pages.router, users.router, timelines.router, queues.router, actions.router)


def install(app: FastAPI) -> None:
    """Add the console to ``app`` (none of it is in the OpenAPI document: pages, not API)."""
    for router in ROUTERS:
        app.include_router(router)
    app.mount("/console/static", StaticFiles(directory=STATIC), name="console-static")

    @app.get("/", include_in_schema=False)
    def root() -> RedirectResponse:
        return RedirectResponse("/console", status_code=307)

    @app.get("/admin", include_in_schema=False)
    def admin() -> RedirectResponse:
        return RedirectResponse("/console/queues", status_code=307)
