"""Alembic environment: online migrations only, on the owner's connection."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import context

config = context.config


def run_migrations_online() -> None:
    """Run migrations in one transaction on a fresh owner connection."""
    url = config.get_main_option("sqlalchemy.url")
    assert url, "sqlalchemy.url is not set"
    engine = sa.create_engine(url, poolclass=sa.pool.NullPool)
    with engine.connect() as connection:
        context.configure(connection=connection, transaction_per_migration=True)
        with context.begin_transaction():
            context.run_migrations()
    engine.dispose()


run_migrations_online()
