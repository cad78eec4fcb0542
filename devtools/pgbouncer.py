"""A real PgBouncer (Debian's ``pgbouncer``, installed by ``make pgbouncer``) in front of a local
PostgreSQL, for the tests and benchmarks that run the engine behind a transaction pooler.

``start_pgbouncer(server_url)`` writes a configuration into a directory of its own, starts
``pgbouncer`` on a free port of 127.0.0.1 and waits until it answers. It forwards every
database of the server (``* = host=... port=...``) with ``pool_mode`` (``transaction`` by
default), trusts the users it is given (``auth_type = trust``: a local test server trusts them
too) and logs into PostgreSQL as the client's own user. PgBouncer refuses to run as root: under
root it drops to ``run_as`` (``pgserver``, the system user the embedded server runs as).
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import sqlalchemy as sa

#: Where Debian installs it.
PGBOUNCER = "/usr/sbin/pgbouncer"


@dataclass
class PgBouncer:
    """A running PgBouncer."""

    port: int
    directory: Path
    process: subprocess.Popen[bytes]

    def url(self, server_database_url: str, user: str) -> str:
        """The URL of ``server_database_url``'s database through this PgBouncer, as ``user``."""
        name = sa.make_url(server_database_url).database
        return f"postgresql+psycopg://{user}@127.0.0.1:{self.port}/{name}"

    def stop(self) -> None:
        """Stop it (SIGINT: at once, closing its connections) and remove its directory."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        shutil.rmtree(self.directory, ignore_errors=True)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_pgbouncer(server_url: str, users: tuple[str, ...], *, pool_mode: str = "transaction",
                    pool_size: int = 30, run_as: str = "pgserver",
                    timeout_s: float = 20.0) -> PgBouncer:
    """Start PgBouncer in front of the server of ``server_url`` (a Unix socket or a TCP host)."""
    if not os.path.exists(PGBOUNCER):
        raise RuntimeError(f"{PGBOUNCER} is missing: run `make pgbouncer` (Debian's pgbouncer)")
    server = sa.make_url(server_url)
    host = server.query.get("host") or server.host or "localhost"
    assert isinstance(host, str), "one server host"
    port = server.port or int(str(server.query.get("port") or 5432))
    directory = Path(tempfile.mkdtemp(prefix="custody-pgbouncer-"))
    listen = _free_port()
    auth = directory / "users.txt"
    auth.write_text("".join(f'"{u}" ""\n' for u in users))
    ini = directory / "pgbouncer.ini"
    root = os.geteuid() == 0
    ini.write_text(
        "[databases]\n"
        f"* = host={host} port={port}\n"
        "[pgbouncer]\n"
        f"listen_addr = 127.0.0.1\nlisten_port = {listen}\nunix_socket_dir =\n"
        f"auth_type = trust\nauth_file = {auth}\n"
        f"pool_mode = {pool_mode}\ndefault_pool_size = {pool_size}\n"
        "max_client_conn = 500\nserver_lifetime = 3600\n"
        # The tests drop their databases with FORCE: PgBouncer then forgets the closed
        # servers at once instead of failing a client on a dead one.
        "server_check_delay = 0\n"
        f"logfile = {directory / 'pgbouncer.log'}\npidfile = {directory / 'pgbouncer.pid'}\n"
        + (f"user = {run_as}\n" if root else ""))
    if root:
        account = pwd.getpwnam(run_as)
        os.chown(directory, account.pw_uid, account.pw_gid)
        for path in (auth, ini):
            os.chown(path, account.pw_uid, account.pw_gid)
    with open(directory / "stderr.txt", "wb") as err_file:
        process = subprocess.Popen([PGBOUNCER, str(ini)], stdout=subprocess.DEVNULL,
                                   stderr=err_file)
    bouncer = PgBouncer(listen, directory, process)
    deadline = time.monotonic() + timeout_s
    while True:
        if process.poll() is not None:
            err = (directory / "stderr.txt").read_text()[-2000:]
            log = directory / "pgbouncer.log"
            detail = log.read_text()[-2000:] if log.exists() else ""
            bouncer.stop()
            raise RuntimeError(f"pgbouncer exited ({process.returncode}): {err} {detail}")
        try:
            with socket.create_connection(("127.0.0.1", listen), timeout=1):
                return bouncer
        except OSError:
            if time.monotonic() > deadline:
                bouncer.stop()
                raise RuntimeError(
                    f"pgbouncer did not listen on {listen} in {timeout_s} s") from None
            time.sleep(0.05)
