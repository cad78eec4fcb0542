"""Ledger core: tables, constraints and the application role's grants.

Revision ID: 0001_ledger
Revises:
Create Date: 2026-11-29
"""

from alembic import op

from migrations import run_sql_file

revision = "0001_ledger"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create the ledger schema."""
    bind = op.get_bind()
    run_sql_file(bind, "revisions/0001_ledger.sql")
    run_sql_file(bind, "revisions/0001_ledger_grants.sql")


def downgrade() -> None:
    """Forward-only: the ledger is append-only."""
    raise NotImplementedError("the ledger is append-only: migrations are forward-only")
