"""Deposits on anvil against the cases: the watcher's deep-reorg case is a row of cases with
its references and nothing else opens; a credited deposit whose ledger transaction a superuser
removed, and a deposit transaction whose history row a superuser removed, are each exactly one
case of the histories check (re-sighted, not reopened, on the next run); a deposit held for
review past its threshold is one aging case."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from api.cases import record_check
from config.reconcile import ReconcileConfig
from config.uow import UnitOfWork
from reconcile import aging, histories
from reconcile import ledger as ledger_check
from tests.deposits.conftest import ALICE, NOW, Rig, node, rig  # noqa: F401  (fixtures)
from tests.reconcile.conftest import all_cases

pytestmark = pytest.mark.anvil


def deposit(rig: Rig, tx_hash: str) -> tuple[int, int]:  # noqa: F811 (rig: the fixture's type)
    """(deposit id, its ledger transaction id)."""
    with UnitOfWork(rig.engine) as uow:
        row = uow.conn.execute(sa.text(
            "SELECT id, ledger_transaction_id FROM deposits WHERE tx_hash = :t"),
            {"t": tx_hash}).one()
    return int(row.id), int(row.ledger_transaction_id)


def cases(engine: Engine) -> list[tuple[str, str, int]]:
    return [(c.type, c.subject, c.seen_count) for c in all_cases(engine)]


def check_all(engine: Engine, cfg: ReconcileConfig, now: datetime) -> None:
    """Run every check of this branch once at ``now`` and record what it found."""
    record_check(engine, ledger_check.CHECK, ledger_check.run(engine, now=now), now)
    record_check(engine, histories.CHECK, histories.run(engine, now=now), now)
    record_check(engine, aging.CHECK, aging.run(engine, cfg, now=now), now)


def test_a_deep_reorg_is_a_case_with_its_refs_and_nothing_else_opens(
        rig: Rig) -> None:  # noqa: F811
    addr = rig.user("alice")
    ours = rig.node.transact(rig.tokens.usdc, "transfer", [addr, 9_000_000], ALICE)
    dust = rig.node.transact(rig.tokens.usdc18, "transfer", [addr, 10**12 + 1], ALICE)
    rig.node.mine(3)
    rig.step()
    assert rig.deposits(ours) == {"log:0": "credited"}
    assert rig.deposits(dust) == {"log:0": "held_for_review"}
    deposit_id, credit = deposit(rig, ours)
    rig.node.reorg(4)  # Deeper than the 3 confirmations the rule assumed.
    rig.step()
    assert rig.deposits(ours) == {"log:0": "disputed"}
    (case,) = all_cases(rig.engine)
    assert (case.type, case.subject, case.status, case.expected) == (
        "deep_reorg", f"deposit:{deposit_id}", "open", "9000000")
    assert case.refs == {"deposit_id": str(deposit_id), "deposit_case_id": str(case.id),
                         "ledger_transaction_id": str(credit), "chain": "dev", "tx_hash": ours,
                         "position": "log:0", "asset": "USDC"}
    # Every check of the engine's own data agrees with the books: nothing else opens (the
    # deposit held for review is younger than its threshold).
    cfg = ReconcileConfig(review_deposit_after_s=86_400)
    check_all(rig.engine, cfg, NOW + timedelta(hours=1))
    assert cases(rig.engine) == [("deep_reorg", f"deposit:{deposit_id}", 1)]
    # A day later the held deposit is a case of its own, once.
    dust_id = _id(rig, dust)
    for hours in (25, 26):
        check_all(rig.engine, cfg, NOW + timedelta(hours=hours))
    assert cases(rig.engine) == [("deep_reorg", f"deposit:{deposit_id}", 1),
                                 ("deposit_review_aged", f"deposit:{dust_id}", 2)]


def _id(rig: Rig, tx_hash: str) -> int:  # noqa: F811
    with UnitOfWork(rig.engine) as uow:
        return int(uow.conn.execute(sa.text("SELECT id FROM deposits WHERE tx_hash = :t"),
                                    {"t": tx_hash}).scalar_one())


def test_a_missing_ledger_transaction_and_a_missing_history_row_are_one_case_each(
        rig: Rig, owner: Engine) -> None:  # noqa: F811
    txs = [rig.node.transact(rig.tokens.usdc, "transfer", [rig.user(u), 5_000_000], ALICE)
           for u in ("alice", "bob")]
    rig.node.mine(3)
    rig.step()
    (alice, alice_tx), (bob, bob_tx) = deposit(rig, txs[0]), deposit(rig, txs[1])
    assert histories.run(rig.engine, now=NOW) == []

    def superuser(statement: str, **params: int) -> None:
        with owner.begin() as conn:
            conn.execute(sa.text("SET LOCAL session_replication_role = replica"))
            conn.execute(sa.text(statement), params)

    def run() -> list[tuple[str, str, int]]:
        record_check(rig.engine, histories.CHECK, histories.run(rig.engine, now=NOW), NOW)
        return cases(rig.engine)

    superuser("DELETE FROM ledger_postings WHERE transaction_id = :t", t=alice_tx)
    superuser("DELETE FROM ledger_transactions WHERE id = :t", t=alice_tx)
    assert run() == [("deposit_transaction_missing", f"deposit:{alice}", 1)]
    (case,) = all_cases(rig.engine)
    assert (case.expected, case.observed) == ("5000000", "0")
    assert case.refs["ledger_transaction_id"] == str(alice_tx)
    superuser("DELETE FROM deposit_events WHERE ledger_transaction_id = :t", t=bob_tx)
    assert run() == [("deposit_transaction_missing", f"deposit:{alice}", 2),
                     ("deposit_history_missing", f"ledger_transaction:{bob_tx}", 1)]
    bob_case = all_cases(rig.engine)[1]
    assert bob_case.refs == {"ledger_transaction_id": str(bob_tx), "deposit_id": str(bob)}
    assert bob_case.observed == "5000000"
