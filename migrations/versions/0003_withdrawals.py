"""Withdrawals: requests, history, attempts, decisions, returns and nonces.

Revision ID: 0003_withdrawals
Revises: 0002_deposits
Create Date: 2026-11-29
"""

from alembic import op

from migrations import run_sql_file

revision = "0003_withdrawals"
down_revision = "0002_deposits"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create the withdrawal schema and grant the application role its rights."""
    bind = op.get_bind()
    run_sql_file(bind, "revisions/0003_withdrawals.sql")
    run_sql_file(bind, "revisions/0003_withdrawals_grants.sql")


def downgrade() -> None:
    """Forward-only: the withdrawal history is append-only."""
    raise NotImplementedError("the withdrawal history is append-only: migrations are forward-only")
