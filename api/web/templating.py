"""The console's templates (``api/web/templates``, Jinja2, every value escaped) and the filters
they format money, times and hashes with: amounts as exact decimals from minor units (never a
float), times in UTC to the second, hashes and addresses in full."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fastapi import Request
from fastapi.responses import HTMLResponse
from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape

from ledger.model import format_amount

TEMPLATES = Path(__file__).parent / "templates"


def decimal(minor: int | str | None, scale: int) -> str:
    """Minor units as the asset's exact decimal (``decimal(1500000, 6) == "1.500000"``)."""
    if minor is None:
        return "—"
    return format_amount(int(minor), scale)


def when(value: datetime | None) -> str:
    """A time in UTC to the second, as ``2026-12-02 10:15:07 UTC``."""
    if value is None:
        return "—"
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def age(seconds: float | None) -> str:
    """A duration in words a person reads at a glance (``3 h 12 min``)."""
    if seconds is None:
        return "—"
    s = int(seconds)
    if s < 120:
        return f"{s} s"
    if s < 7200:
        return f"{s // 60} min"
    if s < 172800:
        return f"{s // 3600} h {s % 3600 // 60} min"
    return f"{s // 86400} d {s % 86400 // 3600} h"


environment = Environment(loader=FileSystemLoader(TEMPLATES), undefined=StrictUndefined,
                          autoescape=select_autoescape(["html"]), trim_blocks=True,
                          lstrip_blocks=True)
environment.filters.update(decimal=decimal, when=when, age=age)


def page(request: Request, template: str, status: int = 200, **values: Any) -> HTMLResponse:
    """``template`` rendered with ``values`` and what every page has: the signed-in session
    (``session``, None on the sign-in and error pages) and the request."""
    values.setdefault("session", getattr(request.state, "console_session", None))
    values.setdefault("message", None)
    values.setdefault("message_kind", "info")
    body = environment.get_template(template).render(request=request, **values)
    return HTMLResponse(body, status_code=status, headers={
        "Cache-Control": "no-store", "X-Frame-Options": "DENY",
        "Referrer-Policy": "same-origin",
        "Content-Security-Policy": ("default-src 'self'; img-src 'self' data:; "
                                    "style-src 'self'; script-src 'self'; "
                                    "form-action 'self'; frame-ancestors 'none'")})
