"""schemathesis against the app's OpenAPI: generated requests (valid and invalid), no 5xx,
every response documented and matching its schema, on a real database."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.core.result import Err
from schemathesis.generation.case import Case
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)
from sqlalchemy.engine import Engine

from api.ratelimit import RateLimit, RateLimits
from tests.api.conftest import serve

REQUESTS_MIN = 1_000
EXAMPLES_PER_MODE = 45
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance,
          response_schema_conformance]
#: Operations that read a node: the test app's chain has none, so an allowed caller gets the
#: documented 503 (checked against the schema like every other answer, only not as a 5xx).
READS_A_NODE = frozenset({"GET /v1/admin/holdings", "GET /readyz"})
ROOMY = RateLimits({s: RateLimit(100_000, 60) for s in ("client", "support", "admin",
                                                        "approver")})


def checks_for(label: str) -> list[Any]:
    """The checks of an operation: all of them, but a 503 is no failure where a node is read."""
    return [c for c in CHECKS if label not in READS_A_NODE or c is not not_a_server_error]


@pytest.mark.slow
def test_generated_requests_get_documented_answers_and_no_5xx(engine: Engine) -> None:
    with serve(engine, ROOMY) as api:
        user = api.funded_user()
        api.withdraw(user)
        schema = schemathesis.openapi.from_asgi("/openapi.json", api.app)
        # Each request as the next principal: every scope, and no key at all.
        callers = itertools.cycle(["acme", "sam", "carol", "alice", None])
        sent = 0
        for result in schema.get_all_operations():
            if isinstance(result, Err):
                raise result.err()
            operation = result.ok()
            for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):

                @given(case=operation.as_strategy(generation_mode=mode))
                @settings(max_examples=EXAMPLES_PER_MODE, deadline=None, database=None,
                          phases=[Phase.generate], derandomize=True,
                          suppress_health_check=list(HealthCheck))
                def run(case: Case[Any]) -> None:
                    nonlocal sent
                    sent += 1
                    case.call_and_validate(headers=api.headers(next(callers)),
                                           checks=checks_for(case.operation.label))

                try:
                    run()
                except Unsatisfiable:
                    # No invalid input exists for an operation without parameters.
                    assert mode is GenerationMode.NEGATIVE, operation.label
    print(f"{sent} generated requests")
    assert sent >= REQUESTS_MIN, sent
