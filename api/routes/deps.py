"""What every route shares: the application context and the unit-of-work dependency.

The context is built once by ``api.app.create_app`` and stored on ``app.state.ctx`` (not in the
lifespan), so an app driven without lifespan events (``httpx.ASGITransport``) works the same.
It also wires the two lookups the withdrawal service asks the API layer for: our own
addresses (deposit addresses, hot and cold addresses) and incoming transfers by deposit key.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cached_property
from typing import TYPE_CHECKING, Annotated, Any

from fastapi import Depends, Request
from sqlalchemy.engine import Engine

from api.own_addresses import DepositTransfers, OurAddresses
from api.problems import ChainUnknown, WithdrawalsNotConfigured
from api.ratelimit import RateLimits
from config.chains import ChainConfig, ChainsConfig
from config.uow import UnitOfWork
from config.withdrawals import WithdrawalsConfig
from deposits import service as deposits
from withdrawals.service import IncomingTransfer

if TYPE_CHECKING:
    from api.jobs import ChainGate
    from chains.addresses import AddressSource
    from config.sweeps import SweepsConfig
    from sweeps.sending import SweepContext

#: A completed idempotency record is kept at least this long (the database refuses less).
IDEMPOTENCY_RETENTION_S = 86_400


def utc_now() -> datetime:
    """The current time (UTC)."""
    return datetime.now(UTC)


@dataclass
class ApiContext:
    """Everything a request needs besides its own input."""

    engine: Engine
    chains: ChainsConfig
    #: The ``[withdrawals]`` table; None when the file has none (requests are then refused
    #: with ``withdrawals_not_configured``: use :meth:`withdrawals_config`).
    withdrawals: WithdrawalsConfig | None
    rate_limits: RateLimits = field(default_factory=RateLimits)
    clock: Callable[[], datetime] = utc_now
    #: An in_progress idempotency record older than this may be taken over by a retry (the
    #: first request's process died); the services below are idempotent themselves.
    idempotency_stale_s: int = 300
    #: Threads of ``readers`` (the hot reads' threads, apart from the threadpool of the routes).
    #: Few on purpose: a read holds its thread for about half a millisecond, so 3 per process
    #: keep up with over 1,000 requests/s, while more threads only contend for the GIL. Paced at
    #: 1,000 balances requests/s (2 workers, 2 cores), p99 was 100-190 ms with 16 threads and
    #: mostly 7-32 ms with 2-3 (bench/RESULTS.md, "HTTP API").
    reader_threads: int = 3
    _sources: dict[str, AddressSource] = field(default_factory=dict)
    #: The ``[sweeps]`` section; None when the file has none (the sweep, cold-transfer and
    #: refill writes are then refused with ``sweeps_not_configured``: see
    #: :meth:`sweeps_config`).
    sweeps: SweepsConfig | None = None
    _sweepers: dict[str, tuple[ChainGate, SweepContext]] = field(default_factory=dict)
    #: The staff console's signing secret, once read (``api.web.session``).
    console_secret: str | None = field(default=None, repr=False)
    #: The read replica's engine (``CUSTODY_DATABASE_REPLICA_URL``), None without one: see
    #: :attr:`reader`.
    read_engine: Engine | None = None

    @property
    def reader(self) -> Engine:
        """The engine of reads that may be a little behind: statements, deposit and withdrawal
        histories, proof-of-reserves reports (the replica's when there is one). Nothing that
        approves spending reads through it: balances, limits and reserves read ``engine``,
        the primary."""
        return self.read_engine or self.engine

    @cached_property
    def readers(self) -> ThreadPoolExecutor:
        """The threads of the hot reads (``api.auth.read_as``, ``BalancesFastPath``), used with
        ``loop.run_in_executor``: a hop costs about 17 µs of CPU there against about 55 through
        ``run_in_threadpool`` (anyio's capacity limiter and cancel scopes; bench/RESULTS.md,
        "HTTP API"). The work run there is short, never cancelled and needs no context
        variables. Shut down by ``close``."""
        return ThreadPoolExecutor(max_workers=self.reader_threads, thread_name_prefix="api-read")

    def close(self) -> None:
        """Stop the reader threads and close the sweepers' node clients, if any were started
        (at the app's shutdown)."""
        readers = self.__dict__.pop("readers", None)
        if readers is not None:
            readers.shutdown(wait=False)
        for _, sweeper in self._sweepers.values():
            sweeper.rpc.close()
        self._sweepers.clear()

    @cached_property
    def autocommit(self) -> Engine:
        """``engine`` in autocommit mode (same pool): each statement is its own transaction.
        For the authentication statement and the reads of ``api.auth.read_as`` only."""
        return self.engine.execution_options(isolation_level="AUTOCOMMIT")

    def withdrawals_config(self) -> WithdrawalsConfig:
        """The withdrawal configuration, or WithdrawalsNotConfigured (409)."""
        if self.withdrawals is None:
            raise WithdrawalsNotConfigured(
                "withdrawals are not configured here: the configuration has no [withdrawals] "
                "table (see config/withdrawals.example.toml)")
        return self.withdrawals

    def sweeps_config(self) -> SweepsConfig:
        """The sweep configuration, or SweepsNotConfigured (409)."""
        from sweeps.errors import SweepsNotConfigured

        if self.sweeps is None:
            raise SweepsNotConfigured(
                "sweeps are not configured here: the configuration has no [sweeps] section "
                "(see config/sweeps.py); nothing is swept, sent to cold or refilled")
        return self.sweeps

    def sweeper(self, name: str, now: datetime) -> SweepContext:
        """The sweeper context of chain ``name`` (built once), after its configuration was
        checked against its node as the scheduler's gate checks it (``api.jobs.ChainGate``:
        once per process; a mismatch refuses the chain, an unreachable node raises its error
        and is asked again next time). SweepsNotConfigured when ``[sweeps]`` does not list
        the chain."""
        from api.jobs import ChainGate
        from sweeps.errors import SweepsNotConfigured
        from sweeps.runner import build_context

        cfg = self.sweeps_config()
        chain = self.chain(name)
        if chain.name not in cfg.chains():
            raise SweepsNotConfigured(f"[sweeps] lists no asset of chain {chain.name}")
        if name not in self._sweepers:
            built = build_context(self.chains, self.withdrawals_config(), cfg, chain.name)
            self._sweepers[name] = (ChainGate(self.engine, chain), built)
        gate, ctx = self._sweepers[name]
        gate.admit(now)
        return ctx

    def chain(self, name: str) -> ChainConfig:
        """A configured chain, or ChainUnknown (422)."""
        found = self.chains.chains.get(name)
        if found is None:
            raise ChainUnknown(f"no chain {name!r} is configured")
        return found

    def address_source(self, family: str) -> AddressSource:
        """The deposit address source of ``family`` (built once)."""
        if family not in self._sources:
            from deposits.errors import AddressSourceUnavailable

            cfg = self.chains.address_sources.get(family)
            if cfg is None:
                raise AddressSourceUnavailable(f"no address source for family {family!r}")
            self._sources[family] = deposits.address_source(cfg)
        return self._sources[family]

    # --- the lookups the withdrawal service asks for (OwnAddresses, IncomingTransfers) ---

    def is_own(self, chain: str, address: str) -> bool:
        """Whether ``address`` is one of our addresses on ``chain``: a hot or cold address,
        or a deposit address."""
        return OurAddresses(self.engine, self.chains).is_own(chain, address)

    def find(self, chain: str, tx_hash: str, position: str) -> IncomingTransfer | None:
        """The incoming transfer with this deposit key, as the deposit histories know it
        (transfers to hot and cold addresses included: ``api.own_addresses``)."""
        return DepositTransfers(self.engine).find(chain, tx_hash, position)


def context(request: Request) -> ApiContext:
    """The application context of the app serving ``request``."""
    ctx = request.app.state.ctx
    assert isinstance(ctx, ApiContext)
    return ctx


def get_uow(request: Request) -> Iterator[UnitOfWork]:
    """A unit of work for the request (reads; it rolls back unless a route commits it)."""
    with UnitOfWork(context(request).engine) as uow:
        yield uow


#: A unit of work for the request (reads; a route commits it when it writes).
Uow = Annotated[UnitOfWork, Depends(get_uow)]


def get_read_uow(request: Request) -> Iterator[UnitOfWork]:
    """A read-only unit of work on :attr:`ApiContext.reader` (the replica, if any)."""
    with UnitOfWork(context(request).reader) as uow:
        yield uow


#: A unit of work for reads that may be a little behind (``ApiContext.reader``); never for a
#: read that approves spending.
ReadUow = Annotated[UnitOfWork, Depends(get_read_uow)]


def problems(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` entries for problem documents of these statuses."""
    from api.schemas import Problem

    content = {"application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}}
    return {s: {"model": Problem, "content": content, "description": _REASONS.get(s, "Problem")}
            for s in sorted(set(statuses))}


_REASONS = {400: "Idempotency-Key missing", 401: "No valid API key", 403: "Scope not allowed",
            404: "Not found (or another client's)", 409: "Conflict with the current state",
            422: "Invalid request or refused by policy", 429: "Rate limited (see Retry-After)",
            503: "Temporarily unavailable"}
#: Problems any authenticated endpoint may answer.
AUTHED = (401, 403, 404, 422, 429, 503)
#: Problems of money-moving endpoints (Idempotency-Key).
MONEY = (*AUTHED, 400, 409)
