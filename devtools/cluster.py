"""A PostgreSQL high-availability cluster on this machine, for tests. Development only.

:class:`Cluster` runs the shape docs/operations.md describes, with Debian's packages (``make
ha-tools`` installs them): one etcd member (the consensus store; a production cluster runs three
on three machines, one is enough here to make "three members" = etcd + two database nodes), and
two Patroni nodes, each managing a PostgreSQL 15 server (``/usr/lib/postgresql/15/bin``).
Replication is synchronous and strict (``synchronous_mode: true``, ``synchronous_mode_strict:
true``): a commit returns only once the standby has the WAL on disk, and with the standby gone
the primary blocks writes instead of running alone, so a transaction confirmed to a customer
survives the loss of either server. ``primary_start_timeout: 0`` makes Patroni fail over to the
synchronous standby when the primary's postmaster dies, instead of restarting it in place.

Every node archives its WAL through pgBackRest into one local repository (:class:`Backups`),
which takes full backups and restores to a point in time into a new data directory.

PostgreSQL refuses to run as root: when this process is root, Patroni and the servers run as
Debian's ``postgres`` user, and the data directories' parents are opened for it to traverse (as
pgserver does for its own user). Every port is a free one on 127.0.0.1.
"""

from __future__ import annotations

import atexit
import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

PG_BIN = Path("/usr/lib/postgresql/15/bin")
#: The database login of the tests (the cluster's superuser; the engine's sessions switch to the
#: application role, as on the embedded server).
SUPERUSER = "postgres"
PASSWORD = "custody-cluster"
STANZA = "custody"
#: The DCS timings: a dead leader's key expires after ``ttl`` seconds; Patroni's loop runs every
#: ``loop_wait``; ``loop_wait + 2 * retry_timeout <= ttl`` as Patroni requires.
TTL_S = 12
LOOP_WAIT_S = 1
RETRY_TIMEOUT_S = 5
_T = TypeVar("_T")


class ClusterUnavailable(RuntimeError):
    """A cluster tool is missing, or a process did not reach the expected state in time."""


def free_port() -> int:
    """A TCP port of 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(what: str, check: Callable[[], _T | None], timeout_s: float,
             interval_s: float = 0.1) -> _T:
    """Poll ``check`` until it returns something other than None or False; raise
    :class:`ClusterUnavailable` naming ``what`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        result = check()
        if result is not None and result is not False:
            return result
        if time.monotonic() > deadline:
            raise ClusterUnavailable(f"timed out after {timeout_s:.0f} s waiting for {what}")
        time.sleep(interval_s)


def require_tools() -> None:
    """Fail in one line when a package of ``make ha-tools`` is missing."""
    for tool in ("etcd", "patroni", "pgbackrest"):
        if shutil.which(tool) is None:
            raise ClusterUnavailable(f"{tool} is not installed: run `make ha-tools`")
    if not (PG_BIN / "postgres").exists():
        raise ClusterUnavailable(f"{PG_BIN}/postgres is missing: run `make ha-tools`")


def _as_postgres() -> dict[str, Any]:
    """Popen arguments that run a child as ``postgres`` when we are root."""
    if os.geteuid() != 0:
        return {}
    return {"user": SUPERUSER, "group": SUPERUSER, "extra_groups": []}


def _own(path: Path) -> None:
    """Give ``path`` to the ``postgres`` user (when root) and let it traverse every parent."""
    path.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        return
    pw = pwd.getpwnam(SUPERUSER)
    os.chown(path, pw.pw_uid, pw.pw_gid)
    for parent in path.resolve().parents:
        mode = parent.stat().st_mode
        if not mode & 0o001:
            parent.chmod(mode | 0o001)


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    if os.geteuid() == 0:
        pw = pwd.getpwnam(SUPERUSER)
        os.chown(path, pw.pw_uid, pw.pw_gid)
    return path


def _get_json(url: str, timeout_s: float = 2.0) -> dict[str, Any] | None:
    """GET ``url`` as JSON; None when nothing answers (Patroni answers 503 with a body too)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as answer:
            return dict(json.loads(answer.read()))
    except urllib.error.HTTPError as exc:
        try:
            return dict(json.loads(exc.read()))
        except ValueError:
            return None
    except (OSError, ValueError):
        return None


def _stop(proc: subprocess.Popen[bytes] | None, timeout_s: float = 30.0) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


@dataclass
class Backups:
    """pgBackRest with one local repository (``repo1-path``) for the stanza ``custody``."""

    base: Path

    @property
    def config(self) -> Path:
        return self.base / "pgbackrest.conf"

    def write_config(self, socket_dir: Path) -> None:
        """The configuration: the repository, and how to reach a server (its data directory and
        port are given per command: the primary moves). ``start-fast``: a backup starts with
        an immediate checkpoint, not a spread one."""
        for sub in ("repo", "log", "lock", "spool"):
            _own(self.base / sub)
        _write(self.config, "\n".join([
            "[global]", f"repo1-path={self.base / 'repo'}", "repo1-retention-full=2",
            f"log-path={self.base / 'log'}", f"lock-path={self.base / 'lock'}",
            f"spool-path={self.base / 'spool'}", "log-level-console=warn", "start-fast=y",
            "archive-timeout=60", "",
            f"[{STANZA}]", f"pg1-socket-path={socket_dir}", f"pg1-user={SUPERUSER}", ""]))

    def archive_command(self, pg_path: Path) -> str:
        """PostgreSQL's ``archive_command`` for the server whose data directory is ``pg_path``."""
        return (f"pgbackrest --config={self.config} --stanza={STANZA} --pg1-path={pg_path} "
                "archive-push %p")

    def run(self, *args: str, timeout_s: float = 300.0) -> str:
        """Run ``pgbackrest`` (as ``postgres``) and return its output; raise on failure."""
        done = subprocess.run(["pgbackrest", f"--config={self.config}", f"--stanza={STANZA}",
                               *args], capture_output=True, text=True, timeout=timeout_s,
                              cwd=self.base, **_as_postgres())
        if done.returncode != 0:
            raise ClusterUnavailable(f"pgbackrest {' '.join(args)} exited {done.returncode}: "
                                     f"{done.stderr.strip() or done.stdout.strip()}")
        return str(done.stdout)

    def newest_backup(self) -> str:
        """The label of the newest backup in the repository (``pgbackrest info``)."""
        stanzas = json.loads(self.run("info", "--output=json"))
        return str(stanzas[0]["backup"][-1]["label"])

    def restore_to_time(self, backup: str, target: str, data_dir: Path) -> None:
        """Restore the backup labelled ``backup`` into the empty ``data_dir`` and set recovery
        to replay the archived WAL up to ``target`` (a timestamp with time zone) and promote
        there. The set is named: left to choose, pgBackRest takes the newest backup that
        stopped before the target, and its stop times have a resolution of one second."""
        _own(data_dir.parent)
        _own(data_dir)
        data_dir.chmod(0o700)
        self.run("restore", f"--pg1-path={data_dir}", f"--set={backup}", "--type=time",
                 f"--target={target}", "--target-action=promote")


@dataclass
class Node:
    """One Patroni node and the PostgreSQL 15 server it manages."""

    name: str
    base: Path
    pg_port: int = field(default_factory=free_port)
    api_port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None

    @property
    def data_dir(self) -> Path:
        return self.base / "data"

    @property
    def api(self) -> str:
        return f"http://127.0.0.1:{self.api_port}"

    def start(self, config: Path) -> None:
        """Start Patroni on ``config`` (it starts, replicates or bootstraps the server)."""
        log = (self.base / "patroni.out").open("ab")
        self.proc = subprocess.Popen(["patroni", str(config)], stdout=log, stderr=log,
                                     cwd=self.base, env={**os.environ, "HOME": str(self.base)},
                                     **_as_postgres())
        log.close()

    def status(self) -> dict[str, Any] | None:
        """Patroni's ``GET /patroni`` (role, state, timeline), None if Patroni does not answer."""
        return _get_json(f"{self.api}/patroni")

    def is_primary(self) -> bool:
        """Whether Patroni calls this node a running primary (``master`` in Patroni 3.0)."""
        status = self.status()
        return bool(status and status.get("role") in ("master", "primary")
                    and status.get("state") == "running")

    def postmaster_pid(self) -> int:
        """The pid of the running postmaster (first line of ``postmaster.pid``)."""
        return int((self.data_dir / "postmaster.pid").read_text().split()[0])

    def kill_postmaster(self) -> int:
        """SIGKILL the postmaster (its backends exit as soon as they notice); return its pid."""
        pid = self.postmaster_pid()
        os.kill(pid, signal.SIGKILL)
        return pid

    def kill_patroni(self) -> None:
        """SIGKILL Patroni itself; the server it manages keeps running."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)


@dataclass
class Cluster:
    """etcd and two Patroni/PostgreSQL nodes under ``base``; see the module's docstring."""

    base: Path
    scope: str = "custody"
    etcd_port: int = field(default_factory=free_port)
    etcd_peer_port: int = field(default_factory=free_port)
    etcd: subprocess.Popen[bytes] | None = None
    nodes: list[Node] = field(default_factory=list)
    backups: Backups | None = None

    @classmethod
    def start(cls, base: Path, *, timeout_s: float = 180.0) -> Cluster:
        """Start etcd, then both nodes; return once there is a primary and a synchronous
        standby streaming from it."""
        require_tools()
        _own(base)
        backups = Backups(base / "backup")
        backups.write_config(base)
        cluster = cls(base, backups=backups)
        cluster.nodes = [Node("pg1", base / "pg1"), Node("pg2", base / "pg2")]
        # A test that never reaches its teardown still leaves no server running behind it.
        atexit.register(cluster.stop)
        try:
            cluster._start_etcd(timeout_s)
            for node in cluster.nodes:
                _own(node.base)
                node.start(cluster._write_patroni_config(node))
            wait_for("a primary", lambda: cluster._alive() and cluster.primary(), timeout_s)
            cluster.wait_sync_standby(timeout_s=timeout_s)
        except BaseException:
            cluster.stop()
            raise
        return cluster

    def _start_etcd(self, timeout_s: float) -> None:
        client = f"http://127.0.0.1:{self.etcd_port}"
        peer = f"http://127.0.0.1:{self.etcd_peer_port}"
        log = (self.base / "etcd.log").open("ab")
        self.etcd = subprocess.Popen(
            ["etcd", "--name", "etcd1", "--data-dir", str(self.base / "etcd"),
             "--listen-client-urls", client, "--advertise-client-urls", client,
             "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
             "--initial-cluster", f"etcd1={peer}"], stdout=log, stderr=log)
        log.close()
        wait_for("etcd to answer", lambda: (_get_json(f"{client}/health") or {}).get(
            "health") == "true", timeout_s)

    def _write_patroni_config(self, node: Node) -> Path:
        """Patroni's configuration of ``node`` (JSON, which is YAML)."""
        assert self.backups is not None
        auth = {"superuser": {"username": SUPERUSER, "password": PASSWORD},
                "replication": {"username": "replicator", "password": PASSWORD}}
        local = {
            "unix_socket_directories": str(self.base),
            "archive_mode": "on", "archive_command": self.backups.archive_command(node.data_dir),
        }
        config = {
            "scope": self.scope, "name": node.name,
            "log": {"level": "INFO"},
            "restapi": {"listen": f"127.0.0.1:{node.api_port}",
                        "connect_address": f"127.0.0.1:{node.api_port}"},
            "etcd3": {"hosts": [f"127.0.0.1:{self.etcd_port}"]},
            "bootstrap": {
                "dcs": {
                    "ttl": TTL_S, "loop_wait": LOOP_WAIT_S, "retry_timeout": RETRY_TIMEOUT_S,
                    # Only the synchronous standby may be promoted (synchronous_mode), and it has
                    # every committed transaction; the lag it may show is uncommitted WAL.
                    "maximum_lag_on_failover": 16 * 1024 * 1024,
                    "primary_start_timeout": 0,
                    "synchronous_mode": True, "synchronous_mode_strict": True,
                    "postgresql": {"use_pg_rewind": True, "parameters": {
                        "wal_level": "replica", "hot_standby": "on", "wal_log_hints": "on",
                        "max_wal_senders": 5, "max_replication_slots": 5,
                        "max_connections": 100, "synchronous_commit": "on",
                        "fsync": "on"}},
                },
                "initdb": [{"encoding": "UTF8"}, {"locale": "C.UTF-8"}, "data-checksums"],
            },
            "postgresql": {
                "listen": f"127.0.0.1:{node.pg_port}",
                "connect_address": f"127.0.0.1:{node.pg_port}",
                "data_dir": str(node.data_dir), "bin_dir": str(PG_BIN),
                "pgpass": str(node.base / "pgpass"), "authentication": auth,
                "parameters": local,
                "pg_hba": ["local all all trust",
                           "host replication replicator 127.0.0.1/32 scram-sha-256",
                           "host all all 127.0.0.1/32 scram-sha-256"],
            },
            "tags": {"nofailover": False, "noloadbalance": False},
        }
        return _write(node.base / "patroni.yml", json.dumps(config, indent=2))

    def _alive(self) -> bool:
        """True while every Patroni runs; :class:`ClusterUnavailable` with its log if one ended."""
        for node in self.nodes:
            if node.proc is not None and node.proc.poll() is not None:
                raise ClusterUnavailable(f"patroni {node.name} exited {node.proc.returncode}:\n"
                                         + self.logs())
        return True

    # --- state -------------------------------------------------------------------------------

    def url(self, database: str = "postgres") -> str:
        """The libpq multi-host URL of the cluster (every node, the primary wherever it is):
        what an operator sets as ``CUSTODY_DATABASE_URL``."""
        hosts = ",".join(f"127.0.0.1:{n.pg_port}" for n in self.nodes)
        return (f"postgresql://{SUPERUSER}:{PASSWORD}@{hosts}/{database}"
                "?target_session_attrs=read-write")

    def node_url(self, node: Node, database: str = "postgres") -> str:
        """A SQLAlchemy URL of one node (no failover): for reading a node directly."""
        return server_url(node.pg_port, database)

    def primary(self) -> Node | None:
        """The node Patroni runs as primary now, if any."""
        return next((n for n in self.nodes if n.is_primary()), None)

    def wait_primary(self, *, other_than: Node | None = None,
                     timeout_s: float = 120.0) -> Node:
        """Wait until a node (not ``other_than``) is a running primary."""
        return wait_for("a primary", lambda: next(
            (n for n in self.nodes if n is not other_than and n.is_primary()), None), timeout_s)

    def sync_standby(self) -> Node | None:
        """The node Patroni has made the synchronous standby (its ``sync`` key in etcd, the only
        node it may promote) and that streams from the primary now."""
        for node in self.nodes:
            members = (_get_json(f"{node.api}/cluster") or {}).get("members") or []
            if any(m.get("role") in ("leader", "master", "primary") for m in members):
                for m in members:
                    if m.get("role") == "sync_standby" and m.get("state") in ("streaming",
                                                                              "running"):
                        return next((n for n in self.nodes if n.name == m.get("name")), None)
                return None
        return None

    def wait_sync_standby(self, timeout_s: float = 120.0) -> Node:
        """Wait until the primary has a synchronous standby streaming from it."""
        return wait_for("a synchronous standby", self.sync_standby, timeout_s)

    def _backrest(self, *args: str) -> str:
        """Run pgBackRest against the primary (wherever it is now)."""
        assert self.backups is not None
        primary = self.wait_primary()
        return self.backups.run(f"--pg1-path={primary.data_dir}",
                                f"--pg1-port={primary.pg_port}", *args)

    def backup(self) -> str:
        """Create the stanza (once), take a full backup of the primary, return its label."""
        assert self.backups is not None
        if not (self.backups.base / "repo" / "backup" / STANZA).exists():
            self._backrest("stanza-create")
        self._backrest("--type=full", "backup")
        return self.backups.newest_backup()

    def archive_now(self) -> None:
        """Switch the primary to a new WAL segment and wait until the finished one is in the
        repository (``pgbackrest check``): everything committed so far can be restored."""
        self._backrest("check")

    def restart_patroni(self, node: Node) -> None:
        """Start ``node``'s Patroni again (as its supervisor would after a crash): it demotes a
        server that is no longer the leader, rewinds it and follows the new primary."""
        node.start(node.base / "patroni.yml")

    def logs(self) -> str:
        """The tail of each node's Patroni log, for a failing test's message."""
        parts = []
        for node in self.nodes:
            path = node.base / "patroni.out"
            if path.exists():
                lines = [line for line in path.read_text(errors="replace").splitlines()
                         if "INFO: no action." not in line]
                parts.append(f"--- {node.name}\n" + "\n".join(lines[-40:]))
        return "\n".join(parts)

    def stop(self) -> None:
        """Stop everything at once, for a cluster whose data is thrown away: SIGKILL both
        Patronis (so neither restarts or promotes its server), stop the servers in immediate
        mode, then etcd."""
        for node in self.nodes:
            if node.proc is not None and node.proc.poll() is None:
                node.proc.kill()
                node.proc.wait(timeout=10)
        for node in self.nodes:
            if (node.data_dir / "postmaster.pid").exists():
                stop_server(node.data_dir, mode="immediate")
        _stop(self.etcd)


def server_url(port: int, database: str = "postgres") -> str:
    """The SQLAlchemy URL of the server on ``port`` of 127.0.0.1 (the superuser's login)."""
    return f"postgresql+psycopg://{SUPERUSER}:{PASSWORD}@127.0.0.1:{port}/{database}"


def start_server(data_dir: Path, port: int, socket_dir: Path, *,
                 options: Sequence[str] = ()) -> None:
    """Start a lone PostgreSQL 15 server on ``data_dir`` (a restored one) with ``pg_ctl``; its
    log is ``<data_dir>.log``."""
    opts = " ".join([f"-p {port}", "-c listen_addresses=127.0.0.1",
                     f"-c unix_socket_directories={socket_dir}", *options])
    log = data_dir.parent / f"{data_dir.name}.log"
    done = subprocess.run([str(PG_BIN / "pg_ctl"), "-D", str(data_dir), "-o", opts, "-l",
                           str(log), "-w", "-t", "120", "start"], capture_output=True, text=True,
                          timeout=180, **_as_postgres())
    if done.returncode != 0:
        tail = log.read_text(errors="replace")[-3000:] if log.exists() else ""
        raise ClusterUnavailable(f"pg_ctl start exited {done.returncode}: {done.stderr}{tail}")


def stop_server(data_dir: Path, *, mode: str = "fast") -> None:
    """Stop the server on ``data_dir`` if it runs (``pg_ctl stop -m mode``)."""
    subprocess.run([str(PG_BIN / "pg_ctl"), "-D", str(data_dir), "-m", mode, "-w", "-t", "60",
                    "stop"], capture_output=True, timeout=90, **_as_postgres())
