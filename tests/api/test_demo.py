"""``custody demo`` as a user runs it (a subprocess): the story completes, the API stays up with
a working demo key, Ctrl-C stops it with exit code 0, and a second run works like the first."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from devtools.anvil import free_port

RUN = "from api.cli import app; app(prog_name='custody')"  # the `custody` entry point


def run_demo_once(server_url: str, cwd: Path) -> str:
    env = {**os.environ, "CUSTODY_DATABASE_URL": server_url, "COLUMNS": "160",
           "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proc = subprocess.Popen([sys.executable, "-c", RUN, "demo", "--port", str(free_port())],
                            cwd=cwd, env=env, text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    lines: list[str] = []
    try:
        deadline = time.monotonic() + 150
        assert proc.stdout is not None
        while not any(line.startswith("Press Ctrl-C") for line in lines):
            assert time.monotonic() < deadline, "".join(lines)
            line = proc.stdout.readline()
            assert line or proc.poll() is None, "".join(lines) + proc.stderr.read()  # type: ignore[union-attr]
            lines.append(line)
        out = "".join(lines)
        url = re.search(r"^API:\s+(\S+)", out, re.M).group(1)  # type: ignore[union-attr]
        key = re.search(r"^demo API key: (\S+)", out, re.M).group(1)  # type: ignore[union-attr]
        bob = re.search(r"user bob: id (\S+),", out).group(1)  # type: ignore[union-attr]
        r = httpx.get(f"{url}/v1/users/{bob}/balances",
                      headers={"Authorization": f"Bearer {key}"}, timeout=10)
        assert r.status_code == 200, r.text
        assert r.json()["balances"][0]["available"]["decimal"] == "119.600000"
        assert httpx.get(f"{url}/docs", timeout=10).status_code == 200
        support = re.search(r"sign in with the support key (\S+),", out).group(1)  # type: ignore[union-attr]
        with httpx.Client(base_url=url, timeout=10) as browser:
            form = browser.get("/console/login").text
            token = re.search(r'name="csrf" value="([^"]+)"', form).group(1)  # type: ignore[union-attr]
            signed_in = browser.post("/console/login", data={"key": support, "csrf": token})
            assert signed_in.status_code == 303, signed_in.text
            page = browser.get(f"/console/users/{bob}")
            assert page.status_code == 200 and "119.600000" in page.text
    finally:
        proc.send_signal(signal.SIGINT)
        rest, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    return out + rest


@pytest.mark.slow
@pytest.mark.anvil
def test_demo_runs_twice_and_stops_on_ctrl_c(server_url: str, tmp_path: Path) -> None:
    first = run_demo_once(server_url, tmp_path)
    for expected in ("reorg before finality", "settled: 30 sent, 0.40 fee, 1.60",
                     "block_reorged_out", "all signatures valid", "withdrawal.settled",
                     "/docs", "stopping"):
        assert expected in first, first
    assert "119.600000" in first and "1.500000000000000000" in first
    assert (tmp_path / "var/demo/custody.toml").read_text().count("[chains.devnet]") == 1
    second = run_demo_once(server_url, tmp_path)
    assert "settled: 30 sent" in second
