"""Lists (issue 17, "Consistent behaviour"): one pagination shape (``items``, ``has_more``,
``next_cursor``) on every listing endpoint, ``from``/``to`` time ranges on the lists of history;
a user's withdrawals (filtered by state), a withdrawal looked up by transaction hash, and a
statement with its opening and closing balances over a date range."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from tests.api.conftest import Api, seed_deposit
from tests.api.test_sweeps_api import problem, serve_doc, sweeps_doc
from tests.withdrawals.conftest import HOT

#: Every listing endpoint (``{u}``: a user of acme's), with a caller allowed to read it.
LISTS = [
    ("acme", "/v1/users/{u}/deposits"),
    ("acme", "/v1/users/{u}/withdrawals"),
    ("acme", "/v1/users/{u}/statement?asset=USDC"),
    ("sam", "/v1/admin/cases?status=all"),
    ("sam", "/v1/admin/treasury/fundings"),
    ("sam", "/v1/admin/sweeps"),
    ("sam", "/v1/admin/cold-transfers"),
    ("sam", "/v1/admin/refills"),
]
PAST = "2000-01-01T00:00:00Z"
FUTURE = "2999-01-01T00:00:00Z"


@pytest.fixture
def sapi(engine: Engine) -> Iterator[Api]:
    """The API with ``[sweeps]`` (no node)."""
    with serve_doc(engine, sweeps_doc()) as running:
        yield running


def query(path: str, params: dict[str, Any]) -> str:
    """``path`` with ``params`` added to its own query string (httpx would replace it)."""
    return str(httpx.URL(path).copy_merge_params(params))


def get(api: Api, who: str, path: str, **params: Any) -> dict[str, Any]:
    r = api.call("GET", query(path, params), who)
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


def sent(api: Api, withdrawal_id: int) -> str:
    """A signed attempt of the withdrawal (as the processor records it before broadcast):
    its transaction hash."""
    tx_hash = "0x" + uuid.uuid4().hex + uuid.uuid4().hex
    with api.engine.begin() as conn:
        conn.execute(sa.text(
            "INSERT INTO outgoing_attempts (withdrawal_id, attempt_no, chain, sender, nonce, "
            "tx_hash, raw_tx, max_fee_per_gas, max_priority_fee_per_gas, gas_limit, created_at, "
            "movement_kind) VALUES (:w, 1, 'devnet', :s, :n, :h, '0x02', 2, 1, 21000, now(), "
            "'withdrawal')"), {"w": withdrawal_id, "s": HOT.lower(), "n": withdrawal_id,
                               "h": tx_hash})
    return tx_hash


def test_every_list_has_the_one_pagination_shape_and_a_time_range(sapi: Api) -> None:
    user = sapi.funded_user()
    for who, path in LISTS:
        url = path.format(u=user)
        body = get(sapi, who, url)
        assert {"items", "has_more", "next_cursor"} <= set(body), (url, body)
        assert body["has_more"] is False and body["next_cursor"] is None, url
        # Every list of history takes a time range, and refuses an empty or malformed one.
        assert get(sapi, who, url, **{"from": FUTURE})["items"] == [], url
        assert get(sapi, who, url, **{"from": FUTURE, "to": PAST})["items"] == [], url
        problem(sapi.call("GET", query(url, {"to": "yesterday"}), who), 422, "request_invalid")


def test_pages_say_whether_more_follow(sapi: Api) -> None:
    user = sapi.funded_user()
    hashes = [seed_deposit(sapi, user) for _ in range(3)]
    first = get(sapi, "acme", f"/v1/users/{user}/deposits", limit=2)
    assert first["has_more"] is True and first["next_cursor"]
    rest = get(sapi, "acme", f"/v1/users/{user}/deposits", limit=2, cursor=first["next_cursor"])
    assert rest["has_more"] is False and rest["next_cursor"] is None
    assert [d["tx_hash"] for d in first["items"] + rest["items"]] == hashes[::-1]
    # Exactly a page left: no promise of another one.
    exact = get(sapi, "acme", f"/v1/users/{user}/deposits", limit=3)
    assert exact["has_more"] is False and len(exact["items"]) == 3
    everything = get(sapi, "acme", f"/v1/users/{user}/deposits", **{"from": PAST, "to": FUTURE})
    assert len(everything["items"]) == 3
    assert get(sapi, "acme", f"/v1/users/{user}/deposits", to=PAST)["items"] == []


def test_the_cases_list_pages_with_a_cursor(sapi: Api) -> None:
    from tests.api.test_http_authz import _finding_case

    opened = [_finding_case(sapi) for _ in range(3)]
    first = get(sapi, "sam", "/v1/admin/cases", limit=2)
    assert [c["id"] for c in first["items"]] == opened[:2] and first["has_more"] is True
    rest = get(sapi, "sam", "/v1/admin/cases", limit=2, cursor=first["next_cursor"])
    assert [c["id"] for c in rest["items"]] == opened[2:] and rest["has_more"] is False


class TestUserWithdrawals:
    def test_listed_newest_first_filtered_by_state_and_paged(self, sapi: Api) -> None:
        user = sapi.funded_user(amount_minor=2_000_000_000)
        ids = [int(sapi.withdraw(user, "10000000")["id"]) for _ in range(3)]
        canceled = sapi.call("POST", f"/v1/withdrawals/{ids[1]}/cancel", "acme", idem="c1")
        assert canceled.status_code == 200, canceled.text
        path = f"/v1/users/{user}/withdrawals"
        listed = get(sapi, "acme", path)
        assert [w["id"] for w in listed["items"]] == ids[::-1]
        assert listed["items"][0]["amount"] == {"minor": "10000000", "decimal": "10.000000"}
        assert [w["id"] for w in get(sapi, "acme", path, state="canceled")["items"]] == [ids[1]]
        both = sapi.call("GET", f"{path}?state=canceled&state=reserved", "sam").json()
        assert sorted(w["id"] for w in both["items"]) == sorted(ids)
        first = get(sapi, "acme", path, limit=2)
        assert first["has_more"] is True
        rest = get(sapi, "acme", path, limit=2, cursor=first["next_cursor"])
        assert [w["id"] for w in first["items"] + rest["items"]] == ids[::-1]
        assert rest["has_more"] is False
        assert get(sapi, "acme", path, **{"from": FUTURE})["items"] == []

    def test_scopes_as_the_other_reads_of_a_user(self, sapi: Api) -> None:
        user = sapi.funded_user()
        sapi.withdraw(user)
        path = f"/v1/users/{user}/withdrawals"
        problem(sapi.call("GET", path, "globex"), 404, "user_not_found")
        problem(sapi.call("GET", path, "alice"), 403, "forbidden")
        problem(sapi.call("GET", path, None), 401, "unauthenticated")
        problem(sapi.call("GET", path + "?state=nope", "acme"), 422, "request_invalid")
        assert len(get(sapi, "carol", path)["items"]) == 1


class TestWithdrawalByTransaction:
    def test_found_by_any_attempt_hash(self, sapi: Api) -> None:
        user = sapi.funded_user()
        wid = int(sapi.withdraw(user)["id"])
        tx_hash = sent(sapi, wid)
        for who in ("acme", "sam", "carol", "alice"):
            body = get(sapi, who, f"/v1/withdrawals/by-tx/devnet/{tx_hash}")
            assert body["withdrawal"]["id"] == wid, who
            assert [a["tx_hash"] for a in body["attempts"]] == [tx_hash]
        upper = "0x" + tx_hash[2:].upper()
        assert get(sapi, "acme", f"/v1/withdrawals/by-tx/devnet/{upper}")["withdrawal"][
            "id"] == wid

    def test_absent_another_clients_or_unknown_chain(self, sapi: Api) -> None:
        user = sapi.funded_user()
        tx_hash = sent(sapi, int(sapi.withdraw(user)["id"]))
        found = problem(sapi.call("GET", f"/v1/withdrawals/by-tx/devnet/{tx_hash}", "globex"),
                        404, "withdrawal_not_found")
        assert tx_hash in found["detail"]
        problem(sapi.call("GET", f"/v1/withdrawals/by-tx/devnet/0x{'ab' * 32}", "acme"), 404,
                "withdrawal_not_found")
        problem(sapi.call("GET", f"/v1/withdrawals/by-tx/nochain/{tx_hash}", "acme"), 422,
                "chain_unknown")
        problem(sapi.call("GET", "/v1/withdrawals/by-tx/devnet/0x12", "acme"), 422,
                "request_invalid")
        problem(sapi.call("GET", f"/v1/withdrawals/by-tx/devnet/{tx_hash}", None), 401,
                "unauthenticated")


def recorded(line: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(line["recorded_at"])


def test_statement_with_opening_closing_and_a_range(sapi: Api) -> None:
    user = sapi.funded_user()  # +150 USDC
    sapi.withdraw(user)  # reserves 32: wallet -32, withdrawals +32
    path = f"/v1/users/{user}/statement?asset=USDC"
    whole = get(sapi, "acme", path)
    assert whole["opening"] == {"available": {"minor": "0", "decimal": "0.000000"},
                                "posted": {"minor": "0", "decimal": "0.000000"}}
    assert whole["closing"]["available"]["minor"] == "118000000"
    assert whole["closing"]["posted"]["minor"] == "150000000"
    assert (whole["from"], whole["to"]) == (None, None)
    funding, reserve, _ = whole["items"]
    assert recorded(funding) < recorded(reserve)
    # From the reserve on: the opening is the balance just before it (after the funding).
    since = recorded(reserve).isoformat()
    ranged = get(sapi, "acme", path, **{"from": since})
    assert [ln["posting_id"] for ln in ranged["items"]] == [ln["posting_id"]
                                                            for ln in whole["items"][1:]]
    assert ranged["opening"]["available"]["minor"] == "150000000"
    assert ranged["opening"]["posted"]["minor"] == "150000000"
    assert ranged["closing"] == whole["closing"]
    assert datetime.fromisoformat(ranged["from"]) == recorded(reserve)
    # Up to the reserve: only the funding; closing = opening + the lines.
    until = recorded(reserve).isoformat()
    before = get(sapi, "acme", path, to=until)
    assert [ln["posting_id"] for ln in before["items"]] == [funding["posting_id"]]
    assert before["closing"]["available"]["minor"] == "150000000"
    # An empty range between the two: opening and closing are the same balance.
    gap = get(sapi, "acme", path, **{
        "from": (recorded(funding) + timedelta(microseconds=1)).isoformat(), "to": until})
    assert gap["items"] == [] and gap["opening"] == gap["closing"]
    assert gap["closing"]["available"]["minor"] == "150000000"
    # Pages of a range carry the running opening.
    first = get(sapi, "acme", path, limit=1)
    second = get(sapi, "acme", path, limit=1, cursor=first["next_cursor"])
    assert second["opening"] == first["closing"] and second["has_more"] is True
    assert datetime.now(UTC) > recorded(reserve)


def test_every_new_route_is_documented(sapi: Api) -> None:
    paths = sapi.http.get("/openapi.json").json()["paths"]
    assert "/v1/users/{user_id}/withdrawals" in paths and "get" in paths[
        "/v1/users/{user_id}/withdrawals"]
    assert "/v1/withdrawals/by-tx/{chain}/{tx_hash}" in paths
    params = {p["name"] for p in paths["/v1/users/{user_id}/statement"]["get"]["parameters"]}
    assert {"from", "to", "cursor", "limit", "asset"} <= params
