"""All SQL of the API's own tables, one module per concern. Functions take a Connection inside
an open transaction (or an autocommit connection where the caller says so) and never commit.

- ``clients``: API clients, keys and users; ``authorize_row``, the one
  statement per request that finds the key, counts it against its rate limit and answers
  whether its client owns a user.
- ``ratelimit``: the counting CTEs of that statement and the cleanup of old windows.
- ``idempotency``: ``Idempotency-Key`` records (claim, complete, release, cleanup).
- ``outbox``: webhook endpoints, deliveries and their attempts, alert events.
- ``jobs``: the scheduler's advisory locks and its run log.
- ``audit``: the audit trail (one insert per recorded action, the newest-first read).

The modules around them (``api.auth``, ``api.idempotency``, ``api.outbox``, ``api.jobs``,
``api.audit``) are the API's services: they hold the rules and open the units of work; routes
call them.
"""
