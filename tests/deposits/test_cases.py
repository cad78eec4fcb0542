"""Transfers that are not simply credited: ignored, suspense, held, not ours; the provider."""

from __future__ import annotations

import pytest

from chains.model import Confirmations
from config.uow import UnitOfWork
from deposits import service
from deposits.attestors import NodeReceiptAttestor
from deposits.errors import NotificationInvalid
from devtools.anvil import AnvilNode
from ledger.integrity import verify
from tests.deposits.conftest import ALICE, CAROL, Rig

pytestmark = pytest.mark.anvil


def _reason(rig: Rig, tx: str, position: str = "log:0") -> str | None:
    with UnitOfWork(rig.engine) as uow:
        (entry,) = [e for e in service.timeline(uow, "dev", tx) if e.deposit.position == position]
    return entry.deposit.booking_reason


class TestNotCredited:
    def test_unlisted_fake_out_of_range_below_minimum_unknown_address(self, rig: Rig) -> None:
        addr = rig.user("alice")
        t, n = rig.tokens, rig.node
        shib = n.transact(t.shib, "transfer", [addr, 10**18], ALICE)
        fake = n.transact(t.fake, "transfer", [addr, 10**9], ALICE)
        huge = n.transact(t.dai, "transfer", [addr, 2**127], ALICE)
        small = n.transact(t.usdc, "transfer", [addr, 999_999], ALICE)
        stranger = n.transact(t.usdc, "transfer", [CAROL, 10**9], ALICE)
        dust = n.transact(t.usdc18, "transfer", [addr, 10**12 + 1], ALICE)
        exact = n.transact(t.usdc18, "transfer", [addr, 3 * 10**18], ALICE)
        n.mine(3)
        rig.step()
        assert rig.deposits(shib) == {"log:0": "ignored"}
        assert _reason(rig, shib) == "unsupported_token"
        assert rig.deposits(fake) == {"log:0": "ignored"}
        assert _reason(rig, fake) == "fake_token"
        assert rig.deposits(huge) == {"log:0": "ignored"}
        assert _reason(rig, huge) == "out_of_range"
        assert rig.deposits(stranger) == {}  # Not our address: not ours, not recorded.
        # Below the minimum: booked to suspense so custody still matches the chain.
        assert rig.deposits(small) == {"log:0": "suspense"}
        assert _reason(rig, small) == "below_minimum"
        assert rig.balance("suspense:unattributed", "USDC") == 999_999
        # 18 decimals into the scale-6 USDC: exact credited, inexact held, never rounded.
        assert rig.deposits(exact) == {"log:0": "credited"}
        assert rig.deposits(dust) == {"log:0": "held_for_review"}
        assert _reason(rig, dust) == "inexact_conversion"
        assert rig.wallet("alice", "USDC") == 3_000_000
        assert rig.balance("custody:dev", "USDC") == 3_000_000 + 999_999
        assert rig.balance("custody:dev", "DAI") == 0
        assert rig.events(shib, "log:0") == ["transfer_ignored"]
        assert verify(rig.engine).ok


def _note(event_id: str, tx: str, address: str, amount: int, asset: str = "USDC",
          status: str = "complete") -> dict[str, str]:
    return {"event_id": event_id, "chain": "dev", "tx_hash": tx, "position": "log:0",
            "status": status, "address": address, "asset": asset, "amount_minor": str(amount)}


def _receive(rig: Rig, note: dict[str, str]) -> bool:
    with UnitOfWork(rig.engine) as uow:
        stored = service.receive_notification(uow, "acme", note)
        uow.commit()
    return stored


class TestProviderAttestor:
    def test_agreement_credits_after_our_rule(self, rig: Rig) -> None:
        rig.attestor = "provider"
        addr = rig.user("alice")
        tx = rig.node.transact(rig.tokens.usdc, "transfer", [addr, 4_000_000], ALICE)
        rig.node.mine(3)
        report = rig.step()
        assert report.finals == 1 and report.credited == 0  # No record yet: waits.
        assert rig.deposits(tx) == {"log:0": "final"}
        assert _receive(rig, _note("ev-1", tx, addr, 4_000_000))
        assert not _receive(rig, _note("ev-1", tx, addr, 4_000_000))  # Stored once.
        assert rig.step().credited == 1
        assert rig.wallet("alice", "USDC") == 4_000_000

    def test_disagreement_is_held_and_nothing_credited(self, rig: Rig) -> None:
        rig.attestor = "provider"
        addr = rig.user("alice")
        tx = rig.node.transact(rig.tokens.usdc, "transfer", [addr, 4_000_000], ALICE)
        rig.node.mine(3)
        rig.step()
        _receive(rig, _note("ev-2", tx, addr, 4_000_001))
        assert rig.step().held == 1
        assert rig.deposits(tx) == {"log:0": "held_for_review"}
        with UnitOfWork(rig.engine) as uow:
            (entry,) = service.timeline(uow, "dev", tx)
        assert entry.events[-1].reason == "amount_mismatch"
        assert rig.wallet("alice", "USDC") == 0 and rig.deposit_postings() == 0

    @pytest.mark.parametrize("field", ["asset", "address"])
    def test_asset_or_address_disagreement_is_held(self, rig: Rig, field: str) -> None:
        rig.attestor = "provider"
        addr = rig.user("alice")
        tx = rig.node.transact(rig.tokens.usdc, "transfer", [addr, 4_000_000], ALICE)
        rig.node.mine(3)
        rig.step()
        note = _note("ev-3", tx, addr, 4_000_000)
        note[field] = "DAI" if field == "asset" else CAROL
        _receive(rig, note)
        rig.step()
        assert rig.deposits(tx) == {"log:0": "held_for_review"}
        assert rig.deposit_postings() == 0

    def test_completion_before_our_rule_is_held(self, rig: Rig) -> None:
        rig.attestor = "provider"
        addr = rig.user("alice")
        tx = rig.node.transact(rig.tokens.usdc, "transfer", [addr, 4_000_000], ALICE)
        rig.node.mine(1)
        rig.step()
        _receive(rig, _note("ev-4", tx, addr, 4_000_000))  # At 1 confirmation of 3.
        report = rig.step()
        assert report.held_early == 1
        assert rig.deposits(tx) == {"log:0": "held_for_review"}
        rig.node.mine(5)
        rig.step()
        assert rig.deposits(tx) == {"log:0": "held_for_review"}
        assert rig.deposit_postings() == 0

    def test_same_event_id_with_other_content_is_refused(self, rig: Rig) -> None:
        addr = rig.user("alice")
        _receive(rig, _note("ev-5", "0x" + "1" * 64, addr, 1))
        with pytest.raises(NotificationInvalid):
            _receive(rig, _note("ev-5", "0x" + "1" * 64, addr, 2))

    def test_amount_that_is_not_plain_minor_units_is_refused(self, rig: Rig) -> None:
        """The one amount parser at scale 0: ``int()`` would take most of these."""
        addr = rig.user("alice")
        note = _note("ev-6", "0x" + "2" * 64, addr, 0)
        for amount in ["", " 4000000", "4000000\n", "4_000_000", "+4000000", "-4000000", "-0",
                       "4e6", "4000000.0", "\u0664\u0660\u0660"]:
            with pytest.raises(NotificationInvalid, match="malformed notification"):
                _receive(rig, {**note, "amount_minor": amount})
        assert _receive(rig, {**note, "amount_minor": "4000000"})  # Nothing stored before.


class TestNodeAttestor:
    def test_nothing_credited_while_the_attesting_node_has_no_record(self, rig: Rig) -> None:
        """An independent attesting node that does not know the transaction: final, waiting."""
        addr = rig.user("alice")
        tx = rig.node.transact(rig.tokens.usdc, "transfer", [addr, 4_000_000], ALICE)
        rig.node.mine(3)
        with AnvilNode.start(slots_in_an_epoch=2) as other:
            other.mine(10)
            rig.watcher(attestor=NodeReceiptAttestor(other.rpc, Confirmations(3)))
            report = rig.step(2)
        assert (report.credited, report.held) == (0, 0)
        assert rig.deposits(tx) == {"log:0": "final"}
        assert rig.deposit_postings() == 0
        rig.watcher()  # Back to the chain's own node: it agrees.
        assert rig.step().credited == 1
