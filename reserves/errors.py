"""Errors of proof of reserves. The ownership checks have their own in ``reserves.ownership``."""

from __future__ import annotations

from config.errors import CustodyError


class ReservesError(CustodyError):
    """Root of the errors of proof of reserves."""

    code = "reserves_error"


class ReportNotFound(ReservesError):
    """No such report (or no report was taken yet)."""

    code = "report_not_found"


class ProofNotFound(ReservesError):
    """The user has no leaf in the report (no ledger balance when it was taken)."""

    code = "proof_not_found"


class ReportRefused(ReservesError):
    """The report cannot be published: a user's balance is negative (it would hide liabilities:
    a case is opened per balance) or a total leaves the tree's range."""

    code = "report_refused"


class BlockNotFinal(ReservesError):
    """A block named for a chain (``--at-block``) is above the chain's newest final block, or
    the chain is not configured."""

    code = "block_not_final"


class SignatureRefused(ReservesError):
    """An imported ownership signature that names no address of the report, is malformed, or
    does not recover to its address over that address's message."""

    code = "signature_refused"


class ReportInconsistent(ReservesError):
    """A stored report whose tree no longer gives a proof of its published root: a leaf or
    node changed after publication (the tables are append-only: only a superuser could)."""

    code = "report_inconsistent"
