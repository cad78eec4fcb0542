"""Rate limits per API key: a fixed window counted in PostgreSQL, shared by every process.

One upsert per request (``hit``) increments the key's counter of the current window, whose start
comes from the database clock so that every process agrees on it. Over the limit, the request is
refused with 429 and ``Retry-After`` (seconds until the window ends). Limits are per scope and
set in :class:`RateLimits`. A fixed window lets a client send up to twice the limit across a
window boundary; that is the accepted price of one statement per request.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import sqlalchemy as sa
from sqlalchemy.engine import Connection


@dataclass(frozen=True)
class RateLimit:
    """At most ``requests_max`` requests per key in each window of ``window_s`` seconds."""

    requests_max: int
    window_s: int = 60

    def __post_init__(self) -> None:
        assert self.requests_max >= 1 and 1 <= self.window_s <= 86_400


@dataclass(frozen=True)
class RateLimits:
    """The limit of each scope (``client``, ``support``, ``admin``, ``approver``)."""

    by_scope: dict[str, RateLimit] = field(default_factory=lambda: {
        "client": RateLimit(1_200), "support": RateLimit(600), "admin": RateLimit(300),
        "approver": RateLimit(300)})

    def of(self, scope: str) -> RateLimit:
        """The limit of ``scope``."""
        return self.by_scope[scope]


def hit(conn: Connection, key_id: int, limit: RateLimit) -> tuple[int, int]:
    """Count one request of ``key_id``; return (requests in this window, seconds it has left)."""
    row = conn.execute(
        sa.text(
            "WITH w AS (SELECT to_timestamp(floor(extract(epoch FROM clock_timestamp()) / :w) "
            "* :w) AS start) "
            "INSERT INTO api_rate_windows AS r (key_id, window_start, requests) "
            "SELECT :k, w.start, 1 FROM w "
            "ON CONFLICT (key_id, window_start) DO UPDATE SET requests = r.requests + 1 "
            "RETURNING requests, extract(epoch FROM window_start + make_interval(secs => :w) "
            "- clock_timestamp()) AS left_s"
        ),
        {"k": key_id, "w": limit.window_s},
    ).one()
    return int(row.requests), max(1, math.ceil(float(row.left_s)))


def cleanup(conn: Connection, *, older_than_s: int = 86_400) -> int:
    """Delete counters of windows that started more than ``older_than_s`` ago."""
    result = conn.execute(
        sa.text("DELETE FROM api_rate_windows "
                "WHERE window_start < now() - make_interval(secs => :s)"),
        {"s": older_than_s},
    )
    return int(result.rowcount)
