"""Cluster fixtures: etcd and two Patroni/PostgreSQL 15 nodes (``devtools.cluster``), a migrated
database on them, and the engine built from the cluster's multi-host URL.

The cluster lives in a directory of its own under the system's temporary directory, removed
afterwards, not in pytest's tmp tree: the servers run as ``postgres``, which must traverse
every parent, and a concurrent pytest session resets the tree's root to mode 0700.

The one engine-side piece these tests need is :func:`cluster_engine`: the application's engine
for ``CUSTODY_DATABASE_URL`` = the libpq multi-host URL (``postgresql://USER:PW@H1:P1,H2:P2/DB
?target_session_attrs=read-write``), as ``config.database`` builds it for every process.
"""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import Engine

import migrations
from config.database import database_url, make_engine, owner_engine
from config.settings import Settings
from devtools.cluster import Cluster

DATABASE = "custody"


def cluster_engine(url: str, **kwargs: Any) -> Engine:
    """The engine a process of the application builds when ``CUSTODY_DATABASE_URL`` is
    ``url`` (the application role; ``kwargs`` as for ``make_engine``)."""
    return make_engine(database_url(Settings(database_url=url)), **kwargs)


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    """A running cluster: a primary and its synchronous standby."""
    base = Path(tempfile.mkdtemp(prefix="custody-cluster-"))
    started = Cluster.start(base / "cluster")
    try:
        yield started
    finally:
        started.stop()
        # Removing four data directories and the backup repository took 11 s here: let it
        # run on after the test, in a process of its own.
        subprocess.run(["sh", "-c", 'rm -rf "$0" >/dev/null 2>&1 &', str(base)], check=True,
                       timeout=30)


@pytest.fixture
def cluster_url(cluster: Cluster) -> str:
    """The multi-host URL of a database migrated with the engine's migrations on the primary."""
    primary = cluster.wait_primary()
    admin = owner_engine(cluster.node_url(primary))
    with admin.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.exec_driver_sql(f'CREATE DATABASE "{DATABASE}"')
    admin.dispose()
    migrations.upgrade(cluster.node_url(primary, DATABASE))
    return cluster.url(DATABASE)
