"""The chain configuration loader and its documented example."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from chains.model import parse_finality_rule
from config.chains import load_chains_config, parse_chains_config, parse_units
from config.errors import ConfigurationInvalid

EXAMPLE = Path(__file__).resolve().parents[2] / "config" / "chains.example.toml"


@contextmanager
def _env(name: str, value: str) -> Iterator[None]:
    old = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if old is None:
            del os.environ[name]
        else:
            os.environ[name] = old


def _base() -> dict[str, Any]:
    return {
        "assets": {"ETH": {"scale": 18}, "USDC": {"scale": 6}},
        "chains": {"dev": {"chain_id": 31337, "rpc_url": "http://x", "finality": "confirmations:3",
                           "native_asset": "ETH",
                           "tokens": [{"contract": "0x" + "Ab" * 20, "symbol": "USDC",
                                       "asset": "USDC", "decimals": 18, "minimum": "1.5"}]}},
    }


class TestLoad:
    def test_example_loads(self) -> None:
        with _env("CUSTODY_ETHEREUM_RPC_URL", "http://127.0.0.1:1"):
            config = load_chains_config(EXAMPLE)
        eth = config.chain("ethereum")
        assert eth.finality == "finalized"
        assert eth.tokens[0].contract == "0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48"
        assert eth.tokens[0].minimum_minor == 1_000_000
        assert eth.native_minimum_minor == 10**15
        assert str(parse_finality_rule(config.chain("devnet").finality)) == "confirmations:3"
        assert config.address_sources["evm"].kind == "mnemonic"
        hundred, thousand = config.chain("devnet").finality_by_amount
        assert (hundred.asset, hundred.at_least_minor, hundred.finality) == (
            "ETH", 100 * 10**18, "confirmations:12")
        assert (thousand.at_least_minor, thousand.finality) == (1000 * 10**18, "finalized")
        assert (eth.recheck_blocks, eth.recheck_age_s, eth.recheck_batch_max) == (0, 86_400, 200)
        assert eth.trace_internal and not config.chain("base").trace_internal

    def test_from_environment_variable(self, tmp_path: Path) -> None:
        path = tmp_path / "c.toml"
        path.write_text('[assets.ETH]\nscale = 18\n[chains.dev]\nchain_id = 1\n'
                        'rpc_url = "http://x"\nfinality = "finalized"\nnative_asset = "ETH"\n')
        with _env("CUSTODY_CONFIG", str(path)):
            assert load_chains_config().chain("dev").native_decimals == 18

    def test_trace_internal_defaults_on(self) -> None:
        assert parse_chains_config(_base()).chain("dev").trace_internal is True
        config = _base()
        config["chains"]["dev"]["trace_internal"] = False
        assert parse_chains_config(config).chain("dev").trace_internal is False
        assert parse_chains_config(_base()).chain("dev").trace_method == "debug_traceBlockByHash"
        config["chains"]["dev"]["trace_method"] = "trace_block"
        assert parse_chains_config(config).chain("dev").trace_method == "trace_block"

    def test_token_parsed_and_lower_cased(self) -> None:
        token = parse_chains_config(_base()).chain("dev").tokens[0]
        assert token.contract == "0x" + "ab" * 20
        assert (token.decimals, token.minimum_minor) == (18, 1_500_000)


class TestRefuse:
    @pytest.mark.parametrize("change", [
        lambda c: c["chains"]["dev"].update(finality="confirmations:0"),
        lambda c: c["chains"]["dev"].update(finality="safe"),
        lambda c: c["chains"]["dev"].update(native_asset="BTC"),
        lambda c: c["chains"]["dev"]["tokens"][0].update(asset="DAI"),
        lambda c: c["chains"]["dev"]["tokens"][0].update(contract="0x1234"),
        lambda c: c["chains"]["dev"]["tokens"][0].update(minimum="0.0000001"),
        lambda c: c["chains"]["dev"]["tokens"].append(dict(c["chains"]["dev"]["tokens"][0])),
        lambda c: c["chains"]["dev"].update(attestor="oracle"),
        lambda c: c["chains"]["dev"].update(trace_internal="yes"),
        lambda c: c["chains"]["dev"].update(trace_internal=1),
        lambda c: c["chains"]["dev"].update(trace_method="trace_filter"),
        lambda c: c["assets"].update(ETH={"scale": 40}),
    ])
    def test_invalid(self, change: object) -> None:
        config = _base()
        change(config)  # type: ignore[operator]
        with pytest.raises(ConfigurationInvalid):
            parse_chains_config(config)

    def test_unknown_chain(self) -> None:
        with pytest.raises(ConfigurationInvalid):
            parse_chains_config(_base()).chain("nope")


class TestUnits:
    """Amounts in the configuration go through the one parser; its refusals become
    ConfigurationInvalid naming the setting."""

    def test_exact_beyond_28_digits(self) -> None:
        # Decimal's default context gave 12345678901123456789012345680 here.
        assert (parse_units("12345678901.123456789012345678", 18, what="x")
                == 12345678901_123456789012345678)

    def test_the_ledger_range_is_the_bound(self) -> None:
        assert parse_units(str(2**127 - 1), 0, what="x") == 2**127 - 1
        assert parse_units("1.70141183460469231731687303715884105727", 38, what="x") == 2**127 - 1
        with pytest.raises(ConfigurationInvalid, match=r"^x: .* beyond the ledger's range"):
            parse_units(str(2**127), 0, what="x")
        with pytest.raises(ConfigurationInvalid, match="beyond the ledger's range"):
            parse_units("1.70141183460469231731687303715884105728", 38, what="x")

    def test_toml_integer_is_whole_units(self) -> None:
        assert parse_units(5, 6, what="x") == 5_000_000

    @pytest.mark.parametrize("value", [" 1", "1.5e0", "+1", "-1", "-0", "1_0", "\u0661", "",
                                       "1.0000001", ".5", -1, True, 1.5, None])
    def test_refused(self, value: object) -> None:
        with pytest.raises(ConfigurationInvalid, match=r"^chains\.dev\.native_minimum"):
            parse_units(value, 6, what="chains.dev.native_minimum")

    def test_in_the_loader(self) -> None:
        config = _base()
        config["chains"]["dev"]["tokens"][0]["minimum"] = "1.5 "
        with pytest.raises(ConfigurationInvalid, match=r"tokens\[0\]\.minimum: '1\.5 ' is not a "
                           "decimal amount: it contains whitespace"):
            parse_chains_config(config)


class TestOwnAddresses:
    def test_hot_and_cold_lower_case_and_the_payout_wallet_is_hot(self) -> None:
        doc = _base()
        doc["chains"]["dev"]["hot_addresses"] = ["0x" + "AA" * 20]
        doc["chains"]["dev"]["cold_addresses"] = ["0x" + "Bb" * 20]
        doc["withdrawals"] = {"hot_wallets": {"dev": {"address": "0x" + "Cc" * 20}}}
        chain = parse_chains_config(doc).chain("dev")
        assert chain.hot_addresses == ("0x" + "aa" * 20, "0x" + "cc" * 20)
        assert chain.cold_addresses == ("0x" + "bb" * 20,)
        assert chain.address_kind("0x" + "CC" * 20) == "hot"
        assert chain.address_kind("0x" + "bb" * 20) == "cold"
        assert chain.address_kind("0x" + "dd" * 20) is None

    def test_none_configured_is_empty(self) -> None:
        chain = parse_chains_config(_base()).chain("dev")
        assert chain.hot_addresses == chain.cold_addresses == ()

    @pytest.mark.parametrize(("hot", "cold", "message"), [
        (["0x12"], [], "hot_addresses must be a list"),
        ("0x" + "aa" * 20, [], "hot_addresses must be a list"),
        ([], [5], "cold_addresses must be a list"),
        (["0x" + "aa" * 20], ["0x" + "AA" * 20], "both as a hot and a cold address"),
    ])
    def test_malformed_or_both_refused(self, hot: Any, cold: Any, message: str) -> None:
        doc = _base()
        doc["chains"]["dev"]["hot_addresses"] = hot
        doc["chains"]["dev"]["cold_addresses"] = cold
        with pytest.raises(ConfigurationInvalid, match=message):
            parse_chains_config(doc)


def _thresholds(*tables: dict[str, Any], finality: str = "confirmations:3") -> dict[str, Any]:
    doc = _base()
    doc["chains"]["dev"]["finality"] = finality
    doc["chains"]["dev"]["finality_by_amount"] = list(tables)
    return doc


class TestFinalityByAmount:
    def test_parsed_exactly_in_the_assets_scale(self) -> None:
        chain = parse_chains_config(_thresholds(
            {"asset": "ETH", "at_least": "100", "finality": "confirmations:64"},
            {"asset": "ETH", "at_least": "1000.000000000000000001", "finality": "finalized"},
            {"asset": "USDC", "at_least": 250000, "finality": "Confirmations:12"},
        )).chain("dev")
        eth, more, usdc = chain.finality_by_amount
        assert (eth.asset, eth.at_least_minor, eth.finality) == (
            "ETH", 100 * 10**18, "confirmations:64")
        assert more.at_least_minor == 1000 * 10**18 + 1 and more.finality == "finalized"
        assert (usdc.at_least, usdc.at_least_minor, usdc.finality) == (
            "250000", 250_000_000_000, "confirmations:12")

    def test_none_is_the_chains_rule_alone(self) -> None:
        assert parse_chains_config(_base()).chain("dev").finality_by_amount == ()

    @pytest.mark.parametrize(("tables", "finality", "message"), [
        ([{"asset": "ETH", "at_least": "100", "finality": "confirmations:3"}],
         "confirmations:3", "'confirmations:3' is not stricter than the chain's finality "
                            "'confirmations:3'"),
        ([{"asset": "ETH", "at_least": "100", "finality": "confirmations:2"}],
         "confirmations:3", "not stricter than the chain's"),
        ([{"asset": "ETH", "at_least": "100", "finality": "confirmations:900"}],
         "finalized", "'confirmations:900' is not stricter than the chain's finality "
                      "'finalized'"),
        ([{"asset": "ETH", "at_least": "100", "finality": "confirmations:64"},
          {"asset": "ETH", "at_least": "10", "finality": "confirmations:128"}],
         "confirmations:3", "ETH at 100 has 'confirmations:64', not stricter than "
                            "'confirmations:128' at 10"),
        ([{"asset": "ETH", "at_least": "10", "finality": "confirmations:64"},
          {"asset": "ETH", "at_least": "10.0", "finality": "finalized"}],
         "confirmations:3", "two thresholds of ETH at 10.0"),
        ([{"asset": "DAI", "at_least": "10", "finality": "finalized"}],
         "confirmations:3", "asset DAI is not declared"),
        ([{"asset": "ETH", "at_least": "0.0000000000000000001", "finality": "finalized"}],
         "confirmations:3", "at_least"),
        ([{"asset": "ETH", "at_least": 1.5, "finality": "finalized"}],
         "confirmations:3", "decimal string"),
        ([{"asset": "ETH", "at_least": "0", "finality": "finalized"}],
         "confirmations:3", "at_least must be above 0"),
        ([{"asset": "ETH", "at_least": "1", "finality": "soon"}],
         "confirmations:3", "finality must be 'finalized' or 'confirmations:<N>'"),
        ([{"asset": "ETH", "at_least": "1", "finality": "finalized", "above": "2"}],
         "confirmations:3", "must be a table of asset, at_least and finality"),
    ], ids=["equal", "looser", "looser_than_finalized", "not_increasing", "same_amount",
            "unknown_asset", "inexact", "float", "zero", "malformed_rule", "unknown_key"])
    def test_refused(self, tables: list[dict[str, Any]], finality: str, message: str) -> None:
        with pytest.raises(ConfigurationInvalid, match="finality_by_amount") as caught:
            parse_chains_config(_thresholds(*tables, finality=finality))
        assert message in caught.value.message

    def test_an_asset_the_chain_does_not_credit_is_refused(self) -> None:
        doc = _thresholds({"asset": "DAI", "at_least": "10", "finality": "finalized"})
        doc["assets"]["DAI"] = {"scale": 18}
        with pytest.raises(ConfigurationInvalid, match="asset DAI is not credited on chains.dev"):
            parse_chains_config(doc)


class TestRecheck:
    def test_defaults_and_values(self) -> None:
        chain = parse_chains_config(_base()).chain("dev")
        assert (chain.recheck_blocks, chain.recheck_age_s, chain.recheck_batch_max) == (
            0, 86_400, 200)
        doc = _base()
        doc["chains"]["dev"].update(recheck_blocks=5000, recheck_age_s=0, recheck_batch_max=10)
        chain = parse_chains_config(doc).chain("dev")
        assert (chain.recheck_blocks, chain.recheck_age_s, chain.recheck_batch_max) == (
            5000, 0, 10)

    @pytest.mark.parametrize("change", [{"recheck_blocks": -1}, {"recheck_age_s": "1d"},
                                        {"recheck_batch_max": 0}])
    def test_refused(self, change: dict[str, Any]) -> None:
        doc = _base()
        doc["chains"]["dev"].update(change)
        with pytest.raises(ConfigurationInvalid, match="recheck_"):
            parse_chains_config(doc)
