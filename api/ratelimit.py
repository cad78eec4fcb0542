"""Rate limits per API key: a fixed window counted in PostgreSQL, shared by every process.

One upsert per request (``api.repository.ratelimit.HIT_SQL``, run inside the authentication
statement of ``api.auth.authorize``) increments the key's counter of the current window (one
counter per database session, summed), whose start comes from the database clock so that every
process agrees on it. Over the limit, the request is refused with 429 and ``Retry-After``
(seconds until the window ends). Limits are per scope and set in :class:`RateLimits`. A fixed
window lets a client send up to twice the limit across a window boundary; that is the accepted
price of one statement per request.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property

from sqlalchemy.engine import Connection

from api.repository import ratelimit as repo


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

    #: Failed authentications per source address (any key, or none), counted in PostgreSQL
    #: (``api_auth_failures``) so that several API processes share one count; over it, every
    #: request from that address is refused with 429 until the window ends.
    auth_failures: RateLimit = field(default_factory=lambda: RateLimit(20))

    def of(self, scope: str) -> RateLimit:
        """The limit of ``scope``."""
        return self.by_scope[scope]

    @cached_property
    def windows_json(self) -> str:
        """The window length of each scope, as a JSON object (a parameter of the auth query)."""
        return json.dumps({scope: limit.window_s for scope, limit in self.by_scope.items()})


def cleanup(conn: Connection, *, older_than_s: int = 86_400) -> int:
    """Delete counters of windows that started more than ``older_than_s`` ago."""
    return repo.delete_windows(conn, older_than_s=older_than_s)
