"""``custody demo`` as a user runs it (a subprocess): the story completes, the API stays up with
a working demo key, Ctrl-C stops it with exit code 0, and a second run works like the first."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from config.logging import ENGINE_LOGGERS
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
        assert re.search(r"^support key:  (\S+) ", out, re.M).group(1) == support  # type: ignore[union-attr]
        _cli_from_another_shell(out, bob, cwd)
    finally:
        proc.send_signal(signal.SIGINT)
        rest, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    # No library's lines (web3, urllib3, asyncio, APScheduler, Alembic): the engine's own only.
    loggers = {json.loads(line)["logger"] for line in err.splitlines() if line.strip()}
    assert all(name.split(".")[0] in ENGINE_LOGGERS for name in loggers), err
    return out + rest


def _cli_from_another_shell(out: str, bob: str, demo_cwd: Path) -> None:
    """The printed export lines alone (no CUSTODY_* of ours, another directory) let the CLI
    reach the demo's database and configuration."""
    exports = dict(re.findall(r"^export (CUSTODY_\w+)=(.+)$", out, re.M))
    assert {"CUSTODY_DATABASE_URL", "CUSTODY_CONFIG"} <= exports.keys(), out
    script = "\n".join(f"export {k}={v}" for k, v in exports.items())
    custody = Path(sys.executable).parent / "custody"
    base = {k: v for k, v in os.environ.items() if not k.startswith("CUSTODY_")}
    elsewhere = demo_cwd / "elsewhere"
    elsewhere.mkdir(exist_ok=True)
    shell = subprocess.run(
        ["bash", "-c", f"{script}\n{custody} addresses list {bob} --json && {custody} verify"],
        cwd=elsewhere, env={**base, "COLUMNS": "80"}, text=True, capture_output=True,
        timeout=60)
    assert shell.returncode == 0, shell.stderr
    listed = json.loads(shell.stdout.splitlines()[0])
    assert listed["user_id"] == bob and listed["addresses"][0]["chain"] == "devnet"
    assert "ok:" in shell.stdout


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
