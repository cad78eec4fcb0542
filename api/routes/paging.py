"""The one pagination shape of the listing endpoints, and their time ranges.

Every list answers ``{"items": [...], "has_more": bool, "next_cursor": str | null}``
(``api.schemas.Page``): pass ``next_cursor`` back as ``cursor`` for the next page, with the same
filters; ``has_more`` is false on the last page (and ``next_cursor`` null). A cursor is the id
of the last item of the previous page (keyset pagination: a page costs the same at any depth).
Lists of history take ``from`` and ``to`` (ISO 8601; naive means UTC): items whose time (each
route says which) is at or after ``from`` and before ``to`` (a ``to`` at or before ``from`` is an
empty range: no items).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, TypeVar

from fastapi import Query

from api.schemas import INSTANT_PATTERN, INSTANT_RANGE, parse_instant

T = TypeVar("T")

CursorParam = Annotated[str | None, Query(pattern=r"^[0-9]{1,18}$", description=(
    "``next_cursor`` of the previous page (with the same filters)."))]
FromParam = Annotated[str | None, Query(
    alias="from", max_length=64,
    json_schema_extra={"format": "date-time", "pattern": INSTANT_PATTERN},
    description="Only items at or after this time (ISO 8601; naive: UTC). " + INSTANT_RANGE)]
ToParam = Annotated[str | None, Query(
    alias="to", max_length=64,
    json_schema_extra={"format": "date-time", "pattern": INSTANT_PATTERN},
    description="Only items before this time (ISO 8601; naive: UTC). " + INSTANT_RANGE)]


@dataclass(frozen=True)
class Window:
    """A request's time range: ``[since, until)``, either end open (None)."""

    since: datetime | None
    until: datetime | None


def window(since: str | None, until: str | None) -> Window:
    """The ``from``/``to`` range (422 ``request_invalid``: not an ISO 8601 time between 1970
    and 9998)."""
    return Window(parse_instant(since, what="from"), parse_instant(until, what="to"))


def cursor_id(cursor: str | None) -> int | None:
    """The id a cursor names (None: the first page)."""
    return None if cursor is None else int(cursor)


def page(rows: Sequence[T], limit: int,
         key: Callable[[T], int]) -> tuple[list[T], bool, str | None]:
    """(items, has_more, next_cursor) of ``rows`` read with ``limit + 1``: the extra row only
    says whether another page follows."""
    items = list(rows[:limit])
    more = len(rows) > limit and bool(items)
    return items, more, str(key(items[-1])) if more else None
