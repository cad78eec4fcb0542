"""The rate-limit counters (``api_rate_windows``): the counting CTEs and their cleanup.

The rules (a fixed window per key, limits per scope) are in ``api.ratelimit``.
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.engine import Connection

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

#: The start of the current failed-authentication window (``%(fw)s``: its length in seconds),
#: on the database clock as the request windows.
FAILURE_WINDOW_SQL = ("to_timestamp(floor(extract(epoch FROM clock_timestamp()) "
                      "/ CAST(%(fw)s AS int)) * CAST(%(fw)s AS int))")


def delete_windows(conn: Connection, *, older_than_s: int) -> int:
    """Delete counters of windows that started more than ``older_than_s`` ago; how many."""
    result = conn.execute(
        sa.text("DELETE FROM api_rate_windows "
                "WHERE window_start < now() - make_interval(secs => :s)"),
        {"s": older_than_s},
    )
    failures = conn.execute(
        sa.text("DELETE FROM api_auth_failures "
                "WHERE window_start < now() - make_interval(secs => :s)"),
        {"s": older_than_s},
    )
    return int(result.rowcount) + int(failures.rowcount)
