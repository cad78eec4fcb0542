"""Errors of the withdrawals package; each has a stable ``code`` the API and the CLI report."""

from __future__ import annotations

from config.errors import CustodyError
from outgoing.errors import SignerAnswerInvalid, SignerUnavailable

__all__ = ["SignerAnswerInvalid", "SignerUnavailable"]  # shared with every outgoing movement


class WithdrawalError(CustodyError):
    """Root of the withdrawals' expected errors."""

    code = "withdrawal_error"


class WithdrawalRefused(WithdrawalError):
    """A request was refused before anything was written (validation or policy)."""

    code = "withdrawal_refused"


class AddressInvalid(WithdrawalRefused):
    """The destination is malformed or fails its EIP-55 checksum."""

    code = "address_invalid"


class AddressZero(WithdrawalRefused):
    """The destination is the zero address (funds sent there are burnt)."""

    code = "address_zero"


class AddressOwn(WithdrawalRefused):
    """The destination is one of our own addresses (a deposit address or a hot wallet)."""

    code = "address_own"


class AmountOutOfBounds(WithdrawalRefused):
    """The amount is zero, negative, below the asset's minimum or above its maximum."""

    code = "amount_out_of_bounds"


class AmountNotRepresentable(WithdrawalRefused):
    """The amount cannot be expressed exactly in the token's on-chain decimals."""

    code = "amount_not_representable"


class AssetNotWithdrawable(WithdrawalRefused):
    """The asset cannot be withdrawn on that chain (not configured)."""

    code = "asset_not_withdrawable"


class DailyLimitExceeded(WithdrawalRefused):
    """The user's withdrawals of this asset in the last 24 hours would pass the daily limit."""

    code = "daily_limit_exceeded"


class VelocityLimitExceeded(WithdrawalRefused):
    """The withdrawals of this asset in a configured rolling window (per user or per client)
    would pass its count or amount limit."""

    code = "velocity_limit_exceeded"


class DestinationNotAllowed(WithdrawalRefused):
    """Allowlisting is on for the user's client and the destination is not usable: not on the
    allowlist (``reason`` ``not_listed``), listed but not active until ``active_at``
    (``not_active``), or removed (``removed``)."""

    code = "destination_not_allowed"

    def __init__(self, message: str, *, reason: str, at: str | None = None) -> None:
        super().__init__(message)
        self.problem_extra = {"reason": reason, "at": at}


class AllowlistError(WithdrawalError):
    """Root of the allowlist's expected errors."""

    code = "allowlist_error"


class AllowlistEntryNotFound(AllowlistError):
    """No such allowlist entry (or it is another client's)."""

    code = "allowlist_entry_not_found"


class AllowlistEntryExists(AllowlistError):
    """The address is already listed (not removed) for that client, user and chain."""

    code = "allowlist_entry_exists"


class AllowlistEntryInvalid(AllowlistError):
    """An allowlist entry cannot be added as asked (unknown chain or user, bad address)."""

    code = "allowlist_entry_invalid"


class AllowlistEntryRemoved(AllowlistError):
    """The entry was removed: a removal is final (add the address again)."""

    code = "allowlist_entry_removed"


class ShorteningRefused(AllowlistError):
    """A vote to shorten an address's activation delay was refused: not an admin, the same
    admin twice, an instant not earlier than the current one or before it was added, or the
    entry is removed or already active."""

    code = "shortening_refused"


class WithdrawalKeyConflict(WithdrawalError):
    """The caller's idempotency key was already used for a different request."""

    code = "withdrawal_key_conflict"


class WithdrawalNotFound(WithdrawalError):
    """No such withdrawal."""

    code = "withdrawal_not_found"


class TransitionRefused(WithdrawalError):
    """The event is not allowed in the withdrawal's current state."""

    code = "transition_refused"


class WithdrawalNotCancelable(TransitionRefused):
    """Cancel is only allowed until a nonce is assigned to the withdrawal (``signing``)."""

    code = "withdrawal_not_cancelable"


class ApprovalRefused(WithdrawalError):
    """An approval (or rejection) was refused: wrong role, own request, or a second vote."""

    code = "approval_refused"


class WriteOffRefused(WithdrawalError):
    """A write-off decision was refused: wrong role, no reason, a second vote, or wrong state."""

    code = "write_off_refused"


class ReturnLinkInvalid(WithdrawalError):
    """A returned transfer cannot be linked to that payout."""

    code = "return_link_invalid"


class RetryRefused(WithdrawalError):
    """A retry of a held withdrawal was refused: wrong role, no reason, or it is not held."""

    code = "retry_refused"


# --- broken invariants ----------------------------------------------------------------------
#
# Not CustodyErrors (config/errors.py): an expected, often transient outcome (the node is away,
# a lock is busy, a request is refused) is retried or answered; a broken invariant is a bug or a
# tampered book that an operator must look at. The processor never lets one stop the other
# payouts of a chain: the withdrawal it concerns is held with a case and a CRITICAL alert.


class InvariantBroken(Exception):
    """Root of the broken invariants of withdrawals; ``code`` names the kind."""

    code = "invariant_broken"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class SettlementMismatch(InvariantBroken):
    """The landed transaction does not pay what the withdrawal asked."""

    code = "settlement_mismatch"


class SettlementRefused(InvariantBroken):
    """The settlement of a final receipt could not be posted (a mismatch, a ledger refusal such
    as an account that would pass its limit or an idempotency conflict, any broken invariant).

    Carries what the hold records: ``kind`` (the case kind), ``cause`` (the error's code),
    ``attempt_id`` (the landed attempt) and ``evidence``.
    """

    code = "settlement_refused"

    def __init__(self, message: str, *, kind: str, cause: str, attempt_id: int,
                 evidence: dict[str, object]) -> None:
        super().__init__(message)
        self.kind = kind
        self.cause = cause
        self.attempt_id = attempt_id
        self.evidence = evidence
