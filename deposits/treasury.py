"""The treasury report (``custody treasury show``, ``GET /v1/admin/treasury``): per chain and
asset, what the ledger says (``treasury:{chain}``, ``custody:{chain}``) next to what the chain
holds at the node's finalized block, on the hot wallets and on all our addresses (users'
deposit addresses, hot and cold addresses).

The chain is read first, outside any database transaction: one ``eth_getBlockByNumber
("finalized")``, then one batched request of ``eth_getBalance`` and ERC-20 ``balanceOf``
(``eth_call``) per address and listed token at that block number, split into chunks by the RPC
client (``batch_size_max``). The number of deposit addresses read is bounded
(``addresses_max``): a chain with more refuses the report rather than giving a partial sum.
The ledger is then read in one short unit of work. A movement in flight (a payout broadcast,
not yet final) shows as a difference; the acceptance test compares a quiet system, where the
difference is exactly zero. A chain whose node cannot be read (no answer, no finalized block,
too many addresses) still gets its ledger figures, with the on-chain ones None and
``unavailable`` saying why: one node down never hides the other chains' report.

On-chain values are converted to the ledger asset's minor units (token decimals to the asset's
scale); a value that does not convert exactly is rounded down and the row says ``exact``
False. Of a hot wallet's balance, the treasury's part is assumed to sit there first (gas is
paid from the hot wallet): ``hot_treasury = min(treasury, hot)``, the rest is customer money.
"""

from __future__ import annotations

from dataclasses import dataclass

from eth_utils.crypto import keccak
from sqlalchemy.engine import Engine

from chains.errors import ChainError
from chains.rpc import RpcCall, from_quantity, to_quantity
from config.chains import ChainConfig, ChainsConfig
from config.uow import UnitOfWork
from deposits import repository as repo
from deposits.errors import DepositError
from ledger import chart
from ledger import service as ledger
from ledger.errors import AccountNotFound, AssetNotFound

BALANCE_OF = "0x" + keccak(text="balanceOf(address)")[:4].hex()


class TreasuryReportUnavailable(DepositError):
    """The report cannot be made exactly (no finalized block, too many addresses)."""

    code = "treasury_report_unavailable"
    retryable = True


@dataclass(frozen=True)
class AssetHoldings:
    """One chain and asset of the treasury report (amounts in the asset's minor units)."""

    chain: str
    asset: str
    scale: int
    #: The chain's native asset: the treasury's balance is the gas float.
    native: bool
    #: The node's finalized block the on-chain figures were read at (None: not read).
    block_number: int | None
    treasury_minor: int
    #: The gas float: the treasury balance of the native asset (None for other assets).
    gas_float_minor: int | None
    hot_onchain_minor: int | None
    #: Of the hot wallets' balance: customer money (custody) and company money (treasury).
    hot_custody_minor: int | None
    hot_treasury_minor: int | None
    #: All our addresses (deposit, hot, cold) on chain at ``block_number``.
    onchain_minor: int | None
    custody_minor: int
    #: ``custody_minor + treasury_minor``.
    ledger_minor: int
    #: ``onchain_minor - ledger_minor``: zero when every unit on chain is accounted for.
    difference_minor: int | None
    #: How many of our addresses were read.
    addresses: int
    #: False when an on-chain value did not convert exactly to the ledger scale.
    exact: bool
    #: Why the on-chain figures are missing (the node's error), None when they were read.
    unavailable: str | None = None


def _convert(value: int, decimals: int, scale: int) -> tuple[int, bool]:
    if scale >= decimals:
        return value * 10 ** (scale - decimals), True
    quotient, remainder = divmod(value, 10 ** (decimals - scale))
    return quotient, remainder == 0


def _balance_of(address: str) -> str:
    return BALANCE_OF + address.lower().removeprefix("0x").rjust(64, "0")


def _onchain(config: ChainsConfig, chain: ChainConfig, addresses: list[str],
             ) -> tuple[int, dict[str, dict[str, tuple[int, bool]]]]:
    """(finalized block, asset -> address -> (ledger minor units, exact))."""
    from deposits.watcher import rpc_for

    with rpc_for(chain.rpc_url, chain) as rpc:
        finalized = rpc.get_block("finalized")
        if finalized is None:
            raise TreasuryReportUnavailable(f"{chain.name}: the node reports no finalized block")
        at = to_quantity(finalized.number)
        calls = [RpcCall("eth_getBalance", [a, at]) for a in addresses]
        for token in chain.tokens:
            calls += [RpcCall("eth_call", [{"to": token.contract, "data": _balance_of(a)}, at])
                      for a in addresses]
        answers = rpc.batch_results(calls)
    found: dict[str, dict[str, tuple[int, bool]]] = {}
    sources = [(chain.native_asset, chain.native_decimals)]
    sources += [(t.asset, t.decimals) for t in chain.tokens]
    for i, (asset, decimals) in enumerate(sources):
        per = found.setdefault(asset, {})
        for j, address in enumerate(addresses):
            raw = answers[i * len(addresses) + j]
            value = from_quantity(raw) if raw not in (None, "0x") else 0
            amount, exact = _convert(value, decimals, config.assets[asset].scale)
            before = per.get(address, (0, True))
            per[address] = (before[0] + amount, before[1] and exact)
    return finalized.number, found


def _ledger_balance(uow: UnitOfWork, code: str, asset: str) -> int:
    try:
        return ledger.account_balance(uow, ledger.get_account(uow, code, asset)).balance_minor
    except (AccountNotFound, AssetNotFound):
        return 0


def chain_report(engine: Engine, config: ChainsConfig, chain: ChainConfig, *,
                 addresses_max: int = 20_000) -> list[AssetHoldings]:
    """The report of one chain, one row per asset (native first)."""
    with UnitOfWork(engine) as uow:
        deposit = repo.deposit_addresses(uow.conn, chain.family, limit=addresses_max + 1)
    if len(deposit) > addresses_max:
        return _ledger_only(engine, config, chain, len(deposit), (
            f"{chain.name}: more than {addresses_max} deposit addresses; raise addresses_max"))
    addresses = list(dict.fromkeys([*chain.hot_addresses, *chain.cold_addresses, *deposit]))
    try:
        block, onchain = _onchain(config, chain, addresses)
    except (ChainError, TreasuryReportUnavailable) as exc:
        return _ledger_only(engine, config, chain, len(addresses), exc.message)
    rows = []
    with UnitOfWork(engine) as uow:
        for asset, per in onchain.items():
            treasury = _ledger_balance(uow, chart.treasury(chain.name).code, asset)
            custody = _ledger_balance(uow, chart.custody(chain.name).code, asset)
            hot = sum(per[a][0] for a in chain.hot_addresses)
            total = sum(v for v, _ in per.values())
            hot_treasury = min(max(treasury, 0), hot)
            native = asset == chain.native_asset
            rows.append(AssetHoldings(
                chain=chain.name, asset=asset, scale=config.assets[asset].scale, native=native,
                block_number=block, treasury_minor=treasury,
                gas_float_minor=treasury if native else None, hot_onchain_minor=hot,
                hot_custody_minor=hot - hot_treasury, hot_treasury_minor=hot_treasury,
                onchain_minor=total, custody_minor=custody, ledger_minor=custody + treasury,
                difference_minor=total - custody - treasury, addresses=len(addresses),
                exact=all(e for _, e in per.values())))
    return rows


def _ledger_only(engine: Engine, config: ChainsConfig, chain: ChainConfig, addresses: int,
                 why: str) -> list[AssetHoldings]:
    """The rows of a chain whose on-chain figures could not be read: the ledger's only."""
    assets = list(dict.fromkeys([chain.native_asset, *(t.asset for t in chain.tokens)]))
    rows = []
    with UnitOfWork(engine) as uow:
        for asset in assets:
            treasury = _ledger_balance(uow, chart.treasury(chain.name).code, asset)
            custody = _ledger_balance(uow, chart.custody(chain.name).code, asset)
            native = asset == chain.native_asset
            rows.append(AssetHoldings(
                chain=chain.name, asset=asset, scale=config.assets[asset].scale, native=native,
                block_number=None, treasury_minor=treasury,
                gas_float_minor=treasury if native else None, hot_onchain_minor=None,
                hot_custody_minor=None, hot_treasury_minor=None, onchain_minor=None,
                custody_minor=custody, ledger_minor=custody + treasury, difference_minor=None,
                addresses=addresses, exact=True, unavailable=why))
    return rows


def treasury_report(engine: Engine, config: ChainsConfig, chains: list[str] | None = None, *,
                    addresses_max: int = 20_000) -> list[AssetHoldings]:
    """The report of ``chains`` (default: every configured chain), chain by chain."""
    names = chains or sorted(config.chains)
    return [row for name in names
            for row in chain_report(engine, config, config.chain(name),
                                    addresses_max=addresses_max)]
