"""Hooks of the schemathesis run in ``test_http_schema`` (``SCHEMATHESIS_HOOKS``).

The document says an ``Idempotency-Key`` is one per distinct request: a generated request
that carries one gets a fresh key, as a real client's would, so that two different generated
bodies never share one (that is ``idempotency_key_reused``, tested on its own in
``test_http_idempotency``). A request generated without the header keeps going without it.
"""

from __future__ import annotations

import uuid
from typing import Any

import schemathesis

HEADER = "Idempotency-Key"


@schemathesis.hook
def before_call(context: Any, case: Any, kwargs: dict[str, Any]) -> None:
    """A fresh key for every generated request that carries one."""
    if case.headers and HEADER in case.headers:
        case.headers[HEADER] = f"st-{uuid.uuid4().hex}"
