"""``custody addresses assign`` and ``list``: the same addresses as the API's deposit-address
routes, errors one line with exit 2 (subprocesses of the entry point at COLUMNS=80, piped)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from devtools.config import dev_config, to_toml
from tests.api.conftest import Api
from tests.withdrawals.conftest import TEST_HOT_KEY_ENV

ENTRY_POINT = str(Path(sys.executable).parent / "custody")


@pytest.fixture
def api_config(tmp_path: Path) -> Path:
    """The API tests' configuration as a file (chain devnet, an xpub address source)."""
    path = tmp_path / "custody.toml"
    path.write_text(to_toml(dev_config(hot_key_env=TEST_HOT_KEY_ENV, xpub=True)))
    return path


def custody(database_url: str, config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``custody ARGS`` on this database and configuration, output piped, 80 columns."""
    env = {**os.environ, "CUSTODY_DATABASE_URL": database_url, "CUSTODY_CONFIG": str(config),
           "COLUMNS": "80"}
    return subprocess.run([ENTRY_POINT, *args], env=env, text=True, capture_output=True,
                          timeout=120)


def assigned(engine: Engine) -> int:
    with engine.connect() as conn:
        return int(conn.execute(sa.text("SELECT count(*) FROM deposit_addresses")).scalar_one())


def test_assign_then_list_match_the_api(api: Api, database_url: str, api_config: Path) -> None:
    user = api.new_user()
    made = custody(database_url, api_config, "addresses", "assign", user, "--chain", "devnet",
                   "--json")
    assert made.returncode == 0, made.stderr
    address = json.loads(made.stdout)
    # The API hands back the same address (200: it exists), and lists the same document.
    again = api.call("POST", f"/v1/users/{user}/deposit-addresses", "acme",
                     idem="a1", json={"chain": "devnet"})
    assert again.status_code == 200, again.text
    assert again.json() == address
    assert address["address"].startswith("0x") and len(address["address"]) == 42
    listed = custody(database_url, api_config, "addresses", "list", user, "--json")
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout) == api.call(
        "GET", f"/v1/users/{user}/deposit-addresses", "acme").json()
    # Lines: the whole address, never shortened at 80 columns.
    plain = custody(database_url, api_config, "addresses", "list", user)
    assert plain.stdout.split() == ["devnet", address["family"], address["address"]]
    second = custody(database_url, api_config, "addresses", "assign", user, "--chain", "devnet")
    assert second.stdout.startswith(f"existing: {address['address']} ")


def test_a_user_without_addresses_says_so(api: Api, database_url: str,
                                          api_config: Path) -> None:
    user = api.new_user()
    listed = custody(database_url, api_config, "addresses", "list", user, "--json")
    assert json.loads(listed.stdout) == {"user_id": user, "addresses": []}


@pytest.mark.parametrize(("args", "code"), [
    (["assign", "no-such-user", "--chain", "devnet"], "user_not_found"),
    (["list", "no-such-user"], "user_not_found"),
    (["assign", "USER", "--chain", "nochain"], "chain_unknown"),
    (["assign", "USER"], "usage_invalid"),
])
def test_errors_are_one_line_and_assign_nothing(api: Api, engine: Engine, database_url: str,
                                                api_config: Path, args: list[str],
                                                code: str) -> None:
    user = api.new_user()
    args = [user if a == "USER" else a for a in args]
    result = custody(database_url, api_config, "addresses", *args)
    assert result.returncode == 2, result.stderr
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"error [{code}]: "), line
    assert assigned(engine) == 0
