"""``custody reconcile custody`` as an operator runs it on anvil: a settled chain (exit 0, no
discrepancy), then a transfer out of the hot wallet the engine did not make (exit 1, one case,
``--json``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.api.test_cli import custody
from tests.reconcile.test_custody_chain import _send_from_hot, node, rig  # noqa: F401
from tests.sweeps.conftest import CHAIN, ETH, SweepRig

pytestmark = [pytest.mark.anvil, pytest.mark.slow]


def test_a_clean_chain_then_an_unmade_transfer(rig: SweepRig, tmp_path: Path,  # noqa: F811
                                               database_url: str) -> None:
    config = str(rig.write_config(tmp_path / "custody.toml"))
    clean = custody(database_url, "reconcile", "custody", "--config", config)
    assert clean.returncode == 0, clean.stderr
    assert f"{CHAIN}: block " in clean.stdout and "no discrepancy" in clean.stdout

    _send_from_hot(rig, ETH // 4)
    rig.node.mine(3)
    rig.watch()
    found = custody(database_url, "reconcile", "custody", "--chain", CHAIN, "--config", config,
                    "--json")
    assert found.returncode == 1, found.stderr
    (chain,) = json.loads(found.stdout)["chains"]
    (finding,) = chain["findings"]
    assert finding["subject"] == f"custody:{CHAIN}:{rig.hot}:ETH"
    assert (finding["case"], finding["expected"]) == ("opened", str(ETH))
    assert chain["incoming_known"] is True

    unknown = custody(database_url, "reconcile", "custody", "--chain", "nope", "--config",
                      config)
    assert unknown.returncode == 2 and unknown.stderr.startswith("error [")
