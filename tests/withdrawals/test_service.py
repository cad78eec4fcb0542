"""Request, reserve, policy, approvals and cancel against real PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import Engine

from config.errors import ConfigurationInvalid
from config.uow import UnitOfWork
from config.withdrawals import WithdrawalsConfig
from ledger import chart
from ledger import service as ledger
from ledger.errors import InsufficientFunds
from ledger.integrity import verify
from ledger.model import Entry, credit, debit
from tests.conftest import BOTH_ROUTES
from withdrawals import errors, service
from withdrawals import repository as repo
from withdrawals.model import State
from withdrawals.service import Actor

from .conftest import (
    ALICE,
    BOB,
    CHAIN,
    DEST,
    HOT,
    T0,
    SetOwnAddresses,
    balance,
    config_toml,
    fund,
    load,
    req,
)


def count(engine: Engine, table: str) -> int:
    with engine.connect() as conn:
        return int(conn.execute(sa.text(f"SELECT count(*) FROM {table}")).scalar_one())


@contextmanager
def statements(engine: Engine) -> Iterator[list[str]]:
    """The SQL statements ``engine`` sends inside the block (BEGIN/COMMIT not included)."""
    seen: list[str] = []

    def record(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        seen.append(statement)

    event.listen(engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(engine, "before_cursor_execute", record)


class TestRequest:
    def test_reserve_posts_amount_plus_max_fee(self, wbook: Engine, cfg: WithdrawalsConfig,
                                               own: SetOwnAddresses) -> None:
        result = service.request_withdrawal(wbook, cfg, own, req(), now=T0)
        w = result.withdrawal
        assert (w.state, w.amount_minor, w.fee_max_minor, w.reserved_minor) == (
            State.RESERVED, 30_000_000, 2_000_000, 32_000_000)
        assert w.destination == DEST.lower() and w.chain_amount == 30_000_000
        assert balance(wbook, "user:u1:wallet") == 118_000_000
        assert balance(wbook, "user:u1:withdrawals") == 32_000_000
        tl = service.timeline(wbook, w.id)
        assert [e.event for e in tl.events] == ["reserve_posted"]
        assert tl.transactions[0].idempotency_key == f"withdrawal:{w.id}:reserve"
        assert w.reserve_posting_id in {p.id for p in tl.transactions[0].postings}
        assert verify(wbook).ok

    @pytest.mark.parametrize(("destination", "error"), [
        ("0x3c44cdddb6a900fa2b585dd299e03d12fa4293b", errors.AddressInvalid),  # 39 digits
        ("0x3C44CdDdB6a900fa2b585dd299e03d12FA4293Bc", errors.AddressInvalid),  # bad checksum
        ("3C44CdDdB6a900fa2b585dd299e03d12FA4293BC00", errors.AddressInvalid),
        ("0xZZ44cdddb6a900fa2b585dd299e03d12fa4293bc", errors.AddressInvalid),
        ("0x0000000000000000000000000000000000000000", errors.AddressZero),
        ("0x90f79bf6eb2c4f870365e785982e1f101e93b906", errors.AddressOwn),  # deposit address
        (HOT, errors.AddressOwn),  # the hot wallet
    ])
    def test_bad_destinations_are_refused(self, wbook: Engine, cfg: WithdrawalsConfig,
                                          own: SetOwnAddresses, destination: str,
                                          error: type[Exception]) -> None:
        with pytest.raises(error):
            service.request_withdrawal(wbook, cfg, own, req(destination=destination), now=T0)
        assert count(wbook, "withdrawals") == 0
        assert balance(wbook, "user:u1:wallet") == 150_000_000

    def test_lower_case_destination_is_accepted(self, wbook: Engine, cfg: WithdrawalsConfig,
                                                own: SetOwnAddresses) -> None:
        w = service.request_withdrawal(wbook, cfg, own, req(destination=DEST.lower()),
                                       now=T0).withdrawal
        assert w.destination == DEST.lower()

    @pytest.mark.parametrize(("amount", "error"), [
        (0, errors.AmountOutOfBounds), (-5, errors.AmountOutOfBounds),
        (999_999, errors.AmountOutOfBounds), (100_000_000_001, errors.AmountOutOfBounds),
        (1.5, errors.AmountOutOfBounds), (True, errors.AmountOutOfBounds),
    ])
    def test_bad_amounts_are_refused(self, wbook: Engine, cfg: WithdrawalsConfig,
                                     own: SetOwnAddresses, amount: object,
                                     error: type[Exception]) -> None:
        with pytest.raises(error):
            service.request_withdrawal(wbook, cfg, own, req(amount=amount), now=T0)  # type: ignore[arg-type]
        assert count(wbook, "withdrawals") == 0

    def test_asset_not_withdrawable(self, wbook: Engine, cfg: WithdrawalsConfig,
                                    own: SetOwnAddresses) -> None:
        for request in (req(asset="DAI"), req(chain="base")):
            with pytest.raises(errors.AssetNotWithdrawable):
                service.request_withdrawal(wbook, cfg, own, request, now=T0)

    def test_insufficient_funds_changes_nothing(self, wbook: Engine, cfg: WithdrawalsConfig,
                                                own: SetOwnAddresses) -> None:
        # 149 + 2 max fee > 150 available.
        with pytest.raises(InsufficientFunds):
            service.request_withdrawal(wbook, cfg, own, req(amount=149_000_000), now=T0)
        assert count(wbook, "withdrawals") == 0 and count(wbook, "withdrawal_events") == 0
        assert balance(wbook, "user:u1:wallet") == 150_000_000

    def test_daily_limit(self, wbook: Engine, cfg: WithdrawalsConfig,
                         own: SetOwnAddresses) -> None:
        fund(wbook, ["u1"], 30_000_000_000)
        service.request_withdrawal(wbook, cfg, own, req(amount=900_000_000, key="a"), now=T0)
        big = [req(amount=4_000_000_000, key=f"b{i}") for i in range(5)]
        for r in big[:4]:  # 4 x 4,000 + 900 = 16,900 <= 20,000 (these wait for approval)
            service.request_withdrawal(wbook, cfg, own, r, now=T0)
        with pytest.raises(errors.DailyLimitExceeded):
            service.request_withdrawal(wbook, cfg, own, big[4], now=T0)
        # A day later the window has moved on.
        later = T0 + timedelta(days=1, seconds=1)
        assert service.request_withdrawal(wbook, cfg, own, big[4], now=later).withdrawal.id

    def test_canceled_withdrawal_does_not_count_toward_limit(
            self, wbook: Engine, cfg: WithdrawalsConfig, own: SetOwnAddresses) -> None:
        fund(wbook, ["u1"], 30_000_000_000)
        w = service.request_withdrawal(wbook, cfg, own, req(amount=4_900_000_000, key="a"),
                                       now=T0).withdrawal
        for i in range(3):
            service.request_withdrawal(wbook, cfg, own, req(amount=4_900_000_000, key=f"b{i}"),
                                       now=T0)
        with pytest.raises(errors.DailyLimitExceeded):
            service.request_withdrawal(wbook, cfg, own, req(amount=4_900_000_000, key="c"),
                                       now=T0)
        service.cancel(wbook, w.id, "u1", now=T0)
        service.request_withdrawal(wbook, cfg, own, req(amount=4_900_000_000, key="c"), now=T0)


    @BOTH_ROUTES
    def test_daily_limit_holds_under_concurrent_requests(
            self, wbook: Engine, cfg: WithdrawalsConfig, own: SetOwnAddresses) -> None:
        # Limit 20,000: of 40 concurrent 900 requests (funded for all), exactly 22 fit.
        fund(wbook, ["u1"], 40 * 902_000_000)

        def attempt(i: int) -> str:
            try:
                service.request_withdrawal(wbook, cfg, own, req(amount=900_000_000, key=f"d{i}"),
                                           now=T0)
                return "ok"
            except errors.DailyLimitExceeded:
                return "limit"

        with ThreadPoolExecutor(max_workers=20) as pool:
            outcomes = list(pool.map(attempt, range(40)))
        assert outcomes.count("ok") == 22 and outcomes.count("limit") == 18
        assert count(wbook, "withdrawals") == 22 and count(wbook, "withdrawal_events") == 22
        assert balance(wbook, "user:u1:withdrawals") == 22 * 902_000_000
        assert verify(wbook).ok

    def test_reserve_takes_three_statements(self, wbook: Engine, cfg: WithdrawalsConfig,
                                            own: SetOwnAddresses) -> None:
        # The user's accounts exist: open (lock, key, daily sum, accounts), ledger post, insert
        # in the reserved state with its history row. The reserve posting id is the one on
        # user:withdrawals.
        with statements(wbook) as seen:
            w = service.request_withdrawal(wbook, cfg, own, req(), now=T0).withdrawal
        assert len(seen) == 3, seen
        # What the request returns is what was stored.
        assert service.get_withdrawal(wbook, w.id) == w
        tl = service.timeline(wbook, w.id)
        [reserve] = [p for p in tl.transactions[0].postings if p.amount_minor < 0]
        assert w.reserve_posting_id == reserve.id
        assert (tl.events[0].from_state, tl.events[0].to_state) == ("requested", "reserved")
        assert tl.events[0].ledger_transaction_id == w.reserve_transaction_id
        assert tl.events[0].evidence == {"daily_used_minor": "0"}
        # A replay reads what the first request wrote and moves nothing; its last statement
        # takes a transaction id, so that its commit waits for a synchronous standby to hold
        # what it found (config.uow.replication_barrier).
        with statements(wbook) as seen:
            again = service.request_withdrawal(wbook, cfg, own, req(), now=T0)
        assert again.replayed and again.withdrawal == w
        assert len(seen) == 3 and "pg_current_xact_id" in seen[-1], seen

    def test_first_withdrawal_opens_the_withdrawals_account(
            self, wbook: Engine, cfg: WithdrawalsConfig, own: SetOwnAddresses) -> None:
        # A wallet credited by a deposit, no user:withdrawals account yet.
        with UnitOfWork(wbook) as uow:
            usdc = ledger.get_asset(uow, "USDC")
            wallet = ledger.open_account(uow, chart.user_wallet("new"), usdc)
            custody = ledger.get_account(uow, f"custody:{CHAIN}", "USDC")
            ledger.post(uow, Entry("test:new", "deposit", T0, "tests",
                                   (debit(custody, 50_000_000), credit(wallet, 50_000_000))))
            uow.commit()
        w = service.request_withdrawal(wbook, cfg, own, req("new"), now=T0).withdrawal
        assert w.state is State.RESERVED
        assert balance(wbook, "user:new:withdrawals") == 32_000_000

    def test_refused_first_withdrawal_leaves_no_accounts(
            self, wbook: Engine, cfg: WithdrawalsConfig, own: SetOwnAddresses) -> None:
        # Never funded: the accounts opened for the reserve roll back with the refusal, and a
        # later request (after a deposit) finds or opens them again.
        with pytest.raises(InsufficientFunds):
            service.request_withdrawal(wbook, cfg, own, req("ghost"), now=T0)
        assert count(wbook, "withdrawals") == 0
        with UnitOfWork(wbook) as uow:
            assert uow.conn.execute(sa.text(
                "SELECT count(*) FROM accounts WHERE code LIKE 'user:ghost:%'")).scalar_one() == 0
        fund(wbook, ["ghost"], 40_000_000)
        w = service.request_withdrawal(wbook, cfg, own, req("ghost"), now=T0).withdrawal
        assert w.state is State.RESERVED and balance(wbook, "user:ghost:wallet") == 8_000_000


class TestIdempotency:
    def test_same_key_same_request_replays(self, wbook: Engine, cfg: WithdrawalsConfig,
                                           own: SetOwnAddresses) -> None:
        first = service.request_withdrawal(wbook, cfg, own, req(), now=T0)
        again = service.request_withdrawal(wbook, cfg, own, req(), now=T0 + timedelta(hours=1))
        assert again.replayed and again.withdrawal.id == first.withdrawal.id
        assert balance(wbook, "user:u1:wallet") == 118_000_000

    def test_same_key_other_request_conflicts(self, wbook: Engine, cfg: WithdrawalsConfig,
                                              own: SetOwnAddresses) -> None:
        service.request_withdrawal(wbook, cfg, own, req(), now=T0)
        with pytest.raises(errors.WithdrawalKeyConflict):
            service.request_withdrawal(wbook, cfg, own, req(amount=31_000_000), now=T0)

    @BOTH_ROUTES
    def test_same_key_100_times_concurrently_is_one_withdrawal(
            self, wbook: Engine, cfg: WithdrawalsConfig, own: SetOwnAddresses) -> None:
        with ThreadPoolExecutor(max_workers=20) as pool:
            results = list(pool.map(
                lambda _: service.request_withdrawal(wbook, cfg, own, req(key="same"), now=T0),
                range(100)))
        assert len({r.withdrawal.id for r in results}) == 1
        assert sum(not r.replayed for r in results) == 1
        assert count(wbook, "withdrawals") == 1
        assert balance(wbook, "user:u1:wallet") == 118_000_000

    @BOTH_ROUTES
    def test_200_concurrent_requests_reserve_exactly_10(
            self, wbook: Engine, cfg: WithdrawalsConfig, own: SetOwnAddresses) -> None:
        # Funded for exactly 10 withdrawals of 10 + 2 max fee.
        fund(wbook, ["rich"], 120_000_000)

        def attempt(i: int) -> str:
            try:
                service.request_withdrawal(wbook, cfg, own,
                                           req("rich", 10_000_000, f"r{i}"), now=T0)
                return "ok"
            except InsufficientFunds:
                return "refused"

        with ThreadPoolExecutor(max_workers=20) as pool:
            outcomes = list(pool.map(attempt, range(200)))
        assert outcomes.count("ok") == 10 and outcomes.count("refused") == 190
        assert balance(wbook, "user:rich:wallet") == 0
        assert balance(wbook, "user:rich:withdrawals") == 120_000_000
        assert verify(wbook).ok


class TestApprovals:
    def test_one_approver_above_first_threshold(self, wbook: Engine, cfg: WithdrawalsConfig,
                                                own: SetOwnAddresses) -> None:
        fund(wbook, ["u1"], 10_000_000_000)
        w = service.request_withdrawal(wbook, cfg, own, req(amount=2_000_000_000),
                                       now=T0).withdrawal
        assert (w.state, w.approvals_required) == (State.PENDING_APPROVAL, 1)
        w = service.approve(wbook, w.id, ALICE, now=T0)
        assert w.state is State.RESERVED

    def test_two_different_approvers_above_second_threshold(
            self, wbook: Engine, cfg: WithdrawalsConfig, own: SetOwnAddresses) -> None:
        fund(wbook, ["u1"], 10_000_000_000)
        w = service.request_withdrawal(wbook, cfg, own, req(amount=6_000_000_000),
                                       now=T0).withdrawal
        assert w.approvals_required == 2
        w = service.approve(wbook, w.id, ALICE, now=T0)
        assert w.state is State.PENDING_APPROVAL
        with pytest.raises(errors.ApprovalRefused, match="already voted"):
            service.approve(wbook, w.id, ALICE, now=T0)
        assert service.approve(wbook, w.id, BOB, now=T0).state is State.RESERVED

    def test_self_approval_and_missing_role_are_refused(
            self, wbook: Engine, cfg: WithdrawalsConfig, own: SetOwnAddresses) -> None:
        fund(wbook, ["alice"], 10_000_000_000)
        w = service.request_withdrawal(wbook, cfg, own, req("alice", 2_000_000_000),
                                       now=T0).withdrawal
        with pytest.raises(errors.ApprovalRefused, match="own"):
            service.approve(wbook, w.id, ALICE, now=T0)
        with pytest.raises(errors.ApprovalRefused, match="role"):
            service.approve(wbook, w.id, Actor("mallory"), now=T0)
        assert service.get_withdrawal(wbook, w.id).state is State.PENDING_APPROVAL

    def test_database_refuses_a_second_vote(self, wbook: Engine, cfg: WithdrawalsConfig,
                                            own: SetOwnAddresses) -> None:
        fund(wbook, ["u1"], 10_000_000_000)
        w = service.request_withdrawal(wbook, cfg, own, req(amount=6_000_000_000),
                                       now=T0).withdrawal
        service.approve(wbook, w.id, ALICE, now=T0)
        with UnitOfWork(wbook) as uow:
            assert not repo.insert_decision(uow.conn, w.id, "approval", "approve", "alice",
                                            None, T0)

    def test_reject_releases(self, wbook: Engine, cfg: WithdrawalsConfig,
                             own: SetOwnAddresses) -> None:
        fund(wbook, ["u1"], 10_000_000_000)
        w = service.request_withdrawal(wbook, cfg, own, req(amount=2_000_000_000),
                                       now=T0).withdrawal
        w = service.reject(wbook, w.id, BOB, now=T0, reason="destination on a sanctions list")
        assert w.state is State.REJECTED
        assert balance(wbook, "user:u1:withdrawals") == 0
        assert verify(wbook).ok


class TestCancel:
    def test_cancel_before_signing_releases_and_closes_the_reserve(
            self, wbook: Engine, cfg: WithdrawalsConfig, own: SetOwnAddresses) -> None:
        w = service.request_withdrawal(wbook, cfg, own, req(), now=T0).withdrawal
        w = service.cancel(wbook, w.id, "u1", now=T0)
        assert w.state is State.CANCELED
        assert balance(wbook, "user:u1:wallet") == 150_000_000
        tl = service.timeline(wbook, w.id)
        release = tl.transactions[-1]
        assert release.idempotency_key == f"withdrawal:{w.id}:release"
        assert [p.closes_posting_id for p in release.postings if p.amount_minor > 0] == [
            w.reserve_posting_id]
        assert service.open_items(wbook, cfg, older_than=timedelta(0),
                                  now=T0 + timedelta(days=9)) == []
        with pytest.raises(errors.WithdrawalNotCancelable):
            service.cancel(wbook, w.id, "u1", now=T0)
        assert verify(wbook).ok


class TestTables:
    def test_events_are_append_only(self, wbook: Engine, cfg: WithdrawalsConfig,
                                    own: SetOwnAddresses, owner: Engine) -> None:
        service.request_withdrawal(wbook, cfg, own, req(), now=T0)
        for statement in ("UPDATE withdrawal_events SET reason = 'x'",
                          "DELETE FROM withdrawal_events", "TRUNCATE withdrawal_events CASCADE",
                          "DELETE FROM withdrawals"):
            # The table owner hits the trigger; the application role lacks the grant too.
            for eng in (owner, wbook):
                with pytest.raises(sa_exc.DBAPIError), eng.begin() as conn:
                    conn.execute(sa.text(statement))

    def test_open_items_list_stuck_reserves_past_sla(
            self, wbook: Engine, cfg: WithdrawalsConfig, own: SetOwnAddresses,
            caplog: pytest.LogCaptureFixture) -> None:
        w1 = service.request_withdrawal(wbook, cfg, own, req(key="a"), now=T0).withdrawal
        w2 = service.request_withdrawal(wbook, cfg, own, req(key="b"), now=T0).withdrawal
        service.cancel(wbook, w1.id, "u1", now=T0)
        # Two identical 30 withdrawals: only the one still open is listed.
        with UnitOfWork(wbook) as uow:
            reserved_at = uow.conn.execute(sa.text("SELECT now()")).scalar_one()
        items = service.open_items(wbook, cfg, older_than=timedelta(0),
                                   now=reserved_at + timedelta(hours=3))
        assert [(i.row.withdrawal_id, i.overdue) for i in items] == [(w2.id, True)]
        assert "reserve open" in caplog.text
        assert service.open_items(wbook, cfg, older_than=timedelta(hours=4),
                                  now=reserved_at + timedelta(hours=3)) == []
        assert items[0].row.chain == CHAIN


class TestUnits:
    """Ledger scale -> on-chain decimals must be exact; the ledger's own scale is the truth."""

    def book(self, engine: Engine, usdc_scale: int) -> None:
        with UnitOfWork(engine) as uow:
            usdc = ledger.open_asset(uow, "USDC", usdc_scale)
            ledger.open_account(uow, chart.custody(CHAIN), usdc)
            uow.commit()
        fund(engine, ["u1"], 1_000 * 10**usdc_scale)

    def test_amount_without_exact_chain_value_is_refused(self, engine: Engine,
                                                         own: SetOwnAddresses) -> None:
        # USDC kept with 7 decimals in the ledger, 6 on this chain.
        _, cfg7 = load(config_toml().replace("[assets.USDC]\nscale = 6",
                                             "[assets.USDC]\nscale = 7"))
        self.book(engine, 7)
        with pytest.raises(errors.AmountNotRepresentable):
            service.request_withdrawal(engine, cfg7, own, req(amount=300_000_001), now=T0)
        assert count(engine, "withdrawals") == 0
        w = service.request_withdrawal(engine, cfg7, own, req(amount=300_000_010),
                                       now=T0).withdrawal
        assert (w.amount_minor, w.chain_amount) == (300_000_010, 30_000_001)
        assert balance(engine, "user:u1:withdrawals") == 300_000_010 + 20_000_000

    def test_configured_scale_must_be_the_ledgers(self, engine: Engine,
                                                  own: SetOwnAddresses) -> None:
        _, cfg7 = load(config_toml().replace("[assets.USDC]\nscale = 6",
                                             "[assets.USDC]\nscale = 7"))
        self.book(engine, 6)  # the ledger says 6: a chain amount from scale 7 would be 10x off
        with pytest.raises(ConfigurationInvalid, match="scale 6 in the ledger"):
            service.request_withdrawal(engine, cfg7, own, req(amount=300_000_000), now=T0)
        assert count(engine, "withdrawals") == 0
        assert balance(engine, "user:u1:wallet") == 1_000_000_000
