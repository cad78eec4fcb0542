"""The root of the engine's error tree.

Every expected failure is a subclass of :class:`CustodyError` with a stable ``code`` that the API
and the CLI report. Programmer errors (a broken invariant) are not in this tree: they fail loudly.
"""

from __future__ import annotations


class CustodyError(Exception):
    """Root of every expected error; ``code`` is stable and machine-readable."""

    code = "custody_error"
    #: Whether retrying the same request later can succeed.
    retryable = False

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ConfigurationInvalid(CustodyError):
    """The settings or the configuration file cannot be used."""

    code = "configuration_invalid"


class DatabaseUnavailable(CustodyError):
    """The database cannot be reached or started."""

    code = "database_unavailable"
    retryable = True


class CommitInDoubt(CustodyError):
    """The connection was lost after COMMIT was sent and before its answer came back: the
    transaction may or may not have committed. Resolved by looking the operation up by its key
    (idempotency key, attempt hash, deposit key) on a new connection, never by assuming either
    outcome (``config.uow.run_in_transaction``'s ``in_doubt``)."""

    code = "commit_in_doubt"
    retryable = True
