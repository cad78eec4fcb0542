"""The gas float: a payout is signed only if the treasury can pay its maximum gas on top of the
maximum gas already in flight on the chain; otherwise it waits, unsigned, and goes on by itself
once the treasury is funded. The arithmetic as a pure function, then against real anvil and
PostgreSQL."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from api.jobs import withdrawal_alerts
from chains.rpc import from_quantity
from config.uow import UnitOfWork
from ledger import service as ledger
from ledger.integrity import verify
from ledger.model import Entry, credit, debit
from outgoing.model import initial_fee_caps
from withdrawals import model, service
from withdrawals.model import Event, State

from .chainkit import Devnet, start_devnet
from .conftest import T0, SetOwnAddresses, alert_subjects, balance, fund, open_book, req


class TestFitGasFloat:
    def test_takes_candidates_in_order_while_they_fit(self) -> None:
        fit = model.fit_gas_float(100, 30, [(1, 20), (2, 20), (3, 20), (4, 20)])
        assert fit == model.GasFloatFit((1, 2, 3), (4,), 90)

    def test_exactly_enough_fits(self) -> None:
        assert model.fit_gas_float(60, 0, [(1, 30), (2, 30)]).signable == (1, 2)
        assert model.fit_gas_float(59, 0, [(1, 30), (2, 30)]).waiting == (2,)

    def test_one_that_does_not_fit_waits_and_a_smaller_later_one_may_go(self) -> None:
        fit = model.fit_gas_float(50, 10, [(1, 30), (2, 20), (3, 5)])
        assert (fit.signable, fit.waiting, fit.committed_minor) == ((1, 3), (2,), 45)

    def test_in_flight_gas_counts_before_any_candidate(self) -> None:
        fit = model.fit_gas_float(100, 100, [(1, 1)])
        assert (fit.signable, fit.waiting, fit.committed_minor) == ((), (1,), 100)

    def test_an_empty_or_overdrawn_treasury_signs_nothing(self) -> None:
        assert model.fit_gas_float(0, 0, [(1, 1), (2, 1)]).waiting == (1, 2)
        assert model.fit_gas_float(-5, 0, [(1, 0)]).waiting == (1,)
        assert model.fit_gas_float(0, 0, []) == model.GasFloatFit((), (), 0)

    def test_the_wait_is_a_self_loop_that_books_nothing(self) -> None:
        t = model.transition(State.RESERVED, Event.GAS_FLOAT_LOW, now=T0)
        assert (t.to_state, t.effects) == (State.RESERVED, ())
        assert State.HELD in model.GAS_COMMITTED and State.RESERVED not in model.GAS_COMMITTED
        assert model.IN_FLIGHT <= model.GAS_COMMITTED


@pytest.fixture
def devnet() -> Iterator[Devnet]:
    net = start_devnet()
    yield net
    net.node.stop()


def fund_treasury(engine: Engine, amount_minor: int, key: str) -> None:
    """A treasury funding as an operator's declared capital books it: DR treasury / CR equity."""
    with UnitOfWork(engine) as uow:
        treasury = ledger.get_account(uow, "treasury:devnet", "ETH")
        equity = ledger.get_account(uow, "equity:owner", "ETH")
        ledger.post(uow, Entry(key, "capital", T0, "tests",
                               (debit(treasury, amount_minor), credit(equity, amount_minor))))
        uow.commit()


def max_fee_per_gas(devnet: Devnet) -> int:
    """The fee cap the processor computes for a first attempt at the current head."""
    latest = devnet.node.rpc.request("eth_getBlockByNumber", ["latest", False])
    hot = devnet.cfg.hot_wallet("devnet")
    return initial_fee_caps(from_quantity(latest["baseFeePerGas"]), hot.priority_fee_wei,
                            hot.max_fee_per_gas_cap_wei).max_fee_per_gas


@pytest.mark.anvil
class TestGasFloat:
    def test_empty_treasury_waits_then_settles_once_funded(
            self, engine: Engine, owner: Engine, devnet: Devnet,
            caplog: pytest.LogCaptureFixture) -> None:
        open_book(engine, float_minor=0)
        fund(engine, ["u1"], 150_000_000)
        w = service.request_withdrawal(engine, devnet.cfg, SetOwnAddresses(), req(),
                                       now=devnet.clock).withdrawal
        with caplog.at_level(logging.WARNING, logger="custody.alerts"):
            for _ in range(3):
                report = devnet.step(engine)
                assert (report.signed, report.gas_waiting) == (0, 1)
                devnet.node.mine(1)
        waiting = service.timeline(engine, w.id)
        assert waiting.withdrawal.state is State.RESERVED
        assert waiting.withdrawal.state_reason == "gas_float_low"
        assert waiting.withdrawal.nonce is None and waiting.attempts == []
        assert [e.event for e in waiting.events] == ["reserve_posted", "gas_float_low"]
        evidence = waiting.events[-1].evidence
        assert evidence["treasury_minor"] == "0" and evidence["in_flight_max_gas_minor"] == "0"
        assert int(evidence["max_gas_minor"]) == 100_000 * int(evidence["max_fee_per_gas"])
        assert (waiting.events[-1].from_state, waiting.events[-1].to_state) == ("reserved",
                                                                                "reserved")
        assert devnet.node.rpc.get_transaction_count(devnet.hot, "pending") == 0
        with owner.connect() as conn:  # no nonce was ever handed out
            assert conn.execute(sa.text("SELECT count(*) FROM sender_nonces")).scalar() == 0
        alerts = [r for r in caplog.records if r.name == "custody.alerts"]
        assert len(alerts) == 1 and "gas float low" in alerts[0].getMessage()
        assert withdrawal_alerts(engine, "devnet", limit=10) == 1
        assert withdrawal_alerts(engine, "devnet", limit=10) == 0  # once per withdrawal
        assert alert_subjects(owner, "gas_float_low") == [str(w.id)]
        with owner.connect() as conn:  # the wait is no news for the client
            assert conn.execute(sa.text(
                "SELECT type FROM outbox_events WHERE type LIKE 'withdrawal.%' ORDER BY id")
            ).scalars().all() == ["withdrawal.reserved"]
        assert balance(engine, "user:u1:withdrawals") == 32_000_000  # not released

        fund_treasury(engine, 10**17, "test:funding:1")  # 0.1 ETH, made elsewhere
        assert devnet.step(engine).signed == 1  # by itself, no operator action
        devnet.node.mine(3)
        devnet.step(engine)
        done = service.timeline(engine, w.id)
        assert done.withdrawal.state is State.SETTLED
        assert [e.event for e in done.events] == [
            "reserve_posted", "gas_float_low", "nonce_assigned", "attempt_signed",
            "send_accepted", "receipt_observed", "final_succeeded"]
        [attempt] = done.attempts
        assert attempt.nonce == 0
        receipt = devnet.node.rpc.get_receipt(attempt.tx_hash)
        assert receipt is not None
        gas_wei = int(receipt["gasUsed"], 16) * int(receipt["effectiveGasPrice"], 16)
        assert balance(engine, "treasury:devnet", "ETH") == 10**17 - gas_wei
        assert balance(engine, "expense:network_fees", "ETH") == gas_wei
        assert devnet.node.rpc.get_transaction_count(devnet.hot) == 1  # nonces 0.. no gap
        verified = verify(engine)
        assert verified.ok, verified.discrepancies

    def test_a_treasury_covering_n_payouts_signs_only_n(self, engine: Engine,
                                                        devnet: Devnet) -> None:
        users = [f"u{i}" for i in range(5)]
        open_book(engine, float_minor=0)
        fund(engine, users, 150_000_000)
        ids = [service.request_withdrawal(engine, devnet.cfg, SetOwnAddresses(),
                                          req(user=u, key=f"k-{u}"),
                                          now=devnet.clock).withdrawal.id for u in users]
        fund_treasury(engine, 3 * 100_000 * max_fee_per_gas(devnet), "test:funding:3")
        report = devnet.step(engine)
        assert (report.signed, report.gas_waiting) == (3, 2)
        states = [service.get_withdrawal(engine, i) for i in ids]
        assert [w.state for w in states] == [State.BROADCAST] * 3 + [State.RESERVED] * 2
        assert [w.nonce for w in states] == [0, 1, 2, None, None]
        assert {w.state_reason for w in states[3:]} == {"gas_float_low"}
        # The three in flight still commit the whole float: the others keep waiting, with
        # still one history row each.
        report = devnet.step(engine)
        assert (report.signed, report.gas_waiting) == (0, 2)
        for i in ids[3:]:
            assert [e.event for e in service.timeline(engine, i).events] == [
                "reserve_posted", "gas_float_low"]
        assert devnet.node.rpc.get_transaction_count(devnet.hot, "pending") == 3
        # Settled, the three booked their real gas; a top-up lets the last two go by themselves.
        devnet.node.mine(3)
        devnet.step(engine)
        assert [service.get_withdrawal(engine, i).state for i in ids[:3]] == [State.SETTLED] * 3
        fund_treasury(engine, 2 * 100_000 * max_fee_per_gas(devnet), "test:funding:2")
        assert devnet.step(engine).signed == 2
        devnet.node.mine(3)
        devnet.step(engine)
        assert [service.get_withdrawal(engine, i).state for i in ids] == [State.SETTLED] * 5
        assert sorted(a.nonce for i in ids for a in service.timeline(engine, i).attempts) == [
            0, 1, 2, 3, 4]
        assert verify(engine).ok
