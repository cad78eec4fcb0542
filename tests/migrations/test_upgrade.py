"""The migrations end in one schema, migrations/schema.sql, however a database gets there: a
fresh install, an upgrade from any earlier revision, an upgrade of a database that the code
before the definition files left at 0011. Definition files are applied again only when their
text changed (or after a revision ran)."""

from __future__ import annotations

import difflib
import itertools
import json
import os
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
import sqlalchemy as sa
from alembic.script import ScriptDirectory

import migrations
from config.database import owner_engine, with_database
from migrations import definitions
from migrations.snapshot import dump

# Not named *.sql: it is a record, not a definition (a search for a function finds its file).
FIXTURE = Path(__file__).parent / "fixtures" / "schema_0011_before_definitions.sql.txt"
_names = itertools.count()


def revisions() -> list[str]:
    """Every revision, oldest first."""
    script = ScriptDirectory.from_config(migrations.alembic_config("postgresql://unused"))
    return [r.revision for r in reversed(list(script.walk_revisions()))]


def same_schema(actual: str) -> None:
    """Assert that ``actual`` is the committed snapshot, showing the difference if not."""
    expected = migrations.SCHEMA_SNAPSHOT.read_text()
    if actual != expected:
        diff = "".join(itertools.islice(difflib.unified_diff(
            expected.splitlines(keepends=True), actual.splitlines(keepends=True),
            "migrations/schema.sql", "migrated database"), 80))
        pytest.fail("the schema differs from migrations/schema.sql (if the change is meant, "
                    f"run `make schema` and commit the file):\n{diff}")


@pytest.fixture
def empty_url(server_url: str) -> Iterator[str]:
    """A new, empty database (not cloned from the migrated template)."""
    name = f"m_{os.getpid()}_{next(_names)}"
    admin = owner_engine(server_url)
    with admin.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
    yield with_database(server_url, name)
    with admin.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    admin.dispose()


def applied(url: str) -> dict[str, object]:
    """path -> applied_at of every recorded definition file."""
    eng = owner_engine(url)
    with eng.connect() as conn:
        rows = conn.execute(sa.text("SELECT path, applied_at FROM schema_definitions")).all()
    eng.dispose()
    return {r.path: r.applied_at for r in rows}


class TestSnapshot:
    def test_a_fresh_install_is_the_snapshot(self, template_url: str) -> None:
        same_schema(dump(template_url))

    @pytest.mark.parametrize("start", revisions()[:-1])
    def test_an_upgrade_from_every_revision_is_the_snapshot(
        self, empty_url: str, start: str
    ) -> None:
        migrations.upgrade(empty_url, start)
        migrations.upgrade(empty_url)
        same_schema(dump(empty_url))

    def test_an_upgrade_of_the_layout_before_definitions_is_the_snapshot(
        self, empty_url: str
    ) -> None:
        # Every database deployed before the definition files: its functions and triggers were
        # made by the old revisions' SQL (ledger_post_batch, ledger_post_arrays_body, ...).
        eng = owner_engine(empty_url)
        with eng.begin() as conn:
            conn.connection.driver_connection.execute(FIXTURE.read_text())  # type: ignore[union-attr]
            conn.exec_driver_sql(
                "INSERT INTO public.alembic_version VALUES ('0011_balance_guard_columns')")
        eng.dispose()
        migrations.upgrade(empty_url)
        same_schema(dump(empty_url))


class TestDefinitions:
    def test_every_file_is_applied_and_recorded(self, template_url: str) -> None:
        files = definitions.definitions()
        assert len(files) > 30
        assert set(applied(template_url)) == {d.path for d in files}

    def test_an_upgrade_with_nothing_changed_applies_nothing(self, database_url: str) -> None:
        before = applied(database_url)
        migrations.upgrade(database_url)
        assert applied(database_url) == before

    def test_a_changed_file_is_applied_again_and_only_it(self, database_url: str) -> None:
        # As if the file's text had changed since it was applied: its recorded hash differs.
        # The function is dropped too, so that only applying the file can bring it back.
        eng = owner_engine(database_url)
        with eng.begin() as conn:
            conn.exec_driver_sql("DROP FUNCTION outbox_withdrawal_type(text) CASCADE")
            conn.exec_driver_sql(
                "UPDATE schema_definitions SET sha256 = repeat('0', 64) "
                "WHERE path = 'functions/outbox_withdrawal_type.sql'")
        before = applied(database_url)
        migrations.upgrade(database_url)
        after = applied(database_url)
        changed = {p for p in after if after[p] != before[p]}
        assert changed == {"functions/outbox_withdrawal_type.sql"}
        with eng.connect() as conn:
            assert conn.exec_driver_sql(
                "SELECT outbox_withdrawal_type('settled'), outbox_withdrawal_type('signed')"
            ).one() == ("withdrawal.settled", None)
        eng.dispose()

    def test_a_failing_definition_leaves_the_database_as_it_was(self, empty_url: str) -> None:
        # One transaction for the revisions and the definitions: nothing of a broken upgrade
        # lands, not even the revision that ran before the definition that failed. Here a
        # function of the same signature and another return type makes one file fail.
        migrations.upgrade(empty_url, "0011_balance_guard_columns")
        eng = owner_engine(empty_url)
        with eng.begin() as conn:
            conn.exec_driver_sql("CREATE FUNCTION outbox_withdrawal_type(p_state text) "
                                 "RETURNS int LANGUAGE sql AS 'SELECT 1'")
        with pytest.raises(psycopg.errors.InvalidFunctionDefinition):
            migrations.upgrade(empty_url)
        with eng.connect() as conn:
            version = conn.exec_driver_sql("SELECT version_num FROM alembic_version").scalar()
            table = conn.exec_driver_sql("SELECT to_regclass('schema_definitions')").scalar()
        eng.dispose()
        assert (version, table) == ("0011_balance_guard_columns", None)


def test_events_written_before_0026_keep_their_version_1_rendering(empty_url: str) -> None:
    """An event stored before payload version 2 stays version 1 through the upgrade, so it
    is delivered and listed as it was first delivered; new rows are version 2."""
    from datetime import UTC, datetime

    from api import outbox

    migrations.upgrade(empty_url, "0025_console_sessions")
    eng = owner_engine(empty_url)
    at = datetime(2026, 11, 1, tzinfo=UTC)
    flat = {"withdrawal_id": "7", "amount_minor": "30000000", "amount": "30"}
    with eng.begin() as conn:
        conn.execute(sa.text(
            "INSERT INTO outbox_events (event_id, type, subject, payload, created_at) VALUES "
            "('evt_wd_7', 'withdrawal.reserved', 'withdrawal:7', CAST(:p AS jsonb), :at)"),
            {"p": json.dumps(flat), "at": at})
    before = outbox.event_body("evt_wd_7", "withdrawal.reserved", at, flat)
    eng.dispose()
    migrations.upgrade(empty_url)
    eng = owner_engine(empty_url)
    with eng.begin() as conn:
        row = conn.execute(sa.text(
            "SELECT type, created_at, payload, version FROM outbox_events "
            "WHERE event_id = 'evt_wd_7'")).one()
        conn.execute(sa.text(
            "INSERT INTO outbox_events (event_id, type, subject, payload) VALUES "
            "('evt_alert_new', 'alert.ledger_drift', 'alert:x', '{\"next\": \"x\"}')"))
        new_version = conn.execute(sa.text(
            "SELECT version FROM outbox_events WHERE event_id = 'evt_alert_new'")).scalar()
    eng.dispose()
    assert row.version == 1 and new_version == 2
    assert outbox.event_body("evt_wd_7", row.type, row.created_at, row.payload,
                             row.version) == before
    assert b'"version"' not in before
