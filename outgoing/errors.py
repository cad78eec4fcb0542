"""Errors of the outgoing-transaction mechanism; each has a stable ``code`` the API and the CLI
report."""

from __future__ import annotations

from config.errors import CustodyError


class OutgoingError(CustodyError):
    """Root of the mechanism's expected errors."""

    code = "outgoing_error"


class SignerUnavailable(OutgoingError):
    """The signer cannot sign (missing key, wrong chain, key does not match the sender; a
    remote signer that timed out, failed or cannot be reached; no signer at all for an address
    source that has none, such as an xpub). A retry may help: a movement whose signature it was
    stays in ``signing`` with its nonce and is signed again later."""

    code = "signer_unavailable"


class SignerAnswerInvalid(SignerUnavailable):
    """A remote signer answered with a transaction that is not the one asked for (another
    sender, nonce, recipient, value, data, chain or fees, or a hash that is not its own).
    Never trusted nor sent; an operator must look at the signer."""

    code = "signer_answer_invalid"
