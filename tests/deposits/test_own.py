"""Transfers to our own hot and cold addresses against a real anvil: recorded in the deposit
history, classified at finality (internal, capital, suspense with a case), never before; two
admins resolve an unattributed one; declared fundings."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import sqlalchemy as sa

from config.chains import ChainsConfig, parse_chains_config
from config.uow import UnitOfWork
from deposits import own
from deposits import repository as repo
from deposits.errors import (
    CaseResolutionInvalid,
    FundingInvalid,
    FundingKeyReused,
    SecondAdminRequired,
)
from devtools.config import dev_config
from ledger.integrity import verify
from tests.deposits.conftest import ALICE, BOB, NOW, Rig

pytestmark = pytest.mark.anvil

HOT = "0x" + "11" * 20
COLD = "0x" + "22" * 20
ETH = 10**18


@dataclass
class OwnRig(Rig):
    """The deposit rig with a hot wallet and a cold address on its chain."""

    @property
    def config(self) -> ChainsConfig:
        """The chain configuration with ``hot_addresses`` and ``cold_addresses``."""
        doc = dev_config(rpc_url=self.node.url, token=self.tokens.usdc.address,
                         chain=self.chain, finality=self.finality, hot_wallet=None,
                         cold_addresses=(COLD,),
                         chain_options={"hot_addresses": [HOT], "scan_blocks_max": 50,
                                        "rpc_timeout_ms": 5000, "rpc_retries_max": 2})
        return parse_chains_config(doc)


@pytest.fixture
def orig(rig: Rig) -> OwnRig:
    """The rig, with our own addresses configured."""
    return OwnRig(engine=rig.engine, node=rig.node, tokens=rig.tokens)


def count(rig: Rig, table: str) -> int:
    """Rows of ``table``."""
    with UnitOfWork(rig.engine) as uow:
        return int(uow.conn.execute(sa.text(f"SELECT count(*) FROM {table}")).scalar_one())


def cases(rig: Rig) -> list[repo.CaseRecord]:
    """Every deposit case."""
    with UnitOfWork(rig.engine) as uow:
        return repo.get_cases(uow.conn)


def declare(rig: OwnRig, *, amount: str = str(2 * 10**18), key: str = "k1",
            asset: str = "ETH",
            chain: str = "dev", sender: str = ALICE) -> tuple[repo.FundingRecord, bool]:
    """Declare a funding through the service."""
    with UnitOfWork(rig.engine) as uow:
        found = own.declare_funding(
            uow, rig.config, own.FundingRequest(chain, asset, amount, sender, "seed capital"),
            declared_by="carol", idempotency_key=key)
        uow.commit()
    return found


def unattributed_case(rig: OwnRig, value: int) -> tuple[str, repo.CaseRecord]:
    """An undeclared ETH transfer to the hot wallet, final and booked to suspense: its hash
    and its case."""
    tx = rig.node.send_eth(ALICE, HOT, value)
    block = send_and_finalize(rig, tx)
    rig.mine_to(block + 2)
    rig.step()
    (case,) = cases(rig)
    return tx, case


def send_and_finalize(rig: OwnRig, tx: str) -> int:
    """Mine the transaction's block, step (not final yet), then make it final and step."""
    rig.node.mine(1)
    block = int(rig.node.receipt(tx)["blockNumber"], 16)
    rig.step()
    return block


class TestUnattributed:
    def test_hot_wallet_transfer_suspense_and_case_at_finality_not_before(
            self, orig: OwnRig) -> None:
        tx = orig.node.send_eth(ALICE, HOT, 2 * ETH)
        block = send_and_finalize(orig, tx)
        assert orig.deposits(tx) == {"call:0": "included"}
        assert orig.deposit_postings() == 0 and cases(orig) == []
        assert orig.balance("suspense:unattributed", "ETH") == 0
        orig.mine_to(block + 2)
        orig.step()
        assert orig.deposits(tx) == {"call:0": "suspense"}
        assert orig.events(tx, "call:0")[-1] == "own_unattributed"
        assert orig.balance("suspense:unattributed", "ETH") == 2 * ETH
        assert orig.balance("custody:dev", "ETH") == 2 * ETH
        (case,) = cases(orig)
        assert case.kind == "unattributed_own_address" and case.resolved_by is None
        with UnitOfWork(orig.engine) as uow:
            (entry,) = repo.deposits_of_transaction(uow.conn, "dev", tx)
        assert (entry.address_kind, entry.user_id, entry.booking) == ("hot", None, "own")
        assert verify(orig.engine).ok

    def test_resolved_as_capital_by_two_admins_same_admin_refused(self, orig: OwnRig) -> None:
        tx, case = unattributed_case(orig, 2 * ETH)
        with UnitOfWork(orig.engine) as uow:
            proposed = own.propose_resolution(uow, case.id, outcome="capital", by="carol",
                                              reason="owner's top-up, not declared")
            uow.commit()
        assert proposed.state == "proposed"
        before = (count(orig, "deposit_case_votes"), count(orig, "ledger_transactions"))
        with UnitOfWork(orig.engine) as uow, pytest.raises(SecondAdminRequired):
            own.approve_resolution(uow, case.id, by="carol", now=NOW)
        assert (count(orig, "deposit_case_votes"), count(orig, "ledger_transactions")) == before
        with UnitOfWork(orig.engine) as uow:
            done = own.approve_resolution(uow, case.id, by="dave", now=NOW)
            uow.commit()
        assert (done.state, done.outcome, done.approved_by) == ("resolved", "capital", "dave")
        assert done.ledger_transaction_id is not None
        assert orig.balance("suspense:unattributed", "ETH") == 0
        assert orig.balance("custody:dev", "ETH") == 0
        assert orig.balance("treasury:dev", "ETH") == 2 * ETH
        assert orig.balance("equity:owner", "ETH") == 2 * ETH
        assert orig.deposits(tx) == {"call:0": "capital"}
        # Approving again by the same second admin replays; nothing moves twice.
        with UnitOfWork(orig.engine) as uow:
            again = own.approve_resolution(uow, case.id, by="dave", now=NOW)
            uow.commit()
        assert again.ledger_transaction_id == done.ledger_transaction_id
        assert verify(orig.engine).ok

    def test_refund_is_approved_only_once_its_withdrawal_was_checked(
            self, orig: OwnRig) -> None:
        tx, case = unattributed_case(orig, ETH)
        with UnitOfWork(orig.engine) as uow:
            proposed = own.propose_resolution(uow, case.id, outcome="refund", by="carol",
                                              reason="send it back")
            uow.commit()
        assert (proposed.state, proposed.outcome) == ("proposed", "refund")
        # The deposit side alone cannot approve it: the API layer checks the withdrawal to
        # the sender first (tests/deposits/test_own_refund.py pays one).
        before = (count(orig, "deposit_case_votes"), count(orig, "ledger_transactions"))
        with UnitOfWork(orig.engine) as uow, pytest.raises(CaseResolutionInvalid,
                                                           match="check its withdrawal"):
            own.approve_resolution(uow, case.id, by="dave", now=NOW)
        assert (count(orig, "deposit_case_votes"), count(orig, "ledger_transactions")) == before
        with UnitOfWork(orig.engine) as uow, pytest.raises(CaseResolutionInvalid,
                                                           match="capital, return or refund"):
            own.propose_resolution(uow, case.id, outcome="gift", by="erin", reason="x")

    def test_cold_address_token_transfer_classified_the_same_way(self, orig: OwnRig) -> None:
        tx = orig.node.transact(orig.tokens.usdc, "transfer", [COLD, 7_000_000], BOB)
        block = send_and_finalize(orig, tx)
        assert cases(orig) == []
        orig.mine_to(block + 2)
        orig.step()
        assert orig.deposits(tx) == {"log:0": "suspense"}
        assert orig.balance("suspense:unattributed", "USDC") == 7_000_000
        (case,) = cases(orig)
        assert case.observed["address_kind"] == "cold"

    def test_reorg_before_finality_back_to_unconfirmed_not_booked(self, orig: OwnRig) -> None:
        tx = orig.node.send_eth(ALICE, HOT, ETH)
        send_and_finalize(orig, tx)
        orig.node.reorg(1)  # Drops our transaction.
        orig.node.mine(1)
        orig.step()
        assert orig.deposits(tx) == {"call:0": "unconfirmed"}
        orig.node.mine(3)
        orig.step(2)
        assert orig.deposits(tx) == {"call:0": "unconfirmed"}
        assert orig.deposit_postings() == 0 and cases(orig) == []


class TestInternal:
    def test_internal_transfer_matched_by_key_no_posting(self, orig: OwnRig) -> None:
        tx = orig.node.send_eth(ALICE, COLD, 3 * ETH)
        with UnitOfWork(orig.engine) as uow:
            own.record_internal_transfer(uow, ("dev", tx, "call:0"), "cold_transfer",
                                         "cold_transfer:1")
            uow.commit()
        block = send_and_finalize(orig, tx)
        orig.mine_to(block + 2)
        report = orig.step()
        assert orig.deposits(tx) == {"call:0": "internal"}
        assert report.credited == report.suspense == 0
        assert orig.deposit_postings() == 0 and cases(orig) == []
        with UnitOfWork(orig.engine) as uow:
            event = repo.events_of(uow.conn, repo.deposits_of_transaction(
                uow.conn, "dev", tx)[0].id)[-1]
        assert event.evidence["internal_transfer"]["reference"] == "cold_transfer:1"



def _one_funding_two_transfers(orig: OwnRig) -> tuple[str, str]:
    """One funding declared, two equal transfers to the hot wallet, both final and settled."""
    declare(orig, amount=str(ETH))
    first = orig.node.send_eth(ALICE, HOT, ETH)
    second = orig.node.send_eth(ALICE, HOT, ETH)
    block = send_and_finalize(orig, second)
    orig.mine_to(block + 2)
    orig.step()
    return first, second

class TestFundings:
    def test_declared_funding_booked_as_capital_at_finality(self, orig: OwnRig) -> None:
        funding, replayed = declare(orig, amount=str(25 * ETH // 10))
        assert not replayed and funding.amount_minor == 25 * ETH // 10
        tx = orig.node.send_eth(ALICE, HOT, 25 * ETH // 10)
        block = send_and_finalize(orig, tx)
        assert orig.balance("treasury:dev", "ETH") == 0
        orig.mine_to(block + 2)
        orig.step()
        assert orig.deposits(tx) == {"call:0": "capital"}
        assert orig.balance("treasury:dev", "ETH") == 25 * ETH // 10
        assert orig.balance("equity:owner", "ETH") == 25 * ETH // 10
        assert orig.balance("custody:dev", "ETH") == 0
        assert cases(orig) == []
        with UnitOfWork(orig.engine) as uow:
            (matched,) = own.list_fundings(uow)
        assert matched.deposit_id is not None and matched.ledger_transaction_id is not None
        assert verify(orig.engine).ok

    def test_each_funding_matched_once_second_transfer_unattributed(self, orig: OwnRig) -> None:
        first, second = _one_funding_two_transfers(orig)
        states = sorted([*orig.deposits(first).values(), *orig.deposits(second).values()])
        assert states == ["capital", "suspense"]
        assert len(cases(orig)) == 1

    def test_the_database_refuses_a_match_the_service_would_not_make(
            self, orig: OwnRig) -> None:
        first, second = _one_funding_two_transfers(orig)
        (fresh, _) = declare(orig, amount=str(ETH), key="k2")  # unmatched, same facts
        with orig.engine.connect() as conn:
            rows = {r.state: r for r in conn.execute(sa.text(
                "SELECT id, state, ledger_transaction_id FROM deposits "
                "WHERE tx_hash = ANY(:t)"), {"t": [first.lower(), second.lower()]})}
        capital, suspense = rows["capital"], rows["suspense"]
        bogus = [
            # the unattributed deposit with its suspense posting: not a treasury_funding
            (fresh.id, suspense.id, suspense.ledger_transaction_id),
            # the matched deposit's posting names the other funding
            (fresh.id, capital.id, capital.ledger_transaction_id),
            (fresh.id, 10**9, capital.ledger_transaction_id),  # no such deposit
        ]
        for funding_id, deposit_id, transaction_id in bogus:
            with orig.engine.connect() as conn, pytest.raises(
                    sa.exc.DBAPIError, match="treasury funding match"):
                conn.execute(sa.text(
                    "INSERT INTO treasury_funding_matches (funding_id, deposit_id, "
                    "ledger_transaction_id) VALUES (:f, :d, :l)"),
                    {"f": funding_id, "d": deposit_id, "l": transaction_id})
        assert count(orig, "treasury_funding_matches") == 1
        assert verify(orig.engine).ok

    def test_declared_twice_under_one_key(self, orig: OwnRig) -> None:
        first, _ = declare(orig, amount=str(ETH))
        again, replayed = declare(orig, amount=str(ETH))
        assert replayed and again.id == first.id
        with pytest.raises(FundingKeyReused):
            declare(orig, amount=str(2 * ETH))
        assert count(orig, "treasury_fundings") == 1

    @pytest.mark.parametrize(("field", "value"), [
        ("chain", "nochain"), ("asset", "DOGE"), ("amount", "1e5"), ("amount", "abc"),
        ("amount", "0"), ("amount", "-1"), ("amount", "0.0000000000000000001"),
        ("amount", "2.5"), ("amount", "1,000"), ("amount", " 1"),
        ("sender", "0x1234"),
    ])
    def test_bad_input_changes_nothing(self, orig: OwnRig, field: str, value: str) -> None:
        args = {"chain": "dev", "asset": "ETH", "amount": str(ETH), "sender": ALICE}
        args[field] = value
        with pytest.raises(FundingInvalid):
            declare(orig, **args)
        assert count(orig, "treasury_fundings") == 0


class TestTreasuryReport:
    def test_onchain_holdings_of_all_our_addresses_equal_custody_plus_treasury(
            self, orig: OwnRig) -> None:
        from deposits.treasury import treasury_report

        declare(orig, amount=str(25 * ETH // 10))
        user = orig.user("alice")
        funding = orig.node.send_eth(ALICE, HOT, 25 * ETH // 10)
        orig.node.send_eth(BOB, user, ETH)
        orig.node.transact(orig.tokens.usdc, "transfer", [COLD, 7_000_000], BOB)
        block = send_and_finalize(orig, funding)
        orig.mine_to(block + 8)  # Final under confirmations:3 and below the finalized tag.
        orig.step()
        rows = {r.asset: r for r in treasury_report(orig.engine, orig.config)}
        eth, usdc = rows["ETH"], rows["USDC"]
        assert eth.native and eth.gas_float_minor == eth.treasury_minor == 25 * ETH // 10
        assert (eth.onchain_minor, eth.custody_minor) == (35 * ETH // 10, ETH)
        assert (eth.hot_onchain_minor, eth.hot_treasury_minor, eth.hot_custody_minor) == (
            25 * ETH // 10, 25 * ETH // 10, 0)
        assert eth.difference_minor == 0 and eth.exact
        assert (usdc.onchain_minor, usdc.custody_minor, usdc.treasury_minor) == (
            7_000_000, 7_000_000, 0)
        assert usdc.difference_minor == 0 and usdc.gas_float_minor is None
        assert eth.addresses == 3
