"""The ``[sweeps]`` section: exact amounts, and every bad value refused with a clear message."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from config.errors import ConfigurationInvalid
from config.sweeps import parse_sweeps_config
from devtools.config import dev_config, dev_configs

COLD = "0x" + "33" * 20


def doc(**asset: Any) -> dict[str, Any]:
    base = dev_config(cold_addresses=(COLD,))
    base["sweeps"] = {"assets": [{"chain": "devnet", "asset": "ETH", "threshold": "0.01",
                                  "hot_min": "1", "hot_max": "50", **asset}]}
    return base


def parse(d: dict[str, Any]) -> Any:
    chains, wcfg = dev_configs(d)
    return parse_sweeps_config(d, chains, wcfg)


def test_amounts_are_exact_minor_units_and_the_cold_address_defaults() -> None:
    cfg = parse(doc())
    eth = cfg.assets[("devnet", "ETH")]
    assert (eth.threshold_minor, eth.hot_min_minor, eth.hot_max_minor) == (
        10**16, 10**18, 50 * 10**18)
    assert eth.token is None and eth.cold_address == COLD
    assert cfg.chains() == ["devnet"] and cfg.dust_gas_share_percent == 10


@pytest.mark.parametrize(("change", "message"), [
    ({"threshold": "0.1234567890123456789"}, "threshold"),
    ({"threshold": 1.5}, "decimal string"),
    ({"hot_min": "60"}, "hot_min must not exceed hot_max"),
    ({"cold_address": "0x" + "44" * 20}, "not one of devnet's cold_addresses"),
    ({"cold_address": "nope"}, "not an EVM address"),
    ({"asset": "DAI"}, "not declared"),
    ({"chain": "nowhere"}, "nowhere"),
])
def test_bad_values_are_refused(change: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigurationInvalid, match=message):
        parse(doc(**change))


def test_hot_max_needs_a_cold_address() -> None:
    d = doc()
    del d["chains"]["devnet"]["cold_addresses"]
    with pytest.raises(ConfigurationInvalid, match="hot_max needs a cold address"):
        parse(d)


def test_a_chain_without_a_hot_wallet_cannot_be_swept() -> None:
    d = doc()
    chains, wcfg = dev_configs(d)
    with pytest.raises(ConfigurationInvalid, match="no hot wallet"):
        parse_sweeps_config(d, chains, dataclasses.replace(wcfg, hot_wallets={}))


def test_a_pair_listed_twice_and_a_missing_section_are_refused() -> None:
    d = doc()
    d["sweeps"]["assets"].append(dict(d["sweeps"]["assets"][0]))
    with pytest.raises(ConfigurationInvalid, match="listed twice"):
        parse(d)
    del d["sweeps"]
    with pytest.raises(ConfigurationInvalid, match=r"\[sweeps\] section is missing"):
        parse(d)
