"""The documented examples make a working configuration file: ``config/chains.example.toml``
followed by ``config/withdrawals.example.toml`` loads as both configurations, as ``custody
config check``, ``serve`` and ``api`` load it; the chains' example alone loads as a deposits-only
file."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from api.configuration import load_withdrawals_if_present
from config.chains import load_chains_config, parse_chains_config
from config.withdrawals import parse_withdrawals_config

CONFIG = Path(__file__).resolve().parents[2] / "config"
CHAINS = CONFIG / "chains.example.toml"
WITHDRAWALS = CONFIG / "withdrawals.example.toml"


@pytest.fixture(autouse=True)
def _ethereum_rpc_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUSTODY_ETHEREUM_RPC_URL", "http://127.0.0.1:1")


def test_the_two_examples_make_a_working_file(tmp_path: Path) -> None:
    text = CHAINS.read_text() + "\n" + WITHDRAWALS.read_text()
    data = tomllib.loads(text)
    chains = parse_chains_config(data)
    wcfg = parse_withdrawals_config(data, chains)
    assert set(chains.chains) == {"ethereum", "base", "devnet"}
    assert set(wcfg.hot_wallets) == {"devnet"}
    assert {key for key in wcfg.assets} == {("devnet", "USDC"), ("devnet", "ETH")}
    path = tmp_path / "custody.toml"
    path.write_text(text)
    assert load_withdrawals_if_present(load_chains_config(path), str(path)) is not None


def test_the_chains_example_alone_is_a_deposits_only_file() -> None:
    chains = load_chains_config(CHAINS)
    assert load_withdrawals_if_present(chains, str(CHAINS)) is None
    assert chains.address_sources["evm"].kind == "mnemonic"
    raw = tomllib.loads(CHAINS.read_text())["chains"]["ethereum"]
    # Documented for the watcher of our own addresses (hot wallets, watch-only cold ones).
    assert raw["hot_addresses"] and raw["cold_addresses"]


def test_with_the_sweeps_example_sweeps_are_configured(tmp_path: Path) -> None:
    from api.configuration import load_sweeps_if_present

    path = tmp_path / "custody.toml"
    path.write_text("\n".join(p.read_text() for p in (
        CHAINS, WITHDRAWALS, CONFIG / "sweeps.example.toml")))
    chains = load_chains_config(path)
    cfg = load_sweeps_if_present(chains, load_withdrawals_if_present(chains, str(path)),
                                 str(path))
    assert cfg is not None and cfg.chains() == ["devnet"]
    eth = cfg.assets[("devnet", "ETH")]
    assert (eth.hot_min_minor, eth.hot_max_minor, eth.cold_address) == (
        10**18, 50 * 10**18, chains.chain("devnet").cold_addresses[0])
    assert load_sweeps_if_present(chains, None, str(CHAINS)) is None


def test_the_reconcile_example_sets_every_threshold() -> None:
    from config.reconcile import ReconcileConfig, parse_reconcile_config

    data = tomllib.loads("\n".join(p.read_text() for p in (
        CHAINS, WITHDRAWALS, CONFIG / "reconcile.example.toml")))
    assert set(data["reconcile"]) == set(ReconcileConfig.__dataclass_fields__)
    assert parse_reconcile_config(data) == ReconcileConfig(
        reserve_sla_s=7200, unknown_withdrawal_after_s=3600, held_withdrawal_after_s=3600,
        review_deposit_after_s=86400)
