"""``custody reconcile <check>`` and ``custody cases`` as a user runs them (a subprocess on a
real database): a clean book finds nothing (exit 0); a stored balance changed by a superuser is
one case, opened then updated (exit 1); the case is listed, shown and resolved once."""

from __future__ import annotations

import json
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from tests.api.test_treasury_cli import api_config, custody  # noqa: F401  (fixture)
from tests.withdrawals.conftest import fund, open_book


def test_checks_open_update_and_the_case_is_resolved(
        engine: Engine, owner: Engine, database_url: str, api_config: Path) -> None:  # noqa: F811
    open_book(engine)
    fund(engine, ["u1"], 150_000_000)
    for check in ("ledger", "histories", "aging"):
        clean = custody(database_url, api_config, "reconcile", check)
        assert clean.returncode == 0, clean.stderr
        assert "no discrepancy" in clean.stdout
    with owner.begin() as conn:
        conn.execute(sa.text(
            "UPDATE account_balances SET balance = balance - 7 WHERE account_id = "
            "(SELECT id FROM accounts WHERE code = 'user:u1:wallet')"))
    first = custody(database_url, api_config, "reconcile", "ledger", "--json")
    assert first.returncode == 1, first.stderr
    report = json.loads(first.stdout)
    (finding,) = report["findings"]
    assert (finding["type"], finding["case"], report["opened"]) == (
        "balance_drift", "opened", [finding["case_id"]])
    case_id = finding["case_id"]
    table = custody(database_url, api_config, "reconcile", "ledger")
    assert table.returncode == 1 and "updated" in table.stdout and case_id in table.stdout
    listed = json.loads(custody(database_url, api_config, "cases", "list", "--json").stdout)
    (case,) = listed["items"]
    assert (case["id"], case["seen_count"], case["status"]) == (case_id, 2, "open")
    shown = custody(database_url, api_config, "cases", "show", case_id)
    assert shown.returncode == 0 and case["subject"] in shown.stdout
    missing = custody(database_url, api_config, "cases", "resolve", case_id, "--by", "ann")
    assert missing.returncode == 2 and "error [case_resolution_invalid]" in missing.stderr
    done = custody(database_url, api_config, "cases", "resolve", case_id, "--by", "ann",
                   "--resolution", "rebuilt the balances")
    assert done.returncode == 0 and f"case {case_id} resolved by ann" in done.stdout
    again = custody(database_url, api_config, "cases", "resolve", case_id, "--by", "ann",
                    "--resolution", "again")
    assert again.returncode == 2 and "error [case_already_resolved]" in again.stderr
    assert json.loads(custody(database_url, api_config, "cases", "list", "--json").stdout) == {
        "items": [], "has_more": False, "next_cursor": None}  # the API's CaseItems page
    resolved = custody(database_url, api_config, "cases", "list", "--status", "resolved",
                       "--type", "balance_drift", "--json")
    assert [c["id"] for c in json.loads(resolved.stdout)["items"]] == [case_id]
    # Paged as the API pages it: a page of one says whether more follow, and its cursor.
    every = json.loads(custody(database_url, api_config, "cases", "list", "--status", "all",
                               "--json").stdout)["items"]
    first_page = json.loads(custody(database_url, api_config, "cases", "list", "--status", "all",
                                    "--limit", "1", "--json").stdout)
    assert first_page["items"] == every[:1]
    assert first_page["has_more"] is (len(every) > 1)
    assert first_page["next_cursor"] == (every[0]["id"] if len(every) > 1 else None)
