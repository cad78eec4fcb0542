"""``custody reconcile provider FILE`` as an operator runs it: a statement with each kind of
outcome (exit 1, three cases opened, the clearing remainder shown), the same file again (nothing
stored, the cases updated), ``--json``, and a malformed file (one line on stderr, exit 2,
nothing changed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.api.test_cli import custody
from tests.reconcile.conftest import all_cases
from tests.reconcile.test_provider_statements import (  # noqa: F401  (fixtures)
    AT,
    HEADER,
    Credited,
    _statement,
    _stored,
    credited,
    node,
)

pytestmark = [pytest.mark.anvil, pytest.mark.slow]


def test_import_match_again_and_refuse(credited: Credited, tmp_path: Path,  # noqa: F811
                                       database_url: str) -> None:
    c = credited
    path = _statement(tmp_path, c)
    first = custody(database_url, "reconcile", "provider", str(path), "--by", "ops")
    assert first.returncode == 1, first.stderr
    out = first.stdout
    assert ("1 matched, 1 amount_mismatch, 1 missing_in_ledger, 1 missing_at_provider"
            in out), out
    assert out.count(" opened") == 3 and "-4769999" in out
    assert "3 new and 0 known records" in out

    again = custody(database_url, "reconcile", "provider", str(path), "--json")
    assert again.returncode == 1, again.stderr
    doc = json.loads(again.stdout)
    assert (doc["new"], doc["records_added"]) == (False, 0)
    assert doc["outcomes"] == {"matched": 1, "amount_mismatch": 1, "missing_in_ledger": 1,
                               "missing_at_provider": 1}
    assert sorted(f["case"] for f in doc["findings"]) == ["updated"] * 3
    assert doc["remainders"] == [{"asset": "USDC", "clearing_minor": "0",
                                  "unbooked_minor": "-4769999", "remainder_minor": "-4769999"}]
    assert len(all_cases(c.rig.engine)) == 3

    bad = tmp_path / "bad.csv"
    bad.write_text(HEADER + f"acme,{c.refs['matched']},in,USDC,4.0,{AT},dev,\n")
    refused = custody(database_url, "reconcile", "provider", str(bad))
    assert refused.returncode == 2 and refused.stdout == ""
    assert refused.stderr.splitlines() == [
        "error [provider_statement_invalid]: bad.csv: line 2: amount_minor '4.0' is not a "
        "whole number of minor units"]
    assert _stored(c.rig.engine) == (1, 3) and len(all_cases(c.rig.engine)) == 3
