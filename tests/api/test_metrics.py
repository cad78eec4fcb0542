"""``/metrics``: Prometheus' text format (read back with prometheus_client's parser), its naming
conventions, the HTTP metrics by route template, and the state gauges (api.metrics)."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta

import httpx
import sqlalchemy as sa
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample
from sqlalchemy.engine import Engine

from api.app import create_app
from api.auth import create_key
from api.metrics import PROBE_TIMEOUT_MS, NodeProbes
from api.routes.deps import utc_now
from config.chains import ChainsConfig
from config.uow import UnitOfWork
from config.withdrawals import WithdrawalsConfig
from deposits.repository.cursors import save_cursor
from devtools.anvil import AnvilNode
from devtools.config import dev_config, dev_configs
from tests.api.conftest import Api, Server
from tests.withdrawals.conftest import TEST_HOT_KEY_ENV, open_book

Families = dict[str, list[Sample]]


def scrape(text: str) -> Families:
    """Every family of the exposition and its samples (parse errors raise)."""
    return {f.name: list(f.samples) for f in text_string_to_metric_families(text)}


def value(families: Families, name: str, **labels: str) -> float | None:
    """The sample ``name`` with exactly ``labels`` (None: absent)."""
    for samples in families.values():
        for s in samples:
            if s.name == name and s.labels == labels:
                return float(s.value)
    return None


def test_the_exposition_parses_follows_the_conventions_and_has_no_empty_family(
        api: Api) -> None:
    api.withdraw(api.funded_user())
    api.call("GET", "/healthz")
    r = api.call("GET", "/metrics", "sam")
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/plain; version=0.0.4")
    families = list(text_string_to_metric_families(r.text))
    names = {f.name for f in families}
    assert {"custody_build_info", "custody_http_requests", "custody_http_request_duration_seconds",
            "custody_withdrawal_reserves_overdue", "custody_deposits_waiting_finality",
            "custody_outbox_undelivered", "custody_chain_node_up",
            "custody_reconciliation_cases_open"} <= names
    for family in families:
        assert family.samples, f"{family.name}: a HELP line without a sample"
        assert family.documentation, family.name
        assert family.name.startswith("custody_"), family.name
        if family.type == "counter":
            assert {s.name for s in family.samples} == {family.name + "_total"}
        if "age" in family.name.split("_") or "duration" in family.name:
            assert family.name.endswith("_seconds"), family.name
    info = [s for f in families if f.name == "custody_build_info" for s in f.samples]
    assert len(info) == 1 and info[0].value == 1 and info[0].labels["version"]
    # Each line of the text is in a HELP/TYPE block: no family without samples slipped out.
    helps = [line.split()[2] for line in r.text.splitlines() if line.startswith("# HELP")]
    assert len(helps) == len(families)


def test_http_requests_are_counted_by_route_template_method_and_status(api: Api) -> None:
    user = api.new_user()
    # The counters are the process's (other tests' requests included): compare two scrapes.
    before = scrape(api.call("GET", "/metrics", "sam").text)
    for _ in range(3):  # answered by the fast path, before the router
        assert api.call("GET", f"/v1/users/{user}/balances", "acme").status_code == 200
    assert api.call("GET", f"/v1/users/{user}/deposits", "acme").status_code == 200
    assert api.call("GET", "/v1/users/nobody-0001/deposits", "acme").status_code == 404
    assert api.call("GET", f"/no/such/{user}").status_code == 404
    families = scrape(api.call("GET", "/metrics", "sam").text)

    def grew(name: str, **labels: str) -> float:
        return (value(families, name, **labels) or 0) - (value(before, name, **labels) or 0)

    balances = {"route": "/v1/users/{user_id}/balances", "method": "GET", "status": "200"}
    assert grew("custody_http_requests_total", **balances) == 3
    assert grew("custody_http_request_duration_seconds_count", **balances) == 3
    assert grew("custody_http_request_duration_seconds_bucket", le="+Inf", **balances) == 3
    deposits = {"route": "/v1/users/{user_id}/deposits", "method": "GET"}
    assert grew("custody_http_requests_total", status="200", **deposits) == 1
    assert grew("custody_http_requests_total", status="404", **deposits) == 1
    assert grew("custody_http_requests_total", route="<unmatched>", method="GET",
                status="404") == 1
    # No raw path in any label: the label values stay bounded whatever the clients ask.
    labels = {v for samples in families.values() for s in samples for v in s.labels.values()}
    assert not any(user in v or "nobody" in v for v in labels)


@contextmanager
def serving(engine: Engine, chains: ChainsConfig, wcfg: WithdrawalsConfig | None, *,
            clock: Callable[[], datetime] | None = None,
            probes: NodeProbes | None = None) -> Iterator[tuple[httpx.Client, dict[str, str]]]:
    """The app on these configurations, a support key's headers."""
    open_book(engine)
    app = create_app(engine, chains, wcfg, clock=clock or utc_now)
    if probes is not None:
        app.state.node_probes = probes
    server = Server(app)
    try:
        with httpx.Client(base_url=server.url, timeout=30) as http:
            key = create_key(engine, "sam", "support").key
            yield http, {"Authorization": f"Bearer {key}"}
    finally:
        server.stop()


def test_reserves_open_past_the_sla_per_chain_and_asset(api: Api, engine: Engine) -> None:
    api.withdraw(api.funded_user())
    chains, wcfg = dev_configs(dev_config(hot_key_env=TEST_HOT_KEY_ENV, xpub=True))
    text = api.call("GET", "/metrics", "sam").text
    assert value(scrape(text), "custody_withdrawal_reserves_overdue", chain="devnet",
                 asset="USDC") == 0  # reserved just now: within the SLA
    later = datetime.now(UTC) + timedelta(seconds=wcfg.open_item_sla_s + 60)
    with serving(engine, chains, wcfg, clock=lambda: later) as (http, auth):
        families = scrape(http.get("/metrics", headers=auth).text)
    assert value(families, "custody_withdrawal_reserves_overdue", chain="devnet",
                 asset="USDC") == 1
    assert value(families, "custody_withdrawal_reserves_overdue", chain="devnet",
                 asset="ETH") == 0


def test_node_up_and_the_watchers_lag_in_blocks_and_seconds(engine: Engine) -> None:
    with AnvilNode.start() as node:
        node.rpc.request("anvil_mine", ["0x4", "0xc"])  # 4 blocks 12 s apart
        tip = node.rpc.get_block(2)
        head = node.rpc.get_block("latest")
        assert tip is not None and head is not None
        with UnitOfWork(engine) as uow:
            save_cursor(uow.conn, "devnet", [(1, "0x" + "00" * 32), (2, tip.hash)])
            uow.commit()
        chains, wcfg = dev_configs(dev_config(rpc_url=node.url, hot_key_env=TEST_HOT_KEY_ENV))
        probes = NodeProbes(chains, cache_s=0)
        with serving(engine, chains, wcfg, probes=probes) as (http, auth):
            families = scrape(http.get("/metrics", headers=auth).text)
            assert value(families, "custody_chain_node_up", chain="devnet") == 1
            assert value(families, "custody_watcher_lag_blocks", chain="devnet") == (
                head.number - 2)
            assert value(families, "custody_watcher_lag_seconds", chain="devnet") == (
                head.timestamp - tip.timestamp) > 0
            node.stop()
            families = scrape(http.get("/metrics", headers=auth).text)
    assert value(families, "custody_chain_node_up", chain="devnet") == 0
    # Nothing is known about the lag while the node is away: no sample, not a stale one.
    assert "custody_watcher_lag_blocks" not in families


def test_a_node_that_never_answers_bounds_the_scrape_and_is_asked_once_per_window(
        engine: Engine) -> None:
    with socket.socket() as silent:  # accepts connections (the kernel does), answers nothing
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        chains, wcfg = dev_configs(dev_config(rpc_url=url, hot_key_env=TEST_HOT_KEY_ENV))
        with serving(engine, chains, wcfg, probes=NodeProbes(chains, cache_s=60)) as (
                http, auth):
            started = time.monotonic()
            families = scrape(http.get("/metrics", headers=auth).text)
            first_s = time.monotonic() - started
            started = time.monotonic()
            ready = http.get("/readyz")
            second_s = time.monotonic() - started
    assert value(families, "custody_chain_node_up", chain="devnet") == 0
    # Bounded by the probe's own timeout, not by the chain's (one attempt with it alone would
    # take rpc_timeout_ms, and it is retried): the rest of the scrape's time is the machine's
    # (5.6 s seen on a loaded machine, with 3 s of slack allowed then).
    node_timeout_s = chains.chain("devnet").rpc_timeout_ms / 1000
    assert node_timeout_s > PROBE_TIMEOUT_MS / 1000
    assert PROBE_TIMEOUT_MS / 1000 <= first_s < node_timeout_s
    # /readyz shares the answer kept from the scrape: no second wait on the dead node.
    assert second_s < 1
    assert ready.status_code == 503 and "chain:devnet" in ready.json()["failing"]


def test_open_cases_by_type(api: Api, owner: Engine) -> None:
    from api.jobs import Job, reconcile, run_locked
    from reconcile import service as cases

    api.funded_user()
    families = scrape(api.call("GET", "/metrics", "sam").text)
    assert value(families, "custody_reconciliation_cases_open", type="balance_drift") == 0
    with owner.begin() as conn:
        conn.execute(sa.text("UPDATE account_balances SET balance = balance - 1 "
                             "WHERE balance < 0"))
    assert run_locked(api.engine, Job("ledger.reconcile", 60,
                                      lambda now: reconcile(api.engine, now)))
    with UnitOfWork(api.engine) as uow:
        expected = cases.count_open_by_type(uow)
    assert expected.get("balance_drift", 0) >= 1
    families = scrape(api.call("GET", "/metrics", "sam").text)
    found = {s.labels["type"]: s.value for s in families["custody_reconciliation_cases_open"]}
    assert {t: n for t, n in found.items() if n} == expected
    assert found["deep_reorg"] == 0
