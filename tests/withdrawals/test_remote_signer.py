"""The remote signer against a real HTTP signing service on 127.0.0.1, and the processor calling
it with no row lock held: while the signer is blocked mid-step another connection takes the
withdrawal's row and the hot wallet's nonce row with NOWAIT; a signer that times out leaves the
withdrawal in ``signing`` with its nonce, and the next step pays it once with that nonce."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Iterator
from datetime import timedelta

import pytest
import sqlalchemy as sa
from eth_account import Account
from sqlalchemy.engine import Engine

from api.jobs import withdrawal_alerts
from config.uow import UnitOfWork
from config.withdrawals import HotWalletConfig
from ledger.integrity import verify
from outgoing.signer import RemoteSigner, UnsignedTx, signer_for
from tests.support.signing_service import SigningService
from withdrawals import errors, service
from withdrawals import repository as repo
from withdrawals.model import Event, State
from withdrawals.processor import StepReport

from .chainkit import Devnet, remote_toml, start_devnet
from .conftest import DEST, SetOwnAddresses, fund, load, open_book, req

KEY = "0x" + "11" * 32
DEST_LOWER = DEST.lower()


def unsigned(nonce: int = 7, value: int = 5) -> UnsignedTx:
    return UnsignedTx(1, nonce, DEST_LOWER, value, "0x", 21_000, 30 * 10**9, 10**9)


@pytest.fixture
def signing() -> Iterator[SigningService]:
    with SigningService(KEY) as svc:
        yield svc


class TestRemoteSigner:
    def test_signs_and_the_answer_is_checked(self, signing: SigningService) -> None:
        signer = RemoteSigner(signing.address, signing.url, timeout_ms=2_000)
        signed = signer.sign(unsigned())
        assert signed.raw_tx.startswith("0x02") and len(signed.tx_hash) == 66
        [body] = signing.requests
        # Amounts travel as decimal strings.
        assert (body["value"], body["max_fee_per_gas"], body["nonce"]) == ("5", "30000000000", 7)
        assert signing.url not in repr(signer)

    @pytest.mark.parametrize("tamper", ["value", "hash", "key"])
    def test_an_answer_that_is_not_the_transaction_asked_for_is_refused(
            self, signing: SigningService, tamper: str) -> None:
        signing.tamper = tamper
        signer = RemoteSigner(signing.address, signing.url, timeout_ms=2_000)
        with pytest.raises(errors.SignerAnswerInvalid):
            signer.sign(unsigned())

    def test_failure_and_timeout_are_signer_unavailable(self, signing: SigningService) -> None:
        signer = RemoteSigner(signing.address, signing.url, timeout_ms=200)
        signing.fail = True
        with pytest.raises(errors.SignerUnavailable, match="HTTP 503"):
            signer.sign(unsigned())
        signing.fail, signing.hang_s = False, 3.0
        started = time.monotonic()
        with pytest.raises(errors.SignerUnavailable, match="no answer"):
            signer.sign(unsigned())
        # Ended by the 200 ms timeout, not by the answer 3 s later (slack for a loaded
        # machine).
        assert time.monotonic() - started < 2.5
        unreachable = RemoteSigner(signing.address, "http://127.0.0.1:9/sign", timeout_ms=200)
        with pytest.raises(errors.SignerUnavailable, match="unreachable"):
            unreachable.sign(unsigned())

    def test_signer_for_reads_a_secret_url_from_the_environment_only(
            self, signing: SigningService) -> None:
        hot = HotWalletConfig("devnet", signing.address, "remote", "",
                              signer_url_env="CUSTODY_TEST_SIGNER_URL", signer_timeout_ms=500)
        with pytest.raises(errors.SignerUnavailable, match="CUSTODY_TEST_SIGNER_URL"):
            signer_for(hot, environ={})
        signer = signer_for(hot, environ={"CUSTODY_TEST_SIGNER_URL": signing.url})
        assert signer.address == signing.address
        assert signer.sign(unsigned()).tx_hash


class TestRemoteConfig:
    def test_remote_signer_keys_are_parsed(self, signing: SigningService) -> None:
        text = remote_toml(_local_toml(), url_env="CUSTODY_SIGNER_URL", timeout_ms=750)
        hot = load(text)[1].hot_wallet("devnet")
        assert (hot.signer, hot.signer_url, hot.signer_url_env, hot.signer_timeout_ms) == (
            "remote", None, "CUSTODY_SIGNER_URL", 750)
        hot = load(remote_toml(_local_toml(), url=signing.url))[1].hot_wallet("devnet")
        assert hot.signer_url == signing.url

    @pytest.mark.parametrize("lines", [
        'signer = "remote"',  # neither URL nor its variable
        'signer = "remote"\nsigner_url = "http://x/sign"\nsigner_url_env = "URL"',  # both
        'signer = "remote"\nsigner_url = "ftp://x/sign"',
        'signer = "remote"\nsigner_url_env = "lower case"',
        'signer = "remote"\nsigner_url = "http://x/sign"\nsigner_timeout_ms = 0',
        'signer = "kms"\nkey_env = "CUSTODY_TEST_HOT_KEY"',
    ])
    def test_invalid_remote_signer_keys_are_refused(self, lines: str) -> None:
        from config.errors import ConfigurationInvalid

        local = 'signer = "local_key"\nkey_env = "CUSTODY_TEST_HOT_KEY"'
        text = _local_toml().replace(local, lines)
        assert text != _local_toml()
        with pytest.raises(ConfigurationInvalid):
            load(text)


def _local_toml() -> str:
    from .conftest import config_toml

    return config_toml()


# --- the processor with a remote signer, on anvil ---------------------------------------------


@pytest.fixture
def devnet() -> Iterator[Devnet]:
    net = start_devnet()
    yield net
    net.node.stop()


@pytest.fixture
def hot_signing(devnet: Devnet) -> Iterator[SigningService]:
    """The signing service holding the devnet hot wallet's key."""
    with SigningService(devnet.key) as svc:
        yield svc


@pytest.fixture
def funded(engine: Engine, devnet: Devnet) -> Engine:
    open_book(engine)
    fund(engine, ["u1"], 150_000_000)
    return engine


def take_rows_nowait(engine: Engine, withdrawal_id: int, hot: str) -> tuple[str, int]:
    """From another connection: lock the withdrawal and the nonce row with NOWAIT (55P03 if
    anyone holds them) and check that no other session sits in an open transaction."""
    with engine.connect() as conn:
        row = conn.execute(sa.text("SELECT state, nonce FROM withdrawals WHERE id = :i "
                                   "FOR UPDATE NOWAIT"), {"i": withdrawal_id}).one()
        conn.execute(sa.text("SELECT next_nonce FROM sender_nonces WHERE chain = 'devnet' "
                             "AND address = :a FOR UPDATE NOWAIT"), {"a": hot}).one()
        open_elsewhere = conn.execute(sa.text(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid <> pg_backend_pid() AND state LIKE 'idle in transaction%'")).scalar_one()
        conn.rollback()
    assert open_elsewhere == 0, "a session holds a transaction open while the signer works"
    return str(row.state), int(row.nonce)


def step_in_thread(devnet: Devnet, engine: Engine, ctx: object, **kw: object) -> tuple[
        threading.Thread, list[StepReport]]:
    reports: list[StepReport] = []
    thread = threading.Thread(target=lambda: reports.append(
        devnet.step(engine, ctx, **kw)))  # type: ignore[arg-type]
    thread.start()
    return thread, reports


@pytest.mark.anvil
class TestProcessorWithRemoteSigner:
    def test_no_row_lock_is_held_while_the_signer_is_called(
            self, funded: Engine, devnet: Devnet, hot_signing: SigningService) -> None:
        ctx = devnet.remote_context(hot_signing.url, timeout_ms=30_000)
        w = service.request_withdrawal(funded, devnet.cfg, SetOwnAddresses(), req(),
                                       now=devnet.clock).withdrawal
        hot_signing.block()
        thread, reports = step_in_thread(devnet, funded, ctx)
        try:
            assert hot_signing.entered.wait(20), "the signer was not called"
            state, nonce = take_rows_nowait(funded, w.id, devnet.hot)
            assert (state, nonce) == ("signing", 0)
        finally:
            hot_signing.release()
            thread.join(30)
        assert reports and reports[0].signed == 1
        tl = service.timeline(funded, w.id)
        assert tl.withdrawal.state is State.BROADCAST
        [attempt] = tl.attempts
        assert attempt.nonce == 0
        devnet.node.mine(3)
        devnet.step(funded, ctx)
        assert service.get_withdrawal(funded, w.id).state is State.SETTLED
        assert len(devnet.transfers_to(DEST)) == 1

    def test_no_row_lock_is_held_while_a_fee_bump_is_signed(
            self, funded: Engine, devnet: Devnet, hot_signing: SigningService) -> None:
        cfg = dataclasses.replace(devnet.cfg, bump_after_s=300)
        ctx = devnet.remote_context(hot_signing.url, timeout_ms=30_000, cfg=cfg)
        w = service.request_withdrawal(funded, cfg, SetOwnAddresses(), req(),
                                       now=devnet.clock).withdrawal
        devnet.step(funded, ctx, cfg)
        # The base fee jumps above the attempt's cap: anvil drops the payout from its pool, the
        # withdrawal goes unknown, and a replacement (same nonce, higher fees) is due.
        devnet.node.rpc.request("anvil_setNextBlockBaseFeePerGas", [hex(50 * 10**9)])
        devnet.node.mine(1)
        devnet.step(funded, ctx, cfg, advance_s=301)
        assert service.get_withdrawal(funded, w.id).state is State.UNKNOWN
        hot_signing.block()
        thread, _ = step_in_thread(devnet, funded, ctx, cfg=cfg)
        try:
            assert hot_signing.entered.wait(20), "the replacement was not signed"
            assert take_rows_nowait(funded, w.id, devnet.hot) == ("unknown", 0)
        finally:
            hot_signing.release()
            thread.join(30)
        first, second = service.timeline(funded, w.id).attempts
        assert second.nonce == first.nonce and second.max_fee_per_gas > first.max_fee_per_gas
        devnet.node.mine(3)
        devnet.step(funded, ctx, cfg)
        assert service.get_withdrawal(funded, w.id).state is State.SETTLED
        assert len(devnet.transfers_to(DEST)) == 1

    def test_a_timeout_leaves_signing_and_the_next_step_pays_once_with_the_same_nonce(
            self, funded: Engine, devnet: Devnet, hot_signing: SigningService) -> None:
        # A timeout well above a signature's cost on a loaded 2-core machine, and a hang above it.
        ctx = devnet.remote_context(hot_signing.url, timeout_ms=1_500)
        ids = [service.request_withdrawal(
            funded, devnet.cfg, SetOwnAddresses(), req(amount=10_000_000 + i, key=f"k{i}",
                                                       destination=dest),
            now=devnet.clock).withdrawal.id
               for i, dest in enumerate([DEST, str(Account.create().address)])]
        hot_signing.hang_s = 2.5
        report = devnet.step(funded, ctx)
        assert report.signed == 0
        before = [service.get_withdrawal(funded, i) for i in ids]
        assert [(w.state, w.nonce) for w in before] == [(State.SIGNING, 0), (State.SIGNING, 1)]
        with UnitOfWork(funded) as uow:
            assert not repo.list_attempts(uow.conn, ids[0])
            assigned = repo.last_event(uow.conn, ids[0], Event.NONCE_ASSIGNED)
        assert assigned is not None
        # A failing signer is the same: nothing recorded, nothing sent, the nonces kept.
        hot_signing.hang_s, hot_signing.fail = 0.0, True
        devnet.step(funded, ctx)
        assert [service.get_withdrawal(funded, i).state for i in ids] == [State.SIGNING] * 2
        with pytest.raises(errors.WithdrawalNotCancelable):
            service.cancel(funded, ids[0], "u1", now=devnet.clock)
        # Overdue, each nonce-holding payout the signer does not sign is alerted, once.
        since = max(w.state_changed_at for w in before)
        soon = since + timedelta(seconds=service.SIGNING_OVERDUE_S - 1)
        late = since + timedelta(seconds=service.SIGNING_OVERDUE_S + 1)
        assert withdrawal_alerts(funded, "devnet", limit=10, now=soon) == 0
        assert withdrawal_alerts(funded, "devnet", limit=10, now=late) == 2
        assert withdrawal_alerts(funded, "devnet", limit=10, now=late) == 0
        hot_signing.fail = False
        assert devnet.step(funded, ctx).signed == 2
        for withdrawal_id, nonce in zip(ids, (0, 1), strict=True):
            [attempt] = service.timeline(funded, withdrawal_id).attempts
            assert attempt.nonce == nonce
        [attempt] = service.timeline(funded, ids[0]).attempts
        assert (str(attempt.max_fee_per_gas), str(attempt.max_priority_fee_per_gas)) == (
            assigned.evidence["max_fee_per_gas"], assigned.evidence["max_priority_fee_per_gas"])
        devnet.node.mine(3)
        devnet.step(funded, ctx)
        assert [service.get_withdrawal(funded, i).state for i in ids] == [State.SETTLED] * 2
        assert len(devnet.transfers_to(DEST)) == 1
        assert devnet.node.rpc.get_transaction_count(devnet.hot) == 2
        assert verify(funded).ok
