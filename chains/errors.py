"""Errors of the chain layer.

Every error says whether a retry can help (``retryable``): a watcher retries a retryable error
later from the same cursor, and stops with an alarm on the others. None of them ever means
"no data": the chain layer raises rather than return an empty answer it is not sure of.
"""

from __future__ import annotations

from typing import Any

from config.errors import CustodyError


class ChainError(CustodyError):
    """Root of the chain layer's errors."""

    code = "chain_error"


class RpcUnavailable(ChainError):
    """The node could not be reached or did not answer in time, after all retries.

    Connection refused or reset, timeouts, HTTP 5xx and 429 end here once the retry budget is
    spent. Retrying later can succeed.
    """

    code = "rpc_unavailable"
    retryable = True


class RpcError(ChainError):
    """The node answered with a JSON-RPC error object.

    ``rpc_code`` and ``data`` are the node's own values. ``retryable`` is set per instance: a
    few error codes (rate limits, "header not found" on a lagging node) can succeed later, most
    (invalid params, reverted execution, nonce too low) cannot.
    """

    code = "rpc_error"

    def __init__(
        self, message: str, *, rpc_code: int | None = None, data: Any = None,
        retryable: bool = False,
    ) -> None:
        super().__init__(message)
        self.rpc_code = rpc_code
        self.data = data
        self.retryable = retryable


class RpcResponseInvalid(ChainError):
    """The node's answer does not have the expected shape (a bug or a broken proxy)."""

    code = "rpc_response_invalid"


class FinalityRuleInvalid(ChainError):
    """A finality rule in the configuration cannot be parsed."""

    code = "finality_rule_invalid"
