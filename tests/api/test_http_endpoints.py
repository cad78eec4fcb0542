"""What the endpoints answer: balances with pending deposits and reserves, deposits pages and
timelines (a client sees only its users' transfers), withdrawal lifecycle, metrics, cases."""

from __future__ import annotations

from tests.api.conftest import Api, seed_deposit

#: An empty page of a list (``api.routes.paging``).
EMPTY_PAGE = {"items": [], "has_more": False, "next_cursor": None}


def test_balances_deposits_and_timelines(api: Api) -> None:
    user = api.funded_user()
    hashes = [seed_deposit(api, user, 1_000_000 * (i + 1)) for i in range(3)]
    api.withdraw(user)  # reserves 30 + 2 (fee max)
    b = api.call("GET", f"/v1/users/{user}/balances", "acme").json()["balances"][0]
    assert (b["asset"], b["scale"]) == ("USDC", 6)
    assert b["posted"] == {"minor": "150000000", "decimal": "150.000000"}
    assert b["pending_incoming"]["minor"] == "6000000"
    assert b["pending_outgoing"]["minor"] == "32000000"
    assert b["available"]["minor"] == "118000000"
    assert b["projected"]["minor"] == str(150_000_000 + 6_000_000 - 32_000_000)
    past = api.call("GET", f"/v1/users/{user}/balances?as_of=2000-01-01T00:00:00Z", "sam")
    assert past.json()["balances"][0]["posted"]["minor"] == "0"

    first = api.call("GET", f"/v1/users/{user}/deposits?limit=2", "acme").json()
    assert len(first["items"]) == 2 and first["next_cursor"]
    rest = api.call("GET", f"/v1/users/{user}/deposits?limit=2&cursor={first['next_cursor']}",
                    "acme").json()
    assert rest["next_cursor"] is None
    seen = [d["tx_hash"] for d in first["items"] + rest["items"]]
    assert seen == list(reversed(hashes))
    assert first["items"][0]["amount"] == {"minor": "3000000", "decimal": "3.000000"}

    timeline = api.call("GET", f"/v1/deposits/devnet/{hashes[0]}", "acme").json()
    transfer = timeline["transfers"][0]
    assert transfer["deposit"]["state"] == "included"
    assert [e["event"] for e in transfer["events"]] == ["transfer_included"]
    assert api.call("GET", f"/v1/deposits/devnet/{hashes[0]}", "globex").status_code == 404


def test_withdrawal_approval_rejection_and_cancel(api: Api) -> None:
    user = api.funded_user("acme", 20_000_000_000)
    dual = api.withdraw(user, "6000000000")
    assert (dual["state"], dual["approvals_required"]) == ("pending_approval", 2)
    path = f"/v1/withdrawals/{dual['id']}/approvals"
    one = api.call("POST", path, "alice", idem="a", json={"decision": "approve"}).json()
    assert one["state"] == "pending_approval"
    twice = api.call("POST", path, "alice", idem="a2", json={"decision": "approve"})
    assert twice.status_code == 409 and twice.json()["code"] == "approval_refused"
    done = api.call("POST", path, "bob", idem="b", json={"decision": "approve"}).json()
    assert done["state"] == "reserved"

    other = api.withdraw(user, "2000000000")
    no_reason = api.call("POST", f"/v1/withdrawals/{other['id']}/approvals", "bob", idem="r",
                         json={"decision": "reject"})
    assert no_reason.status_code == 422
    rejected = api.call("POST", f"/v1/withdrawals/{other['id']}/approvals", "bob", idem="r",
                        json={"decision": "reject", "reason": "suspicious destination"})
    assert rejected.json()["state"] == "rejected"

    canceled = api.call("POST", f"/v1/withdrawals/{done['id']}/cancel", "acme", idem="c",
                        json={"reason": "changed my mind"}).json()
    assert canceled["state"] == "canceled"
    again = api.call("POST", f"/v1/withdrawals/{done['id']}/cancel", "acme", idem="c2", json={})
    assert again.status_code == 409 and again.json()["code"] == "withdrawal_not_cancelable"
    tl = api.call("GET", f"/v1/withdrawals/{done['id']}", "sam").json()
    assert [e["event"] for e in tl["events"]] == [
        "approval_required", "approval_recorded", "approvals_completed", "canceled"]
    assert [d["actor"] for d in tl["decisions"]] == ["alice", "bob"]
    kinds = [t["kind"] for t in tl["ledger_transactions"]]
    assert kinds == ["withdrawal_reserve", "withdrawal_release"]
    balances = api.call("GET", f"/v1/users/{user}/balances", "acme").json()["balances"][0]
    assert balances["available"]["minor"] == "20000000000"


def test_metrics_cases_and_period_close(api: Api) -> None:
    user = api.funded_user()
    seed_deposit(api, user)
    text = api.call("GET", "/metrics", "sam").text
    assert 'custody_deposits_waiting_finality{chain="devnet"} 1.0' in text
    assert 'custody_reconciliation_cases_open{type="deep_reorg"} 0.0' in text
    assert 'custody_reconciliation_cases_open{type="balance_drift"} 0.0' in text
    assert api.call("GET", "/v1/admin/cases", "sam").json() == EMPTY_PAGE
    proposed = api.call("POST", "/v1/admin/periods", "carol", idem="p",
                        json={"ends_at": "2020-01-01T00:00:00Z", "reason": "year end"})
    assert proposed.status_code == 202, proposed.text
    proposal = proposed.json()
    assert (proposal["state"], proposal["proposed_by"], proposal["period_id"]) == (
        "awaiting_approval", "carol", None)
    approvals = f"/v1/admin/periods/proposals/{proposal['id']}/approvals"
    own = api.call("POST", approvals, "carol", idem="a1")
    assert own.status_code == 409 and own.json()["code"] == "second_approver_required"
    closed = api.call("POST", approvals, "dave", idem="a2")
    assert closed.status_code == 201 and closed.json()["closed_by"] == "dave"
    again = api.call("POST", approvals, "alice", idem="a3")
    assert again.status_code == 409 and again.json()["code"] == "second_approver_required"
    missing = api.call("POST", "/v1/admin/periods/proposals/999999/approvals", "dave", idem="a4")
    assert missing.status_code == 404 and missing.json()["code"] == "period_proposal_not_found"
    earlier = api.call("POST", "/v1/admin/periods", "dave", idem="p",
                       json={"ends_at": "2019-01-01T00:00:00Z"})
    assert earlier.status_code == 409 and earlier.json()["code"] == "period_close_invalid"


def test_statement_explains_the_balance(api: Api) -> None:
    user = api.funded_user()
    api.withdraw(user)  # reserves 30 + 2 (fee max)
    first = api.call("GET", f"/v1/users/{user}/statement?asset=USDC&limit=2", "acme").json()
    assert (first["asset"], first["scale"]) == ("USDC", 6)
    assert first["next_cursor"] is not None
    rest = api.call("GET", f"/v1/users/{user}/statement?asset=USDC&cursor={first['next_cursor']}",
                    "sam").json()
    lines = first["items"] + rest["items"]
    assert [(ln["account"], ln["amount"]["minor"], ln["available"]["minor"],
             ln["posted"]["minor"]) for ln in lines] == [
        ("wallet", "150000000", "150000000", "150000000"),
        ("wallet", "-32000000", "118000000", "118000000"),
        ("withdrawals", "32000000", "118000000", "150000000"),
    ]
    assert lines[1]["kind"] == "withdrawal_reserve" and rest["next_cursor"] is None
    b = api.call("GET", f"/v1/users/{user}/balances", "acme").json()["balances"][0]
    assert (b["available"], b["posted"]) == (lines[-1]["available"], lines[-1]["posted"])
    unknown = api.call("GET", f"/v1/users/{user}/statement?asset=NOPE", "acme")
    assert unknown.status_code == 422 and unknown.json()["code"] == "asset_not_found"


def test_balances_body_and_request_ids(api: Api) -> None:
    user = api.funded_user()
    r = api.call("GET", f"/v1/users/{user}/balances", "acme", headers={"X-Request-ID": "abc-1"})
    assert r.headers["content-type"] == "application/json"
    assert r.headers["x-request-id"] == "abc-1"
    body = r.json()
    assert set(body) == {"user_id", "as_of", "known_at", "balances"}
    assert body["user_id"] == user and body["known_at"] is None
    (b,) = body["balances"]
    assert set(b) == {"asset", "scale", "posted", "pending_incoming", "pending_outgoing",
                      "available", "projected", "version", "as_of"}
    assert b["as_of"] == body["as_of"] and b["version"] == 1
    # A malformed id is replaced; generated ids differ, and a problem carries its request's id.
    ids = {api.call("GET", f"/v1/users/{user}/balances", "acme",
                    headers={"X-Request-ID": "bad id!"}).headers["x-request-id"]
           for _ in range(3)}
    assert len(ids) == 3 and "bad id!" not in ids
    missing = api.call("GET", "/v1/users/nobody/balances", "acme")
    assert missing.status_code == 404
    assert missing.json()["request_id"] == missing.headers["x-request-id"]
