"""The webhook outbox: events written by triggers in the transaction of the change, delivered
signed to a real local receiver, retried with backoff, logged, replayed (also from the CLI)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from api import outbox
from config.uow import UnitOfWork
from devtools.e2e import WebhookReceiver
from tests.api.conftest import Api, configs, seed_deposit


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    """A real HTTP receiver on a free local port."""
    r = WebhookReceiver().start()
    yield r
    r.stop()


def hooked(api: Api, receiver: WebhookReceiver, client: str = "acme") -> outbox.Endpoint:
    """Point ``client``'s webhooks at the receiver."""
    endpoint = outbox.set_endpoint(api.engine, client, receiver.url)
    receiver.secret = endpoint.secret
    return endpoint


def events(engine: Engine) -> list[tuple[str, str, str | None]]:
    with engine.connect() as conn:
        return [(r[0], r[1], r[2]) for r in conn.execute(sa.text(
            "SELECT o.event_id, o.type, c.name FROM outbox_events o "
            "LEFT JOIN api_clients c ON c.id = o.client_id ORDER BY o.id"))]


class TestTriggers:
    def test_history_rows_write_events_of_the_owning_client(self, api: Api) -> None:
        user = api.funded_user()
        w = api.withdraw(user)
        seed_deposit(api, user, 7_000_000)
        rows = events(api.engine)
        assert [(t, c) for _, t, c in rows] == [("withdrawal.reserved", "acme"),
                                                ("deposit.seen", "acme")]
        with api.engine.connect() as conn:
            payload = conn.execute(sa.text(
                "SELECT outbox_payload(o) FROM outbox_events o WHERE type = 'deposit.seen'")
            ).scalar_one()
            wd = conn.execute(sa.text(
                "SELECT event_id, outbox_payload(o) AS payload FROM outbox_events o "
                "WHERE type LIKE 'withdrawal.%'")).one()
        deposit = payload["deposit"]
        assert deposit["amount"] == {"minor": "7000000", "decimal": "7.000000"}
        assert deposit["user_id"] == user and deposit["state"] == "included"
        assert payload["history"]["event"] == "transfer_included"
        withdrawal = wd.payload["withdrawal"]
        assert withdrawal["id"] == str(w["id"])
        assert (withdrawal["amount"]["decimal"], withdrawal["fee"]["decimal"]) == (
            "30.000000", "0.400000")
        assert withdrawal["amount"]["minor"] == "30000000"
        assert wd.event_id.startswith("evt_wd_")

    def test_a_deposit_event_is_rendered_from_its_history_row_the_same_at_every_read(
            self, api: Api) -> None:
        from deposits import service as deposits

        user = api.new_user()
        seed_deposit(api, user, 7_000_000)

        def seen() -> tuple[object, object, dict[str, object]]:
            with api.engine.connect() as conn:
                row = conn.execute(sa.text(
                    "SELECT o.payload, o.deposit_event_id, outbox_payload(o) AS rendered "
                    "FROM outbox_events o WHERE type = 'deposit.seen'")).one()
            return row.payload, row.deposit_event_id, row.rendered

        stored, history_id, before = seen()
        with api.engine.connect() as conn:
            first_row = conn.execute(sa.text("SELECT min(id) FROM deposit_events")).scalar()
        # Nothing stored but the history row it names; rendered from it.
        assert (stored, history_id) == (None, first_row)
        assert before["history"]["id"] == str(first_row)  # type: ignore[index]
        chains, _ = configs()
        with UnitOfWork(api.engine) as uow:  # The deposit moves on: reorged out.
            deposits.record_rewind(uow, chains.chain("devnet"), 50, {"test": True},
                                   now=datetime.now(UTC))
            uow.commit()
        assert [t for _, t, _ in events(api.engine)] == ["deposit.seen", "deposit.reorged"]
        _, _, after = seen()
        # The seen event still says what it said when it was written.
        assert after == before
        assert before["deposit"]["state"] == "included"  # type: ignore[index]

    def test_a_deep_reorg_case_is_an_alert_of_the_owning_client(self, api: Api) -> None:
        user = api.new_user()
        seed_deposit(api, user)
        with api.engine.begin() as conn:
            conn.execute(sa.text(
                "INSERT INTO deposit_cases (kind, deposit_id, expected, observed) "
                "SELECT 'deep_reorg', id, '{\"block\": 100}', '{}' FROM deposits"))
        assert [(t, c) for _, t, c in events(api.engine)] == [
            ("deposit.seen", "acme"), ("alert.deep_reorg", "acme")]

    def test_a_rolled_back_change_leaves_no_event(self, api: Api) -> None:
        user = api.new_user()
        from chains.model import ObservedTransfer
        from deposits import scans
        from deposits.scanner import Observation

        address = api.call("POST", f"/v1/users/{user}/deposit-addresses", "acme",
                           json={"chain": "devnet"}).json()["address"]
        observed = Observation(ObservedTransfer(
            token="0x5fbdb2315678afecb367f032d93f642f64180aa3", from_address="0x" + "11" * 20,
            to_address=address, value=5, tx_hash="0x" + "ab" * 32, block_number=9,
            block_hash="0x" + "22" * 32, position="log:0", log_index=0),
            tx_from="0x" + "11" * 20, tx_nonce=1)
        chains, _ = configs()
        with UnitOfWork(api.engine) as uow:
            scans.record_scan(uow, chains, chains.chain("devnet"), [], [observed],
                                 {address: user}, head_block=9, now=datetime.now(UTC))
            in_tx = uow.conn.execute(sa.text("SELECT count(*) FROM outbox_events")).scalar()
            # no commit: the unit of work rolls back
        assert in_tx == 1
        assert events(api.engine) == []

    def test_the_outbox_is_append_only_for_the_application(self, api: Api) -> None:
        api.withdraw(api.funded_user())
        with api.engine.connect() as conn, pytest.raises(sa.exc.DBAPIError):
            conn.execute(sa.text("UPDATE outbox_events SET type = 'deposit.seen'"))

    def test_decimal_rendering_is_exact(self, engine: Engine) -> None:
        with engine.connect() as conn:
            got = conn.execute(sa.text(
                "SELECT outbox_decimal(123456789012345678901, 18), outbox_decimal(1, 18), "
                "outbox_decimal(30000000, 6), outbox_decimal(5, 0)")).one()
        assert tuple(got) == ("123.456789012345678901", "0.000000000000000001", "30", "5")


class TestDelivery:
    def test_signed_delivery_with_a_stable_event_id_and_replay(
            self, api: Api, receiver: WebhookReceiver) -> None:
        hooked(api, receiver)
        other = WebhookReceiver().start()
        try:
            other.secret = outbox.set_endpoint(api.engine, "globex", other.url).secret
            user = api.funded_user()
            api.withdraw(user)
            report = outbox.deliver_due(api.engine)
            assert (report.delivered, report.retried) == (1, 0)
            assert other.requests == []  # globex does not see acme's users
        finally:
            other.stop()
        [got] = receiver.requests
        assert got.signature_valid and got.event_type == "withdrawal.reserved"
        doc = got.document
        assert doc["id"] == got.event_id and doc["data"]["withdrawal"]["user_id"] == user
        assert doc["version"] == 2
        # A forged or altered body does not verify.
        assert not outbox.verify_signature("whsec_" + "0" * 64, "t=1,v1=00", got.body)
        assert outbox.deliver_due(api.engine).attempted == 0  # nothing due twice

        assert outbox.replay(api.engine, event_ids=[got.event_id], actor="ops") == 1
        assert outbox.deliver_due(api.engine).delivered == 1
        assert len(receiver.requests) == 2
        assert receiver.requests[1].event_id == got.event_id
        assert receiver.requests[1].body == got.body  # same bytes: dedupe is safe
        assert list(receiver.accepted()) == [got.event_id]
        with api.engine.connect() as conn:
            log = outbox.delivery_log(conn, event_id=got.event_id)
        assert [(a.outcome, a.attempt_no) for a in log] == [
            ("delivered", 1), ("replayed", 0), ("delivered", 1)]

    def test_retry_after_the_receiver_fails_follows_the_backoff(
            self, api: Api, receiver: WebhookReceiver) -> None:
        hooked(api, receiver)
        api.withdraw(api.funded_user())
        receiver.fail_next = 2
        t0 = datetime.now(UTC)
        assert outbox.deliver_due(api.engine, now=t0).retried == 1
        assert outbox.deliver_due(api.engine, now=t0 + timedelta(seconds=29)).attempted == 0
        assert outbox.deliver_due(api.engine, now=t0 + timedelta(seconds=31)).retried == 1
        assert outbox.deliver_due(api.engine, now=t0 + timedelta(seconds=90)).attempted == 0
        assert outbox.deliver_due(api.engine, now=t0 + timedelta(seconds=92)).delivered == 1
        assert [r.status for r in receiver.requests] == [500, 500, 204]
        assert len({r.event_id for r in receiver.requests}) == 1
        with api.engine.connect() as conn:
            rows = conn.execute(sa.text(
                "SELECT attempt_no, outcome, status_code, next_attempt_at FROM webhook_attempts "
                "ORDER BY id")).all()
        assert [(r.attempt_no, r.outcome, r.status_code) for r in rows] == [
            (1, "retry", 500), (2, "retry", 500), (3, "delivered", 204)]
        assert rows[0].next_attempt_at == t0 + timedelta(seconds=30)
        assert rows[1].next_attempt_at == t0 + timedelta(seconds=31 + 60)

    def test_exhausted_retries_fail_and_replay_from_the_cli_revives(
            self, api: Api, receiver: WebhookReceiver, database_url: str) -> None:
        hooked(api, receiver)
        api.withdraw(api.funded_user())
        receiver.fail_next = 3
        t = datetime.now(UTC)
        for step in range(3):
            outbox.deliver_due(api.engine, now=t + timedelta(seconds=10 * step), delays=(1, 2))
        with api.engine.connect() as conn:
            assert conn.execute(sa.text("SELECT state FROM webhook_deliveries")).scalar() == \
                "failed"
        env = {**os.environ, "CUSTODY_DATABASE_URL": database_url, "COLUMNS": "200"}
        run = "from api.cli import app; app(prog_name='custody')"  # `custody`
        done = subprocess.run([sys.executable, "-c", run, "webhooks", "replay", "--failed"],
                              env=env, text=True, capture_output=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert "1 deliveries queued" in done.stdout and "1 delivered" in done.stdout
        assert [r.status for r in receiver.requests] == [500, 500, 500, 204]
        log = subprocess.run([sys.executable, "-c", run, "webhooks", "log"], env=env, text=True,
                             capture_output=True, timeout=120)
        assert log.returncode == 0 and "replayed" in log.stdout, log.stderr

    def test_an_unreachable_receiver_is_an_attempt_not_a_crash(self, api: Api) -> None:
        outbox.set_endpoint(api.engine, "acme", "http://127.0.0.1:9/nothing-listens")
        api.withdraw(api.funded_user())
        report = outbox.deliver_due(api.engine, timeout_s=2)
        assert report.retried == 1
        with api.engine.connect() as conn:
            error = conn.execute(sa.text("SELECT error FROM webhook_attempts")).scalar()
        assert error and "Connect" in error


def test_the_backoff_schedule_spans_at_least_three_days() -> None:
    delays = outbox.RETRY_DELAYS_S
    assert sum(delays) >= 3 * 86_400
    assert delays[:3] == (30, 60, 120) and max(delays) == 6 * 3600
    assert all(b >= a for a, b in zip(delays, delays[1:], strict=False))
    assert outbox.next_delay_s(len(delays)) == delays[-1]
    assert outbox.next_delay_s(len(delays) + 1) is None


def test_signatures_cover_timestamp_and_body() -> None:
    header = outbox.sign("s" * 40, 1_700_000_000, b'{"a":1}')
    assert outbox.verify_signature("s" * 40, header, b'{"a":1}', now=1_700_000_100)
    assert not outbox.verify_signature("s" * 40, header, b'{"a":2}', now=1_700_000_100)
    assert not outbox.verify_signature("t" * 40, header, b'{"a":1}', now=1_700_000_100)
    assert not outbox.verify_signature("s" * 40, header, b'{"a":1}', now=1_700_001_000)
