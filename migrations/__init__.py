"""Alembic migrations: they own the whole schema, its triggers, functions and grants.

Each revision runs SQL files from ``migrations/sql`` through the driver connection (Alembic's
``op.execute`` mangles ``:name`` and ``%`` inside PL/pgSQL bodies). ``upgrade(url)`` applies
every revision; it runs as the login role (the owner), never as the application role.
"""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config

HERE = Path(__file__).resolve().parent
SQL_DIR = HERE / "sql"


def alembic_config(url: str) -> Config:
    """An Alembic configuration for the database at ``url``."""
    cfg = Config()
    cfg.set_main_option("script_location", str(HERE))
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg


def upgrade(url: str, revision: str = "head") -> None:
    """Apply migrations up to ``revision``."""
    command.upgrade(alembic_config(url), revision)


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
