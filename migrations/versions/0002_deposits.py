"""Deposits: addresses, deposits, their history, cursors, cases and the provider inbox.

Revision ID: 0002_deposits
Revises: 0001_ledger
Create Date: 2026-11-29
"""

from alembic import op

from migrations import run_sql_file

revision = "0002_deposits"
down_revision = "0001_ledger"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create the deposit schema and grant the application role its rights."""
    bind = op.get_bind()
    run_sql_file(bind, "revisions/0002_deposits.sql")
    run_sql_file(bind, "revisions/0002_deposits_grants.sql")


def downgrade() -> None:
    """Forward-only: the deposit history is append-only."""
    raise NotImplementedError("the deposit history is append-only: migrations are forward-only")
