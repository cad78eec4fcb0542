"""A real streaming replica of a local PostgreSQL, for the tests that read from a replica.

``start_replica(server_url)`` takes a base backup of the server (``pg_basebackup -R -X stream``,
pgserver's own PostgreSQL 16 binaries) into a new data directory and starts it as a hot standby
on a Unix socket of its own. ``pause()`` stops its WAL replay (``pg_wal_replay_pause``): from
then on it lags by everything the primary commits, deterministically, until ``resume()``.
Under root, PostgreSQL runs as ``run_as`` (the embedded server's system user), as pgserver
itself does.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import sqlalchemy as sa

from config.database import owner_engine, with_database


def _bin(name: str) -> str:
    from pgserver._commands import POSTGRES_BIN_PATH

    return str(POSTGRES_BIN_PATH / name)


@dataclass
class Replica:
    """A running hot standby."""

    directory: Path
    url: str  # the maintenance database, as the primary's login
    _run: list[str]

    def database_url(self, primary_database_url: str) -> str:
        """The replica's URL of the primary's database ``primary_database_url``."""
        name = sa.make_url(primary_database_url).database
        assert name is not None
        return with_database(self.url, name)

    def _sql(self, statement: str) -> object:
        eng = owner_engine(self.url)
        try:
            with eng.connect() as conn:
                return conn.execute(sa.text(statement)).scalar()
        finally:
            eng.dispose()

    def pause(self) -> None:
        """Stop replaying WAL: the replica lags from now on."""
        self._sql("SELECT pg_wal_replay_pause()")

    def resume(self) -> None:
        """Replay WAL again."""
        self._sql("SELECT pg_wal_replay_resume()")

    def wait_for(self, primary_lsn: str, timeout_s: float = 30.0) -> None:
        """Wait until the replica has replayed the primary's WAL up to ``primary_lsn``."""
        deadline = time.monotonic() + timeout_s
        while not self._sql(f"SELECT pg_last_wal_replay_lsn() >= '{primary_lsn}'::pg_lsn"):
            assert time.monotonic() < deadline, f"the replica did not reach {primary_lsn}"
            time.sleep(0.05)

    def stop(self) -> None:
        """Stop it (fast) and remove its data."""
        subprocess.run([*self._run, _bin("pg_ctl"), "-D", str(self.directory / "data"), "-m",
                        "immediate", "-w", "stop"], capture_output=True, timeout=60)
        shutil.rmtree(self.directory, ignore_errors=True)


def primary_lsn(server_url: str) -> str:
    """The primary's current WAL position."""
    eng = owner_engine(server_url)
    try:
        with eng.connect() as conn:
            return str(conn.execute(sa.text("SELECT pg_current_wal_lsn()")).scalar())
    finally:
        eng.dispose()


def start_replica(server_url: str, *, run_as: str = "pgserver",
                  timeout_s: float = 60.0) -> Replica:
    """A hot standby of the server of ``server_url`` (its login must be allowed to replicate,
    as the embedded server's superuser is over its Unix socket)."""
    server = sa.make_url(server_url)
    host = str(server.query.get("host") or server.host)
    port = str(server.port or 5432)
    directory = Path(tempfile.mkdtemp(prefix="custody-replica-"))
    data, socket_dir = directory / "data", directory / "socket"
    socket_dir.mkdir()
    run: list[str] = []
    if os.geteuid() == 0:
        account = pwd.getpwnam(run_as)
        for path in (directory, socket_dir):
            os.chown(path, account.pw_uid, account.pw_gid)
        run = ["runuser", "-u", run_as, "--"]
    subprocess.run([*run, _bin("pg_basebackup"), "-h", host, "-p", port, "-U",
                    server.username or "postgres", "-D", str(data), "-R", "-X", "stream",
                    "-c", "fast"], check=True, capture_output=True, timeout=timeout_s)
    options = f"-k {socket_dir} -c listen_addresses='' -c hot_standby=on -p {port}"
    started = subprocess.run([*run, _bin("pg_ctl"), "-D", str(data), "-o", options, "-l",
                              str(directory / "log"), "-w", "-t", str(int(timeout_s)), "start"],
                             capture_output=True, timeout=timeout_s + 10)
    if started.returncode != 0:
        log = (directory / "log").read_text()[-2000:] if (directory / "log").exists() else ""
        shutil.rmtree(directory, ignore_errors=True)
        raise RuntimeError(f"the replica did not start: {started.stderr.decode()} {log}")
    url = sa.URL.create("postgresql+psycopg", username=server.username or "postgres",
                        database="postgres", query={"host": str(socket_dir), "port": port})
    return Replica(directory, url.render_as_string(hide_password=False), run)
