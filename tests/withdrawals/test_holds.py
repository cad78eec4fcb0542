"""Held withdrawals: a final receipt whose settlement cannot be posted holds that withdrawal
(case, alert, reserve open) and never stops the chain's other payouts; an admin's retry, once
the cause is fixed, lets it settle. The transitions, then against real anvil and PostgreSQL."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from api.jobs import withdrawal_alerts
from config.uow import UnitOfWork
from ledger import service as ledger
from ledger.integrity import verify
from ledger.model import Entry, credit, debit
from withdrawals import errors, model, service
from withdrawals.model import Effect, Event, State

from .chainkit import Devnet, start_devnet
from .conftest import (
    ALICE,
    CAROL,
    T0,
    SetOwnAddresses,
    alert_subjects,
    balance,
    fund,
    open_book,
    req,
)
from .conftest import write_config as write_config_file
from .test_returns_cli import custody_cli


class TestHoldTransitions:
    def test_held_only_from_included_and_books_nothing(self) -> None:
        t = model.transition(State.INCLUDED, Event.SETTLEMENT_HELD, now=T0)
        assert (t.to_state, t.effects) == (State.HELD, ())
        for state in State:
            if state is not State.INCLUDED:
                with pytest.raises(errors.TransitionRefused):
                    model.transition(state, Event.SETTLEMENT_HELD, now=T0)

    def test_lifting_the_hold_goes_back_to_included(self) -> None:
        t = model.transition(State.HELD, Event.HOLD_LIFTED, now=T0)
        assert (t.to_state, t.effects) == (State.INCLUDED, ())
        leaving = {(s, e) for (s, e) in model.TRANSITIONS if s is State.HELD}
        assert leaving == {(State.HELD, Event.HOLD_LIFTED)}

    def test_held_keeps_the_reserve_open(self) -> None:
        assert not State.HELD.terminal
        entering = [fx for (s, _), (to, fx) in model.TRANSITIONS.items()
                    if to is State.HELD or s is State.HELD]
        assert all(not {Effect.POST_SETTLE, Effect.POST_RELEASE} & set(fx) for fx in entering)

    def test_a_broken_invariant_is_not_an_expected_error(self) -> None:
        from config.errors import CustodyError

        assert not issubclass(errors.SettlementMismatch, CustodyError)
        assert issubclass(errors.SettlementMismatch, errors.InvariantBroken)
        assert issubclass(errors.RetryRefused, CustodyError)


@pytest.fixture
def devnet() -> Iterator[Devnet]:
    net = start_devnet()
    yield net
    net.node.stop()


POISONED = "u07"


def stray_release(engine: Engine, user: str) -> int:
    """A posting made elsewhere that empties the user's withdrawals account behind the
    withdrawal's back (a broken invariant: the settlement that closes the reserve would take
    the account below zero, which the ledger refuses). Its ledger transaction id."""
    with UnitOfWork(engine) as uow:
        wallet = ledger.get_account(uow, f"user:{user}:wallet", "USDC")
        withdrawals = ledger.get_account(uow, f"user:{user}:withdrawals", "USDC")
        posted = ledger.post(uow, Entry("test:stray-release", "adjustment", T0, "tests",
                                        (debit(withdrawals, 32_000_000),
                                         credit(wallet, 32_000_000))))
        uow.commit()
    return posted.transaction_id


@pytest.mark.anvil
class TestHolds:
    def test_one_poisoned_among_twenty_is_held_and_the_others_settle(
            self, engine: Engine, owner: Engine, devnet: Devnet, database_url: str,
            tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
        users = [f"u{i:02d}" for i in range(20)]
        open_book(engine)
        fund(engine, users, 150_000_000)
        ids = {u: service.request_withdrawal(engine, devnet.cfg, SetOwnAddresses(),
                                             req(user=u, key=f"k-{u}"),
                                             now=devnet.clock).withdrawal.id for u in users}
        poisoned = ids[POISONED]
        stray = stray_release(engine, POISONED)
        assert devnet.step(engine).signed == 20
        devnet.node.mine(3)
        with caplog.at_level(logging.WARNING, logger="custody.alerts"):
            report = devnet.step(engine)
        # All in the same step: 19 settle, the poisoned one is held, nothing stops.
        assert (report.settled, report.held) == (19, 1)
        for u, i in ids.items():
            assert service.get_withdrawal(engine, i).state is (
                State.HELD if u == POISONED else State.SETTLED)
        tl = service.timeline(engine, poisoned)
        assert [e.event for e in tl.events][-3:] == ["send_accepted", "receipt_observed",
                                                     "settlement_held"]
        assert tl.withdrawal.state_reason is not None
        assert tl.withdrawal.state_reason.startswith("insufficient_funds")
        [case] = tl.cases
        assert case.open and case.kind == "ledger_refused"
        assert case.evidence["error"] == "insufficient_funds"
        assert case.evidence["booking"] == "final_succeeded"
        assert case.evidence["tx_hash"] == tl.attempts[0].tx_hash
        assert "past its limit" in case.evidence["message"]
        critical = [r for r in caplog.records
                    if r.name == "custody.alerts" and r.levelno == logging.CRITICAL]
        assert len(critical) == 1
        assert "custody withdrawal retry" in critical[0].getMessage()
        assert withdrawal_alerts(engine, "devnet", limit=50) == 1
        assert alert_subjects(owner, "withdrawal_held") == [str(poisoned)]
        # Nothing booked for it (the failing transaction rolled back): the reserve is open.
        assert [t.idempotency_key for t in tl.transactions] == [f"withdrawal:{poisoned}:reserve"]
        assert poisoned in {i.row.withdrawal_id for i in service.open_items(
            engine, devnet.cfg, older_than=timedelta(0), now=datetime.now(UTC))}
        verified = verify(engine)
        assert verified.ok, verified.discrepancies

        # A second step neither holds again nor alerts again.
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="custody.alerts"):
            devnet.node.mine(1)
            assert devnet.step(engine).held == 0
        assert not [r for r in caplog.records if r.name == "custody.alerts"]
        assert len(service.timeline(engine, poisoned).cases) == 1
        assert len(service.timeline(engine, poisoned).events) == len(tl.events)
        assert withdrawal_alerts(engine, "devnet", limit=50) == 0

        # Only an admin, with a reason, and only a held withdrawal.
        with pytest.raises(errors.RetryRefused, match="admin"):
            service.retry_held(engine, poisoned, ALICE, reason="fixed", now=devnet.clock)
        with pytest.raises(errors.RetryRefused, match="reason"):
            service.retry_held(engine, poisoned, CAROL, reason=" ", now=devnet.clock)
        with pytest.raises(errors.RetryRefused, match="not held"):
            service.retry_held(engine, ids["u00"], CAROL, reason="x", now=devnet.clock)

        # The cause removed (the stray posting reversed), the admin's retry lets it settle.
        with UnitOfWork(engine) as uow:
            ledger.reverse(uow, stray, idempotency_key="test:stray-release:reversal",
                           reason="booked against a reserve by mistake", source="tests")
            uow.commit()
        config = write_config_file(tmp_path, devnet.toml)
        retried = custody_cli(database_url, config, "withdrawal_app", "retry", str(poisoned),
                              "--by", "carol", "--reason", "stray posting reversed")
        assert retried.returncode == 0, retried.stderr
        assert "included" in retried.stdout
        again = custody_cli(database_url, config, "withdrawal_app", "retry", str(poisoned),
                            "--by", "carol", "--reason", "twice")
        assert again.returncode == 2 and "retry_refused" in again.stderr
        assert devnet.step(engine).settled == 1
        done = service.timeline(engine, poisoned)
        assert done.withdrawal.state is State.SETTLED
        assert [e.event for e in done.events][-3:] == ["settlement_held", "hold_lifted",
                                                       "final_succeeded"]
        [case] = done.cases
        assert not case.open and case.resolved_by == "carol"
        assert case.resolution_reason == "stray posting reversed"
        assert balance(engine, f"user:{POISONED}:withdrawals") == 0
        assert balance(engine, f"user:{POISONED}:wallet") == 119_600_000
        shown = custody_cli(database_url, config, "withdrawal_app", "show", str(poisoned))
        text = " ".join(shown.stdout.split())  # rich wraps long lines
        assert shown.returncode == 0 and f"case {case.id} (ledger_refused)" in text
        assert "resolved by carol" in text
        assert devnet.node.rpc.get_transaction_count(devnet.hot) == 20
        verified = verify(engine)
        assert verified.ok, verified.discrepancies

    def test_a_cause_still_there_holds_again_with_a_new_case(
            self, engine: Engine, devnet: Devnet) -> None:
        open_book(engine)
        fund(engine, [POISONED], 150_000_000)
        w = service.request_withdrawal(engine, devnet.cfg, SetOwnAddresses(),
                                       req(user=POISONED), now=devnet.clock).withdrawal
        stray_release(engine, POISONED)
        devnet.step(engine)
        devnet.node.mine(3)
        assert devnet.step(engine).held == 1
        service.retry_held(engine, w.id, CAROL, reason="try again", now=devnet.clock)
        assert devnet.step(engine).held == 1
        tl = service.timeline(engine, w.id)
        assert tl.withdrawal.state is State.HELD
        assert [c.open for c in tl.cases] == [False, True]
        assert verify(engine).ok

    def test_a_settlement_mismatch_is_held(self, engine: Engine, owner: Engine,
                                           devnet: Devnet) -> None:
        # The receipt is checked against what the withdrawal asked: a payout of another
        # amount (here: the stored chain amount disagrees with what was signed) is held.
        open_book(engine)
        fund(engine, ["u1"], 150_000_000)
        w = service.request_withdrawal(engine, devnet.cfg, SetOwnAddresses(), req(),
                                       now=devnet.clock).withdrawal
        devnet.step(engine)
        devnet.node.mine(3)
        with owner.begin() as conn:  # (the application role may not update withdrawals)
            conn.execute(sa.text("UPDATE withdrawals SET chain_amount = 29000000 WHERE id = :i"),
                         {"i": w.id})
        assert devnet.step(engine).held == 1
        [case] = service.timeline(engine, w.id).cases
        assert case.kind == "settlement_mismatch"
        assert case.evidence["error"] == "settlement_mismatch"
        assert service.get_withdrawal(engine, w.id).state is State.HELD
        assert verify(engine).ok
