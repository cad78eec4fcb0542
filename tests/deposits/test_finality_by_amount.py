"""Finality by amount on anvil: a large deposit waits for its stricter rule, a small one in the
same block does not; a reorg of a large deposit before its own finality moves no money."""

from __future__ import annotations

from typing import Any

import pytest

from chains.model import Confirmations
from chains.rpc import to_quantity
from config.uow import UnitOfWork
from deposits import repository as repo
from deposits import service
from deposits.attestors import NodeReceiptAttestor, Verdict
from ledger.integrity import verify
from tests.deposits.conftest import ALICE, BOB, CAROL, Rig

pytestmark = pytest.mark.anvil

ETH = 10**18
#: Deposits of 5 ETH or more need 6 confirmations; the chain's own rule is 3.
LARGE = {"finality_by_amount": [{"asset": "ETH", "at_least": "5", "finality": "confirmations:6"}]}
THRESHOLD = {"asset": "ETH", "at_least": "5", "at_least_minor": str(5 * ETH),
             "rule": "confirmations:6"}


def _block(rig: Rig, tx_hash: str) -> int:
    return int(rig.node.receipt(tx_hash)["blockNumber"], 16)


def _last_event(rig: Rig, tx_hash: str) -> Any:
    with UnitOfWork(rig.engine) as uow:
        (entry,) = service.timeline(uow, "dev", tx_hash)
    return entry


def test_small_credited_under_the_chains_rule_large_waits_for_its_own(rig: Rig) -> None:
    rig.chain_options = LARGE
    small, exact, below = rig.user("small"), rig.user("exact"), rig.user("below")
    usdc = rig.user("usdc")
    tx_small = rig.node.send_eth(ALICE, small, 1 * ETH)
    tx_exact = rig.node.send_eth(ALICE, exact, 5 * ETH)  # At the threshold: large.
    tx_below = rig.node.send_eth(BOB, below, 5 * ETH - 1)  # One wei below: small.
    tx_usdc = rig.node.transact(rig.tokens.usdc, "transfer", [usdc, 10**12], BOB)  # Not ETH.
    rig.node.mine(1)
    block = _block(rig, tx_small)
    assert {_block(rig, t) for t in (tx_exact, tx_below, tx_usdc)} == {block}
    rig.mine_to(block + 2)  # 3 confirmations: final under the chain's rule.
    report = rig.step()
    assert report.credited == 3
    assert rig.deposits(tx_small) == rig.deposits(tx_below) == {"call:0": "credited"}
    assert rig.deposits(tx_usdc) == {"log:0": "credited"}
    assert rig.deposits(tx_exact) == {"call:0": "included"}
    assert rig.wallet("exact", "ETH") == 0
    small_credit = _last_event(rig, tx_small).events[-1]
    assert small_credit.rule == "confirmations:3" and "threshold" not in small_credit.evidence
    rig.mine_to(block + 4)  # 5 confirmations: still one short.
    rig.step()
    assert rig.deposits(tx_exact) == {"call:0": "included"}
    assert rig.wallet("exact", "ETH") == 0 and rig.deposit_postings() == 3
    rig.mine_to(block + 5)  # 6 confirmations.
    report = rig.step()
    assert report.credited == 1
    assert rig.wallet("exact", "ETH") == 5 * ETH
    entry = _last_event(rig, tx_exact)
    final, credited = entry.events[-2], entry.events[-1]
    assert final.event == "finality_reached" and credited.state == "credited"
    for row in (final, credited):
        assert row.rule == "confirmations:6 (amount >= 5 ETH)"
        assert row.evidence["threshold"] == THRESHOLD
        assert row.evidence["confirmations"] == 6
    (posted,) = entry.ledger_transactions
    assert posted.metadata["rule"] == "confirmations:6 (amount >= 5 ETH)"
    assert posted.metadata["evidence"]["threshold"] == THRESHOLD
    assert rig.deposit_postings() == 4
    assert verify(rig.engine).ok


def test_finalized_tag_threshold_on_a_confirmations_chain(rig: Rig) -> None:
    """A `finalized` threshold makes the watcher read the node's finalized block (trailing
    the head by 4 here) although the chain's own rule counts confirmations."""
    rig.chain_options = {"finality_by_amount": [
        {"asset": "ETH", "at_least": "5", "finality": "finalized"}]}
    small, large = rig.user("small"), rig.user("large")
    tx_small = rig.node.send_eth(ALICE, small, 1 * ETH)
    tx_large = rig.node.send_eth(BOB, large, 50 * ETH)
    rig.node.mine(1)
    block = _block(rig, tx_large)
    rig.mine_to(block + 3)
    assert rig.node.finalized_block() == block - 1
    rig.step()
    assert rig.deposits(tx_small) == {"call:0": "credited"}
    assert rig.deposits(tx_large) == {"call:0": "included"}
    rig.mine_to(block + 4)
    assert rig.step().credited == 1
    credited = _last_event(rig, tx_large).events[-1]
    assert credited.rule == "finalized (amount >= 5 ETH)"
    assert credited.evidence["finalized_block"] == block


def test_reorg_of_a_large_deposit_the_small_rule_would_have_credited(rig: Rig) -> None:
    rig.chain_options = LARGE
    addr = rig.user("alice")
    ours = rig.node.send_eth(ALICE, addr, 10 * ETH)
    rig.node.mine(1)
    raw = rig.node.raw_transaction(ours)
    block = _block(rig, ours)
    rig.mine_to(block + 3)  # 4 confirmations: the chain's rule (3) would have credited it.
    rig.step()
    assert rig.deposits(ours) == {"call:0": "included"}
    assert rig.deposit_postings() == 0
    rig.node.reorg(4)  # Replaces its block (and drops the transaction).
    assert rig.node.rpc.get_receipt(ours) is None
    report = rig.step()
    assert report.rewound_to is not None and report.cases_opened == []
    assert rig.deposits(ours) == {"call:0": "unconfirmed"}
    rig.node.mine(3)
    rig.step()
    assert rig.deposits(ours) == {"call:0": "unconfirmed"}  # Never failed: not proven gone.
    # The same transaction lands again, in a later block.
    assert rig.node.send_raw(raw) == ours
    rig.node.mine(1)
    again = _block(rig, ours)
    assert again > block
    rig.step()
    assert rig.deposits(ours) == {"call:0": "included"}
    rig.mine_to(again + 4)  # 5 confirmations: not final under its own rule.
    rig.step()
    assert rig.deposits(ours) == {"call:0": "included"}
    assert rig.wallet("alice", "ETH") == 0 and rig.deposit_postings() == 0
    rig.mine_to(again + 5)
    assert rig.step().credited == 1
    assert rig.wallet("alice", "ETH") == 10 * ETH and rig.deposit_postings() == 1
    events = rig.events(ours, "call:0")
    assert events[:3] == ["transfer_included", "block_reorged_out", "transfer_reincluded"]
    assert "nonce_consumed" not in events and events.count("attested_for_user") == 1
    history = _last_event(rig, ours).events
    assert history[0].confirmations == 4  # Seen with more than the chain's 3, not final.
    credited = history[-1]
    assert credited.rule == "confirmations:6 (amount >= 5 ETH)"
    assert credited.evidence["tx_block"] == again
    # More steps credit nothing more.
    rig.mine_to(again + 12)
    rig.step(2)
    assert rig.deposit_postings() == 1
    assert verify(rig.engine).ok


def test_a_nonce_proves_a_deposit_gone_only_under_the_strictest_rule(rig: Rig) -> None:
    """With a threshold of 6 confirmations, a small deposit whose sender's nonce another
    transaction took is failed only once that transaction has 6 confirmations, not 3."""
    rig.chain_options = LARGE
    ours = rig.node.send_eth(ALICE, rig.user("alice"), 1 * ETH)
    rig.node.mine(1)
    nonce = int(rig.node.rpc.get_transaction(ours)["nonce"], 16)  # type: ignore[index]
    rig.step()
    other = {"from": ALICE, "to": CAROL, "value": to_quantity(1), "nonce": to_quantity(nonce)}
    rig.node.reorg(1, [(other, 0)])
    rig.step()
    assert rig.deposits(ours) == {"call:0": "unconfirmed"}
    rig.node.mine(2)  # The replacement has 3 confirmations: final under the chain's rule only.
    rig.step()
    assert rig.deposits(ours) == {"call:0": "unconfirmed"}
    rig.node.mine(3)  # 6 confirmations.
    assert rig.step().failed == 1
    assert rig.deposits(ours) == {"call:0": "failed"}
    with UnitOfWork(rig.engine) as uow:
        (entry,) = service.timeline(uow, "dev", ours)
    assert entry.events[-1].evidence["rule"] == "confirmations:6"
    assert rig.deposit_postings() == 0


def test_the_node_attestor_judges_each_deposit_under_its_own_rule(rig: Rig) -> None:
    rig.chain_options = LARGE
    tx_small = rig.node.send_eth(ALICE, rig.user("small"), 1 * ETH)
    tx_large = rig.node.send_eth(BOB, rig.user("large"), 5 * ETH)
    rig.node.mine(1)
    rig.mine_to(_block(rig, tx_large) + 2)
    rig.step()
    keys = [("dev", tx_small, "call:0"), ("dev", tx_large, "call:0")]
    with UnitOfWork(rig.engine) as uow:
        found = repo.lock_deposits(uow.conn, keys)
    small, large = found[keys[0]], found[keys[1]]
    policy = service.finality_policy(rig.config.chain("dev"))
    verdicts = NodeReceiptAttestor(rig.node.rpc, policy).attest([small, large])
    assert verdicts[small.id].verdict is Verdict.AGREED
    assert verdicts[large.id].verdict is Verdict.PENDING
    assert verdicts[large.id].reason == "not_final_on_attestor"
    assert verdicts[large.id].evidence["rule"] == "confirmations:6 (amount >= 5 ETH)"
    # Under the chain's rule alone the attesting node would have agreed already.
    alone = NodeReceiptAttestor(rig.node.rpc, Confirmations(3)).attest([large])
    assert alone[large.id].verdict is Verdict.AGREED
