"""``keys create`` run as a user runs it (a subprocess); the key it prints works over HTTP."""

from __future__ import annotations

import os
import subprocess
import sys

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
