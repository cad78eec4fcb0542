"""Migrations: versioned revisions for tables and data, definition files for the code in SQL.

``sql/revisions/`` holds the versioned revisions' SQL (tables, columns, constraints, indexes,
roles, table grants, data changes, drops, signature changes), each run once by its Alembic
revision in ``versions/``. ``sql/functions/``, ``sql/triggers/`` and ``sql/views/`` hold the
current definition of every function, table's triggers and view, one file each, applied after
the revisions whenever they change (``migrations.definitions``). ``schema.sql`` is a snapshot of
the whole resulting schema, checked against a freshly migrated database by the tests, so that
every change to the database shows up in review as a diff of that one file.

Revisions run SQL files through the driver connection (Alembic's ``op.execute`` mangles
``:name`` and ``%`` inside PL/pgSQL bodies). ``upgrade(url)`` applies everything; it runs as the
login role (the owner), never as the application role.

Advisory lock (7390, 1): one upgrade of a database at a time.
"""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config

HERE = Path(__file__).resolve().parent
SQL_DIR = HERE / "sql"
SCHEMA_SNAPSHOT = HERE / "schema.sql"
UPGRADE_LOCK = (7390, 1)


def alembic_config(url: str) -> Config:
    """An Alembic configuration for the database at ``url``."""
    cfg = Config()
    cfg.set_main_option("script_location", str(HERE))
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg


def upgrade(url: str, revision: str = "head") -> None:
    """Apply the revisions up to ``revision`` and, when that is the head, the definitions.

    A revision before the head is for tests of the upgrade path: the definitions of today's code
    need the schema of the head revision.
    """
    cfg = alembic_config(url)
    cfg.attributes["definitions"] = revision == "head"
    command.upgrade(cfg, revision)


def run_sql_file(op_bind: object, name: str) -> None:
    """Execute one SQL file of ``migrations/sql`` on the migration's connection."""
    driver = op_bind.connection.driver_connection  # type: ignore[attr-defined]
    driver.execute((SQL_DIR / name).read_text())


def head_revision() -> str:
    """The newest revision of the migrations shipped with this code."""
    from alembic.script import ScriptDirectory

    head = ScriptDirectory.from_config(alembic_config("postgresql://unused")).get_current_head()
    assert head is not None, "no migrations found"
    return head
