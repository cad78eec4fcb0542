"""The database engine: an embedded PostgreSQL or a configured URL, and the application role.

The engine's sessions never run as a superuser: when the login is one (as with the embedded
database), every new connection switches to the application role, which may only SELECT and
INSERT on the ledger tables, and may write withdrawals and the movement tables only through the
SECURITY DEFINER functions that check their state machines (revision 0030_money_table_grants).
Migrations run on a separate owner engine (``owner_engine``).

The URL may name several hosts (``to_sqlalchemy_url``): a new connection goes to the primary.
After a failover the pool's connections to the old primary, which the server closed, are
dropped as they are checked out; one that fails anyway (a host that vanished) makes SQLAlchemy
drop the whole pool, and the next connections find the new primary (``config.uow`` retries what
is safe to retry and resolves a commit whose answer was lost by its key). Behind PgBouncer
in transaction mode (``make_engine``'s ``pooler``) no session state is relied on. Reads that may
be a little behind go to a replica when one is configured (``get_read_engine``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import threading
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine

from config.errors import ConfigurationInvalid, DatabaseUnavailable
from config.settings import Settings, get_settings
from config.uow import SYNC_REP_CANCELLED, UNREPLICATED

_lock = threading.Lock()
_embedded: dict[Path, str] = {}


def embedded_url(data_dir: Path, *, cleanup_mode: str | None = "stop") -> str:
    """Start (or reuse) the embedded PostgreSQL under ``data_dir`` and return its URL.

    ``cleanup_mode``: "stop" stops the server when the last process using it exits (the data
    stays for the next run), "delete" also removes the data directory, None leaves it running.
    """
    data_dir = data_dir.resolve()
    with _lock:
        if data_dir in _embedded:
            return _embedded[data_dir]
        usable_data_dir(data_dir)
        # pgserver asks platformdirs for a runtime directory, which warns when XDG_RUNTIME_DIR is
        # unset (as under root in CI); the fallback it picks is fine for us.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                import pgserver

                server = pgserver.get_server(  # type: ignore[attr-defined]
                    str(data_dir), cleanup_mode=cleanup_mode
                )
            except Exception as exc:
                raise DatabaseUnavailable(
                    f"cannot start embedded PostgreSQL in {data_dir}: {exc}"
                ) from exc
        uri = server.get_uri()
        url = to_sqlalchemy_url(uri)
        _embedded[data_dir] = url
        return url


def usable_data_dir(data_dir: Path) -> None:
    """Create ``data_dir`` if needed; :class:`ConfigurationInvalid` in one line if it cannot be
    a data directory (a file, a path under a file, a place we may not write)."""
    where = f"CUSTODY_DATA_DIR {data_dir}"
    if data_dir.exists() and not data_dir.is_dir():
        raise ConfigurationInvalid(f"{where} is not a directory")
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigurationInvalid(
            f"{where} cannot be created: {exc.strerror or exc}") from None
    if not os.access(data_dir, os.R_OK | os.W_OK | os.X_OK):
        raise ConfigurationInvalid(f"{where} is not readable and writable by this user")


def to_sqlalchemy_url(uri: str) -> str:
    """Make a libpq URI usable by SQLAlchemy with psycopg 3.

    A libpq URL naming several hosts (``postgresql://u@a:5432,b:5432/db?target_session_attrs=
    read-write``) or a keyword/value conninfo (``host=a,b port=5432 dbname=db ...``) becomes
    SQLAlchemy's multi-host form, one ``host`` query parameter per host, which its psycopg
    dialect hands back to libpq unchanged (``host=a,b port=5432,5432`` and every other parameter
    as given): libpq tries the hosts in order and ``target_session_attrs=read-write`` keeps the
    first that accepts writes, the primary. ``ValueError`` for a conninfo libpq cannot parse.
    """
    if "://" not in uri and "=" in uri or _multi_host(uri):
        return _multi_host_url(uri)
    for prefix in ("postgresql+psycopg://", "postgresql://", "postgres://"):
        if uri.startswith(prefix):
            return "postgresql+psycopg://" + uri[len(prefix) :]
    return uri


def _multi_host(uri: str) -> bool:
    """Whether ``uri`` is a libpq URL with a comma in its host part (SQLAlchemy cannot parse it)."""
    if not uri.startswith(("postgresql://", "postgres://")):
        return False
    authority = uri.split("://", 1)[1].split("/", 1)[0].split("?", 1)[0]
    return "," in authority.rsplit("@", 1)[-1]


def _multi_host_url(conninfo: str) -> str:
    from psycopg.conninfo import conninfo_to_dict

    try:
        params = {k: str(v) for k, v in conninfo_to_dict(conninfo).items()}
    except Exception as exc:
        raise ValueError(f"libpq cannot parse the connection string: {exc}") from None
    hosts = params.pop("host", "").split(",")
    ports = params.pop("port", "").split(",")
    if len(ports) == 1:
        ports = ports * len(hosts)
    if len(ports) != len(hosts):
        raise ValueError(f"{len(hosts)} hosts but {len(ports)} ports")
    query: dict[str, str | tuple[str, ...]] = {
        "host": tuple(f"{h}:{p}" if p else h for h, p in zip(hosts, ports, strict=True))}
    user, password, dbname = params.pop("user", None), params.pop("password", None), \
        params.pop("dbname", None)
    query.update(params)
    return sa.URL.create("postgresql+psycopg", username=user, password=password,
                         database=dbname, query=query).render_as_string(hide_password=False)


def database_url(settings: Settings | None = None) -> str:
    """The URL this process uses: the configured one, or the embedded server's."""
    settings = settings or get_settings()
    if settings.database_url:
        return to_sqlalchemy_url(settings.database_url)
    return embedded_url(settings.data_dir)


def with_database(url: str, name: str) -> str:
    """The same server URL pointing at another database."""
    return sa.make_url(url).set(database=name).render_as_string(hide_password=False)


def make_engine(
    url: str,
    *,
    app_role: str | None = "custody_app",
    pool_size: int = 10,
    statement_timeout_ms: int = 30_000,
    pooler: str = "none",
    **kwargs: Any,
) -> Engine:
    """An engine whose connections run as ``app_role`` (when the login may switch to it).

    ``pooler="transaction"`` (``CUSTODY_DATABASE_POOLER``): the engine sits behind PgBouncer in
    transaction pooling mode, where each transaction may run on another server connection and
    a session's state stays behind on the connection it was set on (PgBouncer 1.18 does not
    carry prepared statements either). Then psycopg never prepares a statement
    (``prepare_threshold=None``; ``driver_rows`` ignores ``prepare``), the statement timeout is
    set in every transaction (``SET LOCAL``, one statement when the transaction begins) instead
    of once per connection, and a superuser login is refused (:class:`ConfigurationInvalid`):
    its SET ROLE could not be kept, so the login must be the application role itself. Its cost
    is measured in bench/RESULTS.md ("Behind PgBouncer in transaction mode").
    """
    if pooler not in ("none", "transaction"):
        raise ConfigurationInvalid(f"pooler {pooler!r}: expected none or transaction")
    per_transaction = pooler == "transaction"
    connect_args = dict(kwargs.pop("connect_args", {}))
    if per_transaction:
        connect_args["prepare_threshold"] = None
    engine = sa.create_engine(
        url,
        pool_size=pool_size,
        max_overflow=pool_size,
        pool_pre_ping=False,
        connect_args=connect_args,
        **kwargs,
    )
    timeout = str(int(statement_timeout_ms))

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, record: Any) -> None:
        info = record.info

        def notice(diag: Any) -> None:
            if (diag.message_primary or "").startswith(SYNC_REP_CANCELLED):
                info[UNREPLICATED] = True

        # Kept with the connection: a COMMIT the server answers with this WARNING is in
        # doubt, not done (config.uow.unreplicated_commit_in_doubt).
        dbapi_conn.add_notice_handler(notice)
        # Runs once per physical connection: switch away from a superuser login so that the
        # grants (SELECT/INSERT only on ledger tables) and the triggers hold for this session.
        with dbapi_conn.cursor() as cur:
            if not per_transaction:
                cur.execute(f"SET statement_timeout = {timeout}")
            if app_role:
                cur.execute("SELECT rolsuper FROM pg_roles WHERE rolname = session_user")
                row = cur.fetchone()
                if row and row[0] and per_transaction:
                    dbapi_conn.close()
                    # A SET ROLE would stay on one server connection, and an autocommit
                    # statement has no transaction to SET LOCAL it in.
                    raise ConfigurationInvalid(
                        f"CUSTODY_DATABASE_POOLER=transaction: the login is a superuser; behind "
                        f"a transaction pooler log in as {app_role} itself")
                if row and row[0]:
                    cur.execute(f'SET ROLE "{app_role}"')
        dbapi_conn.commit()

    @event.listens_for(engine, "checkout")
    def _on_checkout(dbapi_conn: Any, _record: Any, _proxy: Any) -> None:
        # An idle connection has nothing to read, unless the server ended it: a failover, a
        # restart or pg_terminate_backend sends its FATAL and closes the socket. Such a
        # connection is discarded here (the pool takes another, or opens one, to the new
        # primary) instead of failing the request that would use it. A syscall, no round
        # trip; a host that vanished without closing its sockets is found by the first
        # statement instead (and ``config.uow`` retries what is safe to retry).
        if _ended_by_server(dbapi_conn):
            raise sa.exc.DisconnectionError("the server ended this pooled connection")

    if per_transaction:
        @event.listens_for(engine, "begin")
        def _on_begin(conn: Connection) -> None:
            # Behind a transaction pooler a session's settings would stay on the server
            # connection they were set on: set the timeout for this transaction only. A SET,
            # not a SELECT of set_config(): a SET takes no snapshot, so the transaction may
            # still begin with SET TRANSACTION ISOLATION LEVEL or SET TRANSACTION SNAPSHOT
            # (the proof of reserves does). An autocommit statement has no transaction: it
            # runs under the role's own statement_timeout (ALTER ROLE ... SET
            # statement_timeout, docs/operations.md).
            driver = conn.connection.driver_connection
            assert driver is not None
            if not driver.autocommit:
                with driver.cursor() as cur:
                    cur.execute(f"SET LOCAL statement_timeout = {timeout}")

    return engine


def _ended_by_server(dbapi_conn: Any) -> bool:
    """Whether an idle psycopg connection's socket has input waiting (its end, in practice:
    the engine neither LISTENs nor expects anything unasked)."""
    try:
        fd = dbapi_conn.pgconn.socket
    except Exception:  # noqa: BLE001 - psycopg raises when the connection is closed already
        return True
    # poll, not select: select() cannot watch a descriptor numbered 1024 or above, which a
    # process with many open sockets (an API worker's keep-alive clients) hands out.
    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)
    return bool(poller.poll(0))


#: Appended to the statement that takes a step's lock (``pg_try_advisory_xact_lock(...)``) in the
#: transaction held open for the step: the server's ``idle_in_transaction_session_timeout``
#: must not end that transaction, and the lock with it, while the step runs on other
#: connections (PgBouncer's ``idle_transaction_timeout`` must stay 0 too: docs/operations.md).
KEEP_LOCK_IDLE = " AND set_config('idle_in_transaction_session_timeout', '0', true) = '0'"

_engines: dict[str, Engine] = {}
log = logging.getLogger("custody.database")
#: How long a long-running process (the API, the scheduler, the watcher, the processor) waits
#: at start for a database it cannot reach (a failover under way, a server restarting) before
#: it gives up with one line: it comes back by itself rather than needing a restart.
STARTUP_WAIT_S = 60.0


def check_schema(url: str, app_role: str) -> None:
    """Refuse, with one clear line, a database that is not migrated to this code's schema."""
    import migrations
    from migrations import definitions

    head = migrations.head_revision()
    probe = owner_engine(url)
    try:
        with probe.connect() as conn:
            role = conn.execute(sa.text("SELECT 1 FROM pg_roles WHERE rolname = :r"),
                                {"r": app_role}).first()
            version = None
            if conn.execute(sa.text("SELECT to_regclass('alembic_version')")).scalar():
                version = conn.execute(sa.text("SELECT version_num FROM alembic_version")).scalar()
            applied: dict[str, str] = {}
            if version == head:
                applied = {r.path: r.sha256 for r in conn.execute(
                    sa.text("SELECT path, sha256 FROM schema_definitions"))}
    except sa.exc.OperationalError as exc:
        raise DatabaseUnavailable(f"cannot connect to the database: {exc.orig}") from exc
    finally:
        probe.dispose()
    if role is None or version != head:
        state = "not migrated" if version is None else f"at {version}, this code needs {head}"
        raise DatabaseUnavailable(f"the database is {state}: run `custody db upgrade` first")
    outdated = definitions.pending(applied, definitions.definitions())
    if outdated:
        raise DatabaseUnavailable(
            f"the database's SQL definitions are older than this code ({outdated[0].path} and "
            f"{len(outdated) - 1} more): run `custody db upgrade` first")


#: What a server says while it cannot take connections yet (libpq reports a server's refusal
#: at connect as ``FATAL:  <message>``, with no SQLSTATE on the exception).
_NOT_YET = ("the database system is starting up", "the database system is shutting down",
            "the database system is in recovery mode",
            "the database system is not yet accepting connections", "terminating connection")


def _unreachable(exc: DatabaseUnavailable) -> bool:
    """Whether ``exc`` says no server could take a connection (none listening, none primary,
    one starting or stopping): worth waiting for. A server that refuses the login or the
    database (``FATAL:`` anything else) is a configuration to fix, not to wait for."""
    cause = exc.__cause__
    if not isinstance(cause, sa.exc.OperationalError):
        return False
    text = str(cause.orig)
    refusals = [part.split("\n")[0] for part in text.split("FATAL:")[1:]]
    return all(any(n in r for n in _NOT_YET) for r in refusals)


def get_engine(settings: Settings | None = None, *, wait_s: float = 0.0) -> Engine:
    """The process-wide application engine (created on first use, after a schema check).
    ``wait_s``: how long to keep trying, with a warning each time, while no server can be
    reached (a one-shot command fails at once; a long-running one passes
    :data:`STARTUP_WAIT_S`). A database that answers but is not migrated fails at once."""
    settings = settings or get_settings()
    url = database_url(settings)
    deadline = time.monotonic() + wait_s
    delay = 0.5
    while True:
        try:
            return _engine_for(url, settings)
        except DatabaseUnavailable as exc:
            if not _unreachable(exc) or time.monotonic() + delay > deadline:
                raise
            log.warning("%s; trying again in %.1f s", exc.message.splitlines()[0], delay)
            time.sleep(delay)
            delay = min(delay * 2, 5.0)


def get_read_engine(settings: Settings | None = None) -> Engine:
    """The engine of reads that may be a little behind the primary: statements, histories,
    reports, proofs of reserves (``CUSTODY_DATABASE_REPLICA_URL``; without one, the primary's
    engine). Never for a read that approves spending: a replica lagging behind would show
    money that is already reserved or spent (available balances, limits, reserves read the
    primary, inside the transaction that writes)."""
    settings = settings or get_settings()
    if not settings.database_replica_url:
        return get_engine(settings)
    return _engine_for(to_sqlalchemy_url(settings.database_replica_url), settings)


def _engine_for(url: str, settings: Settings) -> Engine:
    with _lock:
        if url not in _engines:
            check_schema(url, settings.app_role)
            _engines[url] = make_engine(
                url,
                app_role=settings.app_role,
                pool_size=settings.pool_size,
                statement_timeout_ms=settings.statement_timeout_ms,
                pooler=settings.database_pooler,
            )
        return _engines[url]


def owner_engine(url: str) -> Engine:
    """An engine that keeps the login's own role: for migrations and administration only."""
    return sa.create_engine(url, poolclass=sa.pool.NullPool)


def is_reachable(engine: Engine) -> bool:
    """Whether the database answers a trivial statement on a pooled connection (liveness)."""
    try:
        with engine.connect() as conn:
            conn.execute(sa.text("SELECT 1"))
    except sa.exc.DBAPIError:
        return False
    return True


def driver_rows(conn: Connection, statement: str, params: Any, *,
                prepare: bool | None = None) -> list[Any]:
    """Run ``statement`` (psycopg placeholders) on ``conn``'s psycopg connection, in its
    transaction, and return all its rows.

    For hot statements only: SQLAlchemy's execution layer costs about 0.1 ms of client CPU per
    statement (result metadata, contexts), more than the driver call itself (bench/RESULTS.md).
    The connection's ``before_cursor_execute`` / ``after_cursor_execute`` events fire as
    SQLAlchemy fires them, so statement counts (tests, bench) and SQL tracing still see these
    statements (a listener's rewritten statement, ``retval=True``, is not used, and
    ``handle_error`` does not fire). Driver errors are re-raised as SQLAlchemy's ``DBAPIError``
    subclasses, as from any other repository function (retries read their SQLSTATE); a
    connection the driver reports broken is invalidated. ``prepare``: psycopg's (True: a
    server-side prepared statement from the first call; None: after a few calls), ignored when
    the connection prepares nothing (behind a transaction pooler, ``make_engine``).
    """
    return driver_send(conn, statement, params, prepare=prepare).rows()


@dataclass
class DriverResult:
    """A statement ``driver_send`` sent; its rows are read by :meth:`rows` (in a
    ``driver_pipeline`` block, once the block has ended)."""

    conn: Connection
    cursor: Any
    statement: str
    params: Any

    def rows(self) -> list[Any]:
        """Every row of the statement (the cursor is closed afterwards)."""
        try:
            with _driver_errors(self.conn, self.statement, self.params):
                return list(self.cursor.fetchall())
        finally:
            self.cursor.close()

    @property
    def rowcount(self) -> int:
        """The rows the statement wrote (an INSERT or UPDATE)."""
        return int(self.cursor.rowcount)

    def close(self) -> None:
        """Close the cursor (a statement whose rows are not read)."""
        self.cursor.close()


def driver_send(conn: Connection, statement: str, params: Any, *,
                prepare: bool | None = None) -> DriverResult:
    """Send ``statement`` as ``driver_rows`` runs it, without reading its rows yet: in a
    ``driver_pipeline`` block it is queued with the statements around it."""
    driver = conn.connection.driver_connection
    assert driver is not None
    if driver.prepare_threshold is None:
        prepare = False
    # SQLAlchemy must know the transaction, or its commit would not reach the driver.
    assert driver.autocommit or conn.in_transaction(), "run inside the unit of work's transaction"
    cursor = driver.cursor()
    try:
        conn.dispatch.before_cursor_execute(conn, cursor, statement, params, None, False)
        with _driver_errors(conn, statement, params):
            cursor.execute(statement, params, prepare=prepare)
        conn.dispatch.after_cursor_execute(conn, cursor, statement, params, None, False)
    except BaseException:
        cursor.close()
        raise
    return DriverResult(conn, cursor, statement, params)


@contextlib.contextmanager
def driver_pipeline(conn: Connection) -> Iterator[None]:
    """Statements ``driver_send`` sends inside the block go to the server together, and their
    results come back at its end: one round trip for all of them (psycopg's pipeline mode). The
    first statement that fails makes the server skip the rest; its error is raised as the block
    ends, as ``driver_rows`` raises it, and the transaction is then failed (roll it back)."""
    driver = conn.connection.driver_connection
    assert driver is not None
    with _driver_errors(conn, "(pipeline)", None), driver.pipeline():
        yield


@contextlib.contextmanager
def _driver_errors(conn: Connection, statement: str, params: Any) -> Iterator[None]:
    """Driver errors as SQLAlchemy's ``DBAPIError`` subclasses; a connection the driver reports
    broken is invalidated."""
    try:
        yield
    except conn.dialect.loaded_dbapi.Error as exc:
        driver = conn.connection.driver_connection
        if driver is not None and driver.broken:
            conn.invalidate(exc)
        raise sa.exc.DBAPIError.instance(
            statement, params, exc, conn.dialect.loaded_dbapi.Error) from exc
