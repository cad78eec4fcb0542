"""Database fixtures: a real PostgreSQL per test worker, a fresh migrated database per test.

One embedded server (pgserver) starts per pytest worker; migrations run once into a template
database, and each test gets ``CREATE DATABASE ... TEMPLATE`` (a real, isolated, migrated
database) that is dropped afterwards. Set ``CUSTODY_TEST_DATABASE_URL`` to use another server
(its login must be allowed to create databases and the custody_app role).

The stored secrets are sealed under ``TEST_SECRETS_KEY`` (``CUSTODY_SECRETS_KEY``, set for
this process and every process a test starts, unless the environment sets one): a test's
``CUSTODY_DATABASE_URL`` is a configured database, which needs the key.

``engine`` talks to PostgreSQL directly, or through a real PgBouncer in transaction pooling mode
when a test is parametrized with ``route="pgbouncer"`` (``BOTH_ROUTES``): one PgBouncer per
worker, in front of its server, logging in as custody_app (which it makes a LOGIN role: behind
a transaction pooler the engine refuses a superuser login).
"""

from __future__ import annotations

import itertools
import os
import tempfile
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest
import sqlalchemy as sa
from playwright.sync_api import Browser
from sqlalchemy.engine import Engine

import migrations
from config.database import embedded_url, make_engine, owner_engine, with_database
from devtools.e2e import Devchain, start_devchain
from devtools.pgbouncer import PgBouncer, start_pgbouncer
from devtools.replica import Replica, start_replica
from tests.support.browser import chromium
from tests.support.pg_proxy import PgCutProxy

TEMPLATE = "custody_template"
_counter = itertools.count()
#: The secrets key of the test processes (base64 of 32 bytes; a test value, never a real one).
TEST_SECRETS_KEY = "dGVzdC1zZWNyZXRzLWtleS0zMi1ieXRlcy1sb25nISE="
os.environ.setdefault("CUSTODY_SECRETS_KEY", TEST_SECRETS_KEY)
#: Run a test twice, its ``engine`` direct and through PgBouncer in transaction mode.
BOTH_ROUTES = pytest.mark.parametrize("route", ["direct", "pgbouncer"], indirect=True)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked ``slow`` first, each group in collection order. ``pytest -n 2`` hands tests
    out in collection order, so a crash test of several minutes collected near the end ran
    alone while the other worker sat idle; started first, the short tests fill in around it."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Print the figures passed tests recorded with ``record_property("figures", TEXT)`` (the
    cluster's failover rounds) after the run: a test's own output is captured, and on workers
    (``-n 2``) lost; its properties travel back with its report."""
    lines = [f"{report.nodeid}:\n{value}" for report in terminalreporter.stats.get("passed", [])
             for name, value in getattr(report, "user_properties", []) if name == "figures"]
    if lines:
        terminalreporter.write_sep("-", "figures")
        for line in lines:
            terminalreporter.write_line(line)


@pytest.fixture(scope="session")
def server_url() -> str:
    """URL of the PostgreSQL server of this worker (maintenance database)."""
    configured = os.environ.get("CUSTODY_TEST_DATABASE_URL")
    if configured:
        return configured
    # A directory of its own per test process (not pytest's tmp tree, which concurrent pytest
    # sessions prune), removed with the server when the process exits.
    data_dir = Path(tempfile.mkdtemp(prefix="custody-pg-"))
    url = embedded_url(data_dir, cleanup_mode="delete")
    # A throwaway server: no fsync. Every commit still writes its WAL before it is
    # acknowledged (synchronous_commit stays on), so a killed process, PostgreSQL's included,
    # loses nothing that was committed; only an operating-system crash could, and the data
    # directory is deleted at exit anyway. Each test's CREATE DATABASE and commits then cost
    # a third of what they did on this machine's shared disk.
    _autocommit(url, "ALTER SYSTEM SET fsync = off", "SELECT pg_reload_conf()")
    return url


def _autocommit(url: str, *statements: str) -> None:
    eng = owner_engine(url)
    with eng.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        for statement in statements:
            conn.exec_driver_sql(statement)
    eng.dispose()


@pytest.fixture(scope="session")
def template_url(server_url: str) -> str:
    """A migrated template database, created once per worker."""
    name = f"{TEMPLATE}_{os.getpid()}"
    _autocommit(
        server_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)', f'CREATE DATABASE "{name}"'
    )
    url = with_database(server_url, name)
    migrations.upgrade(url)
    return url


@pytest.fixture
def database_url(server_url: str, template_url: str) -> Iterator[str]:
    """URL of a fresh migrated database for this test (owner login).

    Made one test ahead, and dropped after the test, by a thread of this process: the ~0.1 s
    of CREATE and DROP DATABASE per test overlap the tests instead of adding to them. Each
    test still gets a database of its own, copied from the template, that nothing used before.
    """
    template = sa.make_url(template_url).database
    assert template is not None
    ahead = _ahead.pop((server_url, template), None)
    name = ahead.result() if ahead is not None else _create_database(server_url, template)
    _ahead[(server_url, template)] = _background.submit(_create_database, server_url, template)
    yield with_database(server_url, name)
    _background.submit(_autocommit, server_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


#: The database made ahead for the next test, per (server, template), and the one thread that
#: makes and drops them (in order: the next test's database is made before the last one drops).
_ahead: dict[tuple[str, str], Future[str]] = {}
_background = ThreadPoolExecutor(1, thread_name_prefix="test-databases")


def _create_database(server_url: str, template: str) -> str:
    name = f"t_{os.getpid()}_{next(_counter)}"
    _autocommit(server_url, f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
    return name


@pytest.fixture(scope="session")
def pgbouncer(server_url: str) -> Iterator[PgBouncer]:
    """PgBouncer 1.18 in transaction pooling mode in front of this worker's server."""
    _autocommit(server_url, "ALTER ROLE custody_app LOGIN")
    bouncer = start_pgbouncer(server_url, ("custody_app",))
    yield bouncer
    bouncer.stop()


@pytest.fixture(scope="session")
def replica(server_url: str) -> Iterator[Replica]:
    """A streaming replica (hot standby) of this worker's server (``devtools.replica``); the
    databases the tests create reach it through the WAL like everything else."""
    standby = start_replica(server_url)
    yield standby
    standby.stop()


@pytest.fixture
def cut_proxy(server_url: str) -> Iterator[PgCutProxy]:
    """A PostgreSQL proxy in front of this worker's server that can cut a connection at a
    chosen message (``tests.support.pg_proxy``)."""
    server = sa.make_url(server_url)
    host = server.query.get("host") or server.host or "localhost"
    assert isinstance(host, str)
    proxy = PgCutProxy(host, server.port or 5432)
    yield proxy
    proxy.close()


def through(proxy: PgCutProxy, database_url: str) -> str:
    """``database_url`` (same login, same database) through ``proxy``."""
    url = sa.make_url(database_url)
    return url.set(host="127.0.0.1", port=proxy.port,
                   query={"sslmode": "disable"}).render_as_string(hide_password=False)


@pytest.fixture
def cut_engine(cut_proxy: PgCutProxy, database_url: str) -> Iterator[Engine]:
    """The application engine on this test's database through ``cut_proxy``, with a connection
    in its pool (so that its connect-time COMMIT is not the one a test cuts)."""
    eng = make_engine(through(cut_proxy, database_url), pool_size=2)
    with eng.connect():
        pass
    yield eng
    eng.dispose()


@pytest.fixture
def route(request: pytest.FixtureRequest) -> str:
    """How ``engine`` reaches PostgreSQL: ``direct`` unless parametrized (``BOTH_ROUTES``)."""
    return str(getattr(request, "param", "direct"))


@pytest.fixture
def engine(database_url: str, route: str, request: pytest.FixtureRequest) -> Iterator[Engine]:
    """The application engine (runs as custody_app) on this test's database."""
    if route == "pgbouncer":
        bouncer: PgBouncer = request.getfixturevalue("pgbouncer")
        eng = make_engine(bouncer.url(database_url, "custody_app"), pool_size=25,
                          pooler="transaction")
    else:
        eng = make_engine(database_url, pool_size=25)
    yield eng
    eng.dispose()


@pytest.fixture
def owner(database_url: str) -> Iterator[Engine]:
    """An engine that keeps the owner login (superuser on the embedded server)."""
    eng = owner_engine(database_url)
    yield eng
    eng.dispose()


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    """Debian's Chromium under Playwright, one per test process (Playwright's sync API runs
    one instance per thread: every browser test shares this one)."""
    with chromium() as launched:
        yield launched


@pytest.fixture
def devchain() -> Iterator[Devchain]:
    """anvil with the test token and a fresh hot wallet (``devtools.e2e``), stopped after the
    test: the chain of the end-to-end tests."""
    chain = start_devchain()
    yield chain
    chain.stop()
