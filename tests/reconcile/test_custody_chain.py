"""Custody against the chain on a real anvil and a real PostgreSQL (the sweep rig): a chain where
all is well gives no finding, also while a sweep or a withdrawal is in flight (the named
movements explain the difference); a transfer out of the hot wallet that the engine did not
make gives exactly one finding, at that chain, address and asset, with the ledger's and the
chain's figures."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest
from eth_account import Account
from eth_utils.address import to_checksum_address
from sqlalchemy.engine import Engine

from api.jobs import build_jobs, custody_check
from config.chains import parse_chains_config
from devtools.anvil import AnvilNode
from devtools.config import dev_config
from reconcile import custody
from reconcile.chain_model import Verdict
from reconcile.model import Recorded
from tests.reconcile.conftest import alerts, all_cases
from tests.sweeps.conftest import BOB, CHAIN, ETH, HOT_KEY_ENV, USDC, SweepRig, make_rig
from withdrawals import processor
from withdrawals.service import WithdrawalRequest, request_withdrawal

pytestmark = pytest.mark.anvil


class _NotOurs:
    def is_own(self, chain: str, address: str) -> bool:
        return False


@pytest.fixture
def node() -> Iterator[AnvilNode]:
    """A fresh anvil (automine on, finalized 4 blocks behind)."""
    with AnvilNode.start(slots_in_an_epoch=2) as n:
        yield n


@pytest.fixture
def rig(engine: Engine, node: AnvilNode, monkeypatch: pytest.MonkeyPatch) -> SweepRig:
    """A hot wallet with 1 ETH of treasury money, two credited deposits (ETH and USDC)."""
    r = make_rig(engine, node, monkeypatch)
    r.fund_treasury(ETH)
    r.deposit_eth("a", ETH // 2)
    r.deposit_usdc("b", 20 * USDC)
    r.settle(sweep=False)
    return r


def _check(rig: SweepRig) -> custody.CustodyCheck:
    """One run of the job's step: the chain checked, its findings recorded as cases."""
    return _run(rig)[0]


def _run(rig: SweepRig) -> tuple[custody.CustodyCheck, Recorded]:
    return custody_check(rig.engine, rig.chains, CHAIN, rig.clock)


def _send_from_hot(rig: SweepRig, value: int) -> str:
    """A transfer out of the hot wallet signed with its key, outside the engine."""
    rpc = rig.node.rpc
    tx = {"to": to_checksum_address(BOB), "value": value, "gas": 21_000, "maxFeePerGas": 2 * 10**10,
          "maxPriorityFeePerGas": 10**9, "chainId": int(rpc.request("eth_chainId", []), 16),
          "nonce": rpc.get_transaction_count(rig.hot, "latest"), "type": 2}
    signed = Account.sign_transaction(tx, rig.hot_key)
    return rig.node.send_raw("0x" + bytes(signed.raw_transaction).hex())


def _unexplained(check: custody.CustodyCheck) -> list[Verdict]:
    return [v for v in check.verdicts if not v.explained]


def test_a_settled_chain_and_movements_in_flight_give_no_finding(rig: SweepRig) -> None:
    first = _check(rig)
    assert first.incoming_known and not _unexplained(first) and not first.findings
    # Every deposit address and the hot wallet, per line, was judged.
    holders = {(v.position.holder, v.position.asset) for v in first.verdicts}
    assert {(rig.hot, "ETH"), (rig.hot, "USDC"), (rig.user("a"), "ETH"),
            (rig.user("b"), "USDC")} <= holders

    # A sweep of the ETH address and a gas top-up of the USDC one, sent and final on chain,
    # the sweeper has not seen them: the chain moved, the ledger not yet; the named movements
    # explain it at both ends.
    rig.sweep()
    rig.node.mine(3)
    rig.watch()
    during = _check(rig)
    moved = {(v.position.holder, v.position.asset): sorted(m.kind for m in v.movements)
             for v in during.verdicts if v.position.difference != 0}
    assert moved == {(rig.user("a"), "ETH"): ["sweep"], (rig.user("b"), "ETH"): ["gas_top_up"],
                     (rig.hot, "ETH"): ["gas_top_up", "sweep"]}
    assert not during.findings
    rig.settle()

    # A withdrawal broadcast and final on chain, not settled yet: amount and gas have left.
    ctx = processor.build_context(rig.chains, rig.wcfg, CHAIN,
                                  environ={HOT_KEY_ENV: rig.hot_key})
    request_withdrawal(rig.engine, rig.wcfg, _NotOurs(), WithdrawalRequest(
        user_id="a", chain=CHAIN, asset="ETH", destination=BOB, amount_minor=ETH // 10,
        request_key="w1"), now=rig.clock)
    rig.clock += timedelta(seconds=1)
    processor.step(rig.engine, rig.wcfg, ctx, now=rig.clock)
    rig.node.mine(3)
    rig.watch()
    paying = _check(rig)
    (hot_eth,) = [v for v in paying.verdicts if (v.position.holder, v.position.asset)
                  == (rig.hot, "ETH")]
    assert hot_eth.position.difference < -ETH // 10  # the amount and the gas
    assert [m.kind for m in hot_eth.movements] == ["withdrawal"]
    assert hot_eth.explained and not paying.findings
    assert all_cases(rig.engine) == []


def test_a_transfer_out_of_the_hot_wallet_gives_one_finding(rig: SweepRig) -> None:
    before = _check(rig)
    (hot_eth,) = [v.position for v in before.verdicts
                  if (v.position.holder, v.position.asset) == (rig.hot, "ETH")]
    _send_from_hot(rig, ETH // 4)
    rig.node.mine(3)
    rig.watch()
    after, first = _run(rig)
    (finding,) = after.findings
    gas = hot_eth.on_chain - ETH // 4 - rig.on_chain(rig.hot)[0]
    assert gas > 0
    assert finding.type == "custody_chain_mismatch"
    assert finding.subject == f"custody:{CHAIN}:{rig.hot}:ETH"
    assert finding.expected == str(hot_eth.expected) == str(ETH)
    assert finding.observed == str(ETH - ETH // 4 - gas)
    assert finding.evidence["difference"] == str(-(ETH // 4) - gas)
    assert finding.evidence["movements_in_flight"] == 0
    assert finding.evidence["block_number"] == after.block_number

    # Exactly one case, with its alert; the next run re-sights it and opens nothing.
    (case,) = all_cases(rig.engine)
    assert first.opened == [case.id] and case.subject == finding.subject
    assert (case.type, case.expected, case.observed) == (
        "custody_chain_mismatch", finding.expected, finding.observed)
    rig.node.mine(1)
    rig.watch()
    _, second = _run(rig)
    assert second.opened == [] and second.updated == [case.id]
    (case,) = all_cases(rig.engine)
    assert case.seen_count == 2 and case.status == "open"
    assert [a["case_id"] for a in alerts(rig.engine)] == [str(case.id)]


@pytest.mark.parametrize("chains", [("dev",), ("dev", "other")])
def test_each_chain_has_its_custody_job(engine: Engine, chains: tuple[str, ...]) -> None:
    doc = dev_config(chain=chains[0], hot_wallet=None)
    for extra in chains[1:]:
        doc["chains"][extra] = {**doc["chains"][chains[0]], "chain_id": 99}
    names = [j.name for j in build_jobs(engine, parse_chains_config(doc), None,
                                        only=["reconcile.custody", "reconcile.provider"])]
    assert names == [*(f"reconcile.custody:{c}" for c in chains), "reconcile.provider"]
