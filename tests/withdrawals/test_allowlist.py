"""Destination allowlists and velocity limits (issue 19) against real PostgreSQL: the activation
delay on the engine's clock, immediate removal, the two-admin shortening, the database's guard,
and velocity limits that concurrent requests cannot pass together."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import datetime, timedelta

import pytest
import sqlalchemy as sa
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import Engine

from api.repository import clients
from config.database import make_engine
from config.errors import ConfigurationInvalid
from config.uow import UnitOfWork
from config.withdrawals import AllowlistConfig, VelocityLimit, WithdrawalsConfig
from withdrawals import errors, service
from withdrawals.service import NewAddress

from .conftest import (
    CAROL,
    CHAIN,
    DAVE,
    DEST,
    T0,
    SetOwnAddresses,
    config_toml,
    fund,
    load,
    open_book,
    req,
)

DAY = timedelta(days=1)
OTHER = "0x15d34AAf54267DB7D7c367839AAf71A00a2C6A65"


def client_users(engine: Engine, client: str, users: list[str]) -> int:
    """The client ``client`` with ``users`` (created through the API's tables); its id."""
    with UnitOfWork(engine) as uow:
        client_id = clients.ensure_client(uow.conn, client)
        for user in users:
            clients.insert_user(uow.conn, user, client_id, None)
        uow.commit()
    return client_id


def on(cfg: WithdrawalsConfig, *clients_on: str, delay_s: int = 86_400,
       velocity: tuple[VelocityLimit, ...] = ()) -> WithdrawalsConfig:
    """``cfg`` with allowlisting on for ``clients_on`` and the velocity limits given."""
    return replace(cfg, allowlist=AllowlistConfig(frozenset(clients_on), delay_s),
                   velocity=velocity)


def add(engine: Engine, client_id: int, *, address: str = DEST, user: str | None = None,
        key: str = "a1", now: datetime = T0, delay_s: int = 86_400) -> service.Added:
    """Allowlist ``address`` for ``client_id`` (all its users, or ``user``)."""
    return service.add_address(engine, NewAddress(
        client_id=client_id, user_id=user, chain=CHAIN, address=address, label="cold store",
        request_key=key, added_by="acme"), delay_s=delay_s, now=now)


def withdrawals_of(engine: Engine, user: str) -> int:
    """How many withdrawals ``user`` has."""
    with engine.connect() as conn:
        return int(conn.execute(sa.text("SELECT count(*) FROM withdrawals WHERE user_id = :u"),
                                {"u": user}).scalar_one())


@pytest.fixture
def book(engine: Engine) -> tuple[Engine, int]:
    """The book opened, client acme with users u1 and u2 holding 150 USDC each."""
    open_book(engine)
    acme = client_users(engine, "acme", ["u1", "u2"])
    fund(engine, ["u1", "u2"], 150_000_000)
    return engine, acme


def refusal(engine: Engine, cfg: WithdrawalsConfig, own: SetOwnAddresses, key: str, *,
            now: datetime, user: str = "u1", destination: str = DEST) -> str:
    """The reason a request is refused with (``destination_not_allowed``)."""
    with pytest.raises(errors.DestinationNotAllowed) as refused:
        service.request_withdrawal(engine, cfg, own, req(user, key=key,
                                                         destination=destination), now=now)
    return str(refused.value.problem_extra["reason"])


class TestActivationDelay:
    def test_a_new_address_is_refused_during_the_delay_and_accepted_after_it(
            self, book: tuple[Engine, int], cfg: WithdrawalsConfig, own: SetOwnAddresses) -> None:
        engine, acme = book
        cfg = on(cfg, "acme")
        assert refusal(engine, cfg, own, "w0", now=T0) == "not_listed"
        entry = add(engine, acme).entry
        assert entry.active_at == T0 + DAY and entry.address == DEST.lower()
        with pytest.raises(errors.DestinationNotAllowed) as refused:
            service.request_withdrawal(engine, cfg, own, req(key="w1"),
                                       now=T0 + DAY - timedelta(seconds=1))
        assert refused.value.problem_extra == {"reason": "not_active",
                                               "at": (T0 + DAY).isoformat()}
        assert "not active until" in refused.value.message
        # Nothing was written by the refusals.
        assert withdrawals_of(engine, "u1") == 0
        done = service.request_withdrawal(engine, cfg, own, req(key="w2"), now=T0 + DAY)
        assert done.withdrawal.destination == DEST.lower() and not done.replayed
        # Another address of the same client is still not listed; another chain's entry or
        # another client's does not count.
        assert refusal(engine, cfg, own, "w3", now=T0 + DAY, destination=OTHER) == "not_listed"

    def test_a_client_without_allowlisting_and_a_user_of_no_client_are_not_checked(
            self, book: tuple[Engine, int], cfg: WithdrawalsConfig, own: SetOwnAddresses) -> None:
        engine, _ = book
        client_users(engine, "globex", ["g1"])
        fund(engine, ["g1", "nobody"], 150_000_000)
        cfg = on(cfg, "acme")
        for user in ("g1", "nobody"):
            service.request_withdrawal(engine, cfg, own, req(user, key=f"k-{user}"), now=T0)
        assert refusal(engine, cfg, own, "k-u1", now=T0) == "not_listed"

    def test_an_entry_for_one_user_allows_only_that_user(
            self, book: tuple[Engine, int], cfg: WithdrawalsConfig, own: SetOwnAddresses) -> None:
        engine, acme = book
        cfg = on(cfg, "acme")
        add(engine, acme, user="u2")
        later = T0 + DAY
        assert refusal(engine, cfg, own, "w1", now=later, user="u1") == "not_listed"
        service.request_withdrawal(engine, cfg, own, req("u2", key="w2"), now=later)
        with pytest.raises(errors.AllowlistEntryInvalid):
            add(engine, acme, user="not-acmes", key="a2")

    def test_removal_takes_effect_at_once(
            self, book: tuple[Engine, int], cfg: WithdrawalsConfig, own: SetOwnAddresses) -> None:
        engine, acme = book
        cfg = on(cfg, "acme")
        entry = add(engine, acme, delay_s=0).entry
        service.request_withdrawal(engine, cfg, own, req(key="w1"), now=T0)
        removed_at = T0 + timedelta(seconds=1)
        after, removed = service.remove_address(engine, entry.id, by="acme", now=removed_at)
        assert removed and after.removed_at == removed_at and after.removed_by == "acme"
        assert refusal(engine, cfg, own, "w2", now=removed_at) == "removed"
        # Removing again keeps the first removal.
        again, removed = service.remove_address(engine, entry.id, by="other", now=T0 + DAY)
        assert not removed and again == after
        # Added again, it waits for its delay again.
        add(engine, acme, key="a2", now=removed_at)
        assert refusal(engine, cfg, own, "w3", now=removed_at) == "not_active"

    def test_adding_is_idempotent_per_key_and_one_live_entry_per_address(
            self, book: tuple[Engine, int]) -> None:
        engine, acme = book
        first = add(engine, acme)
        again = add(engine, acme, now=T0 + DAY)
        assert again.replayed and again.entry == first.entry
        with pytest.raises(errors.WithdrawalKeyConflict):
            add(engine, acme, address=OTHER)
        with pytest.raises(errors.AllowlistEntryExists):
            add(engine, acme, key="a2")
        with pytest.raises(errors.AddressInvalid):
            add(engine, acme, address="0x3C44CdDdB6a900fa2b585dd299e03d12FA4293bc", key="a3")

    def test_events_tell_the_client(self, book: tuple[Engine, int], owner: Engine) -> None:
        engine, acme = book
        entry = add(engine, acme).entry
        service.remove_address(engine, entry.id, by="acme", now=T0 + timedelta(hours=1))
        with owner.connect() as conn:
            rows = conn.execute(sa.text(
                "SELECT event_id, type, client_id, payload FROM outbox_events "
                "WHERE subject = :s ORDER BY id"), {"s": f"allowlist:{entry.id}"}).all()
        assert [(r.event_id, r.type, r.client_id) for r in rows] == [
            (f"evt_al_{entry.id}_added", "allowlist.address_added", acme),
            (f"evt_al_{entry.id}_removed", "allowlist.address_removed", acme)]
        added = rows[0].payload["entry"]
        assert added["address"] == DEST.lower() and added["client"] == "acme"
        assert added["active_at"] == (T0 + DAY).isoformat()
        assert rows[1].payload["entry"]["removed_by"] == "acme"


class TestShortening:
    def test_two_different_admins_shorten_one_address(
            self, book: tuple[Engine, int], cfg: WithdrawalsConfig, own: SetOwnAddresses) -> None:
        engine, acme = book
        cfg = on(cfg, "acme")
        entry = add(engine, acme).entry
        soon = T0 + timedelta(hours=1)
        first = service.vote_shorten(engine, entry.id, CAROL, active_at=soon,
                                     reason="customer called", now=T0)
        assert not first.applied and first.entry.active_at == T0 + DAY
        with pytest.raises(errors.ShorteningRefused, match="already voted"):
            service.vote_shorten(engine, entry.id, CAROL, active_at=soon, reason="again",
                                 now=T0)
        with pytest.raises(errors.ShorteningRefused, match="admin role"):
            service.vote_shorten(engine, entry.id, service.Actor("acme"), active_at=soon,
                                 reason="me", now=T0)
        assert refusal(engine, cfg, own, "w1", now=soon) == "not_active"
        second = service.vote_shorten(engine, entry.id, DAVE, active_at=soon,
                                      reason="confirmed", now=T0)
        assert second.applied and second.entry.active_at == soon
        assert [v.admin for v in second.votes] == ["carol", "dave"]
        service.request_withdrawal(engine, cfg, own, req(key="w2"), now=soon)
        # Never later, and never before it was added.
        entry2 = add(engine, acme, address=OTHER, key="a2").entry
        for bad in (T0 + 2 * DAY, T0 - timedelta(seconds=1)):
            with pytest.raises(errors.ShorteningRefused):
                service.vote_shorten(engine, entry2.id, CAROL, active_at=bad, reason="x",
                                     now=T0)

    def test_the_database_refuses_a_shortening_without_two_votes(
            self, book: tuple[Engine, int]) -> None:
        engine, acme = book
        entry = add(engine, acme).entry
        service.vote_shorten(engine, entry.id, CAROL, active_at=T0, reason="one vote", now=T0)
        for statement in (
                "UPDATE withdrawal_allowlist SET active_at = added_at WHERE id = :i",
                "DELETE FROM withdrawal_allowlist WHERE id = :i",
                "UPDATE withdrawal_allowlist_votes SET admin = 'dave' WHERE entry_id = :i"):
            with pytest.raises(sa_exc.DBAPIError), engine.begin() as conn:
                conn.execute(sa.text(statement), {"i": entry.id})
        # An entry inserted with a shorter delay than it names, or removed, is refused too.
        with pytest.raises(sa_exc.DBAPIError), engine.begin() as conn:
            conn.execute(sa.text(
                "INSERT INTO withdrawal_allowlist (client_id, chain, address, label, "
                "request_key, added_by, added_at, delay_s, active_at) VALUES (:c, 'devnet', "
                ":a, 'x', 'k9', 'acme', :t, 86400, :t)"), {"c": acme, "a": OTHER.lower(),
                                                            "t": T0})
        service.remove_address(engine, entry.id, by="acme", now=T0)
        with pytest.raises(sa_exc.DBAPIError), engine.begin() as conn:
            conn.execute(sa.text("UPDATE withdrawal_allowlist SET removed_at = NULL, "
                                 "removed_by = NULL WHERE id = :i"), {"i": entry.id})
        with pytest.raises(errors.AllowlistEntryRemoved):
            service.vote_shorten(engine, entry.id, DAVE, active_at=T0, reason="late", now=T0)


class TestVelocity:
    def test_fifty_concurrent_requests_against_a_client_limit_that_fits_three_pass_three(
            self, database_url: str, engine: Engine, cfg: WithdrawalsConfig,
            own: SetOwnAddresses) -> None:
        open_book(engine)
        users = [f"v{i}" for i in range(50)]
        client_users(engine, "acme", users)
        fund(engine, users, 150_000_000)
        limited = on(cfg, velocity=(VelocityLimit("USDC", "client", 3600, count_max=3),))
        wide = make_engine(database_url, pool_size=50)
        try:
            def attempt(i: int) -> str:
                try:
                    service.request_withdrawal(wide, limited, own, req(users[i], key=f"c{i}"),
                                               now=T0)
                    return "ok"
                except errors.VelocityLimitExceeded:
                    return "limit"

            with ThreadPoolExecutor(max_workers=50) as pool:
                outcomes = list(pool.map(attempt, range(50)))
        finally:
            wide.dispose()
        assert outcomes.count("ok") == 3 and outcomes.count("limit") == 47
        with engine.connect() as conn:
            assert conn.execute(sa.text("SELECT count(*) FROM withdrawals")).scalar_one() == 3

    def test_fifty_concurrent_requests_of_one_user_pass_three(
            self, database_url: str, book: tuple[Engine, int], cfg: WithdrawalsConfig,
            own: SetOwnAddresses) -> None:
        engine, _ = book
        limited = on(cfg, velocity=(VelocityLimit("USDC", "user", 600, count_max=3),))
        wide = make_engine(database_url, pool_size=50)
        try:
            def attempt(i: int) -> str:
                try:
                    service.request_withdrawal(wide, limited, own, req(amount=1_000_000,
                                                                       key=f"u{i}"), now=T0)
                    return "ok"
                except errors.VelocityLimitExceeded:
                    return "limit"

            with ThreadPoolExecutor(max_workers=50) as pool:
                outcomes = list(pool.map(attempt, range(50)))
        finally:
            wide.dispose()
        assert outcomes.count("ok") == 3 and outcomes.count("limit") == 47
        assert withdrawals_of(engine, "u1") == 3

    def test_windows_roll_and_amounts_count(
            self, book: tuple[Engine, int], cfg: WithdrawalsConfig, own: SetOwnAddresses) -> None:
        engine, _ = book
        limited = on(cfg, velocity=(
            VelocityLimit("USDC", "user", 3600, amount_max_minor=50_000_000),
            VelocityLimit("ETH", "user", 3600, count_max=1)))
        service.request_withdrawal(engine, limited, own, req(amount=30_000_000, key="a"),
                                   now=T0)
        with pytest.raises(errors.VelocityLimitExceeded, match="50000000"):
            service.request_withdrawal(engine, limited, own, req(amount=30_000_000, key="b"),
                                       now=T0 + timedelta(minutes=59))
        # The other user's window is its own; an hour later the first request left the window.
        service.request_withdrawal(engine, limited, own, req("u2", amount=30_000_000, key="c"),
                                   now=T0)
        service.request_withdrawal(engine, limited, own, req(amount=30_000_000, key="d"),
                                   now=T0 + timedelta(hours=1, seconds=1))
        # A replay is never refused by a limit: it moves nothing.
        again = service.request_withdrawal(engine, limited, own, req(amount=30_000_000, key="a"),
                                           now=T0 + timedelta(minutes=59))
        assert again.replayed


class TestConfig:
    def test_allowlist_and_velocity_load(self) -> None:
        text = config_toml() + (
            '\n[withdrawals.allowlist]\nclients = ["acme"]\nactivation_delay_s = 3600\n'
            '\n[[withdrawals.velocity]]\nasset = "USDC"\nper = "client"\nwindow_s = 600\n'
            'count_max = 3\namount_max = "12.5"\n')
        _, loaded = load(text)
        assert loaded.allowlist == AllowlistConfig(frozenset({"acme"}), 3600)
        assert loaded.allowlist.enforced("acme") and not loaded.allowlist.enforced("globex")
        assert loaded.velocity_of("USDC") == (VelocityLimit("USDC", "client", 600, 3,
                                                            12_500_000),)
        assert loaded.velocity_of("ETH") == ()
        # Off by default.
        assert load(config_toml())[1].allowlist.clients == frozenset()

    @pytest.mark.parametrize(("extra", "message"), [
        ('[withdrawals.allowlist]\nclients = "acme"\n', "clients must be a list"),
        ('[withdrawals.allowlist]\nactivation_delay_s = -1\n', "activation_delay_s must be"),
        ('[withdrawals.allowlist]\ndelay = 1\n', "unknown key 'delay'"),
        ('[[withdrawals.velocity]]\nasset = "DAI"\nper = "user"\nwindow_s = 60\ncount_max = 1\n',
         "asset DAI is not declared"),
        ('[[withdrawals.velocity]]\nasset = "USDC"\nper = "team"\nwindow_s = 60\n'
         'count_max = 1\n', "per must be one of user, client"),
        ('[[withdrawals.velocity]]\nasset = "USDC"\nper = "user"\ncount_max = 1\n',
         "window_s is required"),
        ('[[withdrawals.velocity]]\nasset = "USDC"\nper = "user"\nwindow_s = 60\n',
         "set count_max, amount_max or both"),
        ('[[withdrawals.velocity]]\nasset = "USDC"\nper = "user"\nwindow_s = 60\n'
         'amount_max = "0.0000001"\n', "amount_max"),
        ('[[withdrawals.velocity]]\nasset = "USDC"\nper = "user"\nwindow_s = 60\n'
         'count_max = 0\n', "count_max must be an integer"),
    ])
    def test_bad_values_are_one_line_errors(self, extra: str, message: str) -> None:
        with pytest.raises(ConfigurationInvalid, match=message) as refused:
            load(config_toml() + "\n" + extra)
        assert "\n" not in refused.value.message


def test_a_removal_waits_for_a_reserve_that_read_the_entry(
        book: tuple[Engine, int], owner: Engine) -> None:
    """The reserve's read locks the live entries FOR SHARE until its commit: a removal cannot
    commit between the check and the reserve (it waits, then every later reserve sees it)."""
    from withdrawals import repository as repo

    engine, acme = book
    entry = add(engine, acme, delay_s=0).entry
    with UnitOfWork(engine) as uow, ThreadPoolExecutor(max_workers=1) as pool:
        read = repo.reserve_limits(uow.conn, "u1", "USDC", CHAIN, DEST.lower(), T0, ["acme"], [])
        assert read.allow_state == "active" and read.client == "acme"
        pid = uow.conn.execute(sa.text("SELECT pg_backend_pid()")).scalar_one()
        removal = pool.submit(service.remove_address, engine, entry.id, by="acme", now=T0)
        blocked = False
        # The owner sees every session's wait (custody_app sees only its login's own).
        for _ in range(500):  # bounded: up to 500 polls of the sessions' waits
            with owner.connect() as conn:
                blocked = bool(conn.execute(sa.text(
                    "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                    "AND :pid = ANY (pg_blocking_pids(pid))"), {"pid": pid}).scalar_one())
            if blocked:
                break
        assert blocked and not removal.done()
        uow.commit()
        _, removed = removal.result(timeout=30)
    assert removed


def test_each_address_that_becomes_usable_is_announced_once(
        book: tuple[Engine, int], owner: Engine) -> None:
    engine, acme = book
    entry = add(engine, acme).entry
    gone = add(engine, acme, address=OTHER, key="a2").entry
    service.remove_address(engine, gone.id, by="acme", now=T0)
    assert service.announce_activations(engine, now=T0 + DAY - timedelta(seconds=1)) == 0
    assert service.announce_activations(engine, now=T0 + DAY) == 1
    assert service.announce_activations(engine, now=T0 + 2 * DAY) == 0
    with owner.connect() as conn:
        rows = conn.execute(sa.text(
            "SELECT event_id, client_id FROM outbox_events WHERE type = "
            "'allowlist.address_active'")).all()
    assert [tuple(r) for r in rows] == [(f"evt_al_{entry.id}_active", acme)]
    # Past the horizon nothing is announced any more (address_added said when).
    late = add(engine, acme, address="0x" + "ab" * 20, key="a3").entry
    assert service.announce_activations(engine, now=late.active_at + timedelta(days=8)) == 0
