"""Alembic environment: online migrations only, on the owner's connection, in one transaction.

The revisions that are due and then the changed definition files (migrations.definitions) are
applied in one database transaction: an upgrade lands whole or not at all, and a revision that
drops an old function lands together with the definitions that stop calling it.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import context

from migrations import UPGRADE_LOCK, definitions

config = context.config


def run_migrations_online() -> None:
    """Run the due revisions, then the definitions, in one transaction."""
    url = config.get_main_option("sqlalchemy.url")
    assert url, "sqlalchemy.url is not set"
    engine = sa.create_engine(url, poolclass=sa.pool.NullPool)
    with engine.connect() as connection:
        context.configure(connection=connection, transaction_per_migration=False)
        with context.begin_transaction():
            # Two upgrades at once (two processes starting) would both apply the same revisions:
            # the second waits here, then finds nothing left to do.
            connection.exec_driver_sql(f"SELECT pg_advisory_xact_lock({UPGRADE_LOCK[0]}, "
                                       f"{UPGRADE_LOCK[1]})")
            before = context.get_context().get_current_revision()
            context.run_migrations()
            if config.attributes.get("definitions", True):
                after = context.get_context().get_current_revision()
                driver = connection.connection.driver_connection
                definitions.apply(driver, everything=before != after)
    engine.dispose()


run_migrations_online()
