"""The command line's audit rows and ``custody audit`` (issue 19), run as a user runs them (a
subprocess on a real database): a mutating command leaves one row (actor ``cli:<OS user>``, a
request id per invocation, no key), a refused one says why, and ``custody audit`` filters and
pages the trail, in the API's JSON shape with ``--json``."""

from __future__ import annotations

import getpass
import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa

from tests.api.conftest import Api
from tests.api.test_cli import custody

ACTOR = f"cli:{getpass.getuser()}"


def cli_rows(api: Api) -> list[dict[str, Any]]:
    with api.engine.connect() as conn:
        return [dict(r) for r in conn.execute(sa.text(
            "SELECT actor, client_id, key_prefix, scope, channel, action, target, request_id, "
            "status, error_code, error_detail, details FROM api_audit WHERE channel = 'cli' "
            "ORDER BY id")).mappings()]


def audit_json(database_url: str, *args: str) -> dict[str, Any]:
    done = custody(database_url, "audit", "--json", *args)
    assert done.returncode == 0, done.stderr
    body: dict[str, Any] = json.loads(done.stdout)
    return body


def test_key_commands_leave_one_row_each(api: Api, database_url: str) -> None:
    created = custody(database_url, "keys", "create", "helpdesk", "--scope", "support")
    assert created.returncode == 0, created.stderr
    key = re.search(r"cust_[0-9a-f]{12}_[A-Za-z0-9_-]{43}", created.stdout)
    assert key is not None, created.stdout
    revoked = custody(database_url, "keys", "revoke", key.group(0))
    assert revoked.returncode == 0, revoked.stderr
    create_row, revoke_row = cli_rows(api)
    prefix = key.group(0).split("_")[1]
    assert {k: create_row[k] for k in ("actor", "client_id", "key_prefix", "scope", "channel",
                                       "action", "target", "status", "error_code")} == {
        "actor": ACTOR, "client_id": None, "key_prefix": None, "scope": None,
        "channel": "cli", "action": "api_key.create", "target": "client=helpdesk",
        "status": 200, "error_code": None}
    assert create_row["details"] == {"scope": "support"}
    # The key was given whole: the row names its prefix, never its secret.
    assert (revoke_row["action"], revoke_row["target"], revoke_row["status"]) == (
        "api_key.revoke", f"key={prefix}", 200)
    assert key.group(0).split("_", 2)[2] not in json.dumps(revoke_row, default=str)
    # One request id per invocation.
    ids = [create_row["request_id"], revoke_row["request_id"]]
    assert all(re.fullmatch(r"[0-9a-f]{32}", i) for i in ids) and ids[0] != ids[1]


def test_a_refused_command_says_why(api: Api, database_url: str) -> None:
    done = custody(database_url, "keys", "revoke", "0123456789ab")
    assert done.returncode == 2
    (row,) = cli_rows(api)
    code, message = re.fullmatch(r"error \[(\w+)\]: (.*)\n", done.stderr).groups()  # type: ignore[union-attr]
    assert (row["action"], row["target"], row["status"], row["error_code"],
            row["error_detail"]) == ("api_key.revoke", "key=0123456789ab", 404, code, message)
    assert code == "api_key_not_found"


def test_a_withdrawal_command_names_its_target(api: Api, database_url: str) -> None:
    done = custody(database_url, "withdrawal", "cancel", "999999", "--as", "carol")
    assert done.returncode == 2
    (row,) = cli_rows(api)
    assert (row["action"], row["target"], row["details"], row["status"]) == (
        "withdrawal.cancel", "withdrawal_id=999999", {"as": "carol"}, 404)


def test_custody_audit_json_is_the_apis_shape(api: Api, database_url: str) -> None:
    refused = api.call("POST", "/v1/admin/periods", "carol", idem="p",
                       json={"ends_at": "2999-01-01T00:00:00Z"})
    assert refused.status_code == 409
    assert custody(database_url, "keys", "create", "newco", "--scope", "client").returncode == 0
    from_cli = audit_json(database_url)
    from_api = api.call("GET", "/v1/admin/audit", "carol").json()
    assert from_cli == from_api
    assert [e["channel"] for e in from_cli["items"]] == ["cli", "api"]
    assert from_cli["items"][1]["error"] == {"code": refused.json()["code"],
                                             "detail": refused.json()["detail"]}


def test_custody_audit_filters_and_pages(api: Api, database_url: str) -> None:
    for name in ("a1", "a2", "a3"):
        assert custody(database_url, "keys", "create", name, "--scope", "client").returncode == 0
    assert custody(database_url, "keys", "revoke", "0123456789ab").returncode == 2
    assert api.call("POST", "/v1/admin/periods", "carol", idem="q",
                    json={"ends_at": "2999-01-01T00:00:00Z"}).status_code == 409
    mine = audit_json(database_url, "--actor", ACTOR)["items"]
    assert [e["action"] for e in mine] == ["api_key.revoke"] + ["api_key.create"] * 3
    created = audit_json(database_url, "--action", "api_key.create")["items"]
    assert [e["target"] for e in created] == ["client=a3", "client=a2", "client=a1"]
    refused = audit_json(database_url, "--outcome", "refused", "--actor", ACTOR)["items"]
    assert [(e["action"], e["error"]["code"]) for e in refused] == [
        ("api_key.revoke", "api_key_not_found")]
    future = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
    assert audit_json(database_url, "--since", future)["items"] == []
    # Pages of two walk every row exactly once, newest first.
    walked: list[int] = []
    cursor: list[str] = []
    while True:
        body = audit_json(database_url, "--limit", "2", *cursor)
        walked += [e["id"] for e in body["items"]]
        if not body["has_more"]:
            break
        cursor = ["--cursor", body["next_cursor"]]
    everything = [e["id"] for e in audit_json(database_url, "--limit", "1000")["items"]]
    assert walked == everything and len(everything) == len(set(everything)) == 5


def test_custody_audit_prints_every_cell_whole(api: Api, database_url: str) -> None:
    assert custody(database_url, "keys", "revoke", "0123456789ab").returncode == 2
    (row,) = cli_rows(api)
    table = custody(database_url, "audit", "--actor", ACTOR)
    assert table.returncode == 0, table.stderr
    for cell in (row["request_id"], "api_key.revoke", "key=0123456789ab",
                 f"api_key_not_found: {row['error_detail']}", ACTOR):
        assert cell in table.stdout, cell


def test_custody_audit_refuses_a_bad_time(database_url: str) -> None:
    done = custody(database_url, "audit", "--since", "yesterday")
    assert done.returncode == 2
    assert done.stderr.startswith("error [request_invalid]: ") and done.stderr.count("\n") == 1
