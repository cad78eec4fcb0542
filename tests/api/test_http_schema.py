"""schemathesis against the app's OpenAPI document: ``schemathesis run --checks all``, every
phase (examples, coverage, fuzzing, stateful), against a real uvicorn on a real database with a
real node (anvil), once per kind of caller. Every check must pass: no 5xx, every status,
header and body documented, valid requests accepted and invalid ones refused, a missing
required header refused, undeclared methods answered 405 with a true ``Allow``, no operation
that ignores authentication."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine

from api.app import create_app
from api.ratelimit import RateLimit, RateLimits
from config.sweeps import parse_sweeps_config
from devtools.anvil import DEV_ACCOUNTS
from devtools.config import DEV_CHAIN, dev_config, dev_configs
from devtools.e2e import start_devchain
from tests.api.conftest import Api, serve_app
from tests.withdrawals.conftest import TEST_HOT_KEY_ENV, open_book

ROOMY = RateLimits({s: RateLimit(100_000, 60) for s in ("client", "support", "admin",
                                                        "approver")})
#: Generated examples per operation and phase.
EXAMPLES = 10
#: The callers the run is made as: a client, an admin, support and an approver.
CALLERS = ("acme", "carol", "sam", "alice")
HOOKS = "tests.api.schemathesis_hooks"
#: A watch-only cold address of the chain (anvil's account 4).
COLD = DEV_ACCOUNTS[4]


@pytest.fixture
def live(engine: Engine) -> Iterator[Api]:
    """The app on a chain with a node (anvil with the test token, blocks mined so that the
    finality rules have a final block) and sweeps configured, served by uvicorn, with a funded
    user and a withdrawal in the book."""
    devchain = start_devchain()
    try:
        devchain.node.mine(8)
        open_book(engine)
        doc = dev_config(hot_key_env=TEST_HOT_KEY_ENV, xpub=True, rpc_url=devchain.node.url,
                         token=devchain.token.address, cold_addresses=(COLD,))
        doc["sweeps"] = {"assets": [{"chain": DEV_CHAIN, "asset": "ETH", "threshold": "0.01"},
                                    {"chain": DEV_CHAIN, "asset": "USDC", "threshold": "1"}]}
        chains, wcfg = dev_configs(doc)
        scfg = parse_sweeps_config(doc, chains, wcfg)
        app = create_app(engine, chains, wcfg, rate_limits=ROOMY, sweeps_config=scfg)
        with serve_app(engine, app) as api:
            api.withdraw(api.funded_user())
            yield api
    finally:
        devchain.stop()


def run_schemathesis(url: str, key: str, workdir: Path) -> subprocess.CompletedProcess[str]:
    """``schemathesis run`` with every check and phase, as ``key``'s holder. The key is the
    document's ``ApiKey`` bearer scheme (a configuration file), so that schemathesis knows
    which header authenticates and can also send requests without it."""
    config = workdir / "schemathesis.toml"
    # Stateful links come from location headers only: the dependency analysis links nullable
    # ids too (a funding's transaction_id is null until booked) and then requests the path
    # /v1/admin/ledger/transactions/None, a request the document itself calls invalid.
    config.write_text(f'[auth.openapi.ApiKey]\nbearer = "{key}"\n\n'
                      '[phases.stateful.inference]\nalgorithms = ["location-headers"]\n')
    env = {**os.environ, "SCHEMATHESIS_HOOKS": HOOKS, "NO_COLOR": "1"}
    return subprocess.run(
        [sys.executable, "-m", "schemathesis.cli", "--config-file", str(config), "run",
         f"{url}/openapi.json",
         "--checks", "all", "--phases", "examples,coverage,fuzzing,stateful",
         "-n", str(EXAMPLES),
         "--generation-deterministic", "--continue-on-failure", "--no-color",
         "--request-timeout", "30"],
        capture_output=True, text=True, env=env, timeout=900, check=False)


@pytest.mark.slow
@pytest.mark.parametrize("who", CALLERS)
def test_schemathesis_all_checks_pass(live: Api, who: str, tmp_path: Path) -> None:
    result = run_schemathesis(str(live.http.base_url).rstrip("/"), live.keys[who], tmp_path)
    output = result.stdout + result.stderr
    summary = output[output.rfind("SUMMARY"):] if "SUMMARY" in output else output[-3000:]
    assert result.returncode == 0, output[-20000:]
    # The run tested every operation of the document and generated requests for them.
    tested = re.search(r"Tested: (\d+)", summary)
    selected = re.search(r"Selected: (\d+)/(\d+)", summary)
    assert tested and selected, summary
    assert tested.group(1) == selected.group(1) == selected.group(2), summary
    generated = re.search(r"(\d+) generated", summary)
    assert generated and int(generated.group(1)) >= 1000, summary
