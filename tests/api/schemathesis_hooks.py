"""Hooks of the schemathesis run in ``test_http_schema`` (``SCHEMATHESIS_HOOKS``).

The document says an ``Idempotency-Key`` is one per distinct request: a generated request
that carries one gets a fresh key, as a real client's would, so that two different generated
bodies never share one (that is ``idempotency_key_reused``, tested on its own in
``test_http_idempotency``). A request generated without the header keeps going without it.

A withdrawal's ``to`` (and an allowlisted ``address``) in mixed case must carry a valid EIP-55
checksum: the document says so
in words (a JSON Schema pattern cannot compute a checksum), and a client writes the address it
was given, never random capitals. A generated mixed-case ``to`` that matches the documented
pattern is sent as the checksummed form of the same address; all-lower and all-upper ones, and
ones that do not match the pattern (negative tests), go as generated.
"""

from __future__ import annotations

import re
import uuid
from typing import Any

import schemathesis
from eth_utils.address import to_checksum_address

HEX_ADDRESS = re.compile(r"^0x[0-9a-fA-F]{40}$")

HEADER = "Idempotency-Key"


@schemathesis.hook
def before_call(context: Any, case: Any, kwargs: dict[str, Any]) -> None:
    """A fresh key for every generated request that carries one."""
    if case.headers and HEADER in case.headers:
        case.headers[HEADER] = f"st-{uuid.uuid4().hex}"
    body = case.body
    field = ("to" if case.path.endswith("/withdrawals")
             else "address" if case.path == "/v1/allowlist" else None)
    if (isinstance(body, dict) and field is not None
            and isinstance(body.get(field), str) and HEX_ADDRESS.match(body[field])):
        digits = body[field][2:]
        if digits != digits.lower() and digits != digits.upper():
            body[field] = to_checksum_address(body[field])
