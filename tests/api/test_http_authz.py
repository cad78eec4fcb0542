"""The authorization matrix: every endpoint, called by every scope, without a key, and by a
client on another client's user (404, never 403: other clients' users are invisible).

Each allowed call really runs (on a fresh resource per caller), so "allowed" means the action
went through or was refused by the domain (4xx other than 401/403/404), never by auth.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa

from tests.api.conftest import DEST, Api, fund_transaction, seed_deposit, take_report
from tests.api.test_http_lists import sent
from tests.api.test_treasury import FUNDING, own_case

#: Callers: acme (client, owns the resource), globex (another client), sam (support),
#: carol (admin), alice (approver), None (no key).
CALLERS: tuple[str | None, ...] = ("acme", "globex", "sam", "carol", "alice", None)
Make = Callable[[Api], tuple[str, Any]]


@dataclass(frozen=True)
class Endpoint:
    """One endpoint: how to build a request on a fresh resource, and the status per caller."""

    method: str
    make: Make
    expected: tuple[int, int, int, int, int, int]
    money: bool = False


def _user(api: Api) -> str:
    return api.new_user("acme")


def _withdrawal(api: Api, amount: str = "30000000") -> int:
    user = api.funded_user("acme", 2_000_000_000)
    return int(api.withdraw(user, amount)["id"])


def _event(api: Api) -> str:
    """The id of a fresh event of acme's (a withdrawal's)."""
    withdrawal_id = _withdrawal(api)
    with api.engine.connect() as conn:
        return str(conn.execute(sa.text(
            "SELECT event_id FROM outbox_events WHERE subject = :s"),
            {"s": f"withdrawal:{withdrawal_id}"}).scalar_one())


def _webhook_endpoint(api: Api) -> int:
    """A fresh webhook endpoint of acme's."""
    from api import outbox
    from config.uow import UnitOfWork

    with UnitOfWork(api.engine) as uow:
        row, _ = outbox.create_endpoint(uow, "acme", "https://example.com/hooks")
        uow.commit()
    return row.id


WEBHOOK = {"client": "acme", "url": "https://example.com/hooks"}


def _tx(api: Api) -> int:
    user = api.funded_user("acme")
    return fund_transaction(api, user)


_proposal_days = itertools.count()


def _proposal(api: Api) -> int:
    """A period close proposed by dave, each one later than the previous (so each can close)."""
    ends_at = datetime(2001, 1, 1, tzinfo=UTC) + timedelta(days=next(_proposal_days))
    r = api.call("POST", "/v1/admin/periods", "dave", idem=uuid.uuid4().hex,
                 json={"ends_at": ends_at.isoformat()})
    assert r.status_code == 202, r.text
    return int(r.json()["id"])


_findings = itertools.count()


def _finding_case(api: Api) -> int:
    """A fresh open case of a reconciliation check (an account's balance drift)."""
    from api.cases import record_check
    from reconcile.model import CaseType, Finding

    n = next(_findings)
    recorded = record_check(api.engine, "tests", [Finding(
        CaseType.BALANCE_DRIFT, f"account:{900 + n}", {"account_id": str(900 + n)}, "1", "2")],
        datetime.now(UTC))
    return recorded.opened[0]


def _latest_report(api: Api) -> str:
    """The newest report's path, after taking a fresh one."""
    take_report(api)
    return "/v1/reserves"


def _proved_user(api: Api) -> str:
    """A funded user of acme's inside a report taken after the funding."""
    user = api.funded_user("acme")
    take_report(api)
    return user


def _fresh_key(api: Api) -> int:
    """The id of a fresh client key (each caller revokes its own)."""
    from api.auth import create_key

    return create_key(api.engine, "newco", "client").id


def _allowlist_body(**more: str) -> dict[str, str]:
    """A new destination for an allowlist (a fresh address per call)."""
    return {"chain": "devnet", "address": "0x" + uuid.uuid4().hex + uuid.uuid4().hex[:8],
            "label": "cold store", **more}


def _allowlist_entry(api: Api) -> int:
    """A fresh entry of acme's allowlist (each caller acts on its own)."""
    r = api.call("POST", "/v1/allowlist", "acme", idem=uuid.uuid4().hex, json=_allowlist_body())
    assert r.status_code == 201, r.text
    return int(r.json()["id"])


W = {"asset": "USDC", "chain": "devnet", "to": DEST, "amount": "30000000"}
ENDPOINTS: dict[str, Endpoint] = {
    "healthz": Endpoint("GET", lambda a: ("/healthz", None), (200, 200, 200, 200, 200, 200)),
    # No node listens for the test chain: not ready, for everyone alike (no authentication).
    "readyz": Endpoint("GET", lambda a: ("/readyz", None), (503, 503, 503, 503, 503, 503)),
    "metrics": Endpoint("GET", lambda a: ("/metrics", None), (403, 403, 200, 200, 403, 401)),
    "create_user": Endpoint("POST", lambda a: ("/v1/users", {}),
                            (201, 201, 403, 403, 403, 401)),
    "assign_address": Endpoint(
        "POST", lambda a: (f"/v1/users/{_user(a)}/deposit-addresses", {"chain": "devnet"}),
        (201, 404, 403, 403, 403, 401)),
    "list_addresses": Endpoint(
        "GET", lambda a: (f"/v1/users/{_user(a)}/deposit-addresses", None),
        (200, 404, 200, 200, 403, 401)),
    "balances": Endpoint("GET", lambda a: (f"/v1/users/{_user(a)}/balances", None),
                         (200, 404, 200, 200, 403, 401)),
    "deposits": Endpoint("GET", lambda a: (f"/v1/users/{_user(a)}/deposits", None),
                         (200, 404, 200, 200, 403, 401)),
    "statement": Endpoint(
        "GET", lambda a: (f"/v1/users/{_user(a)}/statement?asset=USDC", None),
        (200, 404, 200, 200, 403, 401)),
    "deposit_timeline": Endpoint(
        "GET", lambda a: (f"/v1/deposits/devnet/{seed_deposit(a, _user(a))}", None),
        (200, 404, 200, 200, 403, 401)),
    "create_withdrawal": Endpoint(
        "POST", lambda a: (f"/v1/users/{a.funded_user('acme')}/withdrawals", W),
        (201, 404, 403, 403, 403, 401), money=True),
    "get_withdrawal": Endpoint("GET", lambda a: (f"/v1/withdrawals/{_withdrawal(a)}", None),
                               (200, 404, 200, 200, 200, 401)),
    "list_withdrawals": Endpoint("GET", lambda a: (f"/v1/users/{_user(a)}/withdrawals", None),
                                 (200, 404, 200, 200, 403, 401)),
    # As ``get_withdrawal``: the withdrawal that signed the transaction.
    "withdrawal_by_tx": Endpoint(
        "GET", lambda a: (f"/v1/withdrawals/by-tx/devnet/{sent(a, _withdrawal(a))}", None),
        (200, 404, 200, 200, 200, 401)),
    "cancel": Endpoint("POST", lambda a: (f"/v1/withdrawals/{_withdrawal(a)}/cancel", {}),
                       (200, 404, 403, 200, 403, 401), money=True),
    "approve": Endpoint(
        "POST", lambda a: (f"/v1/withdrawals/{_withdrawal(a, '1500000000')}/approvals",
                           {"decision": "approve"}),
        (403, 403, 403, 403, 201, 401), money=True),
    "list_allowlist": Endpoint("GET", lambda a: ("/v1/allowlist", None),
                               (200, 200, 200, 200, 403, 401)),
    "get_allowlist_entry": Endpoint(
        "GET", lambda a: (f"/v1/allowlist/{_allowlist_entry(a)}", None),
        (200, 404, 200, 200, 403, 401)),
    # Each client adds to its own allowlist; an admin names the client.
    "add_allowlist_entry": Endpoint("POST", lambda a: ("/v1/allowlist", _allowlist_body()),
                                    (201, 201, 403, 403, 403, 401), money=True),
    "admin_add_allowlist_entry": Endpoint(
        "POST", lambda a: ("/v1/admin/allowlist", _allowlist_body(client="acme")),
        (403, 403, 403, 201, 403, 401), money=True),
    "remove_allowlist_entry": Endpoint(
        "DELETE", lambda a: (f"/v1/allowlist/{_allowlist_entry(a)}", None),
        (200, 404, 403, 200, 403, 401)),
    # The first admin's vote is recorded (201); the second admin's would apply it.
    "shorten_allowlist_delay": Endpoint(
        "POST", lambda a: (f"/v1/admin/allowlist/{_allowlist_entry(a)}/shorten", {
            "active_at": datetime.now(UTC).isoformat(), "reason": "confirmed by phone"}),
        (403, 403, 403, 201, 403, 401), money=True),
    "ledger_transaction": Endpoint(
        "GET", lambda a: (f"/v1/admin/ledger/transactions/{_tx(a)}", None),
        (403, 403, 200, 200, 403, 401)),
    "reverse": Endpoint(
        "POST", lambda a: (f"/v1/admin/ledger/transactions/{_tx(a)}/reversals",
                           {"reason": "booking error"}),
        (403, 403, 403, 201, 403, 401), money=True),
    "propose_period_close": Endpoint(
        "POST", lambda a: ("/v1/admin/periods", {"ends_at": "2020-01-01T00:00:00Z"}),
        (403, 403, 403, 202, 403, 401), money=True),
    # A fresh proposal by dave (admin) per caller: carol (admin) and alice (approver) are
    # second persons.
    "approve_period_close": Endpoint(
        "POST", lambda a: (f"/v1/admin/periods/proposals/{_proposal(a)}/approvals", None),
        (403, 403, 403, 201, 201, 401), money=True),
    # Reserved, not awaiting a write-off: allowed for an admin, refused by the service (409).
    "write_off_vote": Endpoint(
        "POST", lambda a: (f"/v1/admin/withdrawals/{_withdrawal(a)}/write-off-votes",
                           {"decision": "sent", "reason": "provider confirmed"}),
        (403, 403, 403, 409, 403, 401), money=True),
    # No such incoming transfer: allowed for an admin, refused by the service (409).
    "link_return": Endpoint(
        "POST", lambda a: (f"/v1/admin/withdrawals/{_withdrawal(a)}/returns",
                           {"chain": "devnet", "tx_hash": "0x" + "ab" * 32,
                            "position": "log:0", "amount": "1000000", "reason": "came back"}),
        (403, 403, 403, 409, 403, 401), money=True),
    "cases": Endpoint("GET", lambda a: ("/v1/admin/cases", None),
                      (403, 403, 200, 200, 403, 401)),
    "get_case": Endpoint("GET", lambda a: (f"/v1/admin/cases/{_finding_case(a)}", None),
                         (403, 403, 200, 200, 403, 401)),
    # A fresh case per caller: the admin resolves it.
    "resolve_case": Endpoint(
        "POST", lambda a: (f"/v1/admin/cases/{_finding_case(a)}/resolve",
                           {"resolution": "rebuilt the balances"}),
        (403, 403, 403, 200, 403, 401), money=True),
    "declare_funding": Endpoint("POST", lambda a: ("/v1/admin/treasury/fundings", FUNDING),
                                (403, 403, 403, 201, 403, 401), money=True),
    "list_fundings": Endpoint("GET", lambda a: ("/v1/admin/treasury/fundings", None),
                              (403, 403, 200, 200, 403, 401)),
    # No node in this app: the report answers with its ledger figures (on-chain ones null).
    "treasury": Endpoint("GET", lambda a: ("/v1/admin/treasury", None),
                         (403, 403, 200, 200, 403, 401)),
    # The test configuration's node does not exist: allowed, then 503 from the node.
    "holdings": Endpoint("GET", lambda a: ("/v1/admin/holdings", None),
                         (403, 403, 503, 503, 403, 401)),
    "propose_case": Endpoint(
        "POST", lambda a: (f"/v1/admin/cases/{own_case(a)}/proposals",
                           {"outcome": "capital", "reason": "owner top-up"}),
        (403, 403, 403, 201, 403, 401), money=True),
    # A fresh case proposed by dave per caller: carol is the second admin.
    "approve_case": Endpoint(
        "POST", lambda a: (f"/v1/admin/cases/{own_case(a, proposed_by='dave')}/approvals",
                           None),
        (403, 403, 403, 201, 403, 401), money=True),
    # This app has no [sweeps]: support and admin read (nothing there), an admin's writes are
    # refused with 409 sweeps_not_configured (tests/api/test_sweeps_api.py has them succeed).
    "list_sweeps": Endpoint("GET", lambda a: ("/v1/admin/sweeps", None),
                            (403, 403, 200, 200, 403, 401)),
    "get_sweep": Endpoint("GET", lambda a: ("/v1/admin/sweeps/1", None),
                          (403, 403, 404, 404, 403, 401)),
    "run_sweeper": Endpoint("POST", lambda a: ("/v1/admin/sweeps/run", {"chain": "devnet"}),
                            (403, 403, 403, 409, 403, 401), money=True),
    "propose_cold_transfer": Endpoint(
        "POST", lambda a: ("/v1/admin/cold-transfers", {
            "chain": "devnet", "asset": "ETH", "amount": "1", "reason": "excess"}),
        (403, 403, 403, 409, 403, 401), money=True),
    "decide_cold_transfer": Endpoint(
        "POST", lambda a: ("/v1/admin/cold-transfers/1/approvals", {"decision": "approve"}),
        (403, 403, 403, 409, 403, 401), money=True),
    "list_cold_transfers": Endpoint("GET", lambda a: ("/v1/admin/cold-transfers", None),
                                    (403, 403, 200, 200, 403, 401)),
    "get_cold_transfer": Endpoint("GET", lambda a: ("/v1/admin/cold-transfers/1", None),
                                  (403, 403, 404, 404, 403, 401)),
    "request_refill": Endpoint(
        "POST", lambda a: ("/v1/admin/refills", {
            "chain": "devnet", "asset": "ETH", "amount": "1", "reason": "low"}),
        (403, 403, 403, 409, 403, 401), money=True),
    "list_refills": Endpoint("GET", lambda a: ("/v1/admin/refills", None),
                             (403, 403, 200, 200, 403, 401)),
    "list_events": Endpoint("GET", lambda a: ("/v1/events", None),
                            (200, 200, 200, 200, 403, 401)),
    "get_event": Endpoint("GET", lambda a: (f"/v1/events/{_event(a)}", None),
                          (200, 404, 200, 200, 403, 401)),
    "create_endpoint": Endpoint("POST", lambda a: ("/v1/admin/webhook-endpoints", WEBHOOK),
                                (403, 403, 403, 201, 403, 401), money=True),
    "list_endpoints": Endpoint("GET", lambda a: ("/v1/admin/webhook-endpoints", None),
                               (403, 403, 200, 200, 403, 401)),
    "get_endpoint": Endpoint(
        "GET", lambda a: (f"/v1/admin/webhook-endpoints/{_webhook_endpoint(a)}", None),
        (403, 403, 200, 200, 403, 401)),
    "rotate_endpoint": Endpoint(
        "POST", lambda a: (f"/v1/admin/webhook-endpoints/{_webhook_endpoint(a)}/rotate", None),
        (403, 403, 403, 200, 403, 401), money=True),
    "disable_endpoint": Endpoint(
        "POST", lambda a: (f"/v1/admin/webhook-endpoints/{_webhook_endpoint(a)}/disable", None),
        (403, 403, 403, 200, 403, 401), money=True),
    "list_api_keys": Endpoint("GET", lambda a: ("/v1/admin/api-keys", None),
                              (403, 403, 200, 200, 403, 401)),
    "create_api_key": Endpoint(
        "POST", lambda a: ("/v1/admin/api-keys", {"client": "newco", "scope": "client"}),
        (403, 403, 403, 201, 403, 401), money=True),
    "revoke_api_key": Endpoint(
        "POST", lambda a: (f"/v1/admin/api-keys/{_fresh_key(a)}/revoke", None),
        (403, 403, 403, 200, 403, 401)),
    # The audit trail: admin only.
    "list_audit": Endpoint("GET", lambda a: ("/v1/admin/audit", None),
                           (403, 403, 403, 200, 403, 401)),
    # A report is published: every authenticated scope reads it.
    "latest_report": Endpoint("GET", lambda a: (_latest_report(a), None),
                              (200, 200, 200, 200, 200, 401)),
    "get_report": Endpoint("GET", lambda a: (f"/v1/reserves/{take_report(a)}", None),
                           (200, 200, 200, 200, 200, 401)),
    "reserves_proof": Endpoint(
        "GET", lambda a: (f"/v1/reserves/proofs/{_proved_user(a)}", None),
        (200, 404, 200, 200, 403, 401)),
}


def test_every_route_is_in_the_matrix(api: Api) -> None:
    paths = api.http.get("/openapi.json").json()["paths"]
    operations = sum(len(methods) for methods in paths.values())
    assert operations == len(ENDPOINTS)


@pytest.mark.parametrize("name", sorted(ENDPOINTS))
def test_authorization_matrix(api: Api, name: str) -> None:
    endpoint = ENDPOINTS[name]
    got = []
    for caller in CALLERS:
        path, body = endpoint.make(api)
        idem = uuid.uuid4().hex if endpoint.money else None
        r = api.call(endpoint.method, path, caller, idem=idem, json=body)
        if r.status_code >= 400:
            assert r.headers["content-type"] == "application/problem+json", r.text
        got.append(r.status_code)
    assert tuple(got) == endpoint.expected, dict(zip(CALLERS, got, strict=True))


def test_admin_and_approver_actions_are_audited(api: Api) -> None:
    user = api.funded_user("acme", 2_000_000_000)
    big = api.withdraw(user, "1500000000")
    r = api.call("POST", f"/v1/withdrawals/{big['id']}/approvals", "alice", idem="a1",
                 json={"decision": "approve"}, headers={"X-Request-ID": "req-approve-1"})
    assert r.status_code == 201 and r.json()["state"] == "reserved"
    r = api.call("POST", f"/v1/withdrawals/{big['id']}/cancel", "carol", idem="c1", json={})
    assert r.status_code == 200 and r.json()["state"] == "canceled"
    refused = api.call("POST", "/v1/admin/periods", "carol", idem="p1",
                       json={"ends_at": "2999-01-01T00:00:00Z"})
    assert refused.status_code == 409
    with api.engine.connect() as conn:
        rows = conn.execute(sa.text(
            "SELECT actor, scope, action, target, request_id, status FROM api_audit ORDER BY id"
        )).all()
        with pytest.raises(sa.exc.DBAPIError):
            conn.execute(sa.text("UPDATE api_audit SET actor = 'x'"))
    assert [tuple(r) for r in rows] == [
        ("alice", "approver", "withdrawal.approval", f"withdrawal_id={big['id']}",
         "req-approve-1", 201),
        ("carol", "admin", "withdrawal.cancel", f"withdrawal_id={big['id']}",
         rows[1].request_id, 200),
        ("carol", "admin", "ledger.period_close", "", rows[2].request_id, 409),
    ]


def test_a_principal_cannot_approve_its_own_request(api: Api) -> None:
    # acme also holds an approver key: the actor is the same, the service refuses.
    from api.auth import create_key

    api.keys["acme-approver"] = create_key(api.engine, "acme", "approver").key
    user = api.funded_user("acme", 2_000_000_000)
    big = api.withdraw(user, "1500000000")
    r = api.call("POST", f"/v1/withdrawals/{big['id']}/approvals", "acme-approver", idem="x",
                 json={"decision": "approve"})
    assert r.status_code == 409 and r.json()["code"] == "approval_refused"


def test_revoked_and_forged_keys_are_refused(api: Api) -> None:
    prefix = api.keys["sam"].split("_")[1]
    forged = api.keys["sam"][:-4] + "AAAA"
    r = api.http.get("/metrics", headers={"Authorization": f"Bearer {forged}"})
    assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
    assert api.http.get("/metrics", headers={"Authorization": "Basic abc"}).status_code == 401
    with api.engine.begin() as conn:
        conn.execute(sa.text("UPDATE api_keys SET revoked_at = now() WHERE prefix = :p"),
                     {"p": prefix})
    assert api.call("GET", "/metrics", "sam").status_code == 401
