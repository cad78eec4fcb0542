"""The development configuration: one builder for the demo, the tests and the benchmarks.

``dev_config`` returns the configuration document (what ``tomllib`` reads from a
``CUSTODY_CONFIG`` file) for anvil's chain: chain id 31337, ETH (scale 18, 18 decimals) and a
USDC token (scale 6, 6 decimals), a withdrawal policy for both with a local-key hot wallet, and
optionally an xpub deposit address source derived from the development mnemonic (account 1).
Its parameters are what the users of it genuinely vary (the node, the token's address, the
finality rule, the hot wallet...); a caller that needs more (another token, another asset) adds
it to the returned document. ``to_toml`` writes a document as a configuration file, and
``dev_configs`` parses one into the engine's two configurations.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from chains.addresses import xpub_from_mnemonic
from config.chains import ChainsConfig, parse_chains_config
from config.withdrawals import WithdrawalsConfig, parse_withdrawals_config
from devtools.anvil import DEV_ACCOUNTS, DEV_MNEMONIC

DEV_CHAIN = "devnet"
#: anvil's chain id.
DEV_CHAIN_ID = 31337
#: An RPC URL where no node listens: for configurations that never reach one.
NO_NODE_URL = "http://127.0.0.1:1"
#: The address of the first contract anvil's dev account 0 deploys: the USDC of configurations
#: that deploy none.
DEV_TOKEN = "0x5fbdb2315678afecb367f032d93f642f64180aa3"
#: The hot wallet of configurations that sign nothing (anvil's dev account 1).
DEV_HOT_WALLET = DEV_ACCOUNTS[1]
#: The environment variable a development hot wallet's key is read from.
DEV_HOT_KEY_ENV = "CUSTODY_DEV_HOT_KEY"


def dev_xpub() -> str:
    """The account xpub of deposit addresses in development: the dev mnemonic's account 1."""
    return xpub_from_mnemonic(DEV_MNEMONIC, account=1)


def dev_config(*, rpc_url: str = NO_NODE_URL, token: str = DEV_TOKEN, chain: str = DEV_CHAIN,
               finality: str = "confirmations:3", token_minimum: str = "1.00",
               hot_wallet: str | None = DEV_HOT_WALLET, hot_key_env: str = DEV_HOT_KEY_ENV,
               usdc_daily_limit: str = "20000", xpub: bool = False,
               cold_addresses: tuple[str, ...] = (),
               chain_options: Mapping[str, Any] | None = None,
               withdrawal_options: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The development configuration document.

    ``hot_wallet`` None leaves the withdrawals out (a deposits-only configuration). ``xpub``
    adds the xpub address source of family ``evm`` (``dev_xpub``). The hot wallet is a hot
    address of the chain (the loader adds it); ``cold_addresses`` become the chain's
    watch-only ``cold_addresses``. ``chain_options`` and
    ``withdrawal_options`` are further keys of the chain's table and of ``[withdrawals]``.
    """
    doc: dict[str, Any] = {
        "assets": {"ETH": {"scale": 18}, "USDC": {"scale": 6}},
        "chains": {chain: {
            "family": "evm", "chain_id": DEV_CHAIN_ID, "rpc_url": rpc_url, "finality": finality,
            "native_asset": "ETH", "native_decimals": 18,
            **({"cold_addresses": list(cold_addresses)} if cold_addresses else {}),
            **(chain_options or {}),
            "tokens": [{"contract": token, "symbol": "USDC", "asset": "USDC", "decimals": 6,
                        "minimum": token_minimum}],
        }},
    }
    if xpub:
        doc["address_sources"] = {"evm": {"kind": "xpub", "xpub": dev_xpub()}}
    if hot_wallet is not None:
        doc["withdrawals"] = _withdrawals(chain, token, hot_wallet, hot_key_env,
                                          usdc_daily_limit, withdrawal_options or {})
    return doc


def _withdrawals(chain: str, token: str, hot_wallet: str, hot_key_env: str,
                 usdc_daily_limit: str, options: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "escalate_after_s": 3600, "bump_after_s": 3600, "bump_percent": 25, "attempts_max": 5,
        "open_item_sla_s": 7200, **options,
        "roles": {"approvers": ["alice", "bob"], "admins": ["carol", "dave"]},
        "hot_wallets": {chain: {
            "address": hot_wallet, "signer": "local_key", "key_env": hot_key_env,
            "gas_limit_token": 100000, "priority_fee_wei": 1000000000,
            "max_fee_per_gas_cap_wei": 200000000000}},
        "assets": [
            {"chain": chain, "asset": "USDC", "token": token, "minimum": "1.00",
             "maximum": "100000", "fee": "0.40", "fee_max": "2.00",
             "daily_limit": usdc_daily_limit, "approval_threshold": "1000",
             "dual_approval_threshold": "5000"},
            {"chain": chain, "asset": "ETH", "minimum": "0.001", "maximum": "100",
             "fee": "0.0001", "fee_max": "0.0005", "daily_limit": "1000"},
        ],
    }


def dev_configs(doc: Mapping[str, Any]) -> tuple[ChainsConfig, WithdrawalsConfig]:
    """The chains and withdrawal configurations of a document (``dev_config``)."""
    chains = parse_chains_config(doc)
    return chains, parse_withdrawals_config(doc, chains)


def to_toml(doc: Mapping[str, Any]) -> str:
    """The document as TOML text: each table's keys, then its sub-tables, then its arrays of
    tables. Enough for configuration documents (strings, numbers, booleans, lists of them)."""
    lines: list[str] = []
    _table(lines, [], doc)
    return "\n".join(lines).lstrip("\n") + "\n"


def _table(lines: list[str], path: list[str], table: Mapping[str, Any]) -> None:
    keys = {k: v for k, v in table.items() if not isinstance(v, Mapping) and not _tables(v)}
    if path and (keys or not table):
        lines += ["", f"[{'.'.join(path)}]"]
    lines.extend(f"{k} = {_value(v)}" for k, v in keys.items())
    for k, v in table.items():
        if isinstance(v, Mapping):
            _table(lines, [*path, k], v)
    for k, v in table.items():
        if _tables(v):
            for item in v:
                lines += ["", f"[[{'.'.join([*path, k])}]]"]
                lines.extend(f"{ik} = {_value(iv)}" for ik, iv in item.items())


def _tables(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, Mapping) for v in value)


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)  # a TOML basic string: the same escapes as JSON
    if isinstance(value, list):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    raise TypeError(f"no TOML form for {type(value).__name__}")
