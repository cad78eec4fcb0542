"""Cases over HTTP: staff list and read every case of the engine (open by default, by type and
status), an admin resolves a check's case once (audited, Idempotency-Key), the fix of a case
about a ledger transaction must reference it, and own-address cases are resolved by their own
two-admin routes."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from api.cases import record_check
from reconcile.model import CaseType, Finding
from tests.api.conftest import Api
from tests.api.test_treasury import own_case

DRIFT = Finding(CaseType.BALANCE_DRIFT, "account:7", {"account_id": "7"}, "100", "90",
                {"expected_version": 2})
UNBALANCED = Finding(CaseType.TRANSACTION_UNBALANCED, "transaction:5:USDC",
                     {"ledger_transaction_id": "5", "asset": "USDC"}, "0", "3")


def test_list_read_and_resolve_a_case(api: Api) -> None:
    (drift,) = record_check(api.engine, "tests", [DRIFT], datetime.now(UTC)).opened
    (unbalanced,) = record_check(api.engine, "tests", [UNBALANCED], datetime.now(UTC)).opened
    items = api.call("GET", "/v1/admin/cases", "sam").json()["items"]
    assert [(i["id"], i["type"], i["subject"], i["status"]) for i in items] == [
        (drift, "balance_drift", "account:7", "open"),
        (unbalanced, "transaction_unbalanced", "transaction:5:USDC", "open")]
    assert items[0]["expected"] == "100" and items[0]["observed"] == "90"
    assert f"custody cases resolve {drift}" in items[0]["next"]
    assert "--transaction TXID" in items[1]["next"]
    typed = api.call("GET", "/v1/admin/cases?type=transaction_unbalanced", "sam").json()
    assert [i["id"] for i in typed["items"]] == [unbalanced]
    one = api.call("GET", f"/v1/admin/cases/{drift}", "sam").json()
    assert one["refs"] == {"account_id": "7"} and one["seen_count"] == 1
    missing = api.call("GET", "/v1/admin/cases/999999", "sam")
    assert missing.status_code == 404 and missing.json()["code"] == "case_not_found"

    key = uuid.uuid4().hex
    path = f"/v1/admin/cases/{drift}/resolve"
    body = {"resolution": "rebuilt the balances"}
    assert api.call("POST", path, "sam", idem=key, json=body).status_code == 403
    done = api.call("POST", path, "carol", idem=key, json=body)
    assert done.status_code == 200, done.text
    assert (done.json()["status"], done.json()["resolved_by"], done.json()["next"]) == (
        "resolved", "carol", None)
    replay = api.call("POST", path, "carol", idem=key, json=body)
    assert replay.status_code == 200 and replay.json() == done.json()
    again = api.call("POST", path, "carol", idem=uuid.uuid4().hex, json=body)
    assert again.status_code == 409 and again.json()["code"] == "case_already_resolved"
    # A case about a ledger transaction needs the fix that references it.
    unfixed = api.call("POST", f"/v1/admin/cases/{unbalanced}/resolve", "carol",
                       idem=uuid.uuid4().hex, json={"resolution": "looked at it"})
    assert unfixed.status_code == 422 and unfixed.json()["code"] == "case_resolution_invalid"
    listed = api.call("GET", "/v1/admin/cases?status=all", "sam").json()["items"]
    assert [(i["id"], i["status"]) for i in listed] == [(drift, "resolved"),
                                                         (unbalanced, "open")]
    resolved = api.call("GET", "/v1/admin/cases?status=resolved", "sam").json()["items"]
    assert [i["id"] for i in resolved] == [drift]


def test_an_own_address_case_is_listed_and_resolved_by_two_admins_only(api: Api) -> None:
    case_id = own_case(api)
    (item,) = api.call("GET", "/v1/admin/cases", "sam").json()["items"]
    assert (item["id"], item["type"], item["opened_by"]) == (
        case_id, "unattributed_own_address", "deposits.watcher")
    assert "two admins" in item["next"]
    refused = api.call("POST", f"/v1/admin/cases/{case_id}/resolve", "carol",
                       idem=uuid.uuid4().hex, json={"resolution": "capital"})
    assert refused.status_code == 409 and refused.json()["code"] == "case_resolved_elsewhere"
    for who, route, body in (("carol", "proposals", {"outcome": "capital", "reason": "top-up"}),
                             ("dave", "approvals", None)):
        r = api.call("POST", f"/v1/admin/cases/{case_id}/{route}", who, idem=uuid.uuid4().hex,
                     json=body)
        assert r.status_code == 201, r.text
    shown = api.call("GET", f"/v1/admin/cases/{case_id}", "sam").json()
    assert (shown["status"], shown["resolved_by"]) == ("resolved", "carol")
    assert shown["resolution"] == "capital: top-up (approved by dave)"
    assert shown["resolution_transaction_id"] is not None
