"""Sweeps, cold transfers and refills over HTTP: Idempotency-Key (replay, another body, none),
scopes (admin writes, support reads), problem+json for bad input with nothing written, the
two-admin approval rules, ``sweeps_not_configured`` without ``[sweeps]``, the scheduler's sweep
jobs; and on a real anvil: a sweeper step run through the API (its report, the sweep's timeline
with its gas top-up), a cold transfer approved over HTTP and sent once, the hot-wallet alerts."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from api.app import create_app
from api.auth import create_key
from api.jobs import build_jobs, hot_limit_alerts
from config.sweeps import SweepsConfig, parse_sweeps_config
from config.uow import UnitOfWork
from devtools.anvil import DEV_ACCOUNTS, AnvilNode
from devtools.config import dev_config, dev_configs
from sweeps import limits
from tests.api.conftest import PRINCIPALS, Api, Server
from tests.sweeps.conftest import ETH, USDC, SweepRig, make_rig, node  # noqa: F401
from tests.sweeps.test_cold import COLD, cold_rig
from tests.withdrawals.conftest import TEST_HOT_KEY_ENV, open_book

#: A third admin, so that a two-admin approval can happen without the proposer.
ADMINS = {**PRINCIPALS, "erin": "admin"}
CHAIN = "devnet"
PROPOSAL = {"chain": CHAIN, "asset": "ETH", "amount": "25000000000000000000",  # 25 ETH
            "reason": "excess of the week"}
REFILL = {"chain": CHAIN, "asset": "USDC", "amount": "2500000000", "reason": "weekend"}
#: Every table a proposal, a decision or a refill request writes.
TABLES = ("cold_transfers", "cold_transfer_events", "cold_transfer_approvals",
          "refill_requests", "api_idempotency")

#: An empty page of a list (``api.routes.paging``).
EMPTY_PAGE = {"items": [], "has_more": False, "next_cursor": None}


def sweeps_doc() -> dict[str, Any]:
    """The API tests' configuration (no node) with a cold address and a ``[sweeps]`` section:
    ETH hot between 1 and 50, two admins above 20; USDC hot up to 100,000."""
    doc = dev_config(hot_key_env=TEST_HOT_KEY_ENV, xpub=True, cold_addresses=(COLD,))
    doc["sweeps"] = {"assets": [
        {"chain": CHAIN, "asset": "ETH", "threshold": "0.01", "hot_min": "1", "hot_max": "50",
         "cold_dual_approval_above": "20"},
        {"chain": CHAIN, "asset": "USDC", "threshold": "10", "hot_max": "100000"}]}
    return doc


@contextmanager
def serve_doc(engine: Engine, doc: dict[str, Any],
              sweeps: SweepsConfig | None = None) -> Iterator[Api]:
    """An Api (``tests.api.conftest.Api``) on the configuration ``doc``, with a key per
    principal of ``ADMINS``."""
    open_book(engine)
    chains, wcfg = dev_configs(doc)
    scfg = sweeps or (parse_sweeps_config(doc, chains, wcfg) if "sweeps" in doc else None)
    app = create_app(engine, chains, wcfg, sweeps_config=scfg)
    server = Server(app)
    try:
        with httpx.Client(base_url=server.url, timeout=60) as http:
            api = Api(engine, app, http)
            for name, scope in ADMINS.items():
                api.keys[name] = create_key(engine, name, scope).key
            yield api
    finally:
        server.stop()


@pytest.fixture
def sapi(engine: Engine) -> Iterator[Api]:
    """The API with ``[sweeps]`` (no node)."""
    with serve_doc(engine, sweeps_doc()) as running:
        yield running


def counts(engine: Engine) -> dict[str, int]:
    """Rows of every table the writes touch."""
    with UnitOfWork(engine) as uow:
        return {t: int(uow.conn.execute(sa.text(f"SELECT count(*) FROM {t}")).scalar_one())
                for t in TABLES}


def problem(r: httpx.Response, status: int, code: str) -> dict[str, Any]:
    """Assert a problem document of ``status`` and ``code``; its body."""
    assert r.status_code == status, (r.status_code, r.text)
    assert r.headers["content-type"].startswith("application/problem+json"), r.headers
    body: dict[str, Any] = r.json()
    assert body["code"] == code, body
    return body


def propose(api: Api, who: str = "carol", **changes: Any) -> dict[str, Any]:
    """A proposal (201 expected)."""
    r = api.call("POST", "/v1/admin/cold-transfers", who, idem=uuid.uuid4().hex,
                 json={**PROPOSAL, **changes})
    assert r.status_code == 201, r.text
    return dict(r.json())


def decide(api: Api, cold_id: int, who: str, decision: str = "approve",
           reason: str | None = None, idem: str | None = None) -> httpx.Response:
    """A decision."""
    body: dict[str, Any] = {"decision": decision}
    if reason is not None:
        body["reason"] = reason
    return api.call("POST", f"/v1/admin/cold-transfers/{cold_id}/approvals", who,
                    idem=idem or uuid.uuid4().hex, json=body)


class TestColdTransfers:
    def test_proposed_replayed_listed_and_read(self, sapi: Api) -> None:
        first = sapi.call("POST", "/v1/admin/cold-transfers", "carol", idem="k1", json=PROPOSAL)
        assert first.status_code == 201, first.text
        body = first.json()
        assert body["amount"] == {"minor": "25000000000000000000",
                                  "decimal": "25.000000000000000000"}
        assert body["amount_onchain"] == {"units": "25000000000000000000", "decimals": 18,
                                          "decimal": "25.000000000000000000"}
        assert (body["state"], body["approvals_required"], body["proposed_by"]) == (
            "proposed", 2, "carol")
        assert (body["destination"], body["sender"], body["decisions"]) == (
            COLD, DEV_ACCOUNTS[1], [])
        again = sapi.call("POST", "/v1/admin/cold-transfers", "carol", idem="k1", json=PROPOSAL)
        assert (again.status_code, again.json()) == (201, body)
        assert again.headers["Idempotent-Replayed"] == "true"
        other = sapi.call("POST", "/v1/admin/cold-transfers", "carol", idem="k1",
                          json={**PROPOSAL, "amount": "1"})
        problem(other, 422, "idempotency_key_reused")
        listed = sapi.call("GET", "/v1/admin/cold-transfers?chain=devnet&state=proposed", "sam")
        assert listed.status_code == 200 and [c["id"] for c in listed.json()["items"]] == [
            body["id"]]
        assert sapi.call("GET", "/v1/admin/cold-transfers?state=final", "sam").json() == {
            "items": [], "has_more": False, "next_cursor": None}
        shown = sapi.call("GET", f"/v1/admin/cold-transfers/{body['id']}", "sam")
        assert shown.status_code == 200, shown.text
        timeline = shown.json()
        assert timeline["cold_transfer"] == body
        assert [e["event"] for e in timeline["events"]] == ["planned"]
        assert timeline["attempts"] == []
        problem(sapi.call("GET", "/v1/admin/cold-transfers/999", "sam"), 404,
                "movement_not_found")
        assert counts(sapi.engine)["cold_transfers"] == 1

    def test_bad_input_refused_nothing_written(self, sapi: Api) -> None:
        before = counts(sapi.engine)
        cases: list[tuple[dict[str, Any], int, str]] = [
            ({"amount": "1.5"}, 422, "amount_invalid"),
            ({"amount": "abc"}, 422, "amount_invalid"),
            ({"amount": "-1"}, 422, "amount_invalid"),
            ({"amount": "1e3"}, 422, "amount_invalid"),
            ({"amount": 25}, 422, "amount_invalid"),
            ({"amount": "0"}, 422, "amount_invalid"),
            ({"amount": "9" * 40}, 422, "amount_invalid"),
            ({"chain": "nochain"}, 422, "chain_unknown"),
            ({"asset": "DOGE"}, 422, "cold_transfer_invalid"),
            ({"reason": ""}, 422, "request_invalid"),
            ({"extra": "x"}, 422, "request_invalid"),
        ]
        for change, status, code in cases:
            r = sapi.call("POST", "/v1/admin/cold-transfers", "carol", idem=uuid.uuid4().hex,
                          json={**PROPOSAL, **change})
            problem(r, status, code)
        problem(sapi.call("POST", "/v1/admin/cold-transfers", "carol", json=PROPOSAL), 400,
                "idempotency_key_missing")
        problem(sapi.call("POST", "/v1/admin/cold-transfers", "sam", idem="s1", json=PROPOSAL),
                403, "forbidden")
        problem(sapi.call("POST", "/v1/admin/cold-transfers", None, idem="n1", json=PROPOSAL),
                401, "unauthenticated")
        problem(sapi.call("POST", "/v1/admin/refills", "carol", idem=uuid.uuid4().hex,
                          json={**REFILL, "source": "0x" + "12" * 20}), 422, "refill_invalid")
        problem(sapi.call("POST", "/v1/admin/refills", "carol", idem=uuid.uuid4().hex,
                          json={**REFILL, "amount": "0"}), 422, "amount_invalid")
        problem(sapi.call("POST", "/v1/admin/refills", "carol", json=REFILL), 400,
                "idempotency_key_missing")
        problem(sapi.call("GET", "/v1/admin/cold-transfers?state=nope", "sam"), 422,
                "request_invalid")
        assert counts(sapi.engine) == before

    def test_two_admins_approve_never_the_proposer_nor_twice(self, sapi: Api) -> None:
        cold = propose(sapi)
        problem(decide(sapi, cold["id"], "carol"), 409, "cold_decision_refused")
        first = decide(sapi, cold["id"], "dave", idem="d1")
        assert first.status_code == 201, first.text
        assert first.json()["state"] == "proposed"
        assert [d["approver"] for d in first.json()["decisions"]] == ["dave"]
        replay = decide(sapi, cold["id"], "dave", idem="d1")
        assert replay.json() == first.json() and replay.headers["Idempotent-Replayed"] == "true"
        problem(decide(sapi, cold["id"], "dave"), 409, "cold_decision_refused")
        problem(decide(sapi, cold["id"], "alice"), 403, "forbidden")
        problem(decide(sapi, cold["id"], "erin", "reject"), 409, "cold_decision_refused")
        problem(sapi.call("POST", f"/v1/admin/cold-transfers/{cold['id']}/approvals", "erin",
                          json={"decision": "approve"}), 400, "idempotency_key_missing")
        before = counts(sapi.engine)
        approved = decide(sapi, cold["id"], "erin", reason="checked the cold wallet")
        assert approved.status_code == 201, approved.text
        assert approved.json()["state"] == "approved"
        assert counts(sapi.engine)["cold_transfer_approvals"] == (
            before["cold_transfer_approvals"] + 1)
        # One in flight per chain and asset: another proposal waits for this one to end.
        problem(sapi.call("POST", "/v1/admin/cold-transfers", "dave", idem=uuid.uuid4().hex,
                          json={**PROPOSAL, "amount": "1"}), 409, "cold_transfer_open")
        problem(decide(sapi, cold["id"], "sam"), 403, "forbidden")
        events = sapi.call("GET", f"/v1/admin/cold-transfers/{cold['id']}", "sam").json()
        assert [e["event"] for e in events["events"]] == [
            "planned", "approval_recorded", "approved"]
        assert [e["actor"] for e in events["events"]] == ["carol", "dave", "erin"]

    def test_a_rejection_ends_it(self, sapi: Api) -> None:
        small = propose(sapi, amount="1000000000000000000")  # 1 ETH: one admin
        assert small["approvals_required"] == 1
        rejected = decide(sapi, small["id"], "dave", "reject", reason="not now")
        assert rejected.status_code == 201, rejected.text
        assert (rejected.json()["state"], rejected.json()["state_reason"]) == (
            "rejected", "not now")
        problem(decide(sapi, small["id"], "erin"), 409, "cold_decision_refused")
        assert propose(sapi, who="dave")["state"] == "proposed"  # The next one may come.


class TestRefills:
    def test_requested_replayed_listed(self, sapi: Api) -> None:
        first = sapi.call("POST", "/v1/admin/refills", "carol", idem="r1", json=REFILL)
        assert first.status_code == 201, first.text
        body = first.json()
        assert (body["source"], body["destination"], body["state"]) == (
            COLD, DEV_ACCOUNTS[1], "open")
        assert body["amount"] == {"minor": "2500000000", "decimal": "2500.000000"}
        assert body["requested_by"] == "carol" and body["matched_tx_hash"] is None
        again = sapi.call("POST", "/v1/admin/refills", "carol", idem="r1", json=REFILL)
        assert again.json() == body and again.headers["Idempotent-Replayed"] == "true"
        problem(sapi.call("POST", "/v1/admin/refills", "carol", idem="r1",
                          json={**REFILL, "amount": "1"}), 422, "idempotency_key_reused")
        problem(sapi.call("POST", "/v1/admin/refills", "sam", idem="r2", json=REFILL), 403,
                "forbidden")
        listed = sapi.call("GET", "/v1/admin/refills?state=open", "sam")
        assert [r["id"] for r in listed.json()["items"]] == [body["id"]]
        assert counts(sapi.engine)["refill_requests"] == 1


class TestSweeps:
    def test_reads_and_a_run_without_a_node(self, sapi: Api) -> None:
        assert sapi.call("GET", "/v1/admin/sweeps", "sam").json() == EMPTY_PAGE
        problem(sapi.call("GET", "/v1/admin/sweeps/7", "sam"), 404, "movement_not_found")
        problem(sapi.call("POST", "/v1/admin/sweeps/run", "sam", idem="x", json={"chain": CHAIN}),
                403, "forbidden")
        problem(sapi.call("POST", "/v1/admin/sweeps/run", "carol", idem="x",
                          json={"chain": "nochain"}), 422, "chain_unknown")
        # The node is away: 503, retry later; nothing was stepped nor stored.
        problem(sapi.call("POST", "/v1/admin/sweeps/run", "carol", idem="x",
                          json={"chain": CHAIN}), 503, "rpc_unavailable")
        assert counts(sapi.engine)["api_idempotency"] == 0


def test_without_sweeps_configured_writes_are_refused(engine: Engine) -> None:
    doc = sweeps_doc()
    del doc["sweeps"]
    with serve_doc(engine, doc) as api:
        for path, body in (("/v1/admin/cold-transfers", PROPOSAL), ("/v1/admin/refills", REFILL),
                           ("/v1/admin/sweeps/run", {"chain": CHAIN}),
                           ("/v1/admin/cold-transfers/1/approvals", {"decision": "approve"})):
            found = problem(api.call("POST", path, "carol", idem=uuid.uuid4().hex, json=body),
                            409, "sweeps_not_configured")
            assert "[sweeps]" in found["detail"]
        for path in ("/v1/admin/sweeps", "/v1/admin/cold-transfers", "/v1/admin/refills"):
            assert api.call("GET", path, "sam").json() == EMPTY_PAGE
        assert counts(engine) == dict.fromkeys(TABLES, 0)


def test_the_scheduler_sweeps_only_the_chains_sweeps_lists(engine: Engine) -> None:
    doc = sweeps_doc()
    chains, wcfg = dev_configs(doc)
    scfg = parse_sweeps_config(doc, chains, wcfg)
    env = {TEST_HOT_KEY_ENV: "0x" + "11" * 32}
    names = [j.name for j in build_jobs(engine, chains, wcfg, scfg=scfg, environ=env)]
    assert {"sweeps.run:devnet", "sweeps.limits:devnet"} <= set(names)
    without = [j.name for j in build_jobs(engine, chains, wcfg, environ=env)]
    assert not [n for n in without if n.startswith("sweeps")]
    only = [j.name for j in build_jobs(engine, chains, wcfg, scfg=scfg, environ=env,
                                       only=["sweeps"])]
    assert only == ["sweeps.run:devnet", "sweeps.limits:devnet"]


# --------------------------------------------------------------------------- on anvil


def alert_payloads(owner: Engine, kind: str) -> list[dict[str, Any]]:
    """The payloads of the ``alert.<kind>`` outbox events, oldest first."""
    with owner.connect() as conn:
        return list(conn.execute(sa.text("SELECT payload FROM outbox_events WHERE type = :t "
                                         "ORDER BY id"), {"t": f"alert.{kind}"}).scalars())


@pytest.mark.anvil
def test_a_sweeper_step_over_http_and_the_sweep_timeline(
        engine: Engine, node: AnvilNode, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    rig = make_rig(engine, node, monkeypatch)
    rig.fund_treasury(2 * ETH)
    rig.deposit_usdc("u1", 50 * USDC)  # A token sweep: it needs a gas top-up first.
    rig.settle(sweep=False)
    with serve_doc(engine, rig.doc, rig.cfg) as api:
        run = api.call("POST", "/v1/admin/sweeps/run", "carol", idem="run1", json={"chain": "dev"})
        assert run.status_code == 200, run.text
        report = run.json()
        assert (report["chain"], report["planned"], report["top_ups_planned"]) == ("dev", 1, 1)
        assert report["dust"] == [] and report["skipped_locked"] is False
        replay = api.call("POST", "/v1/admin/sweeps/run", "carol", idem="run1",
                          json={"chain": "dev"})
        assert replay.json() == report and replay.headers["Idempotent-Replayed"] == "true"
        rig.settle()
        (sweep,) = api.call("GET", "/v1/admin/sweeps?chain=dev&state=final", "sam").json()[
            "items"]
        assert (sweep["asset"], sweep["address"], sweep["needs_signer"]) == (
            "USDC", rig.user("u1"), False)
        assert sweep["swept_amount"] == {"units": str(50 * USDC), "decimals": 6,
                                         "decimal": "50.000000"}
        timeline = api.call("GET", f"/v1/admin/sweeps/{sweep['id']}", "sam").json()
        assert [e["event"] for e in timeline["events"]][:3] == [
            "planned", "top_up_planned", "gas_arrived"]
        assert len(timeline["attempts"]) == 1
        (top_up,) = timeline["top_ups"]
        assert (top_up["top_up"]["state"], top_up["top_up"]["address"]) == (
            "final", rig.user("u1"))
        assert len(top_up["attempts"]) == 1 and top_up["events"][0]["event"] == "planned"


@pytest.mark.anvil
def test_a_cold_transfer_approved_over_http_is_sent_once(
        engine: Engine, owner: Engine, node: AnvilNode,  # noqa: F811
        monkeypatch: pytest.MonkeyPatch) -> None:
    rig: SweepRig = cold_rig(engine, node, monkeypatch)
    rig.fund_treasury(5 * ETH)
    rig.settle(sweep=False)
    ctx = rig.context()
    (cold_id,) = limits.check_hot_limits(engine, ctx, rig.clock).proposed
    assert hot_limit_alerts(engine, "dev") == 1 and hot_limit_alerts(engine, "dev") == 0
    (alert,) = alert_payloads(owner, "cold_transfer_proposed")
    assert (alert["cold_transfer_id"], alert["approvals_required"]) == (str(cold_id), 2)
    with serve_doc(engine, rig.doc, rig.cfg) as api:
        for who in ("carol", "dave"):
            r = decide(api, cold_id, who)
            assert r.status_code == 201, r.text
        assert r.json()["state"] == "approved"
        cold_before = rig.on_chain(COLD)[0]
        rig.settle()
        timeline = api.call("GET", f"/v1/admin/cold-transfers/{cold_id}", "sam").json()
    assert timeline["cold_transfer"]["state"] == "final"
    (attempt,) = timeline["attempts"]
    assert rig.on_chain(COLD)[0] - cold_before == 3 * ETH
    assert [r.tx_hash for r in rig.rows("SELECT tx_hash FROM deposits WHERE to_address = :c "
                                        "AND state = 'internal'", c=COLD)] == [attempt["tx_hash"]]
    assert int(timeline["cold_transfer"]["gas_paid"]["units"]) == rig.balance(
        "expense:network_fees", "ETH")


@pytest.mark.anvil
def test_a_low_hot_wallet_raises_one_alert_with_its_refill(
        engine: Engine, owner: Engine, node: AnvilNode,  # noqa: F811
        monkeypatch: pytest.MonkeyPatch) -> None:
    rig = cold_rig(engine, node, monkeypatch)
    rig.fund_treasury(ETH // 10)
    rig.settle(sweep=False)
    report = limits.check_hot_limits(engine, rig.context(), rig.clock)
    (refill_id,) = report.refills
    assert hot_limit_alerts(engine, "dev") == 1
    limits.check_hot_limits(engine, rig.context(), rig.clock)
    assert hot_limit_alerts(engine, "dev") == 0
    (alert,) = alert_payloads(owner, "hot_wallet_low")
    assert alert["refill_request_id"] == str(refill_id)
    assert COLD in alert["next"] and rig.hot in alert["next"]
