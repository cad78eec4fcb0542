"""``/healthz`` (alive, no database) and ``/readyz`` (database, migrations, nodes, scheduler)."""

from __future__ import annotations

import httpx
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from api.app import create_app
from api.jobs import Scheduler
from config.database import make_engine
from devtools.anvil import AnvilNode
from devtools.config import dev_config, dev_configs
from tests.api.conftest import Api, Server
from tests.withdrawals.conftest import TEST_HOT_KEY_ENV


def test_healthz_answers_without_a_database_and_readyz_names_it() -> None:
    dead = make_engine("postgresql+psycopg://custody@127.0.0.1:1/custody", pool_size=1)
    chains, wcfg = dev_configs(dev_config(hot_key_env=TEST_HOT_KEY_ENV))
    server = Server(create_app(dead, chains, wcfg))
    try:
        assert httpx.get(f"{server.url}/healthz").json() == {"status": "ok"}
        ready = httpx.get(f"{server.url}/readyz", timeout=30)
    finally:
        server.stop()
        dead.dispose()
    assert ready.status_code == 503
    assert ready.headers["content-type"] == "application/problem+json"
    body = ready.json()
    assert body["code"] == "not_ready" and body["status"] == 503
    assert body["failing"] == ["database", "chain:devnet"]
    assert "database: the database does not answer" in body["detail"]


def test_readyz_is_ready_with_each_parts_status_and_fails_when_the_scheduler_stops(
        engine: Engine) -> None:
    with AnvilNode.start() as node:
        chains, wcfg = dev_configs(dev_config(rpc_url=node.url, hot_key_env=TEST_HOT_KEY_ENV))
        scheduler = Scheduler(engine, [])
        server = Server(create_app(engine, chains, wcfg, lifespans=[scheduler.lifespan()]))
        try:
            ready = httpx.get(f"{server.url}/readyz", timeout=30)
            assert ready.status_code == 200, ready.text
            assert ready.json() == {"status": "ready", "checks": {
                "database": {"status": "ok"}, "migrations": {"status": "ok"},
                "chain:devnet": {"status": "ok", "chain_id": 31337,
                                 "head_block": node.head()},
                "scheduler": {"status": "ok", "jobs": 0}}}
            scheduler.stop()
            stopped = httpx.get(f"{server.url}/readyz", timeout=30)
        finally:
            server.stop()
    assert stopped.status_code == 503 and stopped.json()["failing"] == ["scheduler"]


def test_readyz_fails_on_another_chain_id_and_an_old_schema(engine: Engine,
                                                             owner: Engine) -> None:
    with AnvilNode.start() as node:
        chains, wcfg = dev_configs(dev_config(rpc_url=node.url, hot_key_env=TEST_HOT_KEY_ENV,
                                              chain_options={"chain_id": 1}))
        with owner.begin() as conn:
            conn.execute(sa.text("UPDATE alembic_version SET version_num = '0001'"))
        server = Server(create_app(engine, chains, wcfg))
        try:
            ready = httpx.get(f"{server.url}/readyz", timeout=30)
        finally:
            server.stop()
    assert ready.status_code == 503
    body = ready.json()
    assert body["failing"] == ["migrations", "chain:devnet"]
    assert body["checks"]["chain:devnet"]["detail"] == "chain id 31337, configured 1"
    assert "run `custody db upgrade` first" in body["checks"]["migrations"]["detail"]
    assert body["checks"]["database"] == {"status": "ok"}


def test_the_api_alone_runs_no_scheduler_and_is_not_failed_for_it(api: Api) -> None:
    ready = api.call("GET", "/readyz")
    # The test chain has no node: not ready, but the scheduler is not why.
    assert ready.status_code == 503
    assert ready.json()["checks"]["scheduler"] == {"status": "not run here"}
    assert ready.json()["failing"] == ["chain:devnet"]
    assert ready.headers["x-request-id"] == ready.json()["request_id"]
