"""End to end over HTTP against anvil: the API and the scheduler in one uvicorn (as ``custody
serve`` runs them), deposits (one through a reorg before finality), credit, a withdrawal to
settlement, and every webhook received by a real local receiver with a valid signature."""

from __future__ import annotations

import tomllib

import httpx
import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from api.app import create_app
from api.auth import create_key
from api.jobs import Intervals, Scheduler, build_jobs
from api.outbox import set_endpoint
from config.chains import parse_chains_config
from config.withdrawals import parse_withdrawals_config
from devtools.e2e import (
    HOT_KEY_ENV,
    Devchain,
    Scenario,
    ServerThread,
    WebhookReceiver,
)
from ledger.integrity import verify

CONFIRMATIONS = 3


@pytest.mark.slow
@pytest.mark.anvil
def test_deposit_reorg_credit_withdrawal_settlement_and_signed_webhooks(
        engine: Engine, devchain: Devchain) -> None:
    data = tomllib.loads(devchain.config_toml(confirmations=CONFIRMATIONS))
    chains = parse_chains_config(data)
    wcfg = parse_withdrawals_config(data, chains)
    key = create_key(engine, "acme", "client").key
    admin_key = create_key(engine, "ops", "admin").key
    receiver = WebhookReceiver().start()
    receiver.secret = set_endpoint(engine, "acme", receiver.url).secret
    jobs = build_jobs(engine, chains, wcfg, intervals=Intervals.uniform(0.1),
                      environ={HOT_KEY_ENV: devchain.hot_key})
    assert {j.name for j in jobs} >= {"deposits.watch:devnet", "withdrawals.process:devnet",
                                      "webhooks.deliver", "ledger.reconcile"}
    scheduler = Scheduler(engine, jobs)
    server = ServerThread(create_app(engine, chains, wcfg, lifespans=[scheduler.lifespan()]))
    try:
        with httpx.Client(base_url=server.url, timeout=30,
                          headers={"Authorization": f"Bearer {key}"}) as http, \
                httpx.Client(base_url=server.url, timeout=30,
                             headers={"Authorization": f"Bearer {admin_key}"}) as admin:
            story = Scenario(http, admin, devchain, CONFIRMATIONS, progress=lambda line: None)
            story.run()
            treasury = {row["asset"]: row for row in story.treasury()}
            alice = {b["asset"]: b for b in story.balances("alice")}
            bob = {b["asset"]: b for b in story.balances("bob")}
            timeline = story.timeline("bob USDC")
        wanted = {"deposit.seen", "deposit.reorged", "deposit.reincluded", "deposit.credited",
                  "withdrawal.reserved", "withdrawal.broadcast", "withdrawal.settled"}
        assert receiver.wait_for(lambda r: wanted <= set(r.types()), timeout_s=20), \
            receiver.types()
    finally:
        server.stop()
        receiver.stop()

    assert alice["ETH"]["posted"]["minor"] == str(15 * 10**17)
    assert (bob["USDC"]["posted"]["decimal"], bob["USDC"]["available"]["decimal"],
            bob["USDC"]["pending_outgoing"]["minor"]) == ("119.600000", "119.600000", "0")
    events = [e["event"] for e in timeline["transfers"][0]["events"]]
    assert events[:3] == ["transfer_included", "block_reorged_out", "transfer_reincluded"]
    assert events[-1] == "attested_for_user"

    # Every request the receiver got carried a valid signature; each event id arrived.
    assert receiver.requests and all(r.signature_valid for r in receiver.requests)
    accepted = receiver.accepted()
    settled = next(r for r in accepted.values() if r.event_type == "withdrawal.settled")
    data_ = settled.document["data"]["withdrawal"]
    assert (data_["amount"]["decimal"], data_["fee"]["decimal"], data_["user_id"]) == (
        "30.000000", "0.400000", story.users["bob"])
    credited = [r.document["data"]["deposit"] for r in accepted.values()
                if r.event_type == "deposit.credited"]
    assert sorted(d["amount"]["minor"] for d in credited) == ["150000000", str(15 * 10**17)]
    with engine.connect() as conn:
        undelivered = conn.execute(sa.text(
            "SELECT count(*) FROM webhook_deliveries WHERE state <> 'delivered'")).scalar()
        jobs_run = set(conn.execute(sa.text("SELECT DISTINCT job FROM job_runs")).scalars())
    assert undelivered == 0
    assert {"deposits.watch:devnet", "withdrawals.process:devnet"} <= jobs_run
    report = verify(engine)
    assert report.ok, report.discrepancies
    # The hot wallet held nothing before the declared fundings: chain and ledger agree exactly,
    # and no transfer to our addresses was left unattributed.
    assert {a: row["difference"]["minor"] for a, row in treasury.items()} == {"ETH": "0",
                                                                            "USDC": "0"}
    assert treasury["USDC"]["treasury"]["decimal"] == "1000.400000"  # capital + the fee
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM deposit_cases")).scalar() == 0
        states = conn.execute(sa.text(
            "SELECT state FROM deposits WHERE address_kind = 'hot'")).scalars().all()
    assert states == ["capital", "capital"]
