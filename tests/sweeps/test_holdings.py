"""The holdings report (``sweeps.holdings``): its arithmetic on plain values (no database, no
node), then against a real anvil and a real PostgreSQL (the sweep rig): a settled system matches
the ledger exactly, address by address and per asset; a deposit or a sweep that is not final is
named in flight, at its address; a balance nobody booked is reported as it is."""

from __future__ import annotations

from dataclasses import replace
from types import MappingProxyType
from typing import Any

import pytest

from chains.balances import Balances
from chains.model import Confirmations, FinalizedTag
from chains.rpc import RpcClient, to_quantity
from config.chains import ChainConfig, TokenConfig, parse_chains_config
from devtools.config import dev_config
from sweeps.holdings import (
    AddressHolding,
    ChainHoldings,
    Flows,
    HoldingsReport,
    HoldingsUnavailable,
    LedgerSide,
    Line,
    Parts,
    assemble,
    chain_lines,
    final_height,
    group_parts,
    holdings,
    ledger_to_chain,
    report_json,
    status_of,
    units_json,
)
from sweeps.repository import AddressRecord

from .conftest import CHAIN, ETH, USDC, SweepRig

HOT, COLD = "0x" + "aa" * 20, "0x" + "cc" * 20
D1, D2, D3 = "0x" + "01" * 20, "0x" + "02" * 20, "0x" + "03" * 20
TOKEN = "0x" + "70" * 20


class TestArithmetic:
    def test_final_height_follows_the_rule(self) -> None:
        # A block at head - N + 1 has N confirmations (its own block is the first).
        assert final_height(Confirmations(3), 100, 90) == 98
        assert final_height(Confirmations(1), 100, None) == 100
        assert final_height(Confirmations(3), 1, None) is None
        assert final_height(FinalizedTag(), 100, 90) == 90
        assert final_height(FinalizedTag(), 100, None) is None

    def test_ledger_to_chain_is_exact_or_says_so(self) -> None:
        assert ledger_to_chain(30_000_000, 6, 18) == (30 * 10**18, True)
        assert ledger_to_chain(5, 6, 6) == (5, True)
        assert ledger_to_chain(1_500, 8, 6) == (15, True)
        assert ledger_to_chain(1_501, 8, 6) == (15, False)
        assert ledger_to_chain(-1_501, 8, 6) == (-16, False)  # toward minus infinity

    def test_group_residual_and_its_split(self) -> None:
        # custody 100 = customers 60 + suspense 5 on deposit addresses + 35 elsewhere;
        # treasury 40 = dust 3 on deposit addresses (and -1 where customer native paid gas)
        # + 38 at hot or cold addresses.
        deposits = Parts(customer=60, treasury=3, suspense=5) + Parts(treasury=-1)
        group = group_parts(100, 40, deposits)
        assert group == Parts(customer=35, treasury=38, suspense=0)
        assert group.expected + deposits.expected == 100 + 40

    def test_status(self) -> None:
        assert status_of(0, Flows(incoming=5), True) == "ok"
        assert status_of(-3, Flows(), False) == "unexplained"
        assert status_of(-3, Flows(held=1), False) == "in_flight"
        assert status_of(-3, Flows(), True) == "in_flight"

    def test_units_json_takes_any_size_and_sign(self) -> None:
        assert units_json(2**256 - 1, 18)["minor"] == str(2**256 - 1)
        assert units_json(-5, 6) == {"minor": "-5", "decimal": "-0.000005"}
        assert units_json(1_500_000, 6) == {"minor": "1500000", "decimal": "1.500000"}
        assert units_json(7, 0) == {"minor": "7", "decimal": "7"}


def _chain(**options: Any) -> ChainConfig:
    return parse_chains_config(dev_config(chain="dev", hot_wallet=None, token=TOKEN,
                                          chain_options=options)).chain("dev")


def _balances(native: dict[str, int], tokens: dict[tuple[str, str], int]) -> Balances:
    return Balances(98, "0x" + "bb" * 32, MappingProxyType(native), MappingProxyType(tokens))


def _assembled(include_empty: bool = False) -> ChainHoldings:
    chain = _chain(hot_addresses=[HOT], cold_addresses=[COLD])
    lines = [Line("ETH", None, 18, 18), Line("USDC", TOKEN, 6, 6)]
    records = {
        (D1, None): AddressRecord(D1, None, credited=50, top_ups=4, swept=30,
                                  swept_customer=30, gas_paid=1),
        (D1, TOKEN): AddressRecord(D1, TOKEN, credited=700, suspense=9),
    }
    side = LedgerSide(
        deposit_addresses=[D1, D2, D3], records=records,
        flows={(D2, None): Flows(incoming=11), (HOT, TOKEN): Flows(outgoing=100)},
        senders=frozenset({HOT}),
        # custody: D1's 20 customer ETH + 1,000 at hot/cold; 709 USDC at D1 + 100 elsewhere.
        custody_minor={"ETH": 1_020, "USDC": 809}, treasury_minor={"ETH": 500})
    native = {HOT: 1_300, COLD: 223, D1: 20 + 3, D2: 0, D3: 0}
    tokens = {(HOT, TOKEN): 100, (COLD, TOKEN): 0, (D1, TOKEN): 709, (D2, TOKEN): 0,
              (D3, TOKEN): 0}
    return assemble(chain, lines, side, _balances(native, tokens), include_empty=include_empty)


class TestAssemble:
    def test_every_address_and_the_group_balance_exactly(self) -> None:
        report = _assembled()
        eth, usdc = report.assets
        d1_eth = next(h for h in report.addresses if h.address == D1 and h.line.token is None)
        # D1: 50 credited, 30 swept (all customer), 4 topped up, 1 gas: 20 customer + 3 treasury.
        assert d1_eth.parts == Parts(customer=20, treasury=3, suspense=0)
        assert (d1_eth.difference, d1_eth.status) == (0, "ok")
        assert eth.on_chain == 1_300 + 223 + 23 and eth.ledger == 1_520
        assert eth.group.parts == Parts(customer=1_000, treasury=497)
        assert eth.group.on_chain == 1_523 and eth.group.difference == 26
        assert eth.difference == eth.group.difference + sum(
            h.difference or 0 for h in report.addresses if h.line.token is None)
        assert eth.deposits_expected == 23
        # The hot wallet is sending: a native difference there may be gas in flight.
        assert eth.group.status == "in_flight" and eth.status == "in_flight"
        assert usdc.group.parts == Parts(customer=100, treasury=0)
        assert (usdc.difference, usdc.status, usdc.group.difference) == (0, "ok", 0)
        assert usdc.flows == Flows(outgoing=100)

    def test_empty_deposit_addresses_are_counted_not_listed(self) -> None:
        listed = [(h.address, h.line.asset) for h in _assembled().addresses]
        # D2 is listed for ETH only (a deposit in flight), D3 not at all; hot and cold always.
        assert listed == [(HOT, "ETH"), (HOT, "USDC"), (COLD, "ETH"), (COLD, "USDC"),
                          (D1, "ETH"), (D1, "USDC"), (D2, "ETH")]
        full = _assembled(include_empty=True)
        assert len(full.addresses) == 10 and full.assets[0].addresses == 5
        assert {h.status for h in full.addresses if h.address == D3} == {"ok"}

    def test_hot_and_cold_rows_have_no_ledger_figures(self) -> None:
        hot = _assembled().addresses[0]
        assert isinstance(hot, AddressHolding) and hot.kind == "hot"
        assert (hot.parts, hot.difference, hot.status) == (None, None, None)
        row = report_json_rows(_assembled())[0]
        assert row["expected"] is None and row["on_chain"] == {"minor": "1300",
                                                               "decimal": "0.000000000000001300"}

    def test_two_sources_of_one_asset_are_refused(self) -> None:
        chain = _chain()
        config = parse_chains_config(dev_config(chain="dev", hot_wallet=None, token=TOKEN))
        bridged = TokenConfig("0x" + "71" * 20, "USDC.e", "USDC", 6, 0)
        with pytest.raises(HoldingsUnavailable) as raised:
            chain_lines(config, replace(chain, tokens=(*chain.tokens, bridged)))
        assert raised.value.code == "holdings_unavailable" and not raised.value.retryable


def report_json_rows(chain: ChainHoldings) -> list[dict[str, Any]]:
    """The address rows of one chain as JSON."""
    return list(report_json(HoldingsReport((chain,)))["chains"][0]["addresses"])


# --------------------------------------------------------------------------- on anvil


def _rows(report: ChainHoldings, address: str) -> dict[str, AddressHolding]:
    return {h.line.asset: h for h in report.addresses if h.address == address}


def _parts(h: AddressHolding) -> Parts:
    assert h.parts is not None, h
    return h.parts


def _report(rig: SweepRig, **options: Any) -> ChainHoldings:
    (chain,) = holdings(rig.engine, rig.chains, CHAIN, **options).chains
    return chain


def _assert_matches_the_ledger(rig: SweepRig, report: ChainHoldings) -> None:
    assets = {a.line.asset: a for a in report.assets}
    for asset in ("ETH", "USDC"):
        a = assets[asset]
        assert a.on_chain == rig.custody(asset) + rig.treasury(asset) == a.ledger, asset
        assert (a.difference, a.status, a.exact) == (0, "ok", True), asset
        assert (a.group.difference, a.group.status) == (0, "ok"), asset
        assert a.flows == Flows(), asset
    for h in report.addresses:
        assert h.kind != "deposit" or (h.difference, h.status) == (0, "ok"), h


@pytest.mark.anvil
def test_settled_deposits_and_sweeps_match_the_ledger_exactly(rig: SweepRig) -> None:
    rig.fund_treasury(3 * ETH)
    for i in range(4):
        rig.deposit_eth(f"e{i}", ETH // 4 + i)
        rig.deposit_usdc(f"u{i}", 50 * USDC + i)
    rig.deposit_usdc("e0", 3 * USDC)
    rig.settle(sweep=False)

    before = _report(rig)
    _assert_matches_the_ledger(rig, before)
    assert before.finality == "confirmations:3"
    assert before.block_number == rig.node.head() - 2  # 3 confirmations
    assert before.deposit_addresses == 8 and before.hot_addresses == 1
    e0 = _rows(before, rig.user("e0"))
    assert e0["ETH"].parts == Parts(customer=ETH // 4, treasury=0, suspense=0)
    assert e0["USDC"].on_chain == _parts(e0["USDC"]).expected == 3 * USDC
    hot = _rows(before, rig.hot)["ETH"]
    assert hot.on_chain == 3 * ETH == before.assets[0].group.parts.treasury

    rig.settle()  # Every address swept to the hot wallet, gas booked.

    after = _report(rig)
    _assert_matches_the_ledger(rig, after)
    usdc = after.assets[1]
    assert usdc.group.on_chain == usdc.ledger == 200 * USDC + 6 + 3 * USDC
    assert usdc.group.parts.customer == usdc.ledger and usdc.deposits_expected == 0
    eth = after.assets[0]
    # What the top-ups left behind is treasury money at the deposit addresses.
    dust = [h for h in after.addresses if h.kind == "deposit" and h.line.asset == "ETH"]
    assert sum(h.on_chain for h in dust) == eth.deposits_expected
    assert eth.group.parts.treasury + sum(_parts(h).treasury for h in dust) == rig.treasury(
        "ETH")
    data = report_json(holdings(rig.engine, rig.chains))
    (chain,) = data["chains"]
    assert chain["assets"][1]["ledger"]["custody"]["minor"] == str(rig.custody("USDC"))
    assert all(isinstance(r["on_chain"]["minor"], str) for r in chain["addresses"])


@pytest.mark.anvil
def test_a_deposit_not_final_is_in_flight_at_its_address(rig: SweepRig) -> None:
    rig.fund_treasury(ETH)
    rig.settle(sweep=False)
    rig.deposit_eth("late", ETH // 3)
    rig.watch()
    address = rig.user("late")
    # Included at the head, above the report's block: nothing differs, it is named in flight.
    row = _rows(_report(rig), address)["ETH"]
    assert (row.on_chain, row.parts, row.difference) == (0, Parts(), 0)
    assert row.flows == Flows(incoming=ETH // 3) and row.status == "ok"
    # Final on chain but not yet recorded as such (the watcher has not looked): the chain has
    # it, the ledger not yet: a difference, named.
    rig.node.mine(3)
    report = _report(rig)
    row = _rows(report, address)["ETH"]
    assert (row.on_chain, row.difference, row.status) == (ETH // 3, ETH // 3, "in_flight")
    assert report.assets[0].difference == ETH // 3 and report.assets[0].status == "in_flight"
    assert report.assets[0].flows.incoming == ETH // 3
    rig.settle(sweep=False)
    _assert_matches_the_ledger(rig, _report(rig))


@pytest.mark.anvil
def test_a_sweep_in_flight_is_named_at_both_ends(rig: SweepRig) -> None:
    rig.fund_treasury(ETH)
    rig.deposit_eth("s", ETH // 2)
    rig.settle(sweep=False)
    address = rig.user("s")
    rig.sweep()  # Planned, signed, sent and mined (automine); not final.
    (sweep,) = rig.rows("SELECT * FROM sweeps")
    assert sweep.state in ("broadcast", "included")
    report = _report(rig)
    row = _rows(report, address)["ETH"]
    assert row.flows == Flows(outgoing=int(sweep.available)) and row.sending
    assert (row.difference, row.status) == (0, "ok")  # Above the report's block still.
    assert _rows(report, rig.hot)["ETH"].flows == Flows(incoming=int(sweep.available))
    rig.node.mine(3)  # Final on chain; the sweeper has not seen it: named in flight.
    report = _report(rig)
    row = _rows(report, address)["ETH"]
    # Left behind: the part of the gas reserve the sweep did not use.
    assert 0 < row.on_chain < ETH // 10_000 and row.status == "in_flight"
    assert row.difference == row.on_chain - ETH // 2
    eth = report.assets[0]
    assert eth.group.status == "in_flight" and eth.status == "in_flight"
    assert -ETH // 2 < eth.difference < 0  # the gas paid, booked once the sweep is final
    rig.settle()
    _assert_matches_the_ledger(rig, _report(rig))


@pytest.mark.anvil
def test_a_balance_nobody_booked_is_reported_exactly(rig: SweepRig) -> None:
    rig.fund_treasury(ETH)
    rig.deposit_eth("x", ETH // 5)
    rig.deposit_usdc("y", 9 * USDC)
    rig.settle(sweep=False)
    address = rig.user("x")
    rig.node.rpc.request("anvil_setBalance", [address, to_quantity(ETH // 5 + 12_345)])
    rig.node.rpc.request("anvil_setBalance", [rig.hot, to_quantity(ETH - 777)])
    rig.node.mine(3)
    report = _report(rig)
    row = _rows(report, address)["ETH"]
    assert (row.difference, row.status) == (12_345, "unexplained")
    eth, usdc = report.assets
    assert (eth.group.difference, eth.group.status) == (-777, "unexplained")
    assert (eth.difference, eth.status) == (12_345 - 777, "unexplained")
    assert (usdc.difference, usdc.status) == (0, "ok")
    unexplained = [(h.address, h.line.asset) for h in report.addresses
                   if h.status == "unexplained"]
    assert unexplained == [(address, "ETH")]


@pytest.mark.anvil
def test_progress_is_reported_and_a_dead_node_is_unavailable(rig: SweepRig) -> None:
    rig.deposit_usdc("p", USDC)
    rig.settle(sweep=False)
    seen: list[tuple[str, int, int]] = []
    _report(rig, on_progress=lambda chain, done, total: seen.append((chain, done, total)))
    assert seen and seen[-1] == (CHAIN, 2, 2)  # the hot wallet and one deposit address

    def dead(chain: ChainConfig) -> RpcClient:
        return RpcClient("http://127.0.0.1:9", rpc_timeout_ms=200, retries_max=0)

    with pytest.raises(HoldingsUnavailable) as raised:
        holdings(rig.engine, rig.chains, CHAIN, rpc_factory=dead)
    assert raised.value.retryable and raised.value.chain == CHAIN
    assert "could not be read" in raised.value.message
