"""Errors of reconciliation; each has a stable ``code``."""

from __future__ import annotations

from config.errors import CustodyError


class ReconcileError(CustodyError):
    """Root of reconciliation's expected errors."""

    code = "reconcile_error"


class CaseNotFound(ReconcileError):
    """No case has that id."""

    code = "case_not_found"


class CaseAlreadyResolved(ReconcileError):
    """The case was resolved already; a resolution is given once."""

    code = "case_already_resolved"


class CaseResolutionInvalid(ReconcileError):
    """The resolution cannot be accepted as given (empty, no fix where one is needed, a fix
    that does not reference the case)."""

    code = "case_resolution_invalid"


class CaseResolvedElsewhere(ReconcileError):
    """A deposit or withdrawal case is resolved by its own procedure (two admins for an
    own-address transfer, a retry for a held withdrawal), which resolves it here too."""

    code = "case_resolved_elsewhere"
