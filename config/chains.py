"""Chain configuration: the chains the deposit watchers follow, their assets and tokens.

A TOML file (path in ``CUSTODY_CONFIG``; documented example in ``config/chains.example.toml``)
declares ledger assets with their scale, the address source of each chain family, and each
chain: ``chain_id``, RPC URL, finality rule, native asset and tokens. Tokens are identified by
contract address, never by symbol; the symbol is only used to recognise fakes.

The loader validates everything up front (unknown assets, malformed contracts, minimums that
cannot be represented in the ledger scale) and returns frozen values. It imports no domain
package: the finality rule is kept as its canonical text (``"confirmations:12"`` or
``"finalized"``) and parsed by ``chains.model.parse_finality_rule`` where it is used.

Confirmations are counted the way ``chains.model.confirmations`` does: a transaction in block
``b`` has ``head - b + 1`` confirmations (its own block is the first), final at ``N`` or more.

Finality by amount: ``[[chains.<name>.finality_by_amount]]`` tables (``asset``, ``at_least`` in
decimal units of the asset, ``finality``) make deposits of that asset at or above the amount
wait for a stricter rule than the chain's own (more confirmations, or ``finalized``). The loader
refuses a rule that is not stricter than the chain's, thresholds of one asset whose rules do not
get stricter as the amount grows, and an asset the chain does not credit.

Re-checks past the reorg window: ``recheck_blocks`` and ``recheck_age_s`` bound which settled
deposits the ``deposits.recheck`` job re-reads (block within that many blocks of the head, or
settled within that many seconds), ``recheck_batch_max`` deposits per step.

Our own addresses besides the users' deposit addresses: ``[chains.<name>]`` may list
``hot_addresses`` (hot wallets the engine holds keys for) and ``cold_addresses`` (watch-only:
no key in the engine). The payout hot wallet of ``[withdrawals.hot_wallets.<name>]`` in the
same document, when present, is a hot address of that chain automatically, so a file written
before these keys existed keeps working. An address may not be both hot and cold.

``trace_internal`` (default ``true``): native transfers made by internal calls (a batch payout
contract, a Safe, a router paying one of our addresses) are found with the node's
``callTracer``; their position is the call-tree path ``call:0.<i>...`` (``chains.traces``). Set
it to ``false`` for a node without tracing: such deposits are then missed. ``trace_method``
picks the node call: ``debug_traceBlockByHash`` (default, every major client) or
``trace_block`` (parity style: reth, erigon, nethermind; no geth), which is about ten times
cheaper on anvil (``bench/RESULTS.md``).
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from config.errors import ConfigurationInvalid
from config.money import AmountTextInvalid, parse_decimal_amount

CONFIG_ENV = "CUSTODY_CONFIG"
_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,31}$")
_ASSET = re.compile(r"^[A-Z0-9][A-Z0-9._-]{0,31}$")
_CONTRACT = re.compile(r"^0x[0-9a-fA-F]{40}$")
_RULE = re.compile(r"^(finalized|confirmations:[1-9][0-9]{0,5})$")
ATTESTORS = frozenset({"node", "provider"})
#: How a block's call traces are read: geth-style ``debug_traceBlockByHash`` with the
#: ``callTracer`` (geth, reth, erigon, nethermind, anvil) or parity-style ``trace_block``
#: (reth, erigon, nethermind, anvil; not geth), much cheaper where the node keeps traces.
TRACE_METHODS = frozenset({"debug_traceBlockByHash", "trace_block"})
ADDRESS_SOURCE_KINDS = frozenset({"mnemonic", "xpub"})


@dataclass(frozen=True)
class AssetConfig:
    """A ledger asset: its code and scale (decimals of one minor unit)."""

    code: str
    scale: int


@dataclass(frozen=True)
class TokenConfig:
    """An ERC-20 we accept on one chain.

    ``contract`` is lower-case hex; ``decimals`` are the token's on-chain decimals, which may
    differ from the ledger asset's scale; ``minimum_minor`` is in the ledger asset's minor units
    (final deposits below it go to ``suspense:unattributed``).
    """

    contract: str
    symbol: str
    asset: str
    decimals: int
    minimum_minor: int


@dataclass(frozen=True)
class FinalityThresholdConfig:
    """A stricter finality rule for large deposits of one asset on one chain.

    Deposits of ``asset`` of at least ``at_least_minor`` (ledger minor units; ``at_least`` is
    the configured decimal text) are final only under ``finality`` (canonical rule text).
    """

    asset: str
    at_least: str
    at_least_minor: int
    finality: str


@dataclass(frozen=True)
class AddressSourceConfig:
    """Where a chain family's deposit addresses come from.

    ``mnemonic``: BIP-44 from a seed phrase read from the environment variable ``mnemonic_env``
    (development chains: the engine then holds keys). ``xpub``: BIP-32 public derivation from an
    account-level xpub (production: no private key in the engine).
    """

    kind: str
    account: int = 0
    mnemonic_env: str | None = None
    xpub: str | None = None
    #: An external signer of the family's deposit addresses (sweeps): the environment variable
    #: holding its URL (it may carry a credential), or None (an xpub source then signs nothing).
    #: It is asked to sign as ``m/44'/60'/<account>'/0/<index>``: for an xpub source, set
    #: ``account`` to the account the xpub was exported at.
    signer_url_env: str | None = None
    signer_timeout_ms: int = 5_000


@dataclass(frozen=True)
class ChainConfig:
    """One chain followed by a watcher."""

    name: str
    family: str
    chain_id: int
    rpc_url: str
    #: Canonical text of the finality rule: ``"finalized"`` or ``"confirmations:<N>"``.
    finality: str
    native_asset: str
    native_decimals: int
    native_minimum_minor: int
    tokens: tuple[TokenConfig, ...] = ()
    #: Custody record that must agree before crediting: ``node`` (re-read the receipt) or
    #: ``provider`` (the custody provider's per-deposit notification).
    attestor: str = "node"
    #: RPC URL of the attesting node; None: the chain's own ``rpc_url``.
    attestor_rpc_url: str | None = None
    start_block: int = 0
    scan_blocks_max: int = 500
    cursor_keep: int = 256
    rpc_timeout_ms: int = 10_000
    rpc_retries_max: int = 3
    poll_interval_s: float = 2.0
    #: Hot wallets of this chain (lower-case hex): the engine holds their keys.
    hot_addresses: tuple[str, ...] = ()
    #: Cold addresses of this chain (lower-case hex): watch-only, the engine has no key.
    cold_addresses: tuple[str, ...] = ()
    #: Stricter finality for large deposits, per asset, in increasing amounts per asset.
    finality_by_amount: tuple[FinalityThresholdConfig, ...] = ()
    #: Settled deposits whose block is within this many blocks of the head are re-read by the
    #: ``deposits.recheck`` job (0: no horizon in blocks).
    recheck_blocks: int = 0
    #: Settled deposits settled within this many seconds are re-read too (0: no horizon in
    #: time). Both 0: the job does not run for this chain.
    recheck_age_s: int = 86_400
    #: Deposits re-read per step of the job (bounded RPC per step: at most this many blocks
    #: and receipts).
    recheck_batch_max: int = 200
    #: Detect ETH paid to our addresses by internal calls (batch payouts, Safe wallets,
    #: routers) with the node's ``callTracer`` (``debug_traceBlockByHash``). On by default:
    #: without it those deposits are never seen. Turn it off only for a node that offers no
    #: tracing (the watcher then says so when it starts, ``custody config check`` reports it).
    trace_internal: bool = True
    #: One of ``TRACE_METHODS``: the node call that reads a block's traces.
    trace_method: str = "debug_traceBlockByHash"

    def address_kind(self, address: str) -> str | None:
        """``"hot"`` or ``"cold"`` for one of our own addresses (any case), else None."""
        wanted = address.lower()
        if wanted in self.hot_addresses:
            return "hot"
        if wanted in self.cold_addresses:
            return "cold"
        return None

    # The three below are read for every transfer a scan decodes: computed once per
    # configuration (cached_property writes the instance's __dict__, which a frozen dataclass
    # allows; they are not fields, so equality and hashing ignore them).

    @cached_property
    def own_addresses(self) -> frozenset[str]:
        """Every hot and cold address of this chain (lower-case)."""
        return frozenset(self.hot_addresses) | frozenset(self.cold_addresses)

    @cached_property
    def listed_symbols(self) -> frozenset[str]:
        """The symbols of the listed tokens, upper-case (to recognise fakes that copy them)."""
        return frozenset(t.symbol.upper() for t in self.tokens)

    @cached_property
    def _tokens_by_contract(self) -> dict[str, TokenConfig]:
        return {t.contract: t for t in reversed(self.tokens)}

    def token(self, contract: str) -> TokenConfig | None:
        """The listed token with this contract address (any case), or None."""
        return self._tokens_by_contract.get(contract.lower())


@dataclass(frozen=True)
class ChainsConfig:
    """The whole chain configuration."""

    assets: Mapping[str, AssetConfig]
    chains: Mapping[str, ChainConfig]
    address_sources: Mapping[str, AddressSourceConfig] = field(default_factory=dict)

    def chain(self, name: str) -> ChainConfig:
        """The chain called ``name``, or ConfigurationInvalid."""
        try:
            return self.chains[name]
        except KeyError:
            raise ConfigurationInvalid(f"no chain {name!r} in the configuration") from None


def parse_units(text: object, scale: int, *, what: str) -> int:
    """A decimal string (or a TOML integer) as exact minor units of ``scale`` below 2^127, or
    ConfigurationInvalid naming ``what``; the grammar is ``config.money.parse_decimal_amount``'s.
    """
    if isinstance(text, int) and not isinstance(text, bool):
        text = str(text)
    if not isinstance(text, str):
        raise ConfigurationInvalid(f"{what} must be a decimal string, got {text!r}")
    try:
        units = parse_decimal_amount(text, scale)
    except AmountTextInvalid as exc:
        raise ConfigurationInvalid(f"{what}: {exc.message}") from None
    # Every configured amount (minimum, limit, fee, threshold) is compared with ledger amounts,
    # which the ledger keeps below 2^127: refuse one that could never be one, when it loads.
    if units >= 2**127:
        raise ConfigurationInvalid(f"{what}: {text!r} is beyond the ledger's range (2^127 minor "
                                   "units)")
    return units


def _int(raw: Mapping[str, Any], key: str, where: str, *, default: int | None = None,
         low: int = 0, high: int = 2**63 - 1) -> int:
    value = raw.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ConfigurationInvalid(f"{where}.{key} must be an integer in [{low}, {high}]")
    return value


def _bool(raw: Mapping[str, Any], key: str, where: str, *, default: bool) -> bool:
    value = raw.get(key, default)
    if not isinstance(value, bool):
        raise ConfigurationInvalid(f"{where}.{key} must be true or false, got {value!r}")
    return value


def _choice(raw: Mapping[str, Any], key: str, where: str, choices: frozenset[str], *,
            default: str) -> str:
    value = raw.get(key, default)
    if value not in choices:
        raise ConfigurationInvalid(f"{where}.{key} must be one of {sorted(choices)}, got "
                                   f"{value!r}")
    return str(value)


def _text(raw: Mapping[str, Any], key: str, where: str, *, pattern: re.Pattern[str] | None = None,
          default: str | None = None) -> str:
    value = raw.get(key, default)
    if not isinstance(value, str) or not value or (pattern and not pattern.match(value)):
        raise ConfigurationInvalid(f"{where}.{key} is missing or malformed: {value!r}")
    return value


def _asset(assets: Mapping[str, AssetConfig], code: str, where: str) -> AssetConfig:
    if code not in assets:
        raise ConfigurationInvalid(f"{where}: asset {code} is not declared in [assets]")
    return assets[code]


def _parse_token(raw: Any, assets: Mapping[str, AssetConfig], where: str) -> TokenConfig:
    if not isinstance(raw, Mapping):
        raise ConfigurationInvalid(f"{where} must be a table")
    asset = _asset(assets, _text(raw, "asset", where, pattern=_ASSET), where)
    return TokenConfig(
        contract=_text(raw, "contract", where, pattern=_CONTRACT).lower(),
        symbol=_text(raw, "symbol", where),
        asset=asset.code,
        decimals=_int(raw, "decimals", where, high=77),
        minimum_minor=parse_units(raw.get("minimum", "0"), asset.scale,
                                  what=f"{where}.minimum"),
    )


def finality_strictness(rule: str) -> tuple[int, int]:
    """A sort key of a canonical rule text: greater is stricter. ``confirmations:N`` grow with
    N; ``finalized`` is above any number of confirmations (``chains.model.rule_strictness``)."""
    if rule == "finalized":
        return (1, 0)
    return (0, int(rule.partition(":")[2]))


def _rule_text(value: Any, what: str) -> str:
    finality = value.strip().lower() if isinstance(value, str) else ""
    if finality == "finalized_tag":
        finality = "finalized"
    if not _RULE.match(finality):
        raise ConfigurationInvalid(f"{what} must be 'finalized' or 'confirmations:<N>' "
                                   f"(N >= 1), got {value!r}")
    return finality


def _parse_thresholds(raw: Mapping[str, Any], where: str, assets: Mapping[str, AssetConfig],
                      credited: set[str], finality: str) -> tuple[FinalityThresholdConfig, ...]:
    """``finality_by_amount``: each stricter than the chain's rule, and, per asset, stricter
    as the amount grows (a larger deposit never waits less than a smaller one)."""
    tables = raw.get("finality_by_amount", [])
    if not isinstance(tables, list):
        raise ConfigurationInvalid(f"{where}.finality_by_amount must be a list of tables "
                                   "([[chains.<name>.finality_by_amount]])")
    found = []
    for i, t in enumerate(tables):
        at = f"{where}.finality_by_amount[{i}]"
        if not isinstance(t, Mapping) or set(t) - {"asset", "at_least", "finality"}:
            raise ConfigurationInvalid(f"{at} must be a table of asset, at_least and finality")
        asset = _asset(assets, _text(t, "asset", at, pattern=_ASSET), at)
        if asset.code not in credited:
            raise ConfigurationInvalid(f"{at}: asset {asset.code} is not credited on "
                                       f"{where} (its native asset or a listed token's)")
        minor = parse_units(t.get("at_least"), asset.scale, what=f"{at}.at_least")
        if minor <= 0:
            raise ConfigurationInvalid(f"{at}.at_least must be above 0")
        rule = _rule_text(t.get("finality"), f"{at}.finality")
        if finality_strictness(rule) <= finality_strictness(finality):
            raise ConfigurationInvalid(f"{at}.finality {rule!r} is not stricter than the "
                                       f"chain's finality {finality!r}")
        found.append(FinalityThresholdConfig(asset.code, str(t["at_least"]), minor, rule))
    for code in sorted({t.asset for t in found}):
        tiers = sorted((t for t in found if t.asset == code), key=lambda t: t.at_least_minor)
        for low, high in zip(tiers, tiers[1:], strict=False):
            if low.at_least_minor == high.at_least_minor:
                raise ConfigurationInvalid(f"{where}.finality_by_amount: two thresholds of "
                                           f"{code} at {high.at_least}")
            if finality_strictness(high.finality) <= finality_strictness(low.finality):
                raise ConfigurationInvalid(
                    f"{where}.finality_by_amount: {code} at {high.at_least} has "
                    f"{high.finality!r}, not stricter than {low.finality!r} at {low.at_least}")
    return tuple(found)


def _rpc_url(raw: Mapping[str, Any], where: str) -> str:
    # Secrets only from the environment: an RPC URL carrying an API key is named by variable.
    env = raw.get("rpc_url_env")
    if env is not None:
        value = os.environ.get(str(env))
        if not value:
            raise ConfigurationInvalid(f"{where}.rpc_url_env: variable {env} is not set")
        return value
    return _text(raw, "rpc_url", where)


def _addresses(raw: Mapping[str, Any], key: str, where: str,
               extra: tuple[str, ...] = ()) -> tuple[str, ...]:
    value = raw.get(key, [])
    if not isinstance(value, list) or not all(isinstance(a, str) and _CONTRACT.match(a)
                                              for a in value):
        raise ConfigurationInvalid(f"{where}.{key} must be a list of 0x addresses (40 hex "
                                   f"digits), got {value!r}")
    return tuple(dict.fromkeys([*(a.lower() for a in value), *extra]))


def _payout_wallet(data: Mapping[str, Any], name: str) -> tuple[str, ...]:
    """The ``address`` of ``[withdrawals.hot_wallets.<name>]``, if the document has one."""
    withdrawals = data.get("withdrawals")
    wallets = withdrawals.get("hot_wallets") if isinstance(withdrawals, Mapping) else None
    wallet = wallets.get(name) if isinstance(wallets, Mapping) else None
    address = wallet.get("address") if isinstance(wallet, Mapping) else None
    if isinstance(address, str) and _CONTRACT.match(address):
        return (address.lower(),)
    return ()  # Absent or malformed: config.withdrawals reports a malformed one.


def _parse_chain(name: str, raw: Any, assets: Mapping[str, AssetConfig],
                 payout: tuple[str, ...] = ()) -> ChainConfig:
    where = f"chains.{name}"
    if not _NAME.match(name) or not isinstance(raw, Mapping):
        raise ConfigurationInvalid(f"{where}: chain names are lower-case words; value a table")
    native = _asset(assets, _text(raw, "native_asset", where, pattern=_ASSET), where)
    tokens = tuple(_parse_token(t, assets, f"{where}.tokens[{i}]")
                   for i, t in enumerate(raw.get("tokens", [])))
    if len({t.contract for t in tokens}) != len(tokens):
        raise ConfigurationInvalid(f"{where}: a token contract is listed twice")
    finality = _rule_text(_text(raw, "finality", where), f"{where}.finality")
    thresholds = _parse_thresholds(raw, where, assets, {native.code, *(t.asset for t in tokens)},
                                   finality)
    attestor = _text(raw, "attestor", where, default="node")
    if attestor not in ATTESTORS:
        raise ConfigurationInvalid(f"{where}.attestor must be one of {sorted(ATTESTORS)}")
    cursor_keep = _int(raw, "cursor_keep", where, default=256, low=2, high=100_000)
    hot = _addresses(raw, "hot_addresses", where, payout)
    cold = _addresses(raw, "cold_addresses", where)
    if set(hot) & set(cold):
        raise ConfigurationInvalid(f"{where}: {sorted(set(hot) & set(cold))[0]} is listed both "
                                   "as a hot and a cold address")
    return ChainConfig(
        name=name,
        family=_text(raw, "family", where, pattern=_NAME, default="evm"),
        chain_id=_int(raw, "chain_id", where, low=1),
        rpc_url=_rpc_url(raw, where),
        finality=finality,
        native_asset=native.code,
        native_decimals=_int(raw, "native_decimals", where, default=18, high=77),
        native_minimum_minor=parse_units(raw.get("native_minimum", "0"), native.scale,
                                         what=f"{where}.native_minimum"),
        tokens=tokens,
        attestor=attestor,
        attestor_rpc_url=raw.get("attestor_rpc_url"),
        start_block=_int(raw, "start_block", where, default=0),
        scan_blocks_max=_int(raw, "scan_blocks_max", where, default=500, low=1, high=10_000),
        cursor_keep=cursor_keep,
        rpc_timeout_ms=_int(raw, "rpc_timeout_ms", where, default=10_000, low=100,
                            high=600_000),
        rpc_retries_max=_int(raw, "rpc_retries_max", where, default=3, high=20),
        poll_interval_s=float(raw.get("poll_interval_s", 2.0)),
        hot_addresses=hot,
        cold_addresses=cold,
        finality_by_amount=thresholds,
        recheck_blocks=_int(raw, "recheck_blocks", where, default=0, high=10_000_000),
        recheck_age_s=_int(raw, "recheck_age_s", where, default=86_400, high=10 * 366 * 86_400),
        recheck_batch_max=_int(raw, "recheck_batch_max", where, default=200, low=1,
                               high=10_000),
        trace_internal=_bool(raw, "trace_internal", where, default=True),
        trace_method=_choice(raw, "trace_method", where, TRACE_METHODS,
                             default="debug_traceBlockByHash"),
    )


def _parse_address_source(family: str, raw: Any) -> AddressSourceConfig:
    where = f"address_sources.{family}"
    if not isinstance(raw, Mapping):
        raise ConfigurationInvalid(f"{where} must be a table")
    kind = _text(raw, "kind", where)
    if kind not in ADDRESS_SOURCE_KINDS:
        raise ConfigurationInvalid(f"{where}.kind must be one of {sorted(ADDRESS_SOURCE_KINDS)}")
    source = AddressSourceConfig(
        kind=kind, account=_int(raw, "account", where, default=0, high=2**31 - 1),
        mnemonic_env=raw.get("mnemonic_env"), xpub=raw.get("xpub"),
        signer_url_env=raw.get("signer_url_env"),
        signer_timeout_ms=_int(raw, "signer_timeout_ms", where, default=5_000, high=600_000),
    )
    if source.signer_url_env is not None and (
            not isinstance(source.signer_url_env, str)
            or not re.match(r"^[A-Z_][A-Z0-9_]{0,127}$", source.signer_url_env)):
        raise ConfigurationInvalid(f"{where}.signer_url_env must name an environment variable")
    if kind == "mnemonic" and not source.mnemonic_env:
        raise ConfigurationInvalid(f"{where}: kind 'mnemonic' needs mnemonic_env")
    if kind == "xpub" and not source.xpub:
        raise ConfigurationInvalid(f"{where}: kind 'xpub' needs xpub")
    return source


def parse_chains_config(data: Mapping[str, Any]) -> ChainsConfig:
    """Validate a parsed TOML document (or an equivalent dict) into a :class:`ChainsConfig`.

    Each chain's ``hot_addresses`` also get the ``address`` of the document's
    ``[withdrawals.hot_wallets.<chain>]`` when there is one (the payout hot wallet is a hot
    address without being listed twice).
    """
    raw_assets = data.get("assets", {})
    if not isinstance(raw_assets, Mapping) or not raw_assets:
        raise ConfigurationInvalid("[assets] must declare at least one asset")
    assets: dict[str, AssetConfig] = {}
    for code, raw in raw_assets.items():
        if not _ASSET.match(code) or not isinstance(raw, Mapping):
            raise ConfigurationInvalid(f"assets.{code}: malformed asset")
        assets[code] = AssetConfig(code, _int(raw, "scale", f"assets.{code}", high=38))
    raw_chains = data.get("chains", {})
    if not isinstance(raw_chains, Mapping):
        raise ConfigurationInvalid("[chains] must be a table")
    chains = {name: _parse_chain(name, raw, assets, _payout_wallet(data, name))
              for name, raw in raw_chains.items()}
    raw_sources = data.get("address_sources", {})
    if not isinstance(raw_sources, Mapping):
        raise ConfigurationInvalid("[address_sources] must be a table")
    sources = {family: _parse_address_source(family, raw) for family, raw in raw_sources.items()}
    return ChainsConfig(assets=assets, chains=chains, address_sources=sources)


def read_config_document(path: str | Path | None = None) -> dict[str, Any]:
    """The configuration file ``path`` (default ``$CUSTODY_CONFIG``) as a parsed TOML
    document, or ConfigurationInvalid: the one reader of that file."""
    chosen = path if path is not None else os.environ.get(CONFIG_ENV)
    if not chosen:
        raise ConfigurationInvalid(f"no configuration file: set {CONFIG_ENV}")
    try:
        with open(chosen, "rb") as f:
            return tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigurationInvalid(f"cannot read configuration {chosen}: {exc}") from exc


def load_chains_config(path: str | Path | None = None) -> ChainsConfig:
    """Load the chain configuration from ``path`` or ``$CUSTODY_CONFIG``."""
    return parse_chains_config(read_config_document(path))
