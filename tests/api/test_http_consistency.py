"""One code per mistake (issue 17, "Consistent behaviour"): an unknown chain is
``chain_unknown`` on every route and filter that takes a chain (path, query or body), and an
amount that is not a positive integer string is ``amount_invalid`` on every request body that
carries one, whatever the shape of the mistake; nothing is written either way."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy.engine import Engine

from tests.api.conftest import DEST, Api
from tests.api.test_sweeps_api import PROPOSAL, REFILL, counts, problem, serve_doc, sweeps_doc
from tests.api.test_treasury import FUNDING
from tests.sweeps.test_cold import COLD

RETURN = {"chain": "devnet", "tx_hash": "0x" + "ab" * 32, "position": "log:0",
          "amount": "1000000", "reason": "came back"}
WITHDRAWAL = {"asset": "USDC", "chain": "devnet", "to": DEST, "amount": "30000000"}


@pytest.fixture
def sapi(engine: Engine) -> Iterator[Api]:
    """The API with ``[sweeps]`` (no node): every route that takes a chain answers."""
    with serve_doc(engine, sweeps_doc()) as running:
        yield running


def bodies(user: str) -> list[tuple[str, str, dict[str, Any]]]:
    """(who, path, a good body) of every request body with a chain."""
    return [
        ("acme", f"/v1/users/{user}/withdrawals", WITHDRAWAL),
        ("acme", f"/v1/users/{user}/deposit-addresses", {"chain": "devnet"}),
        ("carol", "/v1/admin/treasury/fundings", FUNDING),
        ("carol", "/v1/admin/withdrawals/1/returns", RETURN),
        ("carol", "/v1/admin/cold-transfers", PROPOSAL),
        ("carol", "/v1/admin/refills", REFILL),
        ("carol", "/v1/admin/sweeps/run", {"chain": "devnet"}),
    ]


def test_an_unknown_chain_in_a_body_is_chain_unknown(sapi: Api) -> None:
    user = sapi.funded_user()
    before = counts(sapi.engine)
    for who, path, body in bodies(user):
        found = problem(sapi.call("POST", path, who, idem=uuid.uuid4().hex,
                                  json={**body, "chain": "nochain"}), 422, "chain_unknown")
        assert "nochain" in found["detail"], (path, found)
    assert counts(sapi.engine) == before


@pytest.mark.parametrize("path", [
    "/v1/admin/treasury/fundings?chain=nochain",
    "/v1/admin/treasury?chain=nochain",
    "/v1/admin/holdings?chain=nochain",
    "/v1/admin/sweeps?chain=nochain",
    "/v1/admin/cold-transfers?chain=nochain",
    "/v1/admin/refills?chain=nochain",
    "/v1/deposits/nochain/0x" + "ab" * 32,
])
def test_an_unknown_chain_in_a_path_or_filter_is_chain_unknown(sapi: Api, path: str) -> None:
    # Today the filters answered 200 with an empty list and the deposit 404.
    problem(sapi.call("GET", path, "carol"), 422, "chain_unknown")


BAD_AMOUNTS: list[object] = ["0", "-1", "1.5", "1e3", "", " 1", "1 ", "0x10", "007", "+1",
                             "1_000", "\u0661\u0662", str(2**127), "9" * 39, "9" * 400, 1, 1.5,
                             1e3, None, ["1"]]


def test_a_bad_amount_is_amount_invalid_in_every_body(sapi: Api) -> None:
    user = sapi.funded_user()
    before = counts(sapi.engine)
    amount_bodies = [(who, path, body) for who, path, body in bodies(user) if "amount" in body]
    assert len(amount_bodies) == 5
    for amount in BAD_AMOUNTS:
        for who, path, body in amount_bodies:
            found = problem(sapi.call("POST", path, who, idem=uuid.uuid4().hex,
                                      json={**body, "amount": amount}), 422, "amount_invalid")
            assert found["errors"][0]["loc"] == ["body", "amount"], (amount, path, found)
    assert counts(sapi.engine) == before


def test_other_fields_stay_request_invalid(sapi: Api) -> None:
    user = sapi.funded_user()
    problem(sapi.call("POST", f"/v1/users/{user}/withdrawals", "acme", idem="k1",
                      json={**WITHDRAWAL, "asset": "not an asset"}), 422, "request_invalid")
    # An amount mistake next to another one: the request as a whole is invalid.
    problem(sapi.call("POST", f"/v1/users/{user}/withdrawals", "acme", idem="k2",
                      json={**WITHDRAWAL, "asset": "not an asset", "amount": "0"}), 422,
            "request_invalid")


def test_the_amount_type_is_documented(sapi: Api) -> None:
    doc = sapi.call("GET", "/openapi.json").json()
    for name in ("WithdrawalCreate", "FundingCreate", "ReturnLink", "ColdTransferCreate",
                 "RefillCreate"):
        field = doc["components"]["schemas"][name]["properties"]["amount"]
        assert field["type"] == "string" and field["pattern"] == "^[1-9][0-9]{0,38}$", name
        assert "amount_invalid" in field["description"], name


def test_insufficient_funds_says_which_balance_and_by_how_much(sapi: Api) -> None:
    user = sapi.funded_user(amount_minor=150_000_000)  # 150 USDC; the fee is up to 2 USDC
    found = problem(sapi.call("POST", f"/v1/users/{user}/withdrawals", "acme", idem="k",
                              json={**WITHDRAWAL, "amount": "149500000"}), 409,
                    "insufficient_funds")
    assert found["detail"] == (
        f"insufficient funds: the available balance of user:{user}:wallet is 150 USDC, this "
        "withdrawal (149.5 USDC plus a fee of up to 2 USDC) needs 151.5 USDC (short by "
        "1.5 USDC)")
    assert found["account"] == f"user:{user}:wallet" and found["asset"] == "USDC"
    assert found["available"] == {"minor": "150000000", "decimal": "150.000000"}
    assert found["needed"] == {"minor": "151500000", "decimal": "151.500000"}
    assert found["shortfall"] == {"minor": "1500000", "decimal": "1.500000"}
    assert counts(sapi.engine)["api_idempotency"] == 0


def test_contract_fixes_are_in_the_document(sapi: Api) -> None:
    doc = sapi.call("GET", "/openapi.json").json()
    schemas = doc["components"]["schemas"]
    # A period close's ends_at says which years it takes; before 1970 is a documented 422.
    ends_at = schemas["PeriodClose"]["properties"]["ends_at"]
    assert ends_at["format"] == "date-time" and ends_at["pattern"].startswith("^(19[7-9]")
    assert "422" in doc["paths"]["/v1/admin/periods"]["post"]["responses"]
    # A refill's source is one of the configured cold addresses.
    source = schemas["RefillCreate"]["properties"]["source"]
    assert [v.get("enum") for v in source["anyOf"] if v.get("type") == "string"] == [
        [COLD.lower()]]
    # An existing deposit address answers 200, documented.
    responses = doc["paths"]["/v1/users/{user_id}/deposit-addresses"]["post"]["responses"]
    assert {"200", "201"} <= set(responses)
    # A withdrawal's destination: 0x and 40 hex digits, not the zero address.
    to = schemas["WithdrawalCreate"]["properties"]["to"]
    assert to["pattern"] == r"^0x[0-9a-fA-F]{40}$"
    assert to["not"] == {"const": "0x" + "0" * 40}
    assert "EIP-55" in to["description"] and "address_invalid" in to["description"]


@pytest.mark.parametrize(("ends_at", "code"), [
    ("1969-12-31T23:59:59Z", "request_invalid"),
    ("0001-01-01T00:00:00Z", "request_invalid"),
    ("9999-12-31T23:59:59Z", "request_invalid"),
    ("1970-01-01T00:00:00+14:00", None),  # 1969 in UTC, 1970 as written: accepted
])
def test_a_period_end_outside_the_years_is_422(sapi: Api, ends_at: str, code: str | None
                                              ) -> None:
    r = sapi.call("POST", "/v1/admin/periods", "carol", idem=uuid.uuid4().hex,
                  json={"ends_at": ends_at})
    if code is None:
        assert r.status_code == 202, r.text
    else:
        problem(r, 422, code)


@pytest.mark.parametrize(("to", "code"), [
    ("0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC", None),  # EIP-55
    ("0x3c44cdddb6a900fa2b585dd299e03d12fa4293bc", None),
    ("0x3C44CDDDB6A900FA2B585DD299E03D12FA4293BC", None),
    ("0x3c44cdddb6a900fa2b585dd299e03d12fa4293bC", "address_invalid"),  # bad checksum
    ("0x3c44cdddb6a900fa2b585dd299e03d12fa4293", "address_invalid"),
    ("3c44cdddb6a900fa2b585dd299e03d12fa4293bc", "address_invalid"),
    ("0x" + "0" * 40, "address_zero"),
])
def test_withdrawal_destinations(sapi: Api, to: str, code: str | None) -> None:
    user = sapi.funded_user()
    r = sapi.call("POST", f"/v1/users/{user}/withdrawals", "acme", idem=uuid.uuid4().hex,
                  json={**WITHDRAWAL, "to": to})
    if code is None:
        assert r.status_code == 201, r.text
    else:
        problem(r, 422, code)


def test_an_existing_deposit_address_answers_200(sapi: Api) -> None:
    user = sapi.new_user()
    first = sapi.call("POST", f"/v1/users/{user}/deposit-addresses", "acme",
                      json={"chain": "devnet"})
    again = sapi.call("POST", f"/v1/users/{user}/deposit-addresses", "acme",
                      json={"chain": "devnet"})
    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json() == first.json()
