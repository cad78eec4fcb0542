"""Database fixtures: a real PostgreSQL per test worker, a fresh migrated database per test.

One embedded server (pgserver) starts per pytest worker; migrations run once into a template
database, and each test gets ``CREATE DATABASE ... TEMPLATE`` (a real, isolated, migrated
database) that is dropped afterwards. Set ``CUSTODY_TEST_DATABASE_URL`` to use another server
(its login must be allowed to create databases and the custody_app role).
"""

from __future__ import annotations

import itertools
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from playwright.sync_api import Browser
from sqlalchemy.engine import Engine

import migrations
from config.database import embedded_url, make_engine, owner_engine, with_database
from devtools.e2e import Devchain, start_devchain
from tests.support.browser import chromium

TEMPLATE = "custody_template"
_counter = itertools.count()


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
    return embedded_url(data_dir, cleanup_mode="delete")


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
    """URL of a fresh migrated database for this test (owner login)."""
    name = f"t_{os.getpid()}_{next(_counter)}"
    template = sa.make_url(template_url).database
    _autocommit(server_url, f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
    yield with_database(server_url, name)
    _autocommit(server_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def engine(database_url: str) -> Iterator[Engine]:
    """The application engine (runs as custody_app) on this test's database."""
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
