"""Point-in-time restore with pgBackRest: a full backup of the cluster's primary, then two sets
of posts with the database clock read between them, then a restore to that time into a new data
directory. The restored server holds exactly the first set (and everything before the backup)
and ``custody verify`` passes on it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import sqlalchemy as sa

from config.database import make_engine, owner_engine
from config.uow import UnitOfWork
from devtools.cluster import Cluster, free_port, server_url, start_server, stop_server, wait_for
from ledger import service as ledger
from ledger.model import Entry, credit, debit
from tests.withdrawals.conftest import T0, fund, open_book

from .conftest import DATABASE

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
POSTS = 10


def _post(engine: sa.Engine, keys: list[str]) -> None:
    with UnitOfWork(engine) as uow:
        custody = ledger.get_account(uow, "custody:devnet", "USDC")
        wallet = ledger.get_account(uow, "user:u1:wallet", "USDC")
    for n, key in enumerate(keys, start=1):
        ledger.post_entry(engine, Entry(key, "deposit", T0, "restore-test",
                                        (debit(custody, n), credit(wallet, n))))


def test_restore_to_a_point_in_time_holds_exactly_what_was_committed_before_it(
        cluster: Cluster, cluster_url: str,
        record_property: Callable[[str, object], None]) -> None:
    # The primary's own URL: failing over is not this test's subject.
    engine = make_engine(cluster.node_url(cluster.wait_primary(), DATABASE), pool_size=2)
    try:
        open_book(engine)
        fund(engine, ["u1"], 1_000)
        started = time.monotonic()
        backup = cluster.backup()
        backup_s = time.monotonic() - started
        before, after = [f"pitr:before:{i}" for i in range(POSTS)], [
            f"pitr:after:{i}" for i in range(POSTS)]
        _post(engine, before)
        # Read on the server's clock, after the last commit of the first set and before the
        # first of the second: recovery to this time replays the first set and stops there.
        with engine.connect() as conn:
            target = str(conn.execute(sa.text("SELECT clock_timestamp()::text")).scalar_one())
        _post(engine, after)
        cluster.archive_now()
    finally:
        engine.dispose()

    assert cluster.backups is not None
    restored = cluster.base / "restored" / "data"
    started = time.monotonic()
    cluster.backups.restore_to_time(backup, target, restored)
    port = free_port()
    # The restored configuration is the primary's, written by Patroni: no archiving into the
    # cluster's repository, and no synchronous standby to wait for.
    start_server(restored, port, cluster.base, options=[
        "-c archive_mode=off", "-c synchronous_standby_names=''"])
    url = server_url(port, DATABASE)
    try:
        direct = owner_engine(url)
        try:
            wait_for("the restored server to promote", lambda: _promoted(direct), 120)
            restore_s = time.monotonic() - started
            record_property("figures", f"pgBackRest full backup {backup_s:.1f} s; restore to "
                            f"the target time, recovery and promotion {restore_s:.1f} s")
            with direct.connect() as conn:
                keys = set(conn.execute(sa.text(
                    "SELECT idempotency_key FROM ledger_transactions "
                    "WHERE idempotency_key LIKE 'pitr:%'")).scalars())
                funded = conn.execute(sa.text(
                    "SELECT count(*) FROM ledger_transactions WHERE idempotency_key LIKE "
                    "'test:fund:%'")).scalar_one()
        finally:
            direct.dispose()
        assert keys == set(before)
        assert funded == 1
        verified = subprocess.run(
            [sys.executable, "-m", "api.cli", "verify", "--full"], cwd=ROOT,
            env={**os.environ, "CUSTODY_DATABASE_URL": url},
            capture_output=True, text=True, timeout=180, check=False)
        assert verified.returncode == 0, verified.stdout + verified.stderr
    finally:
        stop_server(restored)


def _promoted(engine: sa.Engine) -> bool:
    try:
        with engine.connect() as conn:
            return conn.execute(sa.text("SELECT NOT pg_is_in_recovery()")).scalar_one() is True
    except sa.exc.OperationalError:
        return False
