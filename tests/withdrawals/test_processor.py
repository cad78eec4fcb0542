"""Sign, broadcast, track to finality and settle against real anvil and PostgreSQL."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pytest
from eth_utils.address import to_checksum_address
from sqlalchemy.engine import Engine

from config.uow import UnitOfWork
from config.withdrawals import WithdrawalsConfig
from ledger.integrity import verify
from tests.support.fault_proxy import FaultProxy
from withdrawals import errors, processor, service
from withdrawals import repository as repo
from withdrawals.model import State

from .chainkit import KEY_ENV, Devnet, start_devnet
from .conftest import (
    ALICE,
    CAROL,
    DAVE,
    DEST,
    SetOwnAddresses,
    balance,
    fund,
    load,
    open_book,
    req,
)

pytestmark = pytest.mark.anvil


@pytest.fixture
def devnet() -> Iterator[Devnet]:
    net = start_devnet()
    yield net
    net.node.stop()


@pytest.fixture
def funded(engine: Engine, devnet: Devnet) -> Engine:
    open_book(engine)
    fund(engine, ["u1"], 150_000_000)
    return engine


def state(engine: Engine, withdrawal_id: int) -> State:
    return service.get_withdrawal(engine, withdrawal_id).state


def events(engine: Engine, withdrawal_id: int) -> list[str]:
    return [e.event for e in service.timeline(engine, withdrawal_id).events]


def keys(engine: Engine, withdrawal_id: int) -> list[str]:
    return [t.idempotency_key for t in service.timeline(engine, withdrawal_id).transactions]


class TestSettle:
    def test_usdc_withdrawal_settles_actual_amounts_at_finality(
            self, funded: Engine, devnet: Devnet) -> None:
        own = SetOwnAddresses()
        w = service.request_withdrawal(funded, devnet.cfg, own, req(), now=devnet.clock).withdrawal
        assert balance(funded, "user:u1:wallet") == 118_000_000
        devnet.step(funded)
        assert state(funded, w.id) is State.BROADCAST
        # confirmations:3 -> the block of the payout is the first; final at the third.
        for expected in (State.INCLUDED, State.INCLUDED):
            devnet.node.mine(1)
            devnet.step(funded)
            assert state(funded, w.id) is expected
            assert balance(funded, "user:u1:wallet") == 118_000_000
        devnet.node.mine(1)
        devnet.step(funded)
        w = service.get_withdrawal(funded, w.id)
        assert w.state is State.SETTLED
        assert balance(funded, "user:u1:wallet") == 119_600_000
        assert balance(funded, "user:u1:withdrawals") == 0
        assert balance(funded, "revenue:withdrawal_fees") == 400_000
        assert balance(funded, "treasury:devnet") == 400_000
        assert balance(funded, "custody:devnet") == 119_600_000
        assert devnet.token_balance(DEST) == 30_000_000
        # Gas: the company's expense in ETH, out of the treasury.
        tl = service.timeline(funded, w.id)
        [attempt] = tl.attempts
        receipt = devnet.node.rpc.get_receipt(attempt.tx_hash)
        assert receipt is not None
        gas_wei = int(receipt["gasUsed"], 16) * int(receipt["effectiveGasPrice"], 16)
        assert balance(funded, "expense:network_fees", "ETH") == gas_wei
        assert balance(funded, "treasury:devnet", "ETH") == 10 * 10**18 - gas_wei
        assert keys(funded, w.id) == [f"withdrawal:{w.id}:{s}" for s in
                                      ("reserve", "settle", "gas:1")]
        settle = tl.transactions[1]
        assert any(p.closes_posting_id == w.reserve_posting_id for p in settle.postings)
        assert events(funded, w.id) == ["reserve_posted", "nonce_assigned", "attempt_signed",
                                        "send_accepted", "receipt_observed", "final_succeeded"]
        assert tl.events[-1].evidence["confirmations"] == 3
        report = verify(funded)
        assert report.ok, report.discrepancies
        # Nothing more happens on later steps.
        devnet.node.mine(2)
        devnet.step(funded)
        assert len(devnet.transfers_to(DEST)) == 1

    def test_reorg_before_finality_goes_back_to_broadcast(self, funded: Engine,
                                                          devnet: Devnet) -> None:
        w = service.request_withdrawal(funded, devnet.cfg, SetOwnAddresses(), req(),
                                       now=devnet.clock).withdrawal
        devnet.step(funded)
        devnet.node.mine(1)
        devnet.step(funded)
        assert state(funded, w.id) is State.INCLUDED
        devnet.node.reorg(1)  # The payout's block is replaced; anvil drops the transaction.
        devnet.step(funded)
        assert state(funded, w.id) is State.BROADCAST  # and the same bytes were re-sent
        assert balance(funded, "user:u1:withdrawals") == 32_000_000
        devnet.node.mine(3)
        devnet.step(funded)
        assert state(funded, w.id) is State.SETTLED
        assert events(funded, w.id).count("reorged_out") == 1
        assert len(devnet.transfers_to(DEST)) == 1
        assert verify(funded).ok

    def test_reverted_on_chain_releases_and_books_gas(self, funded: Engine,
                                                      devnet: Devnet) -> None:
        devnet.node.transact(devnet.token, "setBlocked", [DEST, True], gas=100_000)
        devnet.node.mine(1)
        w = service.request_withdrawal(funded, devnet.cfg, SetOwnAddresses(), req(),
                                       now=devnet.clock).withdrawal
        devnet.step(funded)
        devnet.node.mine(3)
        devnet.step(funded)
        assert state(funded, w.id) is State.REVERTED
        assert balance(funded, "user:u1:wallet") == 150_000_000
        assert balance(funded, "expense:network_fees", "ETH") > 0
        assert keys(funded, w.id) == [f"withdrawal:{w.id}:{s}" for s in
                                      ("reserve", "release", "gas:1")]
        assert devnet.token_balance(DEST) == 0
        assert verify(funded).ok

    def test_native_eth_withdrawal(self, engine: Engine, devnet: Devnet) -> None:
        open_book(engine)
        fund(engine, ["u1"], 2 * 10**18, asset="ETH")
        w = service.request_withdrawal(
            engine, devnet.cfg, SetOwnAddresses(),
            req(amount=10**18, asset="ETH"), now=devnet.clock).withdrawal
        before = devnet.node.rpc.get_balance(DEST)
        devnet.step(engine)
        devnet.node.mine(3)
        devnet.step(engine)
        assert state(engine, w.id) is State.SETTLED
        assert devnet.node.rpc.get_balance(DEST) - before == 10**18
        assert balance(engine, "user:u1:wallet", "ETH") == 10**18 - 10**14
        assert verify(engine).ok

    def test_cancel_after_signing_is_refused(self, funded: Engine, devnet: Devnet) -> None:
        w = service.request_withdrawal(funded, devnet.cfg, SetOwnAddresses(), req(),
                                       now=devnet.clock).withdrawal
        devnet.step(funded)
        with pytest.raises(errors.WithdrawalNotCancelable):
            service.cancel(funded, w.id, "u1", now=devnet.clock)


class TestUnknownOutcome:
    def test_answer_dropped_finds_the_landed_transaction_and_settles_once(
            self, funded: Engine, devnet: Devnet) -> None:
        with FaultProxy(devnet.node.url) as proxy:
            ctx = devnet.context(proxy.url)
            w = service.request_withdrawal(funded, devnet.cfg, SetOwnAddresses(), req(),
                                           now=devnet.clock).withdrawal
            proxy.fault = "drop_answer"
            devnet.step(funded, ctx)
            assert proxy.forwarded_sends >= 1 and proxy.dropped_sends >= 1
            assert "send_unconfirmed" in events(funded, w.id)
            assert balance(funded, "user:u1:withdrawals") == 32_000_000  # stays reserved
            proxy.fault = None
            devnet.node.mine(3)
            devnet.step(funded, ctx)
            devnet.node.mine(1)
            devnet.step(funded, ctx)
        assert state(funded, w.id) is State.SETTLED
        assert len(service.timeline(funded, w.id).attempts) == 1
        assert keys(funded, w.id).count(f"withdrawal:{w.id}:settle") == 1
        assert len(devnet.transfers_to(DEST)) == 1
        assert balance(funded, "user:u1:wallet") == 119_600_000
        assert verify(funded).ok

    def test_request_dropped_is_replaced_with_same_nonce_and_lands_once(
            self, funded: Engine, devnet: Devnet) -> None:
        with FaultProxy(devnet.node.url) as proxy:
            ctx = devnet.context(proxy.url)
            w = service.request_withdrawal(funded, devnet.cfg, SetOwnAddresses(), req(),
                                           now=devnet.clock).withdrawal
            proxy.fault = "drop_request"
            devnet.step(funded, ctx)
            assert proxy.forwarded_sends == 0
            assert state(funded, w.id) is State.UNKNOWN
            proxy.fault = None
            devnet.step(funded, ctx)  # nothing landed, nonce free: fee-bumped replacement
            devnet.node.mine(3)
            devnet.step(funded, ctx)
        tl = service.timeline(funded, w.id)
        assert tl.withdrawal.state is State.SETTLED
        assert len(tl.attempts) >= 2
        assert len({a.nonce for a in tl.attempts}) == 1
        assert tl.attempts[-1].max_fee_per_gas > tl.attempts[0].max_fee_per_gas
        assert len(devnet.transfers_to(DEST)) == 1
        assert devnet.node.rpc.get_transaction_count(devnet.hot) == 1
        assert verify(funded).ok

    def test_undetermined_waits_for_two_different_admins(self, funded: Engine,
                                                         devnet: Devnet) -> None:
        cfg = dataclasses.replace(devnet.cfg, attempts_max=1, escalate_after_s=60)
        with FaultProxy(devnet.node.url) as proxy:
            ctx = devnet.context(proxy.url, cfg)
            w = service.request_withdrawal(funded, cfg, SetOwnAddresses(), req(),
                                           now=devnet.clock).withdrawal
            proxy.fault = "drop_request"
            devnet.step(funded, ctx, cfg)
            devnet.step(funded, ctx, cfg, advance_s=30)
            assert state(funded, w.id) is State.UNKNOWN  # never released on a timer
            devnet.step(funded, ctx, cfg, advance_s=60)
            assert state(funded, w.id) is State.AWAITING_WRITE_OFF
        now = devnet.clock
        with pytest.raises(errors.WriteOffRefused, match="role"):
            service.vote_write_off(funded, w.id, ALICE, "not_sent", reason="x", now=now)
        with pytest.raises(errors.WriteOffRefused, match="reason"):
            service.vote_write_off(funded, w.id, CAROL, "not_sent", reason=" ", now=now)
        w = service.vote_write_off(funded, w.id, CAROL, "not_sent",
                                   reason="node lost, tx never broadcast", now=now)
        assert w.state is State.AWAITING_WRITE_OFF
        with pytest.raises(errors.WriteOffRefused, match="already voted"):
            service.vote_write_off(funded, w.id, CAROL, "not_sent", reason="again", now=now)
        assert balance(funded, "user:u1:withdrawals") == 32_000_000
        w = service.vote_write_off(funded, w.id, DAVE, "not_sent", reason="agreed", now=now)
        assert w.state is State.WRITTEN_OFF
        assert balance(funded, "user:u1:wallet") == 150_000_000
        with UnitOfWork(funded) as uow:
            assert len(repo.list_decisions(uow.conn, w.id, "write_off")) == 2
        assert verify(funded).ok

    def test_signer_refuses_a_key_for_another_wallet(self, devnet: Devnet) -> None:
        other = dataclasses.replace(devnet.cfg.hot_wallet("devnet"),
                                    address="0x" + "11" * 20)
        cfg = dataclasses.replace(devnet.cfg, hot_wallets={"devnet": other})
        with pytest.raises(errors.SignerUnavailable):
            devnet.context(cfg=cfg)
        assert to_checksum_address(DEST) == DEST


class TestGasUnits:
    def test_gas_is_converted_to_the_native_assets_ledger_scale(self, engine: Engine,
                                                                devnet: Devnet) -> None:
        # ETH kept with 20 decimals in the ledger (finer than wei): 1 wei = 100 minor units.
        chains, cfg = load(devnet.toml.replace("[assets.ETH]\nscale = 18",
                                               "[assets.ETH]\nscale = 20"))
        open_book(engine, eth_scale=20)
        fund(engine, ["u1"], 150_000_000)
        ctx = processor.build_context(chains, cfg, "devnet", environ={KEY_ENV: devnet.key})
        w = service.request_withdrawal(engine, cfg, SetOwnAddresses(), req(),
                                       now=devnet.clock).withdrawal
        devnet.step(engine, ctx, cfg)
        devnet.node.mine(3)
        devnet.step(engine, ctx, cfg)
        assert state(engine, w.id) is State.SETTLED
        [attempt] = service.timeline(engine, w.id).attempts
        receipt = devnet.node.rpc.get_receipt(attempt.tx_hash)
        assert receipt is not None
        gas_wei = int(receipt["gasUsed"], 16) * int(receipt["effectiveGasPrice"], 16)
        assert balance(engine, "expense:network_fees", "ETH") == gas_wei * 100
        assert balance(engine, "treasury:devnet", "ETH") == 10 * 10**20 - gas_wei * 100
        assert verify(engine).ok


def written_off_as_not_sent(engine: Engine, devnet: Devnet, proxy: FaultProxy,
                            cfg: WithdrawalsConfig, decision: str = "not_sent") -> int:
    """A withdrawal whose only send never reached the node, written off by two admins (as
    ``decision``): its nonce (0) was handed out and never consumed."""
    ctx = devnet.context(proxy.url, cfg)
    w = service.request_withdrawal(engine, cfg, SetOwnAddresses(), req(key="lost"),
                                   now=devnet.clock).withdrawal
    proxy.fault = "drop_request"
    devnet.step(engine, ctx, cfg)
    devnet.step(engine, ctx, cfg, advance_s=61)
    assert state(engine, w.id) is State.AWAITING_WRITE_OFF
    proxy.fault = None
    for admin in (CAROL, DAVE):
        service.vote_write_off(engine, w.id, admin, decision, reason="never reached a node",
                               now=devnet.clock)
    assert state(engine, w.id) is State.WRITTEN_OFF
    assert service.get_withdrawal(engine, w.id).nonce == 0
    return w.id


class TestNonceGap:
    def test_later_withdrawal_goes_out_after_a_write_off_as_not_sent(
            self, funded: Engine, devnet: Devnet) -> None:
        cfg = dataclasses.replace(devnet.cfg, attempts_max=1, escalate_after_s=60)
        with FaultProxy(devnet.node.url) as proxy:
            lost = written_off_as_not_sent(funded, devnet, proxy, cfg)
            ctx = devnet.context(proxy.url, cfg)
            later = service.request_withdrawal(funded, cfg, SetOwnAddresses(), req(key="later"),
                                               now=devnet.clock).withdrawal
            report = devnet.step(funded, ctx, cfg)
            assert report.cancels_signed == 1
            assert service.get_withdrawal(funded, later.id).nonce == 1
            devnet.node.mine(3)
            devnet.step(funded, ctx, cfg)
        assert state(funded, later.id) is State.SETTLED
        assert len(devnet.transfers_to(DEST)) == 1  # the lost payout never went out
        assert devnet.node.rpc.get_transaction_count(devnet.hot) == 2
        tl = service.timeline(funded, lost)
        assert tl.withdrawal.state is State.WRITTEN_OFF and tl.withdrawal.nonce_closed_at
        cancel = tl.attempts[-1]
        assert (cancel.purpose, cancel.nonce) == ("cancel", 0)
        assert [e.event for e in tl.events][-2:] == ["closing_signed", "nonce_closed"]
        sent = devnet.node.rpc.get_transaction(cancel.tx_hash)
        assert sent is not None and sent["to"].lower() == devnet.hot and int(sent["value"], 16) == 0
        # The cancel's gas is the company's network fee; the user got the whole reserve back.
        gas = 0
        for tx_hash in (cancel.tx_hash, service.timeline(funded, later.id).attempts[0].tx_hash):
            receipt = devnet.node.rpc.get_receipt(tx_hash)
            assert receipt is not None
            gas += int(receipt["gasUsed"], 16) * int(receipt["effectiveGasPrice"], 16)
        assert balance(funded, "expense:network_fees", "ETH") == gas
        assert f"withdrawal:{lost}:gas:{cancel.attempt_no}" in keys(funded, lost)
        assert balance(funded, "user:u1:wallet") == 150_000_000 - 32_000_000 + 1_600_000
        # Later steps leave it alone.
        assert devnet.step(funded, cfg=cfg).cancels_signed == 0
        assert verify(funded).ok


    def test_write_off_as_sent_sends_the_payout_once_at_its_own_nonce(
            self, funded: Engine, devnet: Devnet) -> None:
        # Two admins decided the payout left: the ledger books it as settled, so the chain
        # must agree. The nonce is still free, so the payout itself is signed again with the
        # same nonce (never a new one: at most one of them can ever be mined).
        cfg = dataclasses.replace(devnet.cfg, attempts_max=1, escalate_after_s=60)
        with FaultProxy(devnet.node.url) as proxy:
            lost = written_off_as_not_sent(funded, devnet, proxy, cfg, decision="sent")
            ledger_after_decision = balance(funded, "user:u1:wallet")
            ctx = devnet.context(proxy.url, cfg)
            assert devnet.step(funded, ctx, cfg).cancels_signed == 1
            devnet.node.mine(3)
            devnet.step(funded, ctx, cfg)
            assert devnet.step(funded, ctx, cfg).cancels_signed == 0
        tl = service.timeline(funded, lost)
        assert tl.withdrawal.state is State.WRITTEN_OFF and tl.withdrawal.nonce_closed_at
        resent = tl.attempts[-1]
        assert (resent.purpose, resent.nonce) == ("payout", 0)
        transfers = devnet.transfers_to(DEST)
        assert len(transfers) == 1 and int(str(transfers[0]["data"]), 16) == 30_000_000
        assert devnet.node.rpc.get_transaction_count(devnet.hot) == 1
        # The decision moved the money once; closing the nonce moved only the gas.
        assert balance(funded, "user:u1:wallet") == ledger_after_decision
        receipt = devnet.node.rpc.get_receipt(resent.tx_hash)
        assert receipt is not None
        gas = int(receipt["gasUsed"], 16) * int(receipt["effectiveGasPrice"], 16)
        assert balance(funded, "expense:network_fees", "ETH") == gas
        assert verify(funded).ok


class TestFeeBump:
    def test_stuck_broadcast_is_replaced_and_the_replacement_settles(
            self, funded: Engine, devnet: Devnet) -> None:
        cfg = dataclasses.replace(devnet.cfg, bump_after_s=300)
        ctx = devnet.context(cfg=cfg)
        w = service.request_withdrawal(funded, cfg, SetOwnAddresses(), req(),
                                       now=devnet.clock).withdrawal
        devnet.step(funded, ctx, cfg)
        assert state(funded, w.id) is State.BROADCAST
        # The base fee jumps above the attempt's cap: blocks come, the payout is not mined.
        devnet.node.rpc.request("anvil_setNextBlockBaseFeePerGas", [hex(50 * 10**9)])
        devnet.node.mine(1)
        [first] = service.timeline(funded, w.id).attempts
        assert devnet.node.rpc.get_receipt(first.tx_hash) is None
        devnet.step(funded, ctx, cfg, advance_s=100)
        assert len(service.timeline(funded, w.id).attempts) == 1  # not stuck long enough yet
        devnet.step(funded, ctx, cfg, advance_s=201)
        tl = service.timeline(funded, w.id)
        assert len(tl.attempts) == 2 and tl.withdrawal.state is State.BROADCAST
        second = tl.attempts[1]
        assert second.nonce == first.nonce
        assert second.max_fee_per_gas >= first.max_fee_per_gas * 125 // 100
        assert second.max_priority_fee_per_gas >= first.max_priority_fee_per_gas * 125 // 100
        devnet.node.mine(3)
        devnet.step(funded, ctx, cfg)
        assert state(funded, w.id) is State.SETTLED
        assert devnet.node.rpc.get_receipt(first.tx_hash) is None  # exactly one was mined
        receipt = devnet.node.rpc.get_receipt(second.tx_hash)
        assert receipt is not None
        assert service.get_withdrawal(funded, w.id).landed_attempt_id == second.id
        gas_wei = int(receipt["gasUsed"], 16) * int(receipt["effectiveGasPrice"], 16)
        assert balance(funded, "expense:network_fees", "ETH") == gas_wei
        assert keys(funded, w.id) == [f"withdrawal:{w.id}:{s}" for s in
                                      ("reserve", "settle", "gas:2")]
        assert len(devnet.transfers_to(DEST)) == 1
        assert devnet.node.rpc.get_transaction_count(devnet.hot) == 1
        assert verify(funded).ok

    def test_when_the_original_lands_instead_it_is_the_one_settled(
            self, funded: Engine, devnet: Devnet) -> None:
        cfg = dataclasses.replace(devnet.cfg, bump_after_s=300)
        with FaultProxy(devnet.node.url) as proxy:
            ctx = devnet.context(proxy.url, cfg)
            w = service.request_withdrawal(funded, cfg, SetOwnAddresses(), req(),
                                           now=devnet.clock).withdrawal
            devnet.step(funded, ctx, cfg)
            proxy.fault = "drop_request"  # the replacement never reaches the node
            devnet.step(funded, ctx, cfg, advance_s=301)
            proxy.fault = None
            tl = service.timeline(funded, w.id)
            assert len(tl.attempts) == 2
            devnet.node.mine(3)
            devnet.step(funded, ctx, cfg)
        first, second = tl.attempts
        assert state(funded, w.id) is State.SETTLED
        assert service.get_withdrawal(funded, w.id).landed_attempt_id == first.id
        assert devnet.node.rpc.get_receipt(second.tx_hash) is None
        assert keys(funded, w.id)[-1] == f"withdrawal:{w.id}:gas:1"
        assert len(devnet.transfers_to(DEST)) == 1
        assert verify(funded).ok
