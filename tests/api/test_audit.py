"""The audit trail (issue 19): every staff action through the API leaves exactly one row with
who, what, target, request id and outcome; a refusal's row says why; staff reads of a user's
data are recorded and a client's own requests are not; the table is append-only for the
application role and its owner; ``GET /v1/admin/audit`` pages through every row once."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from api.audit import record
from api.repository.audit import AuditRow
from tests.api.conftest import Api

COLUMNS = ("actor, client_id, key_prefix, scope, channel, action, target, status, "
           "error_code, error_detail, details")


def rows_of(api: Api, request_id: str) -> list[dict[str, Any]]:
    """The audit rows of one request (by its X-Request-ID)."""
    with api.engine.connect() as conn:
        found = conn.execute(sa.text(
            f"SELECT {COLUMNS} FROM api_audit WHERE request_id = :r ORDER BY id"),
            {"r": request_id}).mappings().all()
    return [dict(r) for r in found]


def only_row(api: Api, request_id: str) -> dict[str, Any]:
    found = rows_of(api, request_id)
    assert len(found) == 1, found
    return found[0]


def rid() -> str:
    return f"req-{uuid.uuid4().hex[:20]}"


def call(api: Api, method: str, path: str, who: str | None, *, request_id: str,
         **kwargs: Any) -> Any:
    return api.call(method, path, who, headers={"X-Request-ID": request_id}, **kwargs)


def key_of(api: Api, who: str) -> tuple[int, str]:
    """(client id, key prefix) of ``who``'s key."""
    prefix = api.keys[who].split("_")[1]
    with api.engine.connect() as conn:
        (client_id,) = conn.execute(sa.text(
            "SELECT client_id FROM api_keys WHERE prefix = :p"), {"p": prefix}).one()
    return int(client_id), prefix


class TestActions:
    def test_an_admin_action_is_one_row_with_who_what_target_and_request(self, api: Api
                                                                         ) -> None:
        from api.auth import create_key

        victim = create_key(api.engine, "newco", "client")
        request_id = rid()
        r = call(api, "POST", f"/v1/admin/api-keys/{victim.id}/revoke", "carol",
                 request_id=request_id)
        assert r.status_code == 200, r.text
        client_id, prefix = key_of(api, "carol")
        assert only_row(api, request_id) == {
            "actor": "carol", "client_id": client_id, "key_prefix": prefix, "scope": "admin",
            "channel": "api", "action": "api_key.revoke", "target": f"key_id={victim.id}",
            "status": 200, "error_code": None, "error_detail": None,
            "details": {"prefix": victim.prefix, "revoked": True}}

    def test_a_money_action_and_its_replay_are_one_row_each(self, api: Api) -> None:
        user = api.funded_user("acme", 2_000_000_000)
        big = api.withdraw(user, "1500000000")
        first, again = rid(), rid()
        for request_id in (first, again):
            r = call(api, "POST", f"/v1/withdrawals/{big['id']}/approvals", "alice",
                     request_id=request_id, idem="approve-1", json={"decision": "approve"})
            assert r.status_code == 201, r.text
        one, replay = only_row(api, first), only_row(api, again)
        assert (one["actor"], one["scope"], one["action"], one["target"], one["status"]) == (
            "alice", "approver", "withdrawal.approval", f"withdrawal_id={big['id']}", 201)
        assert one["details"] == {"idempotency_key": "approve-1"}
        assert replay["details"] == {"idempotency_key": "approve-1", "replayed": True}
        assert replay["status"] == 201 and replay["error_code"] is None

    def test_a_clients_own_requests_leave_no_row(self, api: Api) -> None:
        request_id = rid()
        user = api.funded_user("acme", 2_000_000_000)
        for method, path, body in (
                ("GET", f"/v1/users/{user}/balances", None),
                ("GET", f"/v1/users/{user}/statement?asset=USDC", None),
                ("POST", f"/v1/users/{user}/deposit-addresses", {"chain": "devnet"})):
            r = call(api, method, path, "acme", request_id=request_id, json=body)
            assert r.status_code < 300, r.text
        assert rows_of(api, request_id) == []


class TestRefusals:
    def test_a_scope_refusal_says_why(self, api: Api) -> None:
        withdrawal = api.withdraw(api.funded_user("acme"))
        request_id = rid()
        r = call(api, "POST", f"/v1/withdrawals/{withdrawal['id']}/cancel", "sam",
                 request_id=request_id, idem="c1", json={})
        assert r.status_code == 403
        row = only_row(api, request_id)
        assert (row["actor"], row["scope"], row["action"], row["target"], row["status"],
                row["error_code"]) == ("sam", "support", "withdrawal.cancel",
                                       f"withdrawal_id={withdrawal['id']}", 403, "forbidden")
        assert row["error_detail"] == r.json()["detail"]

    def test_a_clients_scope_refusal_is_recorded_too(self, api: Api) -> None:
        request_id = rid()
        r = call(api, "POST", "/v1/admin/periods", "acme", request_id=request_id, idem="p",
                 json={"ends_at": "2020-01-01T00:00:00Z"})
        assert r.status_code == 403
        row = only_row(api, request_id)
        assert (row["actor"], row["scope"], row["action"], row["error_code"]) == (
            "acme", "client", "ledger.period_close", "forbidden")

    @pytest.mark.parametrize(("who", "path", "idem", "body", "status", "code"), [
        # Validation by the schema (FastAPI), before the route's code runs.
        ("carol", "/v1/admin/periods", "v1", {"ends_at": 5}, 422, "request_invalid"),
        # Refused by the ledger: the period's end is in the future.
        ("carol", "/v1/admin/periods", "v2", {"ends_at": "2999-01-01T00:00:00Z"}, 409, None),
    ])
    def test_each_refusal_is_one_row_with_its_code_and_detail(
            self, api: Api, who: str, path: str, idem: str | None, body: Any, status: int,
            code: str | None) -> None:
        request_id = rid()
        r = call(api, "POST", path, who, request_id=request_id, idem=idem, json=body)
        assert r.status_code == status, r.text
        problem = r.json()
        row = only_row(api, request_id)
        assert (row["action"], row["status"], row["error_code"], row["error_detail"]) == (
            "ledger.period_close", status, problem["code"], problem["detail"])
        assert code is None or problem["code"] == code

    def test_a_rejection_without_reason_and_a_reused_key_say_why(self, api: Api) -> None:
        user = api.funded_user("acme", 2_000_000_000)
        big = api.withdraw(user, "1500000000")
        no_reason, reused = rid(), rid()
        r = call(api, "POST", f"/v1/withdrawals/{big['id']}/approvals", "alice",
                 request_id=no_reason, idem="k", json={"decision": "reject"})
        assert r.status_code == 422
        row = only_row(api, no_reason)
        assert (row["action"], row["error_code"], row["error_detail"]) == (
            "withdrawal.approval", "request_invalid", "a rejection needs a reason")
        ok = call(api, "POST", f"/v1/withdrawals/{big['id']}/approvals", "alice",
                  request_id=rid(), idem="k2", json={"decision": "approve"})
        assert ok.status_code == 201
        r = call(api, "POST", f"/v1/withdrawals/{big['id']}/approvals", "alice",
                 request_id=reused, idem="k2", json={"decision": "reject", "reason": "x"})
        assert r.status_code == 422 and r.json()["code"] == "idempotency_key_reused"
        row = only_row(api, reused)
        assert row["error_code"] == "idempotency_key_reused"
        assert row["details"] == {"idempotency_key": "k2"}

    def test_a_domain_refusal_of_a_vote_says_why(self, api: Api) -> None:
        withdrawal = api.withdraw(api.funded_user("acme"))
        request_id = rid()
        r = call(api, "POST", f"/v1/admin/withdrawals/{withdrawal['id']}/write-off-votes",
                 "carol", request_id=request_id, idem="w1",
                 json={"decision": "sent", "reason": "provider confirmed"})
        assert r.status_code == 409
        row = only_row(api, request_id)
        assert (row["action"], row["status"], row["error_code"], row["error_detail"]) == (
            "withdrawal.write_off_vote", 409, r.json()["code"], r.json()["detail"])


class TestStaffReads:
    def test_support_reading_a_users_data_is_recorded(self, api: Api) -> None:
        user = api.funded_user("acme")
        # GET balances without a query string is answered by the fast path.
        for path, action in ((f"/v1/users/{user}/balances", "user.balances.read"),
                             (f"/v1/users/{user}/statement?asset=USDC", "user.statement.read"),
                             (f"/v1/users/{user}/deposits", "user.deposits.read")):
            request_id = rid()
            r = call(api, "GET", path, "sam", request_id=request_id)
            assert r.status_code == 200, r.text
            row = only_row(api, request_id)
            assert (row["actor"], row["scope"], row["action"], row["target"],
                    row["status"]) == ("sam", "support", action, f"user_id={user}", 200)

    def test_staff_reads_of_no_users_data_leave_no_row(self, api: Api) -> None:
        request_id = rid()
        for path in ("/v1/admin/cases", "/v1/admin/api-keys", "/v1/admin/audit"):
            r = call(api, "GET", path, "carol", request_id=request_id)
            assert r.status_code == 200, r.text
        assert rows_of(api, request_id) == []

    def test_a_refused_staff_read_is_recorded(self, api: Api) -> None:
        user = api.funded_user("acme")
        request_id = rid()
        r = call(api, "GET", f"/v1/users/{user}/balances", "alice", request_id=request_id)
        assert r.status_code == 403
        row = only_row(api, request_id)
        assert (row["actor"], row["action"], row["status"], row["error_code"]) == (
            "alice", "user.balances.read", 403, "forbidden")


class TestAppendOnly:
    def test_the_application_role_may_not_change_or_delete_a_row(self, api: Api) -> None:
        call(api, "POST", "/v1/admin/periods", "carol", request_id=rid(), idem="i", json={})
        for statement in ("UPDATE api_audit SET actor = 'x'", "DELETE FROM api_audit",
                          "TRUNCATE api_audit"):
            with api.engine.connect() as conn, pytest.raises(sa.exc.DBAPIError) as refused:
                conn.execute(sa.text(statement))
            assert getattr(refused.value.orig, "sqlstate", None) == "42501", statement

    def test_the_owner_may_not_either(self, api: Api, owner: Engine) -> None:
        call(api, "POST", "/v1/admin/periods", "carol", request_id=rid(), idem="i", json={})
        for statement in ("UPDATE api_audit SET actor = 'x'", "DELETE FROM api_audit",
                          "TRUNCATE api_audit"):
            with owner.connect() as conn, pytest.raises(sa.exc.DBAPIError,
                                                        match="api_audit is append-only"):
                conn.execute(sa.text(statement))
        with api.engine.connect() as conn:
            assert conn.execute(sa.text("SELECT count(*) FROM api_audit")).scalar_one() >= 1


def _seed(engine: Engine, n: int, actor: str = "seeded", status: int = 200) -> list[int]:
    ids = []
    for i in range(n):
        ids.append(record(engine, AuditRow(
            actor=actor, client_id=None, key_prefix=None, scope=None,
            action="seal.run" if i % 2 else "ledger.checkpoint", target="", request_id=f"s{i}",
            status=status, channel="cli",
            error_code="forbidden" if status >= 400 else None,
            error_detail="no" if status >= 400 else None)))
    return ids


class TestList:
    def test_pages_walk_every_row_once_newest_first(self, api: Api) -> None:
        seeded = _seed(api.engine, 11)
        seen: list[int] = []
        cursor: str | None = None
        pages = 0
        while True:
            params: dict[str, Any] = {"limit": 3, "actor": "seeded"}
            if cursor is not None:
                params["cursor"] = cursor
            r = api.call("GET", "/v1/admin/audit", "carol", params=params)
            assert r.status_code == 200, r.text
            body = r.json()
            seen += [int(e["id"]) for e in body["items"]]
            pages += 1
            if not body["has_more"]:
                assert body["next_cursor"] is None
                break
            cursor = body["next_cursor"]
        assert seen == sorted(seeded, reverse=True) and pages == 4

    def test_filters_and_the_entry_shape(self, api: Api) -> None:
        _seed(api.engine, 4)
        _seed(api.engine, 2, actor="refused-one", status=403)
        r = api.call("GET", "/v1/admin/audit", "carol",
                     params={"actor": "seeded", "action": "seal.run"})
        assert [e["action"] for e in r.json()["items"]] == ["seal.run", "seal.run"]
        r = api.call("GET", "/v1/admin/audit", "carol", params={"outcome": "refused",
                                                               "actor": "refused-one"})
        items = r.json()["items"]
        assert len(items) == 2
        assert items[0]["outcome"] == "refused" and items[0]["error"] == {
            "code": "forbidden", "detail": "no"}
        assert items[0]["channel"] == "cli" and items[0]["client"] is None
        future = (datetime.now(UTC) + timedelta(days=1)).isoformat()
        r = api.call("GET", "/v1/admin/audit", "carol", params={"since": future})
        assert r.status_code == 200 and r.json()["items"] == []
        past = (datetime.now(UTC) - timedelta(days=1)).isoformat()
        r = api.call("GET", "/v1/admin/audit", "carol",
                     params={"since": past, "actor": "seeded"})
        assert len(r.json()["items"]) == 4

    def test_an_api_entry_names_its_key(self, api: Api) -> None:
        request_id = rid()
        call(api, "POST", "/v1/admin/periods", "dave", request_id=request_id, idem="d", json={})
        r = api.call("GET", "/v1/admin/audit", "carol", params={"actor": "dave"})
        (entry,) = [e for e in r.json()["items"] if e["request_id"] == request_id]
        _, prefix = key_of(api, "dave")
        assert (entry["client"], entry["key_prefix"], entry["scope"], entry["channel"],
                entry["status"], entry["outcome"]) == ("dave", prefix, "admin", "api", 422,
                                                       "refused")
        assert entry["error"]["code"] == "request_invalid"

    @pytest.mark.parametrize("params", [{"since": "0999-01-01T00:00:00Z"},
                                        {"since": "yesterday"}, {"outcome": "maybe"},
                                        {"cursor": "x"}, {"limit": 0}, {"actor": "a\x00b"}])
    def test_bad_filters_are_refused(self, api: Api, params: dict[str, Any]) -> None:
        r = api.call("GET", "/v1/admin/audit", "carol", params=params)
        assert r.status_code == 422 and r.json()["code"] == "request_invalid"

    @pytest.mark.parametrize("who", ["sam", "alice", "acme"])
    def test_only_an_admin_reads_it(self, api: Api, who: str) -> None:
        r = api.call("GET", "/v1/admin/audit", who)
        assert r.status_code == 403 and r.json()["code"] == "forbidden"


def test_every_writing_route_has_an_action_name(api: Api) -> None:
    from fastapi.routing import APIRoute

    from api.audit import ACTIONS
    from api.web.routes import ROUTERS

    paths = api.http.get("/openapi.json").json()["paths"]
    writes = {f"{method.upper()} {path}" for path, methods in paths.items()
              for method in methods if method != "get"}
    writes |= {f"POST {route.path}" for router in ROUTERS for route in router.routes
               if isinstance(route, APIRoute) and "POST" in (route.methods or ())}
    assert writes and writes <= set(ACTIONS), sorted(writes - set(ACTIONS))
