"""Prometheus metrics: what is at risk right now, and what the HTTP API is doing.

Two kinds, one exposition (``render``, the official text format of ``prometheus_client``):

- **State**, computed on each scrape from the database and the nodes with bounded reads:
  unknown withdrawals (count, amount, oldest) and reserves open past the SLA per chain and
  asset, deposits waiting on finality per chain, the watcher's lag behind each node's head
  (blocks, seconds) and whether the node answers on the configured chain id, the outbox, the
  jobs' newest runs and successes, open reconciliation cases, the ledger drift found by the
  newest reconciliation, the newest proof-of-reserves report (ratio per asset, holdings below
  liabilities, age), and ``custody_build_info``.
- **HTTP**, counted by ``api.app.RequestIdMiddleware`` as requests end:
  ``custody_http_requests_total{route,method,status}`` and the
  ``custody_http_request_duration_seconds`` histogram, labelled by the route *template*
  (``/v1/users/{user_id}/balances``), never the raw path, so the label set stays bounded.
  They are per process; ``custody api --workers N`` runs N processes behind one port, where a
  scrape reaches one of them at random, so it uses ``prometheus_client``'s multiprocess mode:
  the CLI points ``PROMETHEUS_MULTIPROC_DIR`` at a fresh directory before the workers start,
  each worker writes its counts there, and whichever worker answers a scrape sums them all.

Units follow Prometheus' conventions: seconds for ages and durations, ``_total`` for counters,
timestamps as Unix seconds. Amount gauges are in the asset's whole unit (1.5 for 1.5 USDC), as
a float: for dashboards and alerts, never read back as money. A family without samples is not
exported at all (no HELP without a value).
"""

from __future__ import annotations

import os
import platform
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cache
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client import disable_created_metrics as _disable_created
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

from api import jobs, outbox
from config.chains import ChainConfig, ChainsConfig
from config.uow import UnitOfWork
from config.withdrawals import WithdrawalsConfig

#: Environment variable of prometheus_client's multiprocess mode (a directory).
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
#: Bounds of each metric's read, so that a scrape stays cheap whatever the backlog.
UNKNOWN_SCAN_MAX = 1_000
WAITING_SCAN_MAX = 10_000
#: A node is asked at most once per this many seconds (a scrape or readiness storm is
#: answered from the last answer), with at most this timeout and no retry.
PROBE_CACHE_S = 5.0
PROBE_TIMEOUT_MS = 2_000
#: Route label of a request no route matched (404s of arbitrary paths: one series, not one
#: per path asked).
UNMATCHED = "<unmatched>"
DURATION_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
                    10.0)

# ``*_created`` series double every counter's output for a timestamp nobody alerts on.
_disable_created()  # type: ignore[no-untyped-call]

HTTP_REGISTRY = CollectorRegistry(auto_describe=True)
HTTP_REQUESTS = Counter(
    "custody_http_requests", "HTTP requests answered, by route template, method and status.",
    ["route", "method", "status"], registry=HTTP_REGISTRY)
HTTP_DURATION = Histogram(
    "custody_http_request_duration_seconds",
    "Time from the request's arrival to the end of its response, by route template, method "
    "and status.", ["route", "method", "status"], buckets=DURATION_BUCKETS,
    registry=HTTP_REGISTRY)
_children: dict[tuple[str, str, str], tuple[Any, Any]] = {}
_children_lock = threading.Lock()


#: Method label values; any other method a client invents is counted as ``OTHER``.
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


def observe_request(route: str, method: str, status: int, seconds: float) -> None:
    """Count one answered request (``route``: the route template or ``UNMATCHED``)."""
    key = (route, method if method in METHODS else "OTHER", str(status))
    pair = _children.get(key)
    if pair is None:
        with _children_lock:
            pair = _children.setdefault(key, (HTTP_REQUESTS.labels(*key),
                                              HTTP_DURATION.labels(*key)))
    pair[0].inc()
    pair[1].observe(seconds)


def multiprocess() -> bool:
    """Whether the HTTP metrics are shared by several processes (``MULTIPROC_ENV`` set)."""
    return bool(os.environ.get(MULTIPROC_ENV))


# --- the nodes -------------------------------------------------------------------------------


@dataclass(frozen=True)
class NodeStatus:
    """What a chain's node said when it was last asked (``up``: it answered on the configured
    chain id)."""

    chain: str
    reachable: bool
    chain_id: int | None
    head_block: int | None
    head_timestamp: int | None
    error: str | None
    checked_at: float

    @property
    def up(self) -> bool:
        """Answering, on the configured chain."""
        return self.reachable and self.error is None


class NodeProbes:
    """The nodes' answers, each asked at most once per ``cache_s`` (``chains.rpc`` with at
    most ``timeout_ms`` and no retry, every chain at once): what ``/readyz`` and ``/metrics``
    read, so neither can hammer a node nor wait on a dead one past the timeout."""

    def __init__(self, chains: ChainsConfig, *, cache_s: float = PROBE_CACHE_S,
                 timeout_ms: int = PROBE_TIMEOUT_MS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.chains = chains
        self.cache_s = cache_s
        self.timeout_ms = timeout_ms
        self._clock = clock
        self._status: dict[str, NodeStatus] = {}
        self._block_times: dict[tuple[str, int], int] = {}
        self._locks = {name: threading.Lock() for name in chains.chains}

    def statuses(self) -> list[NodeStatus]:
        """Every configured chain's node status, fresh within ``cache_s``."""
        names = sorted(self.chains.chains)
        if not names:
            return []
        with ThreadPoolExecutor(max_workers=min(8, len(names))) as pool:
            return list(pool.map(self.status, names))

    def status(self, name: str) -> NodeStatus:
        """Chain ``name``'s node status, asked again when older than ``cache_s``."""
        with self._locks[name]:
            found = self._status.get(name)
            if found is None or self._clock() - found.checked_at >= self.cache_s:
                found = self._status[name] = self._ask(self.chains.chain(name))
            return found

    def _client(self, chain: ChainConfig) -> Any:
        from chains.rpc import RpcClient

        return RpcClient(chain.rpc_url, rpc_timeout_ms=min(self.timeout_ms, chain.rpc_timeout_ms),
                         retries_max=0)

    def _ask(self, chain: ChainConfig) -> NodeStatus:
        from chains.errors import ChainError
        from chains.rpc import RpcCall, from_quantity

        now = self._clock()
        try:
            with self._client(chain) as rpc:
                chain_id, head = rpc.batch_results([
                    RpcCall("eth_chainId"), RpcCall("eth_getBlockByNumber", ["latest", False])])
        except ChainError as exc:
            # Unreachable, refused or nonsense: the node is not up, and that is the signal.
            return NodeStatus(chain.name, False, None, None, None,
                              f"{exc.code}: {exc.message}"[:300], now)
        try:
            observed = from_quantity(chain_id)
            number, stamp = ((None, None) if head is None else
                             (from_quantity(head["number"]), from_quantity(head["timestamp"])))
        except (ChainError, KeyError, TypeError) as exc:
            return NodeStatus(chain.name, True, None, None, None,
                              f"answer not understood: {exc}"[:300], now)
        error = None if observed == chain.chain_id else (
            f"chain id {observed}, configured {chain.chain_id}")
        if number is None:
            error = error or "the node reports no latest block"
        return NodeStatus(chain.name, True, observed, number, stamp, error, now)

    def block_timestamp(self, name: str, number: int) -> int | None:
        """The timestamp of block ``number`` of chain ``name`` (remembered per height; None:
        the node did not say)."""
        from chains.errors import ChainError
        from chains.rpc import from_quantity, to_quantity

        found = self._block_times.get((name, number))
        if found is not None:
            return found
        try:
            with self._client(self.chains.chain(name)) as rpc:
                raw = rpc.request("eth_getBlockByNumber", [to_quantity(number), False])
        except ChainError:
            return None
        try:
            stamp = from_quantity(raw["timestamp"])
        except (ChainError, KeyError, TypeError):
            return None  # None (no such block) included
        if len(self._block_times) > 1_000:
            self._block_times.clear()
        self._block_times[(name, number)] = stamp
        return stamp


# --- the state families ----------------------------------------------------------------------


def _gauge(name: str, help_text: str, labels: Sequence[str],
           samples: Iterable[tuple[Sequence[str], float]]) -> GaugeMetricFamily:
    family = GaugeMetricFamily(name, help_text, labels=list(labels))
    for values, value in samples:
        family.add_metric(list(values), value)
    return family


def _scale(chains: ChainsConfig, asset: str) -> int:
    from api.routes.views import scale_of

    return scale_of(chains, asset)


def build_info() -> GaugeMetricFamily:
    """``custody_build_info{version,python} 1``."""
    return _gauge("custody_build_info", "The running engine: its version and Python's; always "
                  "1.", ["version", "python"], [((_version(), platform.python_version()), 1)])


@cache
def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("custody")
    except PackageNotFoundError:
        return "unknown"


def withdrawal_families(chains: ChainsConfig, wcfg: WithdrawalsConfig | None, uow: UnitOfWork,
                        now: datetime) -> list[Metric]:
    """Unknown withdrawals (count, amount, oldest) and reserves open past the SLA, per chain
    and asset."""
    from withdrawals import service as withdrawals

    count: dict[tuple[str, str], int] = defaultdict(int)
    total: dict[tuple[str, str], int] = defaultdict(int)
    oldest: dict[tuple[str, str], float] = defaultdict(float)
    for chain in sorted(chains.chains):
        for w in withdrawals.unknown_outcomes(uow, chain, limit=UNKNOWN_SCAN_MAX):
            key = (chain, w.asset_code)
            count[key] += 1
            total[key] += w.amount_minor
            since = w.unknown_since or w.state_changed_at
            oldest[key] = max(oldest[key], (now - since).total_seconds())
    keys = sorted(count)
    families: list[Metric] = [
        _gauge("custody_withdrawals_unknown", "Withdrawals whose outcome is unknown (unknown "
               "or awaiting a write-off), per chain and asset.", ["chain", "asset"],
               [(k, count[k]) for k in keys]),
        _gauge("custody_withdrawals_unknown_amount", "Their amount, in the asset's whole unit "
               "(1.5 = 1.5 USDC; the unit of this gauge; monitoring only, never money).",
               ["chain", "asset"], [(k, total[k] / 10 ** _scale(chains, k[1])) for k in keys]),
        _gauge("custody_withdrawals_unknown_oldest_age_seconds", "Age of the oldest unknown "
               "withdrawal (since its outcome became unknown).", ["chain", "asset"],
               [(k, oldest[k]) for k in keys]),
    ]
    if wcfg is not None:
        from withdrawals.repository.ledger_reads import open_reserves

        overdue: dict[tuple[str, str], int] = defaultdict(int)
        for row in open_reserves(uow.conn, now - timedelta(seconds=wcfg.open_item_sla_s)):
            overdue[(row.chain, row.asset_code)] += 1
        # Every chain and asset a payout can use has a sample, 0 included: an alert on "> 0"
        # needs the series to exist before the first overdue reserve.
        for chain in wcfg.hot_wallets:
            for asset in _assets_of(chains, chain):
                overdue.setdefault((chain, asset), 0)
        families.append(_gauge(
            "custody_withdrawal_reserves_overdue", "Withdrawal reserves still open past the SLA "
            f"(open_item_sla_s = {wcfg.open_item_sla_s}), per chain and asset.",
            ["chain", "asset"], sorted(overdue.items())))
    return families


def _assets_of(chains: ChainsConfig, name: str) -> list[str]:
    chain = chains.chain(name)
    return sorted({chain.native_asset, *(t.asset for t in chain.tokens)})


def deposit_families(chains: ChainsConfig, uow: UnitOfWork, now: datetime) -> list[Metric]:
    """Deposits waiting on finality per chain (count capped at ``WAITING_SCAN_MAX``, oldest)."""
    from deposits import service as deposits

    counts, ages = [], []
    for chain in sorted(chains.chains):
        rows = deposits.waiting_for_finality(uow, chain, limit=WAITING_SCAN_MAX)
        age = max(((now - d.first_seen_at).total_seconds() for d in rows), default=0.0)
        counts.append(((chain,), float(len(rows))))
        ages.append(((chain,), age))
    return [
        _gauge("custody_deposits_waiting_finality", "Deposits included or reorged out, not "
               f"final yet (counted up to {WAITING_SCAN_MAX}).", ["chain"], counts),
        _gauge("custody_deposits_waiting_finality_oldest_age_seconds", "Age of the oldest one "
               "(since first seen; 0: none).", ["chain"], ages),
    ]


def chain_families(chains: ChainsConfig, uow: UnitOfWork,
                   probes: NodeProbes | None) -> list[Metric]:
    """Each node's health and the watcher's lag behind its head (blocks, seconds)."""
    if probes is None:
        return []
    from deposits.repository.cursors import get_cursor

    up, lag_blocks, lag_seconds = [], [], []
    for status in probes.statuses():
        up.append(((status.chain,), 1.0 if status.up else 0.0))
        cursor = get_cursor(uow.conn, status.chain)
        if not status.up or status.head_block is None or not cursor:
            continue
        tip = cursor[-1][0]
        behind = max(0, status.head_block - tip)
        lag_blocks.append(((status.chain,), float(behind)))
        if behind == 0:
            lag_seconds.append(((status.chain,), 0.0))
            continue
        stamp = probes.block_timestamp(status.chain, tip)
        if stamp is not None and status.head_timestamp is not None:
            lag_seconds.append(((status.chain,), float(max(0, status.head_timestamp - stamp))))
    return [
        _gauge("custody_chain_node_up", "1 when the chain's node answered (within "
               f"{PROBE_TIMEOUT_MS} ms, asked at most every {PROBE_CACHE_S:g} s) on the "
               "configured chain id; 0 when it did not answer or follows another chain.",
               ["chain"], up),
        _gauge("custody_watcher_lag_blocks", "Blocks between the node's head and the newest "
               "block the deposit watcher has scanned (absent while the node is down or before "
               "the first scan).", ["chain"], lag_blocks),
        _gauge("custody_watcher_lag_seconds", "Seconds between the timestamps of the node's "
               "head and of the newest block the watcher has scanned.", ["chain"],
               lag_seconds),
    ]


def outbox_families(uow: UnitOfWork, now: datetime) -> list[Metric]:
    """Pending and failed webhook deliveries and the oldest undelivered event."""
    pending, oldest, failed = outbox.undelivered(uow, now)
    return [
        _gauge("custody_outbox_undelivered", "Webhook deliveries still pending.", [],
               [((), pending)]),
        _gauge("custody_outbox_oldest_undelivered_age_seconds", "Age of the oldest event with "
               "a pending delivery (0: none).", [], [((), oldest or 0.0)]),
        _gauge("custody_outbox_failed", "Webhook deliveries that gave up (retries exhausted): "
               "they need a replay.", [], [((), failed)]),
    ]


def job_families(uow: UnitOfWork) -> list[Metric]:
    """Each job's newest run (when, ok), newest success and the reconciliation's drift."""
    runs = jobs.last_runs(uow)
    successes = jobs.last_successes(uow)
    drift = jobs.drift_findings(runs)
    return [
        _gauge("custody_job_last_success_timestamp_seconds", "When the newest successful run "
               "of each job ended (Unix time; the run log keeps each job's newest success).",
               ["job"], [((job,), at.timestamp()) for job, at in sorted(successes.items())]),
        _gauge("custody_job_last_run_timestamp_seconds", "When the newest run of each job "
               "ended, whatever its outcome (Unix time).", ["job"],
               [((r.job,), r.finished_at.timestamp()) for r in runs]),
        _gauge("custody_job_last_run_ok", "1 when the newest run of the job ended well.",
               ["job"], [((r.job,), 1.0 if r.ok else 0.0) for r in runs]),
        _gauge("custody_ledger_drift_findings", "Findings of the newest reconciliation "
               "(stored vs replayed balances, trial balance, custody vs liabilities; absent "
               "until it has run).", [], [] if drift is None else [((), drift)]),
    ]


def case_families(uow: UnitOfWork) -> list[Metric]:
    """Open cases by type (``reconcile``: every case of the engine is a row of ``cases``), 0
    included for each type none is open of, so an alert on "> 0" has its series from the
    start."""
    from reconcile import service as cases
    from reconcile.model import CaseType

    open_by_type = {str(t): 0 for t in CaseType} | cases.count_open_by_type(uow)
    return [_gauge("custody_reconciliation_cases_open", "Cases not resolved, by type (ledger "
                   "findings, deposit histories, aging, deep reorgs, own-address transfers, held "
                   "withdrawals...).", ["type"], sorted(((t,), n)
                                                       for t, n in open_by_type.items()))]


def reserve_families(uow: UnitOfWork, now: datetime) -> list[Metric]:
    """The newest proof-of-reserves report: its reserve ratio per asset (absent for an asset
    nothing is owed in), the holdings below liabilities flag, and its age (absent before the
    first report)."""
    from reserves import service as reserves

    newest = reserves.history(uow, limit=1)
    if not newest:
        return []
    report = newest[0]
    age = (now - datetime.fromisoformat(report["taken_at"])).total_seconds()
    assets = report["assets"]
    return [
        _gauge("custody_reserves_ratio", "On-chain holdings over customer liabilities per "
               "asset in the newest proof-of-reserves report (below 1: customers not covered).",
               ["asset"], [((a["asset"],), float(a["ratio"])) for a in assets
                           if a["ratio"] is not None]),
        _gauge("custody_reserves_below_liabilities", "1 when the newest report's holdings of "
               "the asset are below its customer liabilities (exact, not through the ratio).",
               ["asset"], [((a["asset"],), 1.0 if int(a["on_chain"]) < int(a["liabilities"])
                            else 0.0) for a in assets]),
        _gauge("custody_reserves_report_age_seconds", "Seconds since the newest "
               "proof-of-reserves report was taken.", [], [((), max(age, 0.0))]),
    ]


# --- the exposition --------------------------------------------------------------------------


class _NonEmpty(Collector):
    """The families of ``sources`` that have samples (a HELP line always comes with a value)."""

    def __init__(self, sources: Iterable[Callable[[], Iterable[Metric]]]) -> None:
        self.sources = list(sources)

    def collect(self) -> Iterator[Metric]:
        for source in self.sources:
            for family in source():
                if family.samples:
                    yield family


def http_families() -> Iterable[Metric]:
    """The HTTP metrics of this process, or of every process sharing ``MULTIPROC_ENV``."""
    path = os.environ.get(MULTIPROC_ENV)
    if not path:
        return HTTP_REGISTRY.collect()
    registry = CollectorRegistry()
    MultiProcessCollector(registry, path=path)  # type: ignore[no-untyped-call]
    return registry.collect()


def state_families(chains: ChainsConfig, wcfg: WithdrawalsConfig | None, uow: UnitOfWork,
                   now: datetime, probes: NodeProbes | None) -> list[Metric]:
    """Every state family, read now."""
    return [build_info(), *case_families(uow), *withdrawal_families(chains, wcfg, uow, now),
            *deposit_families(chains, uow, now), *chain_families(chains, uow, probes),
            *outbox_families(uow, now), *job_families(uow), *reserve_families(uow, now)]


def render(chains: ChainsConfig, wcfg: WithdrawalsConfig | None, uow: UnitOfWork,
           now: datetime, probes: NodeProbes | None) -> bytes:
    """The whole exposition, in Prometheus' text format."""
    state = state_families(chains, wcfg, uow, now, probes)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_NonEmpty([lambda: state, http_families]))
    return generate_latest(registry)
