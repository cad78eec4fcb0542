"""Treasury over HTTP: declared fundings (Idempotency-Key, bad input), two-admin decisions on an
unattributed transfer to the hot wallet (capital, refund to the sender), and a return linked to
it resolving its case."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from chains.model import ObservedTransfer
from chains.model import parse_finality_rule as rule_of
from config.uow import UnitOfWork
from deposits import own, scans
from deposits import repository as repo
from deposits import service as deposits
from deposits.attestors import Attestation, Verdict
from deposits.scanner import Observation
from devtools.config import DEV_HOT_WALLET
from ledger import service as ledger
from ledger.integrity import verify
from tests.api.conftest import FAKE_TOKEN, Api, configs
from withdrawals import service as withdrawals

SENDER = "0x" + "33" * 20
FUNDING = {"chain": "devnet", "asset": "ETH", "amount": "2500000000000000000",  # 2.5 ETH
           "from_address": SENDER, "reason": "seed capital"}


def count(api: Api, table: str) -> int:
    """Rows of ``table``."""
    with UnitOfWork(api.engine) as uow:
        return int(uow.conn.execute(sa.text(f"SELECT count(*) FROM {table}")).scalar_one())


def balance(api: Api, code: str, asset: str) -> int:
    """Normal-side balance of an account."""
    with UnitOfWork(api.engine) as uow:
        return ledger.account_balance(uow, ledger.get_account(uow, code, asset)).balance_minor


def seed_final_own(api: Api | Engine, amount_minor: int = 4_000_000) -> str:
    """A USDC transfer to the hot wallet, recorded and settled as the watcher would (final,
    attested): it lands in suspense with a case. Returns its transaction hash."""
    engine = api.engine if isinstance(api, Api) else api
    chains, _ = configs()
    chain = chains.chain("devnet")
    tx_hash = "0x" + uuid.uuid4().hex + uuid.uuid4().hex
    observed = Observation(ObservedTransfer(
        token=FAKE_TOKEN, from_address=SENDER, to_address=DEV_HOT_WALLET.lower(),
        value=amount_minor, tx_hash=tx_hash, block_number=100, block_hash="0x" + "22" * 32,
        position="log:0", log_index=3), tx_from=SENDER, tx_nonce=1)
    now = datetime.now(UTC)
    with UnitOfWork(engine) as uow:
        scans.record_scan(uow, chains, chain, [], [observed], {}, head_block=100, now=now)
        deposits.record_progress(uow, chain, rule_of(chain.finality),
                                 [("devnet", tx_hash, "log:0")], head_block=200,
                                 finalized_block=None, canonical={100: "0x" + "22" * 32},
                                 now=now)
        uow.commit()
    with UnitOfWork(engine) as uow:
        (d,) = repo.deposits_of_transaction(uow.conn, "devnet", tx_hash)
        assert (d.state, d.address_kind) == ("final", "hot")
        accounts = deposits.AccountCache()
        accounts.ensure(uow, chains, deposits.accounts_needed(chain, [d]))
        uow.commit()
    with UnitOfWork(engine) as uow:
        counts = deposits.settle_final(uow, chain, {d.id: Attestation(Verdict.AGREED)}, {},
                                       accounts, [d.key], now=now)
        uow.commit()
    assert counts["suspense"] == 1
    return tx_hash


def refund_counts(api: Api) -> tuple[int, ...]:
    """Rows of every table a refund writes."""
    return tuple(count(api, t) for t in ("deposit_case_votes", "deposit_case_resolutions",
                                         "deposit_case_refunds", "ledger_transactions",
                                         "withdrawals"))


def own_case(api: Api, *, proposed_by: str | None = None) -> int:
    """A fresh unattributed own-address case (proposed as capital by ``proposed_by``)."""
    tx = seed_final_own(api)
    with UnitOfWork(api.engine) as uow:
        (d,) = repo.deposits_of_transaction(uow.conn, "devnet", tx)
        (case,) = repo.get_cases(uow.conn, deposit_id=d.id)
    if proposed_by is not None:
        r = api.call("POST", f"/v1/admin/cases/{case.id}/proposals", proposed_by,
                     idem=uuid.uuid4().hex, json={"outcome": "capital", "reason": "top-up"})
        assert r.status_code == 201, r.text
    return case.id


class TestFundings:
    def test_declared_replayed_and_listed(self, api: Api) -> None:
        first = api.call("POST", "/v1/admin/treasury/fundings", "carol", idem="f1",
                         json=FUNDING)
        assert first.status_code == 201, first.text
        body = first.json()
        assert body["amount"] == {"minor": "2500000000000000000", "decimal": "2.500000000000000000"}
        assert (body["state"], body["from_address"], body["declared_by"]) == (
            "expected", SENDER, "carol")
        again = api.call("POST", "/v1/admin/treasury/fundings", "carol", idem="f1",
                         json=FUNDING)
        assert again.status_code == 201 and again.json() == body
        assert again.headers["Idempotent-Replayed"] == "true"
        other = api.call("POST", "/v1/admin/treasury/fundings", "carol", idem="f1",
                         json={**FUNDING, "amount": "3"})
        assert other.status_code == 422 and other.json()["code"] == "idempotency_key_reused"
        listed = api.call("GET", "/v1/admin/treasury/fundings", "sam")
        assert listed.status_code == 200 and [f["id"] for f in listed.json()["items"]] == [
            body["id"]]
        assert count(api, "treasury_fundings") == 1

    def test_bad_input_refused_nothing_written(self, api: Api) -> None:
        changes: list[tuple[dict[str, object], str]] = [
                             ({"chain": "nochain"}, "chain_unknown"),
                             ({"asset": "DOGE"}, "funding_invalid"),
                             ({"amount": "abc"}, "amount_invalid"),
                             ({"amount": "1e3"}, "amount_invalid"),
                             ({"amount": "2.5"}, "amount_invalid"),  # not minor units
                             ({"amount": "-1"}, "amount_invalid"),
                             ({"amount": "0"}, "amount_invalid"),
                             ({"amount": 2.5}, "amount_invalid"),
                             ({"from_address": "0x12"}, "request_invalid")]
        for change, code in changes:
            r = api.call("POST", "/v1/admin/treasury/fundings", "carol",
                         idem=uuid.uuid4().hex, json={**FUNDING, **change})
            assert r.status_code == 422 and r.json()["code"] == code, (change, r.text)
        assert api.call("POST", "/v1/admin/treasury/fundings", "carol",
                        json=FUNDING).status_code == 400  # No Idempotency-Key.
        assert api.call("POST", "/v1/admin/treasury/fundings", "acme", idem="x",
                        json=FUNDING).status_code == 403
        assert count(api, "treasury_fundings") == 0


class TestReport:
    def test_a_node_that_cannot_be_read_leaves_the_ledger_figures_and_says_why(
            self, api: Api) -> None:
        # This app's chain points at a port where no node listens.
        own_case(api)  # 4 USDC booked to custody on chain devnet, waiting in suspense
        r = api.call("GET", "/v1/admin/treasury", "carol")
        assert r.status_code == 200, r.text
        rows = {row["asset"]: row for row in r.json()["items"]}
        assert set(rows) == {"ETH", "USDC"}
        usdc = rows["USDC"]
        assert usdc["custody"]["minor"] == "4000000"
        assert usdc["custody_plus_treasury"]["minor"] == "4000000"
        for field in ("onchain", "difference", "hot_onchain", "hot_custody", "hot_treasury",
                      "block_number"):
            assert usdc[field] is None, field
        assert "did not answer" in usdc["unavailable"] or "no answer" in usdc["unavailable"]
        assert rows["ETH"]["gas_float"] is not None  # the ledger's, node or not


class TestCases:
    def test_votes_on_a_case_id_beyond_32_bits_are_not_found(self, api: Api) -> None:
        # Case ids are bigint; the votes' advisory lock takes int keys (it once cast the id and
        # answered 422 "integer out of range" for ids past 2^31).
        for case_id in (2**31, 2**62):
            for action, body in (("proposals", {"outcome": "capital", "reason": "r"}),
                                 ("approvals", None)):
                r = api.call("POST", f"/v1/admin/cases/{case_id}/{action}", "carol",
                             idem=uuid.uuid4().hex, json=body)
                assert r.status_code == 404, (case_id, action, r.text)
        assert count(api, "deposit_case_votes") == 0

    def test_unattributed_hot_wallet_transfer_resolved_as_capital_by_two_admins(
            self, api: Api) -> None:
        seed_final_own(api)
        (case,) = api.call("GET", "/v1/admin/cases", "sam").json()["items"]
        assert case["type"] == "unattributed_own_address"
        assert balance(api, "suspense:unattributed", "USDC") == 4_000_000
        path = f"/v1/admin/cases/{case['id']}"
        proposed = api.call("POST", f"{path}/proposals", "carol", idem="p1",
                            json={"outcome": "capital", "reason": "owner top-up"})
        assert proposed.status_code == 201 and proposed.json()["state"] == "proposed"
        before = (count(api, "deposit_case_votes"), count(api, "ledger_transactions"))
        same = api.call("POST", f"{path}/approvals", "carol", idem="a1")
        assert same.status_code == 409 and same.json()["code"] == "second_admin_required"
        assert (count(api, "deposit_case_votes"), count(api, "ledger_transactions")) == before
        done = api.call("POST", f"{path}/approvals", "dave", idem="a2")
        assert done.status_code == 201, done.text
        assert (done.json()["state"], done.json()["approved_by"]) == ("resolved", "dave")
        assert balance(api, "suspense:unattributed", "USDC") == 0
        assert balance(api, "treasury:devnet", "USDC") == 4_000_000
        assert balance(api, "equity:owner", "USDC") == 4_000_000
        assert api.call("GET", "/v1/admin/cases", "sam").json()["items"] == []
        assert verify(api.engine).ok

    def test_refund_by_two_admins_requests_the_company_withdrawal_once(
            self, api: Api) -> None:
        tx = seed_final_own(api)  # 4 USDC from SENDER.
        (case,) = api.call("GET", "/v1/admin/cases", "sam").json()["items"]
        path = f"/v1/admin/cases/{case['id']}"
        proposed = api.call("POST", f"{path}/proposals", "carol", idem="p1",
                            json={"outcome": "refund", "reason": "not ours: send it back"})
        assert proposed.status_code == 201, proposed.text
        assert (proposed.json()["state"], proposed.json()["outcome"]) == ("proposed", "refund")
        before = refund_counts(api)
        same = api.call("POST", f"{path}/approvals", "carol", idem="a1")
        assert same.status_code == 409 and same.json()["code"] == "second_admin_required"
        assert refund_counts(api) == before
        done = api.call("POST", f"{path}/approvals", "dave", idem="a2")
        assert done.status_code == 201, done.text
        body = done.json()
        assert (body["state"], body["outcome"], body["approved_by"]) == (
            "resolved", "refund", "dave")
        w = withdrawals.get_withdrawal(api.engine, body["withdrawal_id"])
        # Received 4.00 minus the policy's fee_max 2.00; the reserve is the whole 4.00.
        assert (w.user_id, w.destination, w.amount_minor, w.requested_by, w.request_key) == (
            own.REFUND_USER, SENDER, 2_000_000, "dave", f"case:{case['id']}:refund")
        assert balance(api, "suspense:unattributed", "USDC") == 0
        assert balance(api, f"user:{own.REFUND_USER}:wallet", "USDC") == 0
        assert balance(api, f"user:{own.REFUND_USER}:withdrawals", "USDC") == 4_000_000
        # Approving again (another request, another key) replays the same withdrawal.
        again = api.call("POST", f"{path}/approvals", "dave", idem="a3")
        assert again.status_code == 201 and again.json()["withdrawal_id"] == w.id
        assert count(api, "withdrawals") == 1
        # The case view shows how it was resolved and the withdrawal paying the sender.
        timeline = api.call("GET", f"/v1/deposits/devnet/{tx}", "sam").json()
        (shown,) = timeline["transfers"][0]["cases"]
        assert (shown["outcome"], shown["approved_by"], shown["withdrawal_id"]) == (
            "refund", "dave", w.id)
        assert shown["resolution_transaction_id"] == body["ledger_transaction_id"]
        assert api.call("GET", "/v1/admin/cases", "sam").json()["items"] == []
        # The refunded transfer left suspense: it cannot also be linked as a return.
        linked = api.call("POST", f"/v1/admin/withdrawals/{w.id}/returns", "carol", idem="r1",
                          json={"chain": "devnet", "tx_hash": tx, "position": "log:0",
                                "amount": "4000000", "reason": "bounced"})
        assert linked.status_code == 409 and "refunded to its sender" in linked.json()["detail"]
        assert api.app.state.ctx.find("devnet", tx, "log:0") is None
        # No client can name the company user.
        hidden = api.call("GET", f"/v1/users/{own.REFUND_USER}/balances", "acme")
        assert hidden.status_code in (404, 422)
        assert verify(api.engine).ok

    def test_refund_that_cannot_be_paid_is_refused_and_changes_nothing(
            self, api: Api) -> None:
        seed_final_own(api, 2_500_000)  # 2.50 - 2.00 fee_max = 0.50: below the 1.00 minimum.
        (case,) = api.call("GET", "/v1/admin/cases", "sam").json()["items"]
        path = f"/v1/admin/cases/{case['id']}"
        assert api.call("POST", f"{path}/proposals", "carol", idem="p1", json={
            "outcome": "refund", "reason": "send it back"}).status_code == 201
        before = refund_counts(api)
        refused = api.call("POST", f"{path}/approvals", "dave", idem="a1")
        assert refused.status_code == 409 and refused.json()["code"] == "refund_refused"
        assert "below the minimum" in refused.json()["detail"]
        assert refund_counts(api) == before
        assert balance(api, "suspense:unattributed", "USDC") == 2_500_000
        (still,) = api.call("GET", "/v1/admin/cases", "sam").json()["items"]
        assert still["id"] == case["id"] and still["status"] == "open"

    def test_hot_wallet_transfer_is_found_for_a_return_link(self, api: Api) -> None:
        tx = seed_final_own(api)
        found = api.app.state.ctx.find("devnet", tx, "log:0")
        assert found is not None and found.final and found.booked_to == "suspense"
        assert found.amount_minor == 4_000_000
