"""Proof of reserves over HTTP: every scope reads the newest report and any stored one (404
``report_not_found`` before the first); a client gets the inclusion proof of its own users
only (another client's user answers 404, as for every user route), support and admin of
anyone; the proof verifies against the published root; bad ids are refused."""

from __future__ import annotations

from reserves import merkle
from tests.api.conftest import Api
from tests.api.conftest import take_report as _take


def test_reports_and_proofs_by_scope(api: Api) -> None:
    none_yet = api.call("GET", "/v1/reserves", "acme")
    assert none_yet.status_code == 404 and none_yet.json()["code"] == "report_not_found"
    ours = api.funded_user("acme", 7_000_000)
    theirs = api.funded_user("globex", 2_000_000)
    first = _take(api)
    api.funded_user("acme", 1_000_000)
    second = _take(api)
    for who in ("acme", "sam", "carol", "alice"):
        latest = api.call("GET", "/v1/reserves", who)
        assert latest.status_code == 200, latest.text
        assert latest.json()["id"] == second
    old = api.call("GET", f"/v1/reserves/{first}", "sam").json()
    assert old["id"] == first and old["liabilities"]["users"] == 2
    usdc = {a["asset"]: a for a in old["assets"]}["USDC"]
    assert (usdc["liabilities_users"], usdc["scale"]) == ("9000000", 6)
    assert usdc["on_chain"] == "0" and usdc["ratio"] == "0.000000"  # No chain configured.

    proof = api.call("GET", f"/v1/reserves/proofs/{ours}", "acme")
    assert proof.status_code == 200, proof.text
    body = proof.json()
    assert body["report_id"] == second and body["scales"]["USDC"] == 6
    verified = merkle.verify(body, api.call("GET", "/v1/reserves", "acme").json()[
        "liabilities"]["root"])
    assert verified.user_id == ours and verified.balances["USDC"] == 7_000_000
    at_first = api.call("GET", f"/v1/reserves/proofs/{ours}?report_id={first}", "acme").json()
    assert merkle.verify(at_first, old["liabilities"]["root"]).balances["USDC"] == 7_000_000
    # Another client's user is not found; staff read anyone's.
    other = api.call("GET", f"/v1/reserves/proofs/{theirs}", "acme")
    assert other.status_code == 404 and other.json()["code"] == "user_not_found"
    for who in ("sam", "carol"):
        assert api.call("GET", f"/v1/reserves/proofs/{theirs}", who).status_code == 200
    assert api.call("GET", f"/v1/reserves/proofs/{theirs}", "alice").status_code == 403
    assert api.call("GET", "/v1/reserves", None).status_code == 401


def test_missing_reports_proofs_and_bad_ids(api: Api) -> None:
    user = api.funded_user("acme")
    report_id = _take(api)
    missing = api.call("GET", f"/v1/reserves/{report_id + 1}", "sam")
    assert missing.status_code == 404 and missing.json()["code"] == "report_not_found"
    fresh = api.new_user("acme")  # No ledger balance when the report was taken.
    no_leaf = api.call("GET", f"/v1/reserves/proofs/{fresh}", "acme")
    assert no_leaf.status_code == 404 and no_leaf.json()["code"] == "proof_not_found"
    wrong = api.call("GET", f"/v1/reserves/proofs/{user}?report_id={report_id + 5}", "acme")
    assert wrong.status_code == 404 and wrong.json()["code"] == "report_not_found"
    for path in ("/v1/reserves/0", "/v1/reserves/abc", f"/v1/reserves/proofs/{user}?report_id=0",
                 "/v1/reserves/proofs/bad%20id"):
        bad = api.call("GET", path, "sam")
        assert bad.status_code in (404, 422), (path, bad.status_code)
        assert bad.headers["content-type"].startswith("application/problem+json")
