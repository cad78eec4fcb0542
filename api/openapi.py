"""The OpenAPI document, made exact: what FastAPI generates, refined where it cannot know.

``install(app, chains)`` replaces ``app.openapi`` by a function that refines FastAPI's document
once and caches it:

- ``Idempotency-Key`` is required wherever it is declared (a missing key is refused with 400,
  which FastAPI cannot know: the header is optional to the route so that ``api.idempotency``
  can answer with its own problem).
- Every operation with a body documents 413 (``api.contract.BodyLimit``); money-moving
  operations document their replay (same status and body, ``Idempotent-Replayed: true``);
  every response documents ``X-Request-ID``, 429 and 503 ``Retry-After``.
- Parameters carry their formats: ISO 8601 times are ``date-time``; a chain or an asset (in a
  path, a query or a request body) is an enum of this deployment's configured chains and
  assets, so a generated client knows the values the server accepts.
- ``Problem.code`` is an enum of every error code (``api.error_codes``), and the description
  carries the table of codes and what each means.
- Tags appear once per operation, each described in the document's ``tags``.
- Integer bounds are exact integers (pydantic writes some as floats).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from fastapi import FastAPI
from fastapi.routing import APIRoute

from api import error_codes
from config.chains import ChainsConfig

#: Parameter (and request field) names that hold times.
TIME_NAMES = frozenset({"as_of", "known_at", "from", "to", "since", "until", "start", "end",
                        "created_after", "created_before"})
TAGS = {
    "system": "Liveness, readiness and metrics.",
    "users": "Users, deposit addresses, balances, deposits and statements.",
    "deposits": "Deposit timelines.",
    "withdrawals": "Withdrawal requests, their states and approvals.",
    "events": "Events: what webhooks deliver, listed for catching up.",
    "reserves": "Proof of reserves: reports and per-user inclusion proofs.",
    "admin": "Operators: ledger, periods, write-offs, returns, cases, treasury, holdings.",
    "sweeps": "Operators: sweeps, cold transfers and refills.",
    "webhooks": "Operators: webhook endpoints.",
}
REQUEST_ID_HEADER = {"X-Request-ID": {
    "description": "The request's id (the caller's, when well-formed, else a new one); it is "
                   "in every problem document, audit row and log line of the request.",
    "schema": {"type": "string"}}}
RETRY_AFTER_HEADER = {"Retry-After": {"description": "Seconds to wait before retrying.",
                                      "schema": {"type": "integer", "minimum": 0}}}
REPLAYED_HEADER = {"Idempotent-Replayed": {
    "description": "`true` on a replay: the first request with this Idempotency-Key completed "
                   "and this is its stored response, byte for byte; nothing ran again.",
    "schema": {"type": "string", "enum": ["true"]}}}
REPLAY_NOTE = ("\n\nIdempotent: a repeat with the same `Idempotency-Key` and the same request "
               "answers with the first response's status and body and "
               "`Idempotent-Replayed: true`; the same key with another request is "
               "`idempotency_key_reused` (422); while the first still runs, "
               "`idempotency_in_progress` (409).")
PROBLEM_REF = {"$ref": "#/components/schemas/Problem"}
INT64_MAX = 2**63 - 1


def operation_id(route: APIRoute) -> str:
    """A route's operationId: its function's name (``create_withdrawal``), unique in the app."""
    return route.name


def _operations(doc: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for item in doc.get("paths", {}).values():
        for method, operation in item.items():
            if method in ("get", "put", "post", "delete", "patch"):
                yield operation


def _string_variants(schema: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for variant in schema.get("anyOf", [schema]):
        if variant.get("type") == "string":
            yield variant


def _refine_value(name: str, schema: dict[str, Any], chains: ChainsConfig | None, *,
                  times: bool = True) -> None:
    """Formats and enums by name; ``times``: names of times are ISO 8601 (query parameters:
    a body field named ``to`` is a withdrawal's address, not the end of a range)."""
    for variant in _string_variants(schema):
        if times and name in TIME_NAMES:
            variant["format"] = "date-time"
            variant.pop("maxLength", None)
        elif name == "chain" and chains is not None:
            variant["enum"] = sorted(chains.chains)
            variant.pop("pattern", None)
        elif name == "asset" and chains is not None:
            variant["enum"] = sorted(chains.assets)
            variant.pop("pattern", None)
        elif name == "source" and chains is not None:
            # A refill's source: one of the configured cold addresses (of the request's chain,
            # else 422 ``refill_invalid``); none configured: no value is acceptable.
            cold = sorted({a for c in chains.chains.values() for a in c.cold_addresses})
            if cold:
                variant["enum"] = cold
                variant.pop("pattern", None)
            variant["description"] = (
                "One of the chain's configured cold addresses (default: the asset's cold "
                "address in [sweeps]); another address is 422 ``refill_invalid``.")


def _refine_parameters(operation: dict[str, Any], chains: ChainsConfig | None) -> bool:
    """Formats and enums of the parameters; True when the operation takes Idempotency-Key."""
    idempotent = False
    for parameter in operation.get("parameters", []):
        if parameter["in"] == "header" and parameter["name"].lower() == "idempotency-key":
            idempotent = True
            parameter["required"] = True
            variants = list(_string_variants(parameter["schema"]))
            extra = {k: v for k, v in parameter["schema"].items() if k != "anyOf"}
            parameter["schema"] = {**extra, **variants[0]}
            parameter["description"] = ("Required: 1-200 printable ASCII characters, one per "
                                        "distinct request; a missing key is refused with "
                                        "400 (`idempotency_key_missing`).")
            continue
        _refine_value(parameter["name"], parameter["schema"], chains)
    return idempotent


def _request_schemas(doc: dict[str, Any]) -> set[str]:
    names: set[str] = set()
    for operation in _operations(doc):
        body = operation.get("requestBody", {}).get("content", {})
        for media in body.values():
            ref = media.get("schema", {}).get("$ref", "")
            if ref.startswith("#/components/schemas/"):
                names.add(ref.rsplit("/", 1)[1])
    return names


def _refine_responses(operation: dict[str, Any], idempotent: bool) -> None:
    responses = operation.setdefault("responses", {})
    if "requestBody" in operation and "413" not in responses:
        responses["413"] = {"description": "Request body too large",
                            "content": {"application/problem+json": {"schema": PROBLEM_REF}}}
    for status, response in responses.items():
        headers = response.setdefault("headers", {})
        headers.update(REQUEST_ID_HEADER)
        if status in ("429", "503"):
            headers.update(RETRY_AFTER_HEADER)
        if idempotent and status.startswith("2"):
            headers.update(REPLAYED_HEADER)
    if idempotent:
        operation["description"] = operation.get("description", "").rstrip() + REPLAY_NOTE


def _dedupe_tags(operation: dict[str, Any]) -> None:
    if "tags" in operation:
        operation["tags"] = list(dict.fromkeys(operation["tags"]))


def _exact_bounds(node: Any) -> None:
    """Integer bounds as integers: pydantic writes ``le=2**63 - 1`` of an optional field as
    the float 9.223372036854776e+18, which is above the largest id and lets clients send ids
    the server refuses."""
    if isinstance(node, dict):
        for key in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
            value = node.get(key)
            if isinstance(value, float) and value.is_integer():
                exact = int(value)
                node[key] = INT64_MAX if abs(exact - INT64_MAX) <= 2**11 else exact
        for value in node.values():
            _exact_bounds(value)
    elif isinstance(node, list):
        for value in node:
            _exact_bounds(value)


def refine(doc: dict[str, Any], chains: ChainsConfig | None) -> dict[str, Any]:
    """Refine FastAPI's document in place (see the module's docstring); returns it."""
    _exact_bounds(doc)
    for operation in _operations(doc):
        idempotent = _refine_parameters(operation, chains)
        _refine_responses(operation, idempotent)
        _dedupe_tags(operation)
    schemas = doc.get("components", {}).get("schemas", {})
    for name in _request_schemas(doc):
        for field, schema in schemas.get(name, {}).get("properties", {}).items():
            _refine_value(field, schema, chains, times=False)
    problem = schemas.get("Problem", {}).get("properties", {})
    if "code" in problem:
        problem["code"] = {**problem["code"], "type": "string", "enum": error_codes.codes(),
                           "description": "Stable and machine-readable: see the table of "
                                          "error codes in the description."}
    used = {t for operation in _operations(doc) for t in operation.get("tags", [])}
    doc["tags"] = [{"name": t, "description": d} for t, d in TAGS.items() if t in used] + [
        {"name": t} for t in sorted(used - set(TAGS))]
    info = doc.setdefault("info", {})
    info["description"] = (info.get("description", "").rstrip() + "\n\n## Error codes\n\n"
                           + error_codes.markdown_table())
    return doc


def install(app: FastAPI, chains: ChainsConfig | None) -> None:
    """Serve the refined document at ``/openapi.json`` (built once, on first request)."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = refine(generate(), chains)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]

