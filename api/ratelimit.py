"""Rate limits per API key: a fixed window counted in PostgreSQL, shared by every process.

One upsert per request (``HIT_SQL``, run inside the authentication statement of
``api.auth.authorize``) increments the key's counter of the current window (one counter per
database session, summed), whose start comes from the database clock so that every process
agrees on it. Over the limit, the request is refused with 429 and ``Retry-After`` (seconds until
the window ends). Limits are per scope and set in :class:`RateLimits`. A fixed window lets a
client send up to twice the limit across a window boundary; that is the accepted price of one
statement per request.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property

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

    @cached_property
    def windows_json(self) -> str:
        """The window length of each scope, as a JSON object (a parameter of the auth query)."""
        return json.dumps({scope: limit.window_s for scope, limit in self.by_scope.items()})


#: Counting one request: two CTEs (``ins``, ``hit``) for the top-level WITH of a statement.
#: ``{key}`` is the key id and ``{window}`` the window's length in seconds, both expressions over
#: ``{source}``. The window starts at a multiple of its length on the database clock, so every
#: process agrees on it. ``ins`` increments this database session's own counter of the window
#: (one row per key, window and session, ``slot`` = the backend's pid); ``hit`` adds the other
#: sessions' counters of that window as committed when the statement started. One row for all
#: sessions made every request of a key wait for the previous one's row lock: at 1,000
#: requests/s on 2 cores that queue was most of the hot read's p99 (bench/RESULTS.md, "HTTP
#: API"). The price: requests in flight at the same moment in different sessions do not see
#: each other's increment, so a burst may pass the limit by up to the number of sessions.
HIT_SQL = (
    "ins AS (INSERT INTO api_rate_windows AS r (key_id, window_start, slot, requests) "
    "SELECT {key}, to_timestamp(floor(extract(epoch FROM clock_timestamp()) / {window}) "
    "* {window}), pg_backend_pid(), 1 FROM {source} "
    "ON CONFLICT (key_id, window_start, slot) DO UPDATE SET requests = r.requests + 1 "
    "RETURNING key_id, window_start, slot, requests), "
    "hit AS (SELECT ins.window_start, ins.requests + coalesce((SELECT sum(o.requests) "
    "FROM api_rate_windows o WHERE o.key_id = ins.key_id AND o.window_start = ins.window_start "
    "AND o.slot <> ins.slot), 0) AS requests FROM ins)"
)
#: Seconds left in the window of the ``hit`` row (``{window}``: its length).
LEFT_SQL = ("extract(epoch FROM hit.window_start + make_interval(secs => {window}) "
            "- clock_timestamp())")


def cleanup(conn: Connection, *, older_than_s: int = 86_400) -> int:
    """Delete counters of windows that started more than ``older_than_s`` ago."""
    result = conn.execute(
        sa.text("DELETE FROM api_rate_windows "
                "WHERE window_start < now() - make_interval(secs => :s)"),
        {"s": older_than_s},
    )
    return int(result.rowcount)
