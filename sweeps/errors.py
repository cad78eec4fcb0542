"""Errors of the sweeps package (sweeps, cold transfers, refill requests); each has a stable
``code`` that the API (``api.problems``) and the CLI report."""

from __future__ import annotations

from config.errors import CustodyError


class SweepsError(CustodyError):
    """Root of the package's expected errors."""

    code = "sweeps_error"


class SweepsNotConfigured(SweepsError):
    """The configuration has no ``[sweeps]`` section (or none for that chain): nothing is swept,
    proposed to cold or requested from cold here."""

    code = "sweeps_not_configured"


class MovementNotFound(SweepsError):
    """No sweep, gas top-up, cold transfer or refill request with that id."""

    code = "movement_not_found"


class ColdTransferInvalid(SweepsError):
    """A proposed cold transfer was refused before anything was written: unknown chain or
    asset, no cold address or hot wallet for it, an amount of zero or one that does not fit."""

    code = "cold_transfer_invalid"


class ColdTransferOpen(SweepsError):
    """Another cold transfer of the same chain and asset is still in flight (at most one at a
    time: proposed, approved or being sent)."""

    code = "cold_transfer_open"


class ColdDecisionRefused(SweepsError):
    """An approval or rejection that cannot be recorded: by the proposer, a second decision of
    the same admin, by someone who is not an admin, a rejection without a reason, or on a cold
    transfer that is no longer waiting for decisions."""

    code = "cold_decision_refused"


class RefillInvalid(SweepsError):
    """A refill request was refused before anything was written: unknown chain or asset, a
    source that is not one of the chain's cold addresses, an amount of zero."""

    code = "refill_invalid"


class RequestKeyReused(SweepsError):
    """The request key was used before for a different proposal or refill request."""

    code = "request_key_reused"


class AdminRequired(SweepsError):
    """Only an admin may propose or decide a cold transfer or request a refill."""

    code = "admin_required"


class HotHoldingUnavailable(SweepsError):
    """The hot wallet's holding cannot be read now (the node reports no finalized block);
    the next check reads again."""

    code = "hot_holding_unavailable"
    retryable = True
