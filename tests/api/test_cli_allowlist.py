"""``custody allowlist list|add|remove``: the same entries as ``/v1/allowlist``, the activation
delay of the configuration, errors one line with exit 2 (subprocesses of the entry point)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from devtools.config import dev_config, to_toml
from tests.api.conftest import DEST, Api
from tests.api.test_cli_addresses import custody
from tests.withdrawals.conftest import TEST_HOT_KEY_ENV


@pytest.fixture
def allowlist_config(tmp_path: Path) -> Path:
    """The API tests' configuration with a one-hour activation delay, as a file."""
    path = tmp_path / "custody.toml"
    doc = dev_config(hot_key_env=TEST_HOT_KEY_ENV, xpub=True,
                     withdrawal_options={"allowlist": {"clients": ["acme"],
                                                       "activation_delay_s": 3600}})
    path.write_text(to_toml(doc))
    return path


def test_add_list_remove_match_the_api(api: Api, database_url: str,
                                       allowlist_config: Path) -> None:
    before = datetime.now(UTC)
    made = custody(database_url, allowlist_config, "allowlist", "add", "acme", "devnet", DEST,
                   "--label", "cold store", "--key", "k1", "--json")
    assert made.returncode == 0, made.stderr
    entry = json.loads(made.stdout)
    assert entry["state"] == "pending" and entry["address"] == DEST.lower()
    assert entry["added_by"].startswith("cli:") and entry["delay_s"] == 3600
    active_at = datetime.fromisoformat(entry["active_at"])
    assert before + timedelta(hours=1) <= active_at <= datetime.now(UTC) + timedelta(hours=1)
    # The same key again adds nothing.
    again = custody(database_url, allowlist_config, "allowlist", "add", "acme", "devnet", DEST,
                    "--label", "cold store", "--key", "k1")
    assert again.returncode == 0 and "was already added" in again.stdout
    # The API lists the same entry.
    listed = api.call("GET", "/v1/allowlist", "acme").json()["items"]
    assert listed == [entry]
    table = custody(database_url, allowlist_config, "allowlist", "list", "--client", "acme")
    assert table.returncode == 0 and DEST.lower() in table.stdout and "pending" in table.stdout

    gone = custody(database_url, allowlist_config, "allowlist", "remove", str(entry["id"]),
                   "--json")
    assert gone.returncode == 0, gone.stderr
    assert json.loads(gone.stdout)["state"] == "removed"
    assert api.call("GET", f"/v1/allowlist/{entry['id']}", "acme").json()["state"] == "removed"
    listed = custody(database_url, allowlist_config, "allowlist", "list", "--json")
    assert json.loads(listed.stdout)["items"] == []


@pytest.mark.parametrize(("args", "code"), [
    (("add", "nobody", "devnet", DEST, "--label", "x", "--key", "k"), "client_not_found"),
    (("add", "acme", "nochain", DEST, "--label", "x", "--key", "k"), "configuration_invalid"),
    (("add", "acme", "devnet", DEST.lower().replace("0x3c", "0x3C"), "--label", "x", "--key",
      "k"), "address_invalid"),
    (("add", "acme", "devnet", DEST, "--label", "x", "--key", "k", "--user", "nouser"),
     "user_not_found"),
    (("remove", "999"), "allowlist_entry_not_found"),
])
def test_errors_are_one_line(api: Api, database_url: str, allowlist_config: Path,
                             args: tuple[str, ...], code: str) -> None:
    done = custody(database_url, allowlist_config, "allowlist", *args)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert done.stderr.startswith(f"error [{code}]: ") and done.stderr.count("\n") == 1
