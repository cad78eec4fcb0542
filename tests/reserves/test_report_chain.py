"""Proof of reserves on a real anvil and a real PostgreSQL (the sweep rig): after deposits,
sweeps and a withdrawal the holdings equal custody + treasury and the customer liabilities
equal custody; every user's proof verifies against the published root with the user's posted
balances; every address holding funds signed the report's message; a transfer out of the hot
wallet that the engine did not make puts the ratio below 1, and the report's findings become
cases with their alerts."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from eth_account import Account
from eth_utils.address import to_checksum_address
from sqlalchemy.engine import Engine

from api.cases import record_check
from chains.model import parse_finality_rule
from config.uow import UnitOfWork
from devtools.anvil import AnvilNode
from ledger import service as ledger
from reconcile.model import CaseType
from reserves import merkle, service
from reserves.errors import BlockNotFinal, ProofNotFound
from reserves.ownership import check_report
from reserves.signers import EngineSigners
from sweeps.holdings import final_height
from tests.reconcile.conftest import alerts, all_cases
from tests.sweeps.conftest import (
    BOB,
    CHAIN,
    ETH,
    HOT_KEY_ENV,
    USDC,
    SweepRig,
    make_rig,
)
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
    """Treasury funded, two users' deposits (ETH and USDC) credited and swept, and a
    withdrawal of user a settled."""
    r = make_rig(engine, node, monkeypatch)
    r.fund_treasury(ETH)
    r.deposit_eth("a", ETH // 2)
    r.deposit_usdc("a", 5 * USDC)
    r.deposit_usdc("b", 20 * USDC)
    r.settle()
    ctx = processor.build_context(r.chains, r.wcfg, CHAIN, environ={HOT_KEY_ENV: r.hot_key})
    request_withdrawal(r.engine, r.wcfg, _NotOurs(), WithdrawalRequest(
        user_id="a", chain=CHAIN, asset="ETH", destination=BOB, amount_minor=ETH // 10,
        request_key="w1"), now=r.clock)
    for _ in range(20):
        r.clock += timedelta(seconds=1)
        processor.step(r.engine, r.wcfg, ctx, now=r.clock)
        r.node.mine(2)
        r.watch()
        state = r.rows("SELECT state FROM withdrawals")[0].state
        if state == "settled":
            break
    assert state == "settled"
    r.settle()
    return r


def _take(rig: SweepRig, **kw: Any) -> service.Taken:
    rig.clock += timedelta(seconds=1)
    return service.take_report(rig.engine, rig.chains, now=rig.clock, taken_by="test",
                               signer_of=EngineSigners(rig.chains, rig.wcfg), **kw)


def _document(rig: SweepRig, report_id: int | None) -> dict[str, Any]:
    with UnitOfWork(rig.engine) as uow:
        return service.report_document(uow, report_id)


def _posted(rig: SweepRig, user_id: str) -> dict[str, int]:
    with UnitOfWork(rig.engine) as uow:
        return {b.asset.code: b.posted_minor for b in ledger.user_balances(uow, user_id)}


def test_reserves_equal_liabilities_after_deposits_withdrawals_and_sweeps(rig: SweepRig) -> None:
    taken = _take(rig)
    assert taken.report_id is not None and taken.findings == []
    doc = _document(rig, taken.report_id)
    by_asset = {a["asset"]: a for a in doc["assets"]}
    for asset in ("ETH", "USDC"):
        a = by_asset[asset]
        # On chain: exactly what the ledger says our addresses hold.
        assert int(a["on_chain"]) == rig.custody(asset) + rig.treasury(asset)
        assert a["difference"] == "0" and a["explained"] is True
        # Customer liabilities: exactly custody (the treasury is the company's own money).
        assert int(a["liabilities"]) == rig.custody(asset) > 0
        assert int(a["on_chain"]) - int(a["treasury"]) == int(a["liabilities"])
        assert a["ratio"] is not None and a["ratio"] >= "1.000000"
    assert by_asset["USDC"]["ratio"] == "1.000000"  # No treasury USDC: exactly covered.
    users = {u: _posted(rig, u) for u in ("a", "b")}
    assert doc["liabilities"]["users"] == 2
    assert int(by_asset["ETH"]["liabilities_users"]) == sum(p.get("ETH", 0) for p in users.values())
    (chain,) = doc["chains"]
    rule = parse_finality_rule(rig.chains.chain(CHAIN).finality)
    assert chain["block_number"] == final_height(rule, rig.node.head(), rig.node.finalized_block())
    block = rig.node.rpc.get_block(chain["block_number"])
    assert block is not None and block.hash == chain["block_hash"]


def test_every_users_proof_verifies_with_their_posted_balances(rig: SweepRig) -> None:
    taken = _take(rig)
    assert taken.report_id is not None
    root = _document(rig, taken.report_id)["liabilities"]["root"]
    for user_id in ("a", "b"):
        with UnitOfWork(rig.engine) as uow:
            proof = service.user_proof(uow, user_id)
        verified = merkle.verify(proof, root)
        assert verified.user_id == user_id
        posted = _posted(rig, user_id)
        assert verified.balances == {a: posted.get(a, 0) for a in proof["assets"]}
        # The proof for a does not verify as b's.
        other = {**proof, "leaf": {**proof["leaf"], "user_id": "b" if user_id == "a" else "a"}}
        with pytest.raises(merkle.ProofInvalid):
            merkle.verify(other, root)
    with UnitOfWork(rig.engine) as uow, pytest.raises(ProofNotFound):
        service.user_proof(uow, "nobody")


def test_every_address_holding_funds_signed_the_reports_message(rig: SweepRig) -> None:
    taken = _take(rig)
    assert taken.report_id is not None
    doc = _document(rig, taken.report_id)
    listed = {(a["address"], a["kind"]) for a in doc["addresses"]}
    assert (rig.hot, "hot") in listed
    checks = check_report(doc)
    assert checks and all(c.verdict == "ok" for c in checks), checks
    # Every address with a non-zero holding on chain is listed.
    for address in [rig.hot, *rig.users.values()]:
        wei, units = rig.on_chain(address)
        if wei or units:
            assert address in {a for a, _ in listed}


def test_a_named_block_that_is_not_final_is_refused(rig: SweepRig) -> None:
    with pytest.raises(BlockNotFinal):
        _take(rig, at_blocks={CHAIN: rig.node.head() + 1})
    with pytest.raises(BlockNotFinal):
        _take(rig, at_blocks={"nochain": 1})
    finalized = rig.node.finalized_block()
    taken = _take(rig, at_blocks={CHAIN: finalized})
    assert _document(rig, taken.report_id)["chains"][0]["block_number"] == finalized


def test_a_transfer_out_of_the_hot_wallet_puts_the_ratio_below_one(rig: SweepRig) -> None:
    held = rig.node.rpc.get_balance(rig.hot, "latest")
    gas = 21_000 * 2 * 10**10
    tx = {"to": to_checksum_address(BOB), "value": held - gas, "gas": 21_000,
          "maxFeePerGas": 2 * 10**10, "maxPriorityFeePerGas": 10**9,
          "chainId": int(rig.node.rpc.request("eth_chainId", []), 16),
          "nonce": rig.node.rpc.get_transaction_count(rig.hot, "latest"), "type": 2}
    rig.node.send_raw("0x" + bytes(Account.sign_transaction(tx, rig.hot_key).raw_transaction).hex())
    rig.node.mine(6)
    rig.watch()
    taken = _take(rig)
    assert taken.report_id is not None
    eth = {a["asset"]: a for a in _document(rig, taken.report_id)["assets"]}["ETH"]
    assert int(eth["on_chain"]) < int(eth["liabilities"]) and eth["ratio"] < "1"
    assert eth["explained"] is False
    types = {f.type for f in taken.findings}
    assert types == {CaseType.RESERVES_SHORTFALL, CaseType.RESERVES_DIFFERENCE_UNEXPLAINED}
    record_check(rig.engine, "reserves", taken.findings, rig.clock)
    opened = [c for c in all_cases(rig.engine) if c.type.startswith("reserves_")]
    assert {c.subject for c in opened} == {"reserves:ETH", "reserves:ETH:difference"}
    assert {a["type"] for a in alerts(rig.engine)} >= {"reserves_shortfall"}
    # Stored reports are never rewritten.
    with UnitOfWork(rig.engine) as uow, pytest.raises(sa.exc.DBAPIError):
        uow.conn.execute(sa.text("UPDATE reserve_reports SET root_hash = repeat('0', 64)"))
