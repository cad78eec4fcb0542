"""The console's timelines pages (being built)."""

from __future__ import annotations

from fastapi import APIRouter

router = APIRouter(prefix="/console", include_in_schema=False)
