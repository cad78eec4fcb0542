"""A withdrawal return that arrived at the hot wallet: found for the link, and linking it (by
one operator, or by two admins through the case) resolves its own-address case."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from sqlalchemy.engine import Engine

from api import own_addresses
from config.uow import UnitOfWork
from deposits import own
from deposits import repository as repo
from ledger.integrity import verify
from tests.api.test_treasury import seed_final_own
from tests.withdrawals.chainkit import Devnet, start_devnet
from tests.withdrawals.conftest import balance
from tests.withdrawals.test_returns_cli import settled
from withdrawals import service as withdrawals

pytestmark = pytest.mark.anvil
NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def devnet() -> Iterator[Devnet]:
    """A chain with a settled-able hot wallet."""
    net = start_devnet()
    yield net
    net.node.stop()


def open_case_of(engine: Engine, tx_hash: str) -> repo.CaseRecord:
    """The unattributed own-address case of a seeded transfer."""
    with UnitOfWork(engine) as uow:
        (d,) = repo.deposits_of_transaction(uow.conn, "devnet", tx_hash)
        (case,) = repo.get_cases(uow.conn, deposit_id=d.id)
    return case


def test_return_to_the_hot_wallet_linked_resolves_the_case(engine: Engine,
                                                           devnet: Devnet) -> None:
    wid = settled(engine, devnet)
    wallet = balance(engine, "user:u1:wallet")
    direct = seed_final_own(engine, 4_000_000)
    own_addresses.link_return(engine, wid, chain="devnet", tx_hash=direct, position="log:0",
                              amount_minor=4_000_000, actor="carol", reason="bounced",
                              now=NOW)
    case = open_case_of(engine, direct)
    assert (case.resolved_by, case.outcome, case.withdrawal_id) == ("carol", "return", wid)
    assert balance(engine, "user:u1:wallet") == wallet + 4_000_000
    # The second one through the case: proposed by one admin, approved (and linked) by another.
    voted = seed_final_own(engine, 6_000_000)
    case = open_case_of(engine, voted)
    with UnitOfWork(engine) as uow:
        own.propose_resolution(uow, case.id, outcome="return", by="carol", reason="bounced",
                               withdrawal_id=wid)
        uow.commit()
    done = own_addresses.approve_case(engine, case.id, by="dave", now=NOW)
    assert (done.state, done.outcome, done.withdrawal_id) == ("resolved", "return", wid)
    assert balance(engine, "user:u1:wallet") == wallet + 10_000_000
    assert balance(engine, "suspense:unattributed") == 0
    returns = withdrawals.timeline(engine, wid).returns
    assert sorted(r.tx_hash for r in returns) == sorted([direct, voted])
    # Approving again replays: nothing linked or credited twice.
    again = own_addresses.approve_case(engine, case.id, by="dave", now=NOW)
    assert again.state == "resolved"
    assert balance(engine, "user:u1:wallet") == wallet + 10_000_000
    assert verify(engine).ok
