"""Composition: the ``custody`` command line, the HTTP app, the scheduler and the outbox.

``api`` imports every domain package; no domain package imports ``api`` (``make lint``).

- ``app`` builds the FastAPI app; ``routes/`` holds its endpoints, which call services (the
  domain packages' ``service`` modules and the API's own below), never a repository.
- The API's own services: ``auth`` (keys, scopes, users), ``audit`` (the audit trail: which
  requests are recorded, the reading of it), ``idempotency`` (``Idempotency-Key``),
  ``ratelimit``, ``outbox`` (signed webhooks), ``jobs`` (the scheduler), ``sealed_secrets``
  (re-wrapping the stored secrets when the secrets key rotates).
- ``repository/`` holds all SQL of the API's own tables, one module per concern.
- ``cli*`` are the command line; ``custody demo`` imports ``devtools`` inside the command only.
"""
