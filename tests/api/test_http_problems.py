"""Bad input: problem+json with a stable code, a 4xx (never a 500), and nothing changed."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from tests.api.conftest import DEST, Api
from tests.withdrawals.conftest import balance

GOOD = {"asset": "USDC", "chain": "devnet", "to": DEST, "amount": "30000000"}


def unchanged(api: Api, user: str) -> None:
    with api.engine.connect() as conn:
        for table in ("withdrawals", "api_idempotency", "deposit_addresses"):
            assert conn.execute(sa.text(f"SELECT count(*) FROM {table}")).scalar_one() == 0
    assert balance(api.engine, f"user:{user}:wallet") == 150_000_000


@pytest.mark.parametrize(("body", "code"), [
    ({**GOOD, "amount": 1.5}, "amount_invalid"),
    ({**GOOD, "amount": 1e3}, "amount_invalid"),
    ({**GOOD, "amount": 30000000}, "amount_invalid"),
    ({**GOOD, "amount": "1.5"}, "amount_invalid"),
    ({**GOOD, "amount": "1e3"}, "amount_invalid"),
    ({**GOOD, "amount": "-5"}, "amount_invalid"),
    ({**GOOD, "amount": "9" * 39}, "amount_invalid"),
    ({**GOOD, "amount": "9" * 400}, "amount_invalid"),
    ({**GOOD, "amount": str(2**127)}, "amount_invalid"),
    ({**GOOD, "amount": "\u0661\u0662\u0663"}, "amount_invalid"),  # int() reads 123
    ({**GOOD, "amount": "30_000_000"}, "amount_invalid"),
    ({**GOOD, "amount": " 30000000"}, "amount_invalid"),
    ({**GOOD, "amount": "30000000\n"}, "amount_invalid"),
    ({**GOOD, "amount": "+30000000"}, "amount_invalid"),
    ({**GOOD, "amount": "0"}, "amount_invalid"),
    ({**GOOD, "chain": "nochain"}, "chain_unknown"),
    ({**GOOD, "asset": "DOGE"}, "asset_not_withdrawable"),
    ({**GOOD, "to": "0x3c44cdddb6a900fa2b585dd299e03d12fa4293bC"}, "address_invalid"),
    ({**GOOD, "to": "0x" + "0" * 40}, "address_zero"),
    ({**GOOD, "extra": "x"}, "request_invalid"),
    ({"asset": "USDC"}, "request_invalid"),
    ([GOOD], "request_invalid"),
])
def test_bad_withdrawal_requests_are_refused(api: Api, body: object, code: str) -> None:
    user = api.funded_user()
    r = api.call("POST", f"/v1/users/{user}/withdrawals", "acme", idem="k", json=body)
    assert r.status_code == 422, r.text
    assert r.headers["content-type"] == "application/problem+json"
    problem = r.json()
    assert problem["code"] == code
    assert problem["status"] == 422 and problem["type"].endswith(code)
    assert problem["title"] and problem["detail"] and problem["request_id"]
    unchanged(api, user)


def test_malformed_json_is_422(api: Api) -> None:
    user = api.funded_user()
    r = api.http.post(f"/v1/users/{user}/withdrawals", content=b'{"asset": "USDC",',
                      headers={**api.headers("acme", "k"), "Content-Type": "application/json"})
    assert r.status_code == 422 and r.json()["code"] == "request_invalid"
    unchanged(api, user)


@pytest.mark.parametrize(("method", "path", "body", "code"), [
    ("POST", "/v1/users/{u}/deposit-addresses", {"chain": "nochain"}, "chain_unknown"),
    ("POST", "/v1/users/{u}/deposit-addresses", {"chain": "Not A Chain"}, "request_invalid"),
    ("GET", "/v1/users/{u}/balances?as_of=yesterday", None, "request_invalid"),
    ("GET", "/v1/users/{u}/balances?as_of=0001-01-01T00:00:00%2B14:00", None,
     "request_invalid"),
    ("GET", "/v1/users/{u}/deposits?cursor=abc", None, "request_invalid"),
    ("GET", "/v1/users/{u}/deposits?limit=100000", None, "request_invalid"),
    ("GET", "/v1/withdrawals/99999999999999999999", None, "request_invalid"),
    ("GET", "/v1/users/a%20b/balances", None, "request_invalid"),
    ("GET", "/v1/deposits/devnet/0x1234", None, "request_invalid"),
])
def test_bad_parameters_are_422(api: Api, method: str, path: str, body: object,
                                code: str) -> None:
    user = api.funded_user()
    r = api.call(method, path.format(u=user), "acme", json=body)
    assert r.status_code == 422 and r.json()["code"] == code, r.text
    unchanged(api, user)


def test_unknown_things_are_404(api: Api) -> None:
    assert api.call("GET", "/v1/withdrawals/12345", "sam").json()["code"] == "withdrawal_not_found"
    r = api.call("GET", "/v1/deposits/devnet/0x" + "ab" * 32, "sam")
    assert r.status_code == 404 and r.json()["code"] == "deposit_not_found"
    r = api.call("GET", "/v1/admin/ledger/transactions/424242", "sam")
    assert r.status_code == 404 and r.json()["code"] == "transaction_not_found"
    r = api.call("GET", "/v1/users/usr_nobody/balances", "acme")
    assert r.status_code == 404 and r.json()["code"] == "user_not_found"
    r = api.call("GET", "/v1/nowhere", "acme")
    assert r.status_code == 404 and r.headers["content-type"] == "application/problem+json"


def test_idempotency_key_must_be_printable(api: Api) -> None:
    user = api.funded_user()
    r = api.call("POST", f"/v1/users/{user}/withdrawals", "acme", idem="x" * 201, json=GOOD)
    assert r.status_code == 422 and r.json()["code"] == "request_invalid"
    unchanged(api, user)
