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
- Integer bounds are exact integers (pydantic writes some as floats); a withdrawal's amount
  carries its chain and asset's configured bounds (``if``/``then`` conditions with patterns).
- States are enums (``STATES``: the lifecycle's own values, which the tables' CHECKs hold too),
  and every field has a description, scalar fields an example (``api.field_docs``).

``install_webhooks(app)`` adds the OpenAPI 3.1 ``webhooks`` section: one operation per event
type (``api.schemas_events.EVENT_TYPES``), its request body the event's model, its headers
the delivery's (docs/webhooks.md).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, Any

from fastapi import FastAPI, Header
from fastapi.routing import APIRoute

from api import error_codes, field_docs
from config.chains import ChainsConfig
from config.withdrawals import WithdrawalsConfig
from deposits.model import DepositState
from reconcile.model import CaseStatus, CaseType
from sweeps.model import State as MovementState
from withdrawals.model import State as WithdrawalState

#: Parameter (and request field) names that hold times.
TIME_NAMES = frozenset({"as_of", "known_at", "from", "to", "since", "until", "start", "end",
                        "created_after", "created_before"})
TAGS = {
    "system": "Liveness, readiness and metrics.",
    "users": "Users, deposit addresses, balances, deposits and statements.",
    "deposits": "Deposit timelines.",
    "withdrawals": "Withdrawal requests, their states and approvals.",
    "allowlist": "Destination allowlists: where a client's users may withdraw to, usable "
                 "after an activation delay.",
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

_M = MovementState
#: The values a state (or kind) field can take, by "Schema.field": each lifecycle's states as
#: its table's CHECK allows them (tests/api/test_openapi_contract.py compares the two).
STATES: dict[str, tuple[str, ...]] = {
    "Deposit.state": tuple(DepositState),
    "EventDeposit.state": tuple(DepositState),
    "EventDepositHistory.state": tuple(DepositState),
    "EventWithdrawal.state": tuple(WithdrawalState),
    "DepositEvent.state": tuple(DepositState),
    "Withdrawal.state": tuple(WithdrawalState),
    "Sweep.state": (_M.PROPOSED, _M.WAITING_GAS, _M.READY, _M.SIGNING, _M.SIGNED, _M.BROADCAST,
                    _M.UNKNOWN, _M.INCLUDED, _M.FINAL, _M.REVERTED, _M.DROPPED),
    "GasTopUp.state": (_M.READY, _M.SIGNING, _M.SIGNED, _M.BROADCAST, _M.UNKNOWN, _M.INCLUDED,
                       _M.FINAL, _M.REVERTED, _M.DROPPED),
    "ColdTransfer.state": (_M.PROPOSED, _M.APPROVED, _M.SIGNING, _M.SIGNED, _M.BROADCAST,
                           _M.UNKNOWN, _M.INCLUDED, _M.FINAL, _M.REVERTED, _M.DROPPED,
                           _M.REJECTED),
    "Refill.state": ("open", "matched", "canceled"),
    "CaseItem.status": tuple(CaseStatus),
    "CaseItem.type": tuple(CaseType),
    "Case.kind": ("deep_reorg", "unattributed_own_address"),
    "Decision.kind": ("approval", "write_off"),
}
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


#: The years ``api.schemas.parse_instant`` accepts (1970-9998), as written.
YEAR_PATTERN = r"^(19[7-9][0-9]|[2-8][0-9]{3}|9[0-8][0-9]{2}|99[0-8][0-9]|999[0-8])-"


def _refine_value(name: str, schema: dict[str, Any], chains: ChainsConfig | None, *,
                  body: bool = False) -> None:
    """Formats and enums of one parameter or request field (``body``: a request field, where
    ``to`` and ``from`` are addresses and only ``*_at`` names are times)."""
    is_time = (name.endswith("_at") or name == "as_of") if body else name in TIME_NAMES
    for variant in _string_variants(schema):
        if is_time:
            variant["format"] = "date-time"
            variant["pattern"] = YEAR_PATTERN
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


def at_least(n: int) -> str:
    """A pattern for the decimal integers (no sign, no leading zero) >= ``n`` (>= 1)."""
    digits = str(n)
    d = len(digits)
    alternatives = [f"[1-9][0-9]{{{d},}}", digits]
    for i, c in enumerate(digits):
        if c != "9":
            rest = d - i - 1
            alternatives.append(f"{digits[:i]}[{int(c) + 1}-9]" + (f"[0-9]{{{rest}}}" if rest
                                                                    else ""))
    return "^(" + "|".join(alternatives) + ")$"


def at_most(n: int) -> str:
    """A pattern for the decimal integers (no sign, no leading zero) from 1 to ``n``."""
    digits = str(n)
    d = len(digits)
    alternatives = [digits] + ([f"[1-9][0-9]{{0,{d - 2}}}"] if d >= 2 else [])
    for i, c in enumerate(digits):
        low = 1 if i == 0 else 0
        if int(c) > low:
            rest = d - i - 1
            alternatives.append(f"{digits[:i]}[{low}-{int(c) - 1}]" + (f"[0-9]{{{rest}}}" if rest
                                                                        else ""))
    return "^(" + "|".join(alternatives) + ")$"


def _withdrawal_bounds(schemas: dict[str, Any], withdrawals: WithdrawalsConfig | None) -> None:
    """Each withdrawable chain and asset's bounds on ``WithdrawalCreate.amount``, as conditions
    (a chain and asset that cannot be withdrawn is refused: ``asset_not_withdrawable``)."""
    create = schemas.get("WithdrawalCreate")
    if create is None or withdrawals is None:
        return
    conditions = []
    for (chain, asset), policy in sorted(withdrawals.assets.items()):
        conditions.append({
            "if": {"properties": {"chain": {"const": chain}, "asset": {"const": asset}},
                   "required": ["chain", "asset"]},
            "then": {"properties": {"amount": {"allOf": [
                {"pattern": at_least(policy.minimum_minor)},
                {"pattern": at_most(policy.maximum_minor)}]}}}})
    pairs = [{"properties": {"chain": {"const": c}, "asset": {"const": a}}}
             for c, a in sorted(withdrawals.assets)]
    create["allOf"] = [*conditions, {"anyOf": pairs}]
    bounds = ", ".join(f"{c} {a}: {p.minimum_minor} to {p.maximum_minor}"
                       for (c, a), p in sorted(withdrawals.assets.items()))
    create["description"] = (create.get("description", "").rstrip()
                             + f" Withdrawable, with the amount's bounds in minor units: {bounds}.")


def _describe_fields(schemas: dict[str, Any]) -> None:
    """State enums, and the description and example of every field its model left without."""
    for name, schema in schemas.items():
        for field, value in schema.get("properties", {}).items():
            values = STATES.get(f"{name}.{field}")
            if values is not None:
                enum = {"type": "string", "enum": [str(v) for v in values]}
                if "anyOf" in value:
                    value["anyOf"] = [enum if v.get("type") == "string" else v
                                      for v in value["anyOf"]]
                else:
                    value.update(enum)
            found = field_docs.field_doc(name, field)
            if found is None:
                continue
            description, example = found
            value.setdefault("description", description)
            if example is not None and "$ref" not in value and "examples" not in value:
                value["examples"] = [example]


def _webhook_answers(doc: dict[str, Any], schemas: dict[str, Any]) -> None:
    """A webhook's responses are the receiver's: FastAPI's 422 (its own request validation)
    does not apply to them; its validation schemas go when nothing else refers to them."""
    for item in doc.get("webhooks", {}).values():
        for operation in item.values():
            operation.get("responses", {}).pop("422", None)
    text = str({k: v for k, v in doc.items() if k != "components"}) + str(
        {k: v for k, v in schemas.items() if k not in ("HTTPValidationError", "ValidationError")})
    if "#/components/schemas/HTTPValidationError" not in text:
        schemas.pop("HTTPValidationError", None)
        if "#/components/schemas/ValidationError" not in text:
            schemas.pop("ValidationError", None)


def refine(doc: dict[str, Any], chains: ChainsConfig | None,
           withdrawals: WithdrawalsConfig | None = None) -> dict[str, Any]:
    """Refine FastAPI's document in place (see the module's docstring); returns it."""
    _exact_bounds(doc)
    for operation in _operations(doc):
        idempotent = _refine_parameters(operation, chains)
        _refine_responses(operation, idempotent)
        _dedupe_tags(operation)
    schemas = doc.get("components", {}).get("schemas", {})
    _webhook_answers(doc, schemas)
    _describe_fields(schemas)
    _withdrawal_bounds(schemas, withdrawals)
    for name in _request_schemas(doc):
        for field, schema in schemas.get(name, {}).get("properties", {}).items():
            _refine_value(field, schema, chains, body=True)
            enums = [v["enum"] for v in _string_variants(schema) if "enum" in v]
            if enums and "examples" in schema:  # this deployment's values, not a generic one
                schema["examples"] = [enums[0][0]]
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


def install(app: FastAPI, chains: ChainsConfig | None,
            withdrawals: WithdrawalsConfig | None = None) -> None:
    """Serve the refined document at ``/openapi.json`` (built once, on first request)."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = refine(generate(), chains, withdrawals)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]



WEBHOOK_NOTE = (
    "\n\nPOSTed as JSON to every enabled endpoint subscribed to this type, signed: "
    "`Custody-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, \"<t>.\" + body)>`; for "
    "24 hours after a rotation a second `v1=` is made with the previous secret. Answer any 2xx "
    "to acknowledge; anything else (or no answer within 10 s) is retried with backoff "
    "(30 s doubling to 6 h, for about 3 days). Delivery is at least once: dedupe on `id`. "
    "The same event is readable at `GET /v1/events/{event_id}`. See docs/webhooks.md.")


def install_webhooks(app: FastAPI) -> None:
    """Describe every event type in the document's ``webhooks`` (one operation each, named
    after its type, its body the event's model: ``api.schemas_events.body_model``)."""
    from api.schemas_events import EVENT_TYPES, body_model

    for event_type, meaning in EVENT_TYPES.items():
        model = body_model(event_type)
        name = "webhook_" + event_type.replace(".", "_")

        def receive(body: Any, custody_signature: Any, custody_event_id: Any,
                    custody_event_type: Any, custody_timestamp: Any,
                    custody_delivery_attempt: Any) -> None:
            """Documentation only: the engine sends these; it serves no such route."""

        receive.__annotations__ = {
            "body": model,
            "custody_signature": Annotated[str, Header(
                alias="Custody-Signature", description="`t=<unix seconds>,v1=<hex>` "
                "(two `v1` during the 24 hours after a rotation).")],
            "custody_event_id": Annotated[str, Header(
                alias="Custody-Event-Id", description="The event's id (dedupe on it).")],
            "custody_event_type": Annotated[str, Header(
                alias="Custody-Event-Type", description="The event's type.")],
            "custody_timestamp": Annotated[str, Header(
                alias="Custody-Timestamp", description="Unix seconds, as in the signature.")],
            "custody_delivery_attempt": Annotated[str, Header(
                alias="Custody-Delivery-Attempt", description="1 for the first attempt.")],
            "return": None,
        }
        receive.__name__ = name
        app.webhooks.add_api_route(
            event_type, receive, methods=["POST"], name=name, operation_id=name,
            summary=meaning,
            description=meaning + WEBHOOK_NOTE, tags=["webhooks"],
            responses={200: {"description": "Any 2xx acknowledges the delivery."}})
