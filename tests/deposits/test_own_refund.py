"""Refund to the sender of an unattributed transfer to the hot wallet, against a real anvil: the
watcher books it to suspense with a case at finality; two admins resolve it as a refund; the
company's withdrawal to the sender is paid by the normal processor and settles; a retried
approval never pays twice; a refund that cannot be paid changes nothing."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
import sqlalchemy as sa
from eth_utils.address import to_checksum_address
from sqlalchemy.engine import Engine

from api.own_addresses import Payouts, approve_case
from config.chains import ChainsConfig
from config.uow import UnitOfWork, run_in_transaction
from deposits import own
from deposits import repository as repo
from deposits.errors import RefundRefused, SecondAdminRequired
from deposits.watcher import Watcher
from devtools.anvil import DEV_ACCOUNTS
from ledger.integrity import verify
from tests.withdrawals.chainkit import Devnet, start_devnet
from tests.withdrawals.conftest import balance, open_book
from withdrawals import service as withdrawals
from withdrawals.model import State

pytestmark = pytest.mark.anvil
SENDER = DEV_ACCOUNTS[4]  # Sends nothing else in these tests: its balance moves only by ours.
NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
RECEIVED = 10**16  # 0.01 ETH.
FEE, FEE_MAX = 10**14, 5 * 10**14  # The dev ETH policy: fee 0.0001, fee_max 0.0005.
TABLES = ("deposit_case_votes", "deposit_case_resolutions", "deposit_case_refunds",
          "ledger_transactions", "withdrawals")


@pytest.fixture
def devnet(engine: Engine) -> Iterator[Devnet]:
    """A chain with a funded hot wallet (its key known to the processor) and the book open."""
    net = start_devnet()
    open_book(engine)
    yield net
    net.node.stop()


def watched_from_now(net: Devnet) -> ChainsConfig:
    """The devnet configuration, its watcher starting after the hot wallet's own funding."""
    chain = dataclasses.replace(net.chains.chains["devnet"],
                                start_block=net.node.rpc.block_number() + 1)
    return dataclasses.replace(net.chains, chains={**net.chains.chains, "devnet": chain})


def counts(engine: Engine) -> tuple[int, ...]:
    """Rows of the tables a refund writes."""
    with UnitOfWork(engine) as uow:
        return tuple(int(uow.conn.execute(sa.text(f"SELECT count(*) FROM {t}")).scalar_one())
                     for t in TABLES)


def unattributed_case(engine: Engine, net: Devnet, amount_wei: int) -> int:
    """Send ``amount_wei`` from SENDER to the hot wallet, watch it to finality (suspense and a
    case, not before), and return the case id."""
    watcher = Watcher(engine, watched_from_now(net), "devnet")
    net.node.send_eth(SENDER, net.hot, amount_wei)
    net.node.mine(1)
    watcher.step(now=NOW)
    with UnitOfWork(engine) as uow:
        assert [c for c in repo.get_cases(uow.conn) if c.resolved_by is None] == []
    for _ in range(4):  # confirmations:3
        net.node.mine(1)
        watcher.step(now=NOW)
    with UnitOfWork(engine) as uow:
        (case,) = [c for c in repo.get_cases(uow.conn) if c.resolved_by is None]
        d = repo.deposit_by_id(uow.conn, case.deposit_id)
    assert (d.state, d.address_kind, d.from_address) == ("suspense", "hot", SENDER.lower())
    return case.id


def unattributed_token_case(engine: Engine, net: Devnet, amount_minor: int) -> int:
    """As :func:`unattributed_case`, with a USDC transfer: the refund goes to the Transfer's
    ``from`` (SENDER, which also sent the transaction here)."""
    watcher = Watcher(engine, watched_from_now(net), "devnet")
    net.node.transact(net.token, "mint", [to_checksum_address(SENDER), amount_minor])
    net.node.transact(net.token, "transfer", [to_checksum_address(net.hot), amount_minor],
                      SENDER)
    for _ in range(5):  # Included, then final under confirmations:3.
        net.node.mine(1)
        watcher.step(now=NOW)
    with UnitOfWork(engine) as uow:
        (case,) = [c for c in repo.get_cases(uow.conn) if c.resolved_by is None]
        d = repo.deposit_by_id(uow.conn, case.deposit_id)
    assert (d.state, d.asset_code, d.from_address) == ("suspense", "USDC", SENDER.lower())
    return case.id


def propose_refund(engine: Engine, case_id: int, by: str = "carol") -> None:
    """``by`` proposes the refund."""
    run_in_transaction(engine, lambda uow: own.propose_resolution(
        uow, case_id, outcome="refund", by=by, reason="not ours: send it back"))


def test_refund_proposed_approved_by_a_second_admin_paid_and_settled(
        engine: Engine, devnet: Devnet) -> None:
    case_id = unattributed_case(engine, devnet, RECEIVED)
    assert balance(engine, "suspense:unattributed", "ETH") == RECEIVED
    payouts = Payouts(devnet.chains, devnet.cfg)
    propose_refund(engine, case_id)
    before = counts(engine)
    with pytest.raises(SecondAdminRequired):
        approve_case(engine, case_id, by="carol", now=NOW, payouts=lambda: payouts)
    assert counts(engine) == before
    done = approve_case(engine, case_id, by="dave", now=NOW, payouts=lambda: payouts)
    assert (done.state, done.outcome, done.approved_by) == ("resolved", "refund", "dave")
    assert done.withdrawal_id is not None and done.ledger_transaction_id is not None
    w = withdrawals.get_withdrawal(engine, done.withdrawal_id)
    assert (w.user_id, w.destination, w.asset_code, w.requested_by) == (
        own.REFUND_USER, SENDER.lower(), "ETH", "dave")
    assert w.amount_minor == RECEIVED - FEE_MAX and w.state is State.RESERVED
    assert balance(engine, "suspense:unattributed", "ETH") == 0
    # A retried approval (the approver, or another admin) replays: one withdrawal.
    for admin in ("dave", "erin"):
        again = approve_case(engine, case_id, by=admin, now=NOW, payouts=lambda: payouts)
        assert again.withdrawal_id == done.withdrawal_id
    assert counts(engine)[-1] == before[-1] + 1
    sender_before = devnet.node.rpc.get_balance(SENDER)
    devnet.step(engine)
    devnet.node.mine(3)
    devnet.step(engine)
    assert withdrawals.get_withdrawal(engine, w.id).state is State.SETTLED
    assert devnet.node.rpc.get_balance(SENDER) == sender_before + RECEIVED - FEE_MAX
    assert balance(engine, "suspense:unattributed", "ETH") == 0
    # The unused part of the fee reserve stays, visible, in the company refund wallet.
    assert balance(engine, f"user:{own.REFUND_USER}:wallet", "ETH") == FEE_MAX - FEE
    assert balance(engine, f"user:{own.REFUND_USER}:withdrawals", "ETH") == 0
    assert balance(engine, "custody:devnet", "ETH") == FEE_MAX - FEE
    with UnitOfWork(engine) as uow:
        (case,) = repo.get_cases(uow.conn, case_id=case_id)
    assert (case.outcome, case.withdrawal_id) == ("refund", w.id)
    assert verify(engine).ok


def test_crash_after_the_resolution_is_completed_by_approving_again(
        engine: Engine, devnet: Devnet) -> None:
    case_id = unattributed_case(engine, devnet, RECEIVED)
    payouts = Payouts(devnet.chains, devnet.cfg)
    propose_refund(engine, case_id)
    # What approve_case commits before the withdrawal request, then "the process died".
    run_in_transaction(engine, lambda uow: own.approve_resolution(
        uow, case_id, by="dave", now=NOW, refund_validated=True))
    with UnitOfWork(engine) as uow:
        (case,) = repo.get_cases(uow.conn, case_id=case_id)
    assert (case.outcome, case.withdrawal_id) == ("refund", None)
    assert balance(engine, f"user:{own.REFUND_USER}:wallet", "ETH") == RECEIVED
    with pytest.raises(SecondAdminRequired):  # The proposer still cannot carry it out.
        approve_case(engine, case_id, by="carol", now=NOW, payouts=lambda: payouts)
    done = approve_case(engine, case_id, by="erin", now=NOW, payouts=lambda: payouts)
    assert done.withdrawal_id is not None
    w = withdrawals.get_withdrawal(engine, done.withdrawal_id)
    assert w.requested_by == "dave"  # The approver of record, whoever completed it.
    again = approve_case(engine, case_id, by="dave", now=NOW, payouts=lambda: payouts)
    assert again.withdrawal_id == w.id
    assert counts(engine)[TABLES.index("withdrawals")] == 1
    assert verify(engine).ok


def test_refund_that_cannot_be_paid_is_refused_and_changes_nothing(
        engine: Engine, devnet: Devnet) -> None:
    # 0.0012 ETH minus the 0.0005 reserve is 0.0007: below the 0.001 minimum.
    case_id = unattributed_case(engine, devnet, 12 * 10**14)
    propose_refund(engine, case_id)
    before = counts(engine)
    payouts = Payouts(devnet.chains, devnet.cfg)
    with pytest.raises(RefundRefused, match="below the minimum"):
        approve_case(engine, case_id, by="dave", now=NOW, payouts=lambda: payouts)
    no_eth = Payouts(devnet.chains, dataclasses.replace(devnet.cfg, assets={
        k: v for k, v in devnet.cfg.assets.items() if k[1] != "ETH"}))
    with pytest.raises(RefundRefused, match="asset_not_withdrawable"):
        approve_case(engine, case_id, by="dave", now=NOW, payouts=lambda: no_eth)
    with pytest.raises(RefundRefused, match="withdrawal configuration"):
        approve_case(engine, case_id, by="dave", now=NOW)
    assert counts(engine) == before
    assert balance(engine, "suspense:unattributed", "ETH") == 12 * 10**14
    with UnitOfWork(engine) as uow:
        (case,) = repo.get_cases(uow.conn, case_id=case_id)
    assert case.resolved_by is None
    assert verify(engine).ok


def test_token_refund_goes_to_the_transfer_sender_and_settles(
        engine: Engine, devnet: Devnet) -> None:
    case_id = unattributed_token_case(engine, devnet, 7_000_000)  # 7.00 USDC.
    propose_refund(engine, case_id)
    payouts = Payouts(devnet.chains, devnet.cfg)
    done = approve_case(engine, case_id, by="dave", now=NOW, payouts=lambda: payouts)
    assert done.withdrawal_id is not None
    before = devnet.token_balance(SENDER)
    devnet.step(engine)
    devnet.node.mine(3)
    devnet.step(engine)
    w = withdrawals.get_withdrawal(engine, done.withdrawal_id)
    assert (w.state, w.amount_minor) == (State.SETTLED, 5_000_000)  # 7.00 - fee_max 2.00.
    assert devnet.token_balance(SENDER) == before + 5_000_000
    assert balance(engine, "suspense:unattributed") == 0
    assert balance(engine, f"user:{own.REFUND_USER}:wallet") == 2_000_000 - 400_000
    assert verify(engine).ok
