"""Sweep, gas top-up and hot/cold configuration: per (chain, asset) the sweep threshold, the hot
wallet's minimum and maximum, the cold address and the approval rule of a transfer to it; the
dust rule; the timings of the sending ladder.

Read from the ``[sweeps]`` section of the TOML file named by ``CUSTODY_CONFIG`` (the same file
as the chains and the withdrawals; example in ``config/sweeps.example.toml``). Amounts are
decimal strings in the LEDGER asset's units and become exact ``int`` minor units here. Sweeps
need the chain's hot wallet (``[withdrawals.hot_wallets.<chain>]``): it is the destination of
every sweep, the sender of every gas top-up and cold transfer, and its gas settings (tip, fee
cap, gas limits) are those of every transaction the sweeper sends, deposit addresses included.

Example::

    [sweeps]
    dust_gas_share_percent = 10      # gas above 10% of the value: dust, left alone and reported
    [[sweeps.assets]]
    chain = "devnet"
    asset = "ETH"
    threshold = "0.01"               # sweep an address once it holds more than this
    hot_min = "1"                    # below: an alert asks for a refill from cold
    hot_max = "50"                   # above: the excess is proposed as a transfer to cold
    cold_dual_approval_above = "20"  # a cold transfer above this needs two admins
    [[sweeps.assets]]
    chain = "devnet"
    asset = "USDC"
    threshold = "10"
    native_per_unit = "0.0004"       # value of one USDC in ETH, for the dust rule only
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from config.chains import ChainsConfig, parse_units, read_config_document
from config.errors import ConfigurationInvalid
from config.withdrawals import WithdrawalsConfig

_ADDRESS = re.compile(r"^0x[0-9a-fA-F]{40}$")
#: Decimals of ``native_per_unit``: a price with up to 18 decimals.
PRICE_SCALE = 18


@dataclass(frozen=True)
class SweepAssetConfig:
    """One swept (chain, asset). Amounts in the ledger asset's minor units (``scale``);
    ``token`` is the ERC-20 contract (None: the native coin) with its on-chain ``decimals``.
    ``native_per_unit_scaled``: the value of one whole unit of the asset in the native asset,
    times 10^PRICE_SCALE (None: no price, so the dust rule is not applied to it)."""

    chain: str
    asset: str
    scale: int
    token: str | None
    decimals: int
    threshold_minor: int
    hot_min_minor: int | None
    hot_max_minor: int | None
    cold_address: str | None
    cold_dual_approval_above_minor: int | None
    native_per_unit_scaled: int | None


@dataclass(frozen=True)
class SweepsConfig:
    """The ``[sweeps]`` section."""

    assets: Mapping[tuple[str, str], SweepAssetConfig]
    dust_gas_share_percent: int = 10
    bump_after_s: int = 300
    bump_percent: int = 25
    attempts_max: int = 5
    #: An outcome undetermined this long raises an alert (it is never released on a timer).
    escalate_after_s: int = 3_600
    batch_max: int = 200

    def chain_assets(self, chain: str) -> list[SweepAssetConfig]:
        """The swept assets of ``chain``, native first."""
        found = [a for (c, _), a in self.assets.items() if c == chain]
        return sorted(found, key=lambda a: (a.token is not None, a.asset))

    def chains(self) -> list[str]:
        """The chains that have swept assets."""
        return sorted({c for c, _ in self.assets})


def _int(raw: Mapping[str, Any], key: str, where: str, default: int, low: int = 0,
         high: int = 10**9) -> int:
    value = raw.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ConfigurationInvalid(f"{where}.{key} must be an integer in [{low}, {high}]")
    return value


def _optional(raw: Mapping[str, Any], key: str, scale: int, where: str) -> int | None:
    if key not in raw:
        return None
    return parse_units(raw[key], scale, what=f"{where}.{key}")


def _parse_asset(raw: Any, chains: ChainsConfig, withdrawals: WithdrawalsConfig,
                 where: str) -> SweepAssetConfig:
    if not isinstance(raw, Mapping):
        raise ConfigurationInvalid(f"{where} must be a table")
    chain = chains.chain(str(raw.get("chain", "")))
    code = str(raw.get("asset", ""))
    if code not in chains.assets:
        raise ConfigurationInvalid(f"{where}: asset {code} is not declared in [assets]")
    scale = chains.assets[code].scale
    if code == chain.native_asset:
        token, decimals = None, chain.native_decimals
    else:
        listed = [t for t in chain.tokens if t.asset == code]
        if not listed:
            raise ConfigurationInvalid(f"{where}: {code} is neither {chain.name}'s native asset "
                                       "nor one of its tokens")
        token, decimals = listed[0].contract.lower(), listed[0].decimals
    if scale > decimals:
        raise ConfigurationInvalid(f"{where}: {code}'s ledger scale {scale} is finer than its "
                                   f"{decimals} on-chain decimals")
    withdrawals.hot_wallet(chain.name)  # Refused when the chain has no hot wallet.
    threshold = parse_units(raw.get("threshold", "0"), scale, what=f"{where}.threshold")
    hot_min = _optional(raw, "hot_min", scale, where)
    hot_max = _optional(raw, "hot_max", scale, where)
    if hot_min is not None and hot_max is not None and hot_min > hot_max:
        raise ConfigurationInvalid(f"{where}: hot_min must not exceed hot_max")
    cold = raw.get("cold_address")
    if cold is None and chain.cold_addresses:
        cold = chain.cold_addresses[0]
    if cold is not None:
        if not _ADDRESS.match(str(cold)):
            raise ConfigurationInvalid(f"{where}.cold_address is not an EVM address")
        cold = str(cold).lower()
        if cold not in chain.cold_addresses:
            raise ConfigurationInvalid(f"{where}.cold_address {cold} is not one of "
                                       f"{chain.name}'s cold_addresses (every address we "
                                       "control is watched)")
    if hot_max is not None and cold is None:
        raise ConfigurationInvalid(f"{where}: hot_max needs a cold address to send the excess to")
    price = _optional(raw, "native_per_unit", PRICE_SCALE, where)
    return SweepAssetConfig(
        chain=chain.name, asset=code, scale=scale, token=token, decimals=decimals,
        threshold_minor=threshold, hot_min_minor=hot_min, hot_max_minor=hot_max,
        cold_address=cold,
        cold_dual_approval_above_minor=_optional(raw, "cold_dual_approval_above", scale, where),
        native_per_unit_scaled=price)


def parse_sweeps_config(data: Mapping[str, Any], chains: ChainsConfig,
                        withdrawals: WithdrawalsConfig) -> SweepsConfig:
    """Validate the parsed TOML document's ``[sweeps]`` section."""
    raw = data.get("sweeps")
    if not isinstance(raw, Mapping):
        raise ConfigurationInvalid("[sweeps] section is missing")
    where = "sweeps"
    assets_raw = raw.get("assets", [])
    if not isinstance(assets_raw, list):
        raise ConfigurationInvalid("sweeps.assets must be an array of tables")
    parsed = [_parse_asset(a, chains, withdrawals, f"{where}.assets[{i}]")
              for i, a in enumerate(assets_raw)]
    assets = {(a.chain, a.asset): a for a in parsed}
    if len(assets) != len(parsed):
        raise ConfigurationInvalid(f"{where}.assets: a (chain, asset) is listed twice")
    return SweepsConfig(
        assets=assets,
        dust_gas_share_percent=_int(raw, "dust_gas_share_percent", where, 10, 1, 100),
        bump_after_s=_int(raw, "bump_after_s", where, 300, 1),
        bump_percent=_int(raw, "bump_percent", where, 25, 10, 1_000),
        attempts_max=_int(raw, "attempts_max", where, 5, 1, 50),
        escalate_after_s=_int(raw, "escalate_after_s", where, 3_600, 1),
        batch_max=_int(raw, "batch_max", where, 200, 1, 10_000),
    )


def load_sweeps_config(chains: ChainsConfig, withdrawals: WithdrawalsConfig,
                       path: str | Path | None = None) -> SweepsConfig | None:
    """The ``[sweeps]`` section from ``path`` or ``$CUSTODY_CONFIG``; None when the file has
    none (the engine then runs without sweeps)."""
    data = read_config_document(path)
    if "sweeps" not in data:
        return None
    return parse_sweeps_config(data, chains, withdrawals)
