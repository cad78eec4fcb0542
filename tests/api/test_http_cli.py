"""``keys create`` run as a user runs it (a subprocess); the key it prints works over HTTP."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from tests.api.conftest import serve

RUN = "from api.cli_api import api_cli; api_cli(prog_name='custody')"


def custody(database_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CUSTODY_DATABASE_URL": database_url, "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-c", RUN, *args], env=env, text=True,
                          capture_output=True, timeout=120)


def test_keys_create_prints_the_key_once_and_stores_its_hash(database_url: str,
                                                           engine: Engine) -> None:
    made = custody(database_url, "keys", "create", "--scope", "support", "--client", "sam2")
    assert made.returncode == 0, made.stderr
    key = made.stdout.strip()
    assert key.startswith("cust_") and "shown once" in made.stderr
    with engine.connect() as conn:
        stored = conn.execute(sa.text("SELECT prefix, secret_sha256 FROM api_keys")).one()
    assert stored.prefix in key and key.split("_", 2)[2] not in stored.secret_sha256
    with serve(engine) as api:
        r = api.http.get("/metrics", headers={"Authorization": f"Bearer {key}"})
        assert r.status_code == 200
    bad = custody(database_url, "keys", "create", "--scope", "root")
    assert bad.returncode == 2 and "error [request_invalid]" in bad.stderr
    assert custody(database_url, "api", "--help").returncode == 0


def test_api_serves_from_several_worker_processes(database_url: str, engine: Engine,
                                                  tmp_path: Path) -> None:
    import httpx

    from devtools.anvil import free_port
    from devtools.config import dev_config, to_toml
    from tests.withdrawals.conftest import TEST_HOT_KEY_ENV

    assert "--workers" in custody(database_url, "api", "--help").stdout
    config = tmp_path / "custody.toml"
    config.write_text(to_toml(dev_config(hot_key_env=TEST_HOT_KEY_ENV, xpub=True)))
    port = free_port()
    env = {**os.environ, "CUSTODY_DATABASE_URL": database_url}
    server = subprocess.Popen(
        [sys.executable, "-c", RUN, "api", "--port", str(port), "--workers", "2",
         "--config", str(config)], env=env, stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while True:
            assert server.poll() is None, "custody api exited"
            assert time.monotonic() < deadline, "custody api did not answer"
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.2)
        workers = [p for p in Path("/proc").glob("[0-9]*/stat")
                   if _parent(p) == server.pid and "python" in _command(p)]
        assert len(workers) >= 2, workers
        # The database-backed behaviour is shared: a key works whichever process answers.
        made = custody(database_url, "keys", "create", "--scope", "support", "--client", "sam3")
        key = made.stdout.strip()
        for _ in range(6):
            r = httpx.get(f"http://127.0.0.1:{port}/metrics",
                          headers={"Authorization": f"Bearer {key}"}, timeout=10)
            assert r.status_code == 200
    finally:
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=30) is not None


def _parent(stat: Path) -> int | None:
    try:
        return int(stat.read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def _command(stat: Path) -> str:
    try:
        return (stat.parent / "cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return ""


def test_keys_list_and_revoke_from_the_cli(database_url: str, engine: Engine) -> None:
    import json

    made = custody(database_url, "keys", "create", "newco", "--scope", "support",
                   "--expires-in", "30d")
    assert made.returncode == 0, made.stderr
    key = made.stdout.strip()
    prefix = key.split("_")[1]
    assert f"key {prefix} (support) for client newco, expires " in made.stderr
    old = custody(database_url, "keys", "create", "--scope", "client", "--client", "acme2")
    assert old.returncode == 0, old.stderr  # the older spelling still works

    listed = custody(database_url, "keys", "list", "--client", "newco", "--json")
    assert listed.returncode == 0, listed.stderr
    items = json.loads(listed.stdout)["items"]
    assert [(k["prefix"], k["scope"], k["client"], k["state"]) for k in items] == [
        (prefix, "support", "newco", "active")]
    assert items[0]["expires_at"] is not None and key.split("_", 2)[2] not in listed.stdout
    table = custody(database_url, "keys", "list")
    assert table.returncode == 0 and prefix in table.stdout and "acme2" in table.stdout

    with serve(engine) as api:
        assert api.http.get("/metrics", headers={"Authorization": f"Bearer {key}"}
                            ).status_code == 200
        revoked = custody(database_url, "keys", "revoke", prefix)
        assert revoked.returncode == 0, revoked.stderr
        assert f"key {prefix} (support) of client newco revoked" in revoked.stdout
        # The running server refuses it at its next request.
        r = api.http.get("/metrics", headers={"Authorization": f"Bearer {key}"})
        assert r.status_code == 401 and "revoked" in r.json()["detail"]
    again = custody(database_url, "keys", "revoke", prefix)
    assert again.returncode == 0 and "was already revoked" in again.stdout
    listed = custody(database_url, "keys", "list", "--client", "newco", "--json")
    (item,) = json.loads(listed.stdout)["items"]
    assert item["state"] == "revoked" and item["revoked_by"].startswith("cli:")

    unknown = custody(database_url, "keys", "revoke", "abcdefabcdef")
    assert unknown.returncode == 2 and "error [api_key_not_found]" in unknown.stderr
    for bad in (["--expires-in", "30x"], ["--expires-at", "2001-01-01T00:00:00Z"],
                ["--expires-in", "1d", "--expires-at", "2030-01-01"]):
        refused = custody(database_url, "keys", "create", "newco", "--scope", "client", *bad)
        assert refused.returncode == 2 and "error [request_invalid]" in refused.stderr, bad
