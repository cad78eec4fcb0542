"""Errors of the ledger; each has a stable ``code``."""

from __future__ import annotations

from config.errors import CustodyError


class LedgerError(CustodyError):
    """Root of the ledger's expected errors."""

    code = "ledger_error"


class EntryInvalid(LedgerError):
    """The request is malformed: unbalanced, zero or out-of-range amounts, bad fields."""

    code = "entry_invalid"


class AmountInvalid(EntryInvalid):
    """An amount is not an integer inside the signed 128-bit range."""

    code = "amount_invalid"


class IdempotencyConflict(LedgerError):
    """The idempotency key was already used for a different request."""

    code = "idempotency_conflict"


class InsufficientFunds(LedgerError):
    """Posting would take a flagged account past its limit; nothing was written."""

    code = "insufficient_funds"


class PeriodClosed(LedgerError):
    """The effective time falls in a closed period and the entry is not an adjustment."""

    code = "period_closed"


class NotOutOfPeriod(LedgerError):
    """An out-of-period adjustment whose effective time is not in a closed period."""

    code = "not_out_of_period"


class ReversalExceedsOriginal(LedgerError):
    """A reversal (or closing) would exceed what is left of the original posting."""

    code = "reversal_exceeds_original"


class ReversalMismatch(LedgerError):
    """A reversal or closing line does not mirror the posting it references."""

    code = "reversal_mismatch"


class BalanceOutOfRange(LedgerError):
    """The resulting balance would leave the signed 128-bit range."""

    code = "balance_out_of_range"


class AccountNotFound(LedgerError):
    """No such account (or asset)."""

    code = "account_not_found"


class AssetNotFound(LedgerError):
    """No such asset."""

    code = "asset_not_found"


class AssetScaleMismatch(LedgerError):
    """The asset exists with another scale; scales never change."""

    code = "asset_scale_mismatch"


class AccountMismatch(LedgerError):
    """The account exists with another type or other flags."""

    code = "account_mismatch"


class TransactionNotFound(LedgerError):
    """No such ledger transaction."""

    code = "transaction_not_found"


class PeriodCloseInvalid(LedgerError):
    """The period cannot be closed at that time (not after the last close, or in the future)."""

    code = "period_close_invalid"


class SecondApproverRequired(PeriodCloseInvalid):
    """A period close proposal approved by its own proposer, or approved already."""

    code = "second_approver_required"


class PeriodProposalNotFound(LedgerError):
    """No such period close proposal."""

    code = "period_proposal_not_found"
