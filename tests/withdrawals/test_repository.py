"""The reserve's server-side functions (withdrawal_reserve_open, withdrawal_reserve_record) against
real PostgreSQL: what they
refuse, that a refusal writes nothing, the lock they hold, the outbox's decimal rendering, the
reserve's own outbox row and the checks that replaced the foreign keys for other writers."""

from __future__ import annotations

import random
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import timedelta

import pytest
import sqlalchemy as sa
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import Engine

from config.encryption import keyring
from config.uow import UnitOfWork, sqlstate
from config.withdrawals import WithdrawalsConfig
from ledger import chart
from ledger import service as ledger
from ledger.model import Account, Entry, credit, debit, format_amount
from tests.conftest import BOTH_ROUTES
from withdrawals import errors, service
from withdrawals import repository as repo
from withdrawals.model import State
from withdrawals.repository import HistoryRow, WithdrawalRecord

from .conftest import CHAIN, DEST, FAKE_TOKEN, T0, SetOwnAddresses, balance, fund, req

SINCE = T0 - timedelta(days=1)


def count(engine: Engine, table: str) -> int:
    with engine.connect() as conn:
        return int(conn.execute(sa.text(f"SELECT count(*) FROM {table}")).scalar_one())


def open_for(uow: UnitOfWork, user: str = "u1", key: str = "k1",
             asset: str = "USDC") -> repo.ReserveOpened:
    return repo.open_reserve(uow.conn, user, asset, key, SINCE, chart.user_wallet(user).code,
                             chart.user_withdrawals(user).code)


def requested(withdrawal_id: int, *, user: str = "u1", key: str = "k1",
              amount_minor: int = 30_000_000, fee_max_minor: int = 2_000_000,
              asset: str = "USDC", approvals_required: int = 0) -> WithdrawalRecord:
    """A withdrawal as request_withdrawal builds it before its reserve (state requested)."""
    return WithdrawalRecord(
        id=withdrawal_id, user_id=user, request_key=key, fingerprint="ab" * 32,
        requested_by=user, chain=CHAIN, asset_code=asset, token=FAKE_TOKEN,
        destination=DEST.lower(), amount_minor=amount_minor, fee_minor=400_000,
        fee_max_minor=fee_max_minor, chain_amount=amount_minor,
        approvals_required=approvals_required, state=State.REQUESTED, state_reason=None,
        hot_wallet=None, nonce=None, reserve_transaction_id=None, reserve_posting_id=None,
        closing_transaction_id=None, landed_attempt_id=None, requested_at=T0,
        state_changed_at=T0, unknown_since=None)


def post_reserve(uow: UnitOfWork, w: WithdrawalRecord,
                 accounts: tuple[Account, Account]) -> HistoryRow:
    """Post ``w``'s reserve through the ledger; the history row that records it."""
    wallet, withdrawals = accounts
    tx = ledger.post(uow, Entry(f"withdrawal:{w.id}:reserve", "withdrawal_reserve", T0,
                                "withdrawals", (debit(wallet, w.reserved_minor),
                                                credit(withdrawals, w.reserved_minor)),
                                reference=f"withdrawal:{w.id}")).transaction_id
    return HistoryRow(from_state=State.REQUESTED, to_state=State.RESERVED,
                      event="reserve_posted", reason="reserved", evidence={}, actor=w.user_id,
                      occurred_at=T0, ledger_transaction_id=tx)


def user_accounts(opened: repo.ReserveOpened, user: str = "u1") -> tuple[Account, Account]:
    return (opened.accounts[chart.user_wallet(user).code],
            opened.accounts[chart.user_withdrawals(user).code])


Tamper = Callable[[WithdrawalRecord, HistoryRow, tuple[Account, Account]],
                  tuple[WithdrawalRecord, HistoryRow, int]]

TAMPERED: dict[str, Tamper] = {
    # Each one names a reserve that is not exactly this withdrawal's.
    "amount": lambda w, h, a: (replace(w, amount_minor=w.amount_minor + 1), h, a[1].id),
    "max fee": lambda w, h, a: (replace(w, fee_max_minor=w.fee_max_minor - 1), h, a[1].id),
    "asset": lambda w, h, a: (replace(w, asset_code="ETH"), h, a[1].id),
    "user": lambda w, h, a: (replace(w, user_id="u2"), h, a[1].id),
    "withdrawal id": lambda w, h, a: (replace(w, id=w.id + 1000), h, a[1].id),
    "account": lambda w, h, a: (w, h, a[0].id),
    "transaction": lambda w, h, a: (w, replace(h, ledger_transaction_id=1), a[1].id),
    "state": lambda w, h, a: (w, replace(h, to_state=State.SETTLED), a[1].id),
    "approvals": lambda w, h, a: (replace(w, approvals_required=1), h, a[1].id),
}


class TestRecordTransition:
    def test_a_column_outside_the_allow_list_is_refused_before_any_statement(
            self, engine: Engine) -> None:
        history = HistoryRow(from_state=State.RESERVED, to_state=State.CANCELED, event="canceled",
                             reason=None, evidence={}, actor="t", occurred_at=T0)
        sent: list[str] = []
        sa.event.listen(engine, "before_cursor_execute",
                        lambda _c, _cur, statement, *_a: sent.append(statement))
        with engine.connect() as conn:
            for column in ["amount_minor", "fee_minor", "destination", "user_id", "id",
                           "state = 'settled', amount_minor", "State"]:
                with pytest.raises(ValueError, match="a transition cannot set"):
                    repo.record_transition(conn, 1, {"state": "canceled", column: 0}, history)
        assert sent == []
        assert "amount_minor" not in repo.TRANSITION_COLUMNS


class TestRecordReserve:
    @pytest.mark.parametrize("tampered", sorted(TAMPERED))
    def test_refuses_a_reserve_that_is_not_the_withdrawals_and_writes_nothing(
            self, wbook: Engine, tampered: str) -> None:
        with UnitOfWork(wbook) as uow:
            opened = open_for(uow)
            assert opened.withdrawal_id is not None and opened.existing_id is None
            w = requested(opened.withdrawal_id)
            accounts = user_accounts(opened)
            history = post_reserve(uow, w, accounts)
            bad_w, bad_history, account_id = TAMPERED[tampered](w, history, accounts)
            savepoint = uow.conn.begin_nested()
            with pytest.raises(sa_exc.IntegrityError) as refused:
                repo.record_reserve(uow.conn, bad_w, bad_history, account_id)
            assert sqlstate(refused.value) == "23514"
            savepoint.rollback()
            in_tx = uow.conn.execute(sa.text(
                "SELECT (SELECT count(*) FROM withdrawals), (SELECT count(*) FROM "
                "withdrawal_events), (SELECT count(*) FROM outbox_events)")).one()
            assert tuple(in_tx) == (0, 0, 0)
            # The right reserve, in the same transaction, is accepted.
            posting_id = repo.record_reserve(uow.conn, w, history, accounts[1].id)
            uow.commit()
        stored = service.get_withdrawal(wbook, w.id)
        assert (stored.state, stored.reserve_transaction_id, stored.reserve_posting_id) == (
            State.RESERVED, history.ledger_transaction_id, posting_id)
        assert count(wbook, "withdrawal_events") == 1 and count(wbook, "outbox_events") == 1

    def test_a_key_committed_meanwhile_is_a_serialization_failure(self, wbook: Engine) -> None:
        # The (user, key) of another asset's withdrawal, committed after open_reserve looked.
        with UnitOfWork(wbook) as first, UnitOfWork(wbook) as second:
            a = open_for(first)
            b = open_for(second, asset="ETH")
            assert a.existing_id is None and b.existing_id is None
            w = requested(a.withdrawal_id or 0)
            history = post_reserve(first, w, user_accounts(a))
            repo.record_reserve(first.conn, w, history, user_accounts(a)[1].id)
            first.commit()
            w2 = requested(b.withdrawal_id or 0, asset="ETH", amount_minor=10**16,
                           fee_max_minor=5 * 10**14)
            fund(wbook, ["u1"], 10**18, asset="ETH")
            with UnitOfWork(wbook) as uow:  # the accounts as the ledger has them now
                eth = ledger.get_asset(uow, "ETH")
                eth_accounts = ledger.open_user_accounts(uow, "u1", eth)
            history2 = post_reserve(second, w2, eth_accounts)
            with pytest.raises(sa_exc.OperationalError) as raced:
                repo.record_reserve(second.conn, w2, history2, eth_accounts[1].id)
            assert sqlstate(raced.value) == "40001"
        assert count(wbook, "withdrawals") == 1


class TestOpenReserve:
    def test_finds_the_key_and_reads_nothing_for_a_new_one(
            self, wbook: Engine, cfg: WithdrawalsConfig, own: SetOwnAddresses) -> None:
        w = service.request_withdrawal(wbook, cfg, own, req(), now=T0).withdrawal
        with UnitOfWork(wbook) as uow:
            again = open_for(uow)
            new = open_for(uow, key="k2")
        assert (again.existing_id, again.withdrawal_id) == (w.id, None)
        assert new.existing_id is None and new.withdrawal_id is not None
        assert new.used_minor == 30_000_000
        assert set(new.accounts) == {"user:u1:wallet", "user:u1:withdrawals"}

    @BOTH_ROUTES
    def test_holds_the_users_asset_lock_until_commit(self, wbook: Engine) -> None:
        with UnitOfWork(wbook) as holder:
            open_for(holder)
            with UnitOfWork(wbook) as other:
                other.conn.exec_driver_sql("SET LOCAL lock_timeout = '200ms'")
                open_for(other, asset="ETH")  # another asset: another lock
                open_for(other, user="u2")  # another user: another lock
                with pytest.raises(sa_exc.OperationalError) as waited:
                    open_for(other, key="k2")
                assert sqlstate(waited.value) == "55P03"

    def test_refuses_repeatable_read(self, wbook: Engine) -> None:
        # Its snapshot could predate the lock, and the day's total miss a concurrent request.
        with wbook.connect().execution_options(isolation_level="REPEATABLE READ") as conn:
            with conn.begin(), pytest.raises(sa_exc.DBAPIError) as refused:
                repo.open_reserve(conn, "u1", "USDC", "k1", SINCE, "w", "x")
            assert sqlstate(refused.value) == "25000"

    def test_refuses_missing_values(self, wbook: Engine) -> None:
        with UnitOfWork(wbook) as uow, pytest.raises(sa_exc.DBAPIError) as refused:
            repo.open_reserve(uow.conn, None, "USDC", "k1", SINCE, "w", "x")  # type: ignore[arg-type]
        assert sqlstate(refused.value) == "22004"


@BOTH_ROUTES
class TestSameKeyAcrossAssets:
    def test_concurrent_same_key_in_two_assets_is_one_withdrawal(
            self, wbook: Engine, cfg: WithdrawalsConfig, own: SetOwnAddresses) -> None:
        # Different assets take different limit locks: the unique key decides, the loser's
        # reserve rolls back and its retry reports the conflict.
        fund(wbook, ["u1"], 10**18, asset="ETH")
        fund(wbook, ["u1"], 10_000_000_000)

        def attempt(args: tuple[str, str]) -> str:
            key, asset = args
            amount = 10**16 if asset == "ETH" else 10_000_000
            try:
                service.request_withdrawal(wbook, cfg, own, req(key=key, asset=asset,
                                                                amount=amount), now=T0)
                return asset
            except errors.WithdrawalKeyConflict:
                return "conflict"

        jobs = [(f"x{i}", asset) for i in range(30) for asset in ("USDC", "ETH")]
        random.Random(4).shuffle(jobs)
        with ThreadPoolExecutor(max_workers=12) as pool:
            outcomes = list(pool.map(attempt, jobs))
        assert outcomes.count("conflict") == 30
        usdc, eth = outcomes.count("USDC"), outcomes.count("ETH")
        assert usdc + eth == 30 and count(wbook, "withdrawals") == 30
        assert balance(wbook, "user:u1:withdrawals") == usdc * 12_000_000
        assert balance(wbook, "user:u1:withdrawals", "ETH") == eth * (10**16 + 5 * 10**14)


def trimmed(decimal: str) -> str:
    """A decimal string without the trailing zeros of its fraction (and no lone point)."""
    return decimal.rstrip("0").rstrip(".") if "." in decimal else decimal


class TestDecimal:
    def test_outbox_decimal_renders_the_exact_decimal(self, engine: Engine) -> None:
        # The payloads' rendering is format_amount's (the API's) without trailing zeros.
        rng = random.Random(7)
        pairs: list[tuple[int, int]] = []
        for scale in range(0, 39):
            for minor in (0, 1, -1, 5, -5, 10, 100, 10**scale, 10**scale - 1, 10**scale + 1,
                          -(10**scale), 30_000_000, 2**127 - 1, -(2**127 - 1),
                          rng.randrange(-(2**127) + 1, 2**127), rng.randrange(10**12)):
                pairs.append((minor, scale))
        with engine.connect() as conn:
            rows = conn.execute(sa.text(
                "SELECT m, s, outbox_decimal(m, s) AS text "
                "FROM unnest(CAST(:m AS numeric[]), CAST(:s AS int[])) AS u(m, s)"),
                {"m": [str(m) for m, _ in pairs], "s": [s for _, s in pairs]}).all()
            nulls = conn.execute(sa.text(
                "SELECT outbox_decimal(NULL, 6), outbox_decimal(5, NULL)")).one()
        assert len(rows) == len(pairs)
        assert [r for r in rows if r.text != trimmed(format_amount(int(r.m), r.s))] == []
        assert tuple(nulls) == (None, None)
        got = {(int(r.m), r.s): r.text for r in rows}
        assert got[(30_000_000, 6)] == "30" and got[(1, 18)] == "0.000000000000000001"
        assert got[(-5, 1)] == "-0.5" and got[(0, 6)] == "0"


def reserve(engine: Engine, cfg: WithdrawalsConfig, own: SetOwnAddresses, user: str = "u1",
            key: str = "k1") -> WithdrawalRecord:
    return service.request_withdrawal(engine, cfg, own, req(user=user, key=key),
                                      now=T0).withdrawal


RAW_EVENT = ("INSERT INTO withdrawal_events (withdrawal_id, from_state, to_state, event, reason, "
             "actor, ledger_transaction_id, occurred_at) VALUES (:w, 'requested', 'reserved', "
             "'reserve_posted', 'reserved', 'raw', :tx, :at) RETURNING id")


class TestReserveOutbox:
    """withdrawal_reserve_record writes the reserve's outbox row itself (the outbox trigger
    skips its role); every other writer still gets its row from the trigger."""

    def test_reserve_outbox_row_is_the_one_the_trigger_writes(
            self, wbook: Engine, owner: Engine, cfg: WithdrawalsConfig,
            own: SetOwnAddresses) -> None:
        with owner.begin() as conn:
            client_id = conn.execute(sa.text(
                "INSERT INTO api_clients (name) VALUES ('exchange') RETURNING id")).scalar_one()
            conn.execute(sa.text("INSERT INTO api_users (id, client_id) VALUES ('u1', :c)"),
                         {"c": client_id})
        w = reserve(wbook, cfg, own)
        # The same history row, written raw by the application role: the trigger's outbox row.
        with wbook.begin() as conn:
            raw_id = conn.execute(sa.text(RAW_EVENT), {
                "w": w.id, "tx": w.reserve_transaction_id, "at": T0}).scalar_one()
        with wbook.connect() as conn:
            rows = conn.execute(sa.text(
                "SELECT o.event_id, o.type, o.client_id, o.user_id, o.subject, o.payload, "
                "o.created_at = e.recorded_at AS at_recorded, e.id AS history_id "
                "FROM outbox_events o JOIN withdrawal_events e ON o.event_id = 'evt_wd_' || e.id "
                "ORDER BY e.id")).all()
        assert len(rows) == 2 and rows[1].history_id == raw_id
        direct, by_trigger = rows
        assert direct.event_id == f"evt_wd_{direct.history_id}"
        assert direct.at_recorded and by_trigger.at_recorded
        assert (direct.type, direct.client_id, direct.user_id, direct.subject) == (
            by_trigger.type, by_trigger.client_id, by_trigger.user_id, by_trigger.subject) == (
            "withdrawal.reserved", client_id, "u1", f"withdrawal:{w.id}")
        # The same payload but for the history row's own id (and time).
        assert direct.payload["withdrawal"] == by_trigger.payload["withdrawal"]
        assert direct.payload["history"]["id"] == str(direct.history_id)
        assert by_trigger.payload["history"]["id"] == str(raw_id)
        assert ({k: v for k, v in direct.payload["history"].items()
                 if k not in ("id", "occurred_at")}
                == {k: v for k, v in by_trigger.payload["history"].items()
                    if k not in ("id", "occurred_at")})
        assert direct.payload["withdrawal"]["amount"] == {"minor": "30000000",
                                                          "decimal": "30.000000"}
        assert direct.payload["withdrawal"]["fee"]["decimal"] == "0.400000"

    def test_reserve_fans_out_to_its_clients_endpoint_and_not_without_one(
            self, wbook: Engine, owner: Engine, cfg: WithdrawalsConfig,
            own: SetOwnAddresses) -> None:
        fund(wbook, ["u2"], 1_000_000_000)
        with owner.begin() as conn:
            client_id = conn.execute(sa.text(
                "INSERT INTO api_clients (name) VALUES ('exchange') RETURNING id")).scalar_one()
            conn.execute(sa.text("INSERT INTO api_users (id, client_id) VALUES ('u1', :c)"),
                         {"c": client_id})
            conn.execute(sa.text(
                "INSERT INTO webhook_endpoints (client_id, url, secret_sealed) "
                "VALUES (:c, 'https://example.test/hook', :s)"),
                {"c": client_id, "s": keyring().seal("s" * 32, "webhook_endpoint:test")})
        mine = reserve(wbook, cfg, own)
        reserve(wbook, cfg, own, user="u2", key="k2")  # a user of no client: no delivery
        with wbook.connect() as conn:
            deliveries = conn.execute(sa.text(
                "SELECT o.subject FROM webhook_deliveries d "
                "JOIN outbox_events o ON o.id = d.event_id")).scalars().all()
        assert deliveries == [f"withdrawal:{mine.id}"]
        assert count(wbook, "outbox_events") == 2

    def test_writer_role_is_not_the_applications(self, owner: Engine) -> None:
        with owner.connect() as conn:
            row = conn.execute(sa.text(
                "SELECT p.prosecdef, pg_get_userbyid(p.proowner), "
                "pg_has_role('custody_app', 'custody_withdrawal_writer', 'MEMBER'), "
                "(SELECT rolcanlogin FROM pg_roles WHERE rolname = 'custody_withdrawal_writer') "
                "FROM pg_proc p WHERE p.proname = 'withdrawal_reserve_record'")).one()
        assert tuple(row) == (True, "custody_withdrawal_writer", False, False)


class TestReferencesOfOtherWriters:
    """The foreign keys of withdrawals and withdrawal_events became checks that skip only
    withdrawal_reserve_record's role: a raw writer is refused (23503) and writes nothing."""

    @pytest.mark.parametrize("bad", ["withdrawal", "ledger transaction"])
    def test_history_row_naming_a_missing_parent_is_refused(
            self, wbook: Engine, cfg: WithdrawalsConfig, own: SetOwnAddresses,
            bad: str) -> None:
        w = reserve(wbook, cfg, own)
        params = {"w": w.id, "tx": w.reserve_transaction_id, "at": T0}
        params["w" if bad == "withdrawal" else "tx"] = 10**12
        with wbook.begin() as conn, pytest.raises(sa_exc.IntegrityError) as refused:
            conn.execute(sa.text(RAW_EVENT), params)
        assert sqlstate(refused.value) == "23503"
        assert count(wbook, "withdrawal_events") == 1 and count(wbook, "outbox_events") == 1

    @pytest.mark.parametrize("column", ["reserve_transaction_id", "reserve_posting_id"])
    def test_withdrawal_naming_a_missing_ledger_row_is_refused(
            self, wbook: Engine, owner: Engine, cfg: WithdrawalsConfig, own: SetOwnAddresses,
            column: str) -> None:
        # Written as the owner: the application role may not write withdrawals directly at all
        # (tests/migrations/test_money_grants.py); the checks hold for every other writer.
        w = reserve(wbook, cfg, own)
        with owner.begin() as conn, pytest.raises(sa_exc.IntegrityError) as refused:
            conn.execute(sa.text(f"UPDATE withdrawals SET {column} = 10^12 WHERE id = :w"),
                         {"w": w.id})
        assert sqlstate(refused.value) == "23503"
        # A copy of the stored row under another key, with the one reference missing.
        refs = {"reserve_transaction_id": "reserve_transaction_id",
                "reserve_posting_id": "reserve_posting_id", column: "10^12"}
        with owner.begin() as conn, pytest.raises(sa_exc.IntegrityError) as refused:
            conn.execute(sa.text(
                "INSERT INTO withdrawals (user_id, request_key, fingerprint, requested_by, chain, "
                "asset_code, destination, amount_minor, fee_max_minor, fee_minor, chain_amount, "
                "approvals_required, state, reserve_transaction_id, reserve_posting_id, "
                "requested_at, state_changed_at) SELECT user_id, 'raw', fingerprint, "
                "requested_by, chain, asset_code, destination, amount_minor, fee_max_minor, "
                "fee_minor, chain_amount, approvals_required, state, "
                f"{refs['reserve_transaction_id']}, {refs['reserve_posting_id']}, "
                "requested_at, state_changed_at FROM withdrawals WHERE id = :w"), {"w": w.id})
        assert sqlstate(refused.value) == "23503"
        assert service.get_withdrawal(wbook, w.id) == w
        assert count(wbook, "withdrawals") == 1

    def test_a_withdrawals_id_cannot_change(
            self, wbook: Engine, cfg: WithdrawalsConfig, own: SetOwnAddresses) -> None:
        w = reserve(wbook, cfg, own)
        with wbook.begin() as conn, pytest.raises(sa_exc.IntegrityError) as refused:
            conn.execute(sa.text("UPDATE withdrawals SET id = id + 1000 WHERE id = :w"),
                         {"w": w.id})
        assert sqlstate(refused.value) == "23503"
        assert service.get_withdrawal(wbook, w.id) == w

    def test_raw_writer_with_existing_parents_is_accepted(
            self, wbook: Engine, cfg: WithdrawalsConfig, own: SetOwnAddresses) -> None:
        w = reserve(wbook, cfg, own)
        with wbook.begin() as conn:
            conn.execute(sa.text(RAW_EVENT), {"w": w.id, "tx": w.reserve_transaction_id,
                                              "at": T0})
        assert count(wbook, "withdrawal_events") == 2 and count(wbook, "outbox_events") == 2
