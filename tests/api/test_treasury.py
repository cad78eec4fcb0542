"""Treasury over HTTP: declared fundings (Idempotency-Key, bad input), two-admin decisions on an
unattributed transfer to the hot wallet, and a return linked to it resolving its case."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from chains.model import ObservedTransfer
from chains.model import parse_finality_rule as rule_of
from config.uow import UnitOfWork
from deposits import repository as repo
from deposits import service as deposits
from deposits.attestors import Attestation, Verdict
from deposits.scanner import Observation
from devtools.config import DEV_HOT_WALLET
from ledger import service as ledger
from ledger.integrity import verify
from tests.api.conftest import FAKE_TOKEN, Api, configs

SENDER = "0x" + "33" * 20
FUNDING = {"chain": "devnet", "asset": "ETH", "amount": "2.5", "from_address": SENDER,
           "reason": "seed capital"}


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
        deposits.record_scan(uow, chains, chain, [], [observed], {}, head_block=100, now=now)
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
                             ({"chain": "nochain"}, "funding_invalid"),
                             ({"asset": "DOGE"}, "funding_invalid"),
                             ({"amount": "abc"}, "funding_invalid"),
                             ({"amount": "1e3"}, "funding_invalid"),
                             ({"amount": "0"}, "funding_invalid"),
                             ({"amount": 2.5}, "request_invalid"),
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


class TestCases:
    def test_unattributed_hot_wallet_transfer_resolved_as_capital_by_two_admins(
            self, api: Api) -> None:
        seed_final_own(api)
        (case,) = api.call("GET", "/v1/admin/cases", "sam").json()["items"]
        assert case["kind"] == "unattributed_own_address"
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

    def test_refund_not_supported_yet(self, api: Api) -> None:
        seed_final_own(api)
        (case,) = api.call("GET", "/v1/admin/cases", "sam").json()["items"]
        r = api.call("POST", f"/v1/admin/cases/{case['id']}/proposals", "carol", idem="p",
                     json={"outcome": "refund", "reason": "send it back"})
        assert r.status_code == 409 and "not supported yet" in r.json()["detail"]
        assert count(api, "deposit_case_votes") == 0

    def test_hot_wallet_transfer_is_found_for_a_return_link(self, api: Api) -> None:
        tx = seed_final_own(api)
        found = api.app.state.ctx.find("devnet", tx, "log:0")
        assert found is not None and found.final and found.booked_to == "suspense"
        assert found.amount_minor == 4_000_000
