"""Withdrawal configuration: withdrawable assets with their bounds, fee schedule and policy,
the hot wallet and gas settings of each chain, the timings of the unknown-outcome ladder, the
destination allowlists (which clients, the activation delay) and the velocity limits.

Read from the ``[withdrawals]`` section of the TOML file named by ``CUSTODY_CONFIG`` (the same
file as the chain configuration; documented example in ``config/withdrawals.example.toml``).
Amounts are decimal strings in the LEDGER asset's units and become exact ``int`` minor units
here; a value with more decimals than the asset's scale is refused, never rounded. Everything
is validated against the chain configuration (the chain exists, the token is listed there, its
on-chain decimals are known) and returned as frozen values. No secret is read here: the hot
wallet's key (a local signer) or a remote signer's URL carrying a credential is named by an
environment variable that only ``outgoing.signer`` reads.

A hot wallet is refused when its chain's native asset has a ledger scale coarser than the
chain's native decimals: the gas it pays is a fact in the chain's smallest unit (wei) that the
ledger could then only book rounded, and rounding would make the treasury drift from the
wallet's real balance (see ``withdrawals.model``). Finer ledger scales are fine (exact).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from config.chains import ChainsConfig, parse_units, read_config_document
from config.errors import ConfigurationInvalid

_ADDRESS = re.compile(r"^0x[0-9a-fA-F]{40}$")
_ENV = re.compile(r"^[A-Z_][A-Z0-9_]{0,127}$")
_URL = re.compile(r"^https?://[^\s]+$")
SIGNER_KINDS = frozenset({"local_key", "remote"})


@dataclass(frozen=True)
class AssetPolicy:
    """One withdrawable (chain, asset): bounds, fee schedule and approval policy.

    All amounts in the ledger asset's minor units. ``token`` is the ERC-20 contract
    (lower-case) or None for the chain's native coin; ``decimals`` its on-chain decimals.
    The user is charged ``fee_minor``; the reserve covers ``fee_max_minor`` (>= fee).
    Amounts above ``approval_threshold_minor`` wait for one approver, above
    ``dual_approval_threshold_minor`` for two different approvers (None: never).
    """

    chain: str
    asset: str
    scale: int
    token: str | None
    decimals: int
    minimum_minor: int
    maximum_minor: int
    fee_minor: int
    fee_max_minor: int
    daily_limit_minor: int
    approval_threshold_minor: int | None = None
    dual_approval_threshold_minor: int | None = None


@dataclass(frozen=True)
class HotWalletConfig:
    """The single hot wallet payouts leave from on one chain, its signer and its gas settings
    (wei).

    ``signer`` is ``local_key`` (the key in the environment variable ``key_env``; development
    chains only) or ``remote`` (a signing service at ``signer_url``, or at the URL held by the
    environment variable ``signer_url_env`` when the URL carries a credential; each request
    waits at most ``signer_timeout_ms`` to connect and as long for the answer).
    """

    chain: str
    address: str
    signer: str
    key_env: str
    signer_url: str | None = None
    signer_url_env: str | None = None
    signer_timeout_ms: int = 5_000
    gas_limit_native: int = 21_000
    gas_limit_token: int = 100_000
    priority_fee_wei: int = 1_000_000_000
    max_fee_per_gas_cap_wei: int = 500_000_000_000


@dataclass(frozen=True)
class AllowlistConfig:
    """Destination allowlists (``[withdrawals.allowlist]``): the API clients whose users may
    withdraw only to their allowlisted addresses, and how long a newly added address waits
    before it can be used (an admin may shorten it for one address with a second admin's
    approval; nothing else can)."""

    clients: frozenset[str] = frozenset()
    activation_delay_s: int = 86_400

    def enforced(self, client: str) -> bool:
        """Whether allowlisting is on for ``client``."""
        return client in self.clients


@dataclass(frozen=True)
class VelocityLimit:
    """One rolling window of ``[[withdrawals.velocity]]``: per ``user`` or per ``client``, the
    withdrawals of ``asset`` requested in the last ``window_s`` seconds may number at most
    ``count_max`` and add up to at most ``amount_max_minor`` (ledger minor units), the new one
    included; None: that bound is not set. On top of the daily limit."""

    asset: str
    per: str
    window_s: int
    count_max: int | None = None
    amount_max_minor: int | None = None


@dataclass(frozen=True)
class WithdrawalsConfig:
    """The whole ``[withdrawals]`` section."""

    assets: Mapping[tuple[str, str], AssetPolicy]
    hot_wallets: Mapping[str, HotWalletConfig]
    #: Undetermined this long after going unknown: wait for a two-admin write-off decision.
    escalate_after_s: int = 3_600
    #: A broadcast attempt not included after this long is replaced with higher fees.
    bump_after_s: int = 300
    #: Replacement fees are at least this many percent above the previous attempt (>= 10).
    bump_percent: int = 25
    #: Attempts per withdrawal (the first plus replacements).
    attempts_max: int = 5
    #: A reserve still open after this long raises an alert.
    open_item_sla_s: int = 7_200
    #: Withdrawals handled per processor step and phase.
    batch_max: int = 50
    #: Identities with the approver and admin roles (the API layer maps logins to them).
    approvers: frozenset[str] = field(default_factory=frozenset)
    admins: frozenset[str] = field(default_factory=frozenset)
    #: Destination allowlists (off for every client by default).
    allowlist: AllowlistConfig = field(default_factory=AllowlistConfig)
    #: Velocity limits, checked with the daily limit under the reserve's locks.
    velocity: tuple[VelocityLimit, ...] = ()

    def velocity_of(self, asset: str) -> tuple[VelocityLimit, ...]:
        """The velocity windows of ``asset``, in configuration order."""
        return tuple(v for v in self.velocity if v.asset == asset)

    def policy(self, chain: str, asset: str) -> AssetPolicy | None:
        """The policy of ``asset`` on ``chain``, or None when it is not withdrawable there."""
        return self.assets.get((chain, asset))

    def hot_wallet(self, chain: str) -> HotWalletConfig:
        """The hot wallet of ``chain``, or ConfigurationInvalid."""
        try:
            return self.hot_wallets[chain]
        except KeyError:
            raise ConfigurationInvalid(f"no hot wallet for chain {chain!r}") from None


def _int(raw: Mapping[str, Any], key: str, where: str, default: int, low: int = 0,
         high: int = 2**63 - 1) -> int:
    value = raw.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ConfigurationInvalid(f"{where}.{key} must be an integer in [{low}, {high}]")
    return value


def _optional_units(raw: Mapping[str, Any], key: str, scale: int, where: str) -> int | None:
    if raw.get(key) is None:
        return None
    return parse_units(raw[key], scale, what=f"{where}.{key}")


def _parse_asset(raw: Any, chains: ChainsConfig, where: str) -> AssetPolicy:
    if not isinstance(raw, Mapping):
        raise ConfigurationInvalid(f"{where} must be a table")
    chain = chains.chain(str(raw.get("chain")))
    code = str(raw.get("asset"))
    if code not in chains.assets:
        raise ConfigurationInvalid(f"{where}: asset {code} is not declared in [assets]")
    scale = chains.assets[code].scale
    token_text = raw.get("token")
    if token_text is None:
        if code != chain.native_asset:
            raise ConfigurationInvalid(f"{where}: {code} is not {chain.name}'s native asset; "
                                       "name its token contract")
        token, decimals = None, chain.native_decimals
    else:
        listed = chain.token(str(token_text)) if _ADDRESS.match(str(token_text)) else None
        if listed is None or listed.asset != code:
            raise ConfigurationInvalid(f"{where}: token {token_text} is not listed as {code} "
                                       f"on chain {chain.name}")
        token, decimals = listed.contract, listed.decimals
    units = {k: parse_units(raw.get(k, "0"), scale, what=f"{where}.{k}")
             for k in ("minimum", "maximum", "fee", "fee_max", "daily_limit")}
    if units["fee"] > units["fee_max"]:
        raise ConfigurationInvalid(f"{where}: fee must not exceed fee_max")
    if not 0 < units["minimum"] <= units["maximum"]:
        raise ConfigurationInvalid(f"{where}: need 0 < minimum <= maximum")
    policy = AssetPolicy(
        chain=chain.name, asset=code, scale=scale, token=token, decimals=decimals,
        minimum_minor=units["minimum"], maximum_minor=units["maximum"],
        fee_minor=units["fee"], fee_max_minor=units["fee_max"],
        daily_limit_minor=units["daily_limit"],
        approval_threshold_minor=_optional_units(raw, "approval_threshold", scale, where),
        dual_approval_threshold_minor=_optional_units(raw, "dual_approval_threshold", scale,
                                                      where),
    )
    if decimals < scale and (policy.minimum_minor % 10 ** (scale - decimals)):
        raise ConfigurationInvalid(f"{where}: minimum not representable in {decimals} decimals")
    return policy


def _parse_hot_wallet(chain_name: str, raw: Any, chains: ChainsConfig) -> HotWalletConfig:
    where = f"withdrawals.hot_wallets.{chain_name}"
    chain = chains.chain(chain_name)
    native_scale = chains.assets[chain.native_asset].scale
    if native_scale < chain.native_decimals:
        raise ConfigurationInvalid(
            f"{where}: the ledger scale of {chain.native_asset} ({native_scale}) is coarser than "
            f"{chain_name}'s native decimals ({chain.native_decimals}): the gas this wallet pays "
            f"could not be booked exactly. Open {chain.native_asset} with a scale of at least "
            f"{chain.native_decimals}.")
    if not isinstance(raw, Mapping):
        raise ConfigurationInvalid(f"{where} must be a table")
    address = str(raw.get("address", ""))
    if not _ADDRESS.match(address):
        raise ConfigurationInvalid(f"{where}.address is not an EVM address")
    signer = str(raw.get("signer", "local_key"))
    if signer not in SIGNER_KINDS:
        raise ConfigurationInvalid(f"{where}.signer must be one of {sorted(SIGNER_KINDS)}")
    return HotWalletConfig(
        chain=chain_name, address=address.lower(), signer=signer, **_signer_keys(raw, where),
        gas_limit_native=_int(raw, "gas_limit_native", where, 21_000, 21_000, 10_000_000),
        gas_limit_token=_int(raw, "gas_limit_token", where, 100_000, 21_000, 10_000_000),
        priority_fee_wei=_int(raw, "priority_fee_wei", where, 1_000_000_000, 0),
        max_fee_per_gas_cap_wei=_int(raw, "max_fee_per_gas_cap_wei", where, 500 * 10**9, 1),
    )


def _signer_keys(raw: Mapping[str, Any], where: str) -> dict[str, Any]:
    """The keys of the hot wallet's signer: ``key_env`` for a local key; for a remote signer
    exactly one of ``signer_url`` and ``signer_url_env``, and ``signer_timeout_ms``."""
    if str(raw.get("signer", "local_key")) == "local_key":
        key_env = str(raw.get("key_env", ""))
        if not _ENV.match(key_env):
            raise ConfigurationInvalid(f"{where}.key_env must name an environment variable")
        return {"key_env": key_env}
    url, url_env = raw.get("signer_url"), raw.get("signer_url_env")
    if (url is None) == (url_env is None):
        raise ConfigurationInvalid(f"{where}: a remote signer needs exactly one of signer_url "
                                   "and signer_url_env")
    if url is not None and not _URL.match(str(url)):
        raise ConfigurationInvalid(f"{where}.signer_url must be an http(s) URL")
    if url_env is not None and not _ENV.match(str(url_env)):
        raise ConfigurationInvalid(f"{where}.signer_url_env must name an environment variable")
    return {"key_env": "", "signer_url": None if url is None else str(url),
            "signer_url_env": None if url_env is None else str(url_env),
            "signer_timeout_ms": _int(raw, "signer_timeout_ms", where, 5_000, 1, 600_000)}


VELOCITY_SCOPES = ("user", "client")
_CLIENT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$")


def _parse_allowlist(raw: Any) -> AllowlistConfig:
    where = "withdrawals.allowlist"
    if raw is None:
        return AllowlistConfig()
    if not isinstance(raw, Mapping):
        raise ConfigurationInvalid(f"{where} must be a table")
    unknown = sorted(set(raw) - {"clients", "activation_delay_s"})
    if unknown:
        raise ConfigurationInvalid(f"{where}: unknown key {unknown[0]!r}")
    clients = raw.get("clients", [])
    if not isinstance(clients, list) or not all(
            isinstance(c, str) and _CLIENT.fullmatch(c) for c in clients):
        raise ConfigurationInvalid(f"{where}.clients must be a list of API client names")
    return AllowlistConfig(
        clients=frozenset(clients),
        activation_delay_s=_int(raw, "activation_delay_s", where, 86_400, 0, 365 * 86_400))


def _parse_velocity(raw: Any, chains: ChainsConfig, where: str) -> VelocityLimit:
    if not isinstance(raw, Mapping):
        raise ConfigurationInvalid(f"{where} must be a table")
    unknown = sorted(set(raw) - {"asset", "per", "window_s", "count_max", "amount_max"})
    if unknown:
        raise ConfigurationInvalid(f"{where}: unknown key {unknown[0]!r}")
    code = str(raw.get("asset"))
    if code not in chains.assets:
        raise ConfigurationInvalid(f"{where}: asset {code} is not declared in [assets]")
    per = raw.get("per")
    if per not in VELOCITY_SCOPES:
        raise ConfigurationInvalid(f"{where}.per must be one of {', '.join(VELOCITY_SCOPES)}")
    if "window_s" not in raw:
        raise ConfigurationInvalid(f"{where}.window_s is required")
    window_s = _int(raw, "window_s", where, 0, 1, 366 * 86_400)
    count_max = (None if raw.get("count_max") is None
                 else _int(raw, "count_max", where, 0, 1, 10**9))
    amount_max = _optional_units(raw, "amount_max", chains.assets[code].scale, where)
    if amount_max is not None and amount_max <= 0:
        raise ConfigurationInvalid(f"{where}.amount_max must be above zero")
    if count_max is None and amount_max is None:
        raise ConfigurationInvalid(f"{where}: set count_max, amount_max or both")
    return VelocityLimit(asset=code, per=str(per), window_s=window_s, count_max=count_max,
                         amount_max_minor=amount_max)


def parse_withdrawals_config(data: Mapping[str, Any], chains: ChainsConfig) -> WithdrawalsConfig:
    """Validate the parsed TOML document's ``[withdrawals]`` section against ``chains``."""
    raw = data.get("withdrawals")
    if not isinstance(raw, Mapping):
        raise ConfigurationInvalid("[withdrawals] section is missing")
    where = "withdrawals"
    assets_raw = raw.get("assets", [])
    if not isinstance(assets_raw, list):
        raise ConfigurationInvalid("withdrawals.assets must be an array of tables")
    policies = [_parse_asset(a, chains, f"{where}.assets[{i}]") for i, a in enumerate(assets_raw)]
    assets = {(p.chain, p.asset): p for p in policies}
    if len(assets) != len(policies):
        raise ConfigurationInvalid(f"{where}.assets: a (chain, asset) is listed twice")
    wallets_raw = raw.get("hot_wallets", {})
    if not isinstance(wallets_raw, Mapping):
        raise ConfigurationInvalid(f"{where}.hot_wallets must be a table")
    wallets = {name: _parse_hot_wallet(name, w, chains) for name, w in wallets_raw.items()}
    for chain_name, _ in assets:
        if chain_name not in wallets:
            raise ConfigurationInvalid(f"{where}: chain {chain_name} has assets but no hot wallet")
    velocity_raw = raw.get("velocity", [])
    if not isinstance(velocity_raw, list):
        raise ConfigurationInvalid(f"{where}.velocity must be an array of tables")
    velocity = tuple(_parse_velocity(v, chains, f"{where}.velocity[{i}]")
                     for i, v in enumerate(velocity_raw))
    roles = raw.get("roles", {})
    if not isinstance(roles, Mapping):
        raise ConfigurationInvalid(f"{where}.roles must be a table")
    return WithdrawalsConfig(
        assets=assets,
        hot_wallets=wallets,
        escalate_after_s=_int(raw, "escalate_after_s", where, 3_600, 1),
        bump_after_s=_int(raw, "bump_after_s", where, 300, 1),
        bump_percent=_int(raw, "bump_percent", where, 25, 10, 1_000),
        attempts_max=_int(raw, "attempts_max", where, 5, 1, 50),
        open_item_sla_s=_int(raw, "open_item_sla_s", where, 7_200, 1),
        batch_max=_int(raw, "batch_max", where, 50, 1, 10_000),
        approvers=frozenset(str(x) for x in roles.get("approvers", [])),
        admins=frozenset(str(x) for x in roles.get("admins", [])),
        allowlist=_parse_allowlist(raw.get("allowlist")),
        velocity=velocity,
    )


def load_withdrawals_config(chains: ChainsConfig,
                            path: str | Path | None = None) -> WithdrawalsConfig:
    """Load the ``[withdrawals]`` section from ``path`` or ``$CUSTODY_CONFIG``."""
    return parse_withdrawals_config(read_config_document(path), chains)
