"""Errors of the holdings report."""

from __future__ import annotations

from config.errors import CustodyError


class HoldingsUnavailable(CustodyError):
    """The report of a chain cannot be made exactly: its node did not answer, has no final
    block, answered nonsense, or the chain maps two on-chain sources to one ledger asset.
    ``retryable`` says whether asking again later can help."""

    code = "holdings_unavailable"

    def __init__(self, message: str, *, chain: str, retryable: bool = True) -> None:
        super().__init__(message)
        self.chain = chain
        self.retryable = retryable

