"""Errors of the deposit side; each has a stable ``code``."""

from __future__ import annotations

from config.errors import CustodyError


class DepositError(CustodyError):
    """Root of the deposit side's expected errors."""

    code = "deposit_error"


class TransitionRefused(DepositError):
    """An event that the deposit lifecycle does not allow in the deposit's state (a bug)."""

    code = "transition_refused"


class DepositNotFound(DepositError):
    """No such deposit, transaction or case."""

    code = "deposit_not_found"


class AddressSourceUnavailable(DepositError):
    """The deposit address source cannot be used (missing seed variable, bad xpub)."""

    code = "address_source_unavailable"


class ReorgTooDeep(DepositError):
    """The node's chain no longer contains any block of the watcher's cursor.

    The reorg is deeper than the cursor keeps: the watcher stops and an operator decides.
    """

    code = "reorg_too_deep"


class WatcherBusy(DepositError):
    """Another process runs a step of this chain's watcher right now."""

    code = "watcher_busy"
    retryable = True


class CursorMoved(DepositError):
    """The watcher's cursor is not where the step's scan started (another process stepped
    between this watcher's steps): nothing was written; the next step reads it again."""

    code = "cursor_moved"
    retryable = True


class NotificationInvalid(DepositError):
    """A custody provider notification is malformed or reuses an event id with other data."""

    code = "notification_invalid"


class CaseResolutionInvalid(DepositError):
    """The case cannot be resolved that way (already resolved, nothing to reverse)."""

    code = "case_resolution_invalid"


class FundingInvalid(DepositError):
    """A treasury funding declaration with a bad field (unknown chain or asset, an amount that
    is not a positive decimal string in the asset's units, a malformed address, no reason)."""

    code = "funding_invalid"


class FundingKeyReused(DepositError):
    """A funding idempotency key that was used for a funding with other fields."""

    code = "funding_key_reused"


class SecondAdminRequired(DepositError):
    """A case resolution approved by the admin who proposed it: another admin must approve."""

    code = "second_admin_required"


class RefundRefused(DepositError):
    """A refund to the sender that cannot be paid as a withdrawal (the asset is not
    withdrawable on that chain, the amount left after the fee reserve is out of the policy's
    bounds, the sender is one of our own addresses...): nothing was resolved or posted."""

    code = "refund_refused"
