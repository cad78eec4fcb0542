"""The engine's URLs and connection settings: several hosts (libpq picks the primary), and the
transaction-pooler setting behind a real PgBouncer."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from config.database import make_engine, to_sqlalchemy_url
from config.errors import ConfigurationInvalid
from devtools.pgbouncer import PgBouncer
from devtools.replica import Replica


def _libpq_args(url: str) -> dict[str, object]:
    sa_url = sa.make_url(url)
    return dict(sa.create_engine(sa_url).dialect.create_connect_args(sa_url)[1])


class TestMultiHostUrls:
    @pytest.mark.parametrize("given", [
        "postgresql://app:pw@db1:5432,db2:5433/custody?target_session_attrs=read-write",
        "host=db1,db2 port=5432,5433 user=app password=pw dbname=custody "
        "target_session_attrs=read-write",
    ])
    def test_reach_libpq_unchanged(self, given: str) -> None:
        args = _libpq_args(to_sqlalchemy_url(given))
        assert {k: args[k] for k in ("host", "port", "user", "password", "dbname",
                                     "target_session_attrs")} == {
            "host": "db1,db2", "port": "5432,5433", "user": "app", "password": "pw",
            "dbname": "custody", "target_session_attrs": "read-write"}

    def test_a_single_host_url_is_left_as_it_was(self) -> None:
        assert to_sqlalchemy_url("postgresql://u@h:5/d?sslmode=require") == \
            "postgresql+psycopg://u@h:5/d?sslmode=require"

    def test_the_primary_is_found_past_a_dead_host_and_a_standby(
            self, database_url: str, replica: Replica) -> None:
        primary = sa.make_url(database_url).query["host"]
        standby = sa.make_url(replica.url).query["host"]
        name = sa.make_url(database_url).database
        # A host nobody listens on, the standby, then the primary: read-write skips the first
        # two.
        url = to_sqlalchemy_url(f"host=127.0.0.1,{standby},{primary} port=1,5432,5432 "
                                f"user=postgres dbname={name} target_session_attrs=read-write")
        engine = make_engine(url, pool_size=1)
        try:
            with engine.connect() as conn:
                assert conn.execute(sa.text("SELECT pg_is_in_recovery()")).scalar() is False
                assert conn.execute(sa.text("SELECT current_user")).scalar() == "custody_app"
        finally:
            engine.dispose()


class TestTransactionPooler:
    def test_the_statement_timeout_holds_in_every_transaction(
            self, database_url: str, pgbouncer: PgBouncer) -> None:
        engine = make_engine(pgbouncer.url(database_url, "custody_app"), pool_size=4,
                             statement_timeout_ms=234, pooler="transaction")
        try:
            for _ in range(6):
                with engine.connect() as conn:
                    assert conn.execute(sa.text(
                        "SELECT current_setting('statement_timeout')")).scalar() == "234ms"
                    with pytest.raises(sa.exc.OperationalError, match="statement timeout"):
                        conn.execute(sa.text("SELECT pg_sleep(2)"))
        finally:
            engine.dispose()

    def test_a_transaction_may_still_begin_with_its_isolation_and_snapshot(
            self, database_url: str, pgbouncer: PgBouncer) -> None:
        # The timeout is set without taking a snapshot: SET TRANSACTION ISOLATION LEVEL and
        # SET TRANSACTION SNAPSHOT (the proof of reserves) must come before any query.
        engine = make_engine(pgbouncer.url(database_url, "custody_app"), pool_size=2,
                             pooler="transaction")
        try:
            with engine.connect() as exporter, engine.connect() as importer:
                exporter.execute(sa.text("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ"))
                snapshot = exporter.execute(sa.text("SELECT pg_export_snapshot()")).scalar()
                importer.execute(sa.text(
                    "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY"))
                importer.execute(sa.text(f"SET TRANSACTION SNAPSHOT '{snapshot}'"))
                assert importer.execute(sa.text("SELECT 1")).scalar() == 1
        finally:
            engine.dispose()

    def test_a_superuser_login_is_refused(self, database_url: str) -> None:
        # Its SET ROLE would stay on one server connection of PgBouncer's (the test server's
        # login is a superuser).
        engine = make_engine(database_url, pool_size=1, pooler="transaction")
        try:
            with pytest.raises(ConfigurationInvalid, match="login is a superuser"):
                engine.connect()
        finally:
            engine.dispose()
