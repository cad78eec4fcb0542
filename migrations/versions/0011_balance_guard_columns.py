"""Ledger: the balance rows' immutability guard fires only for UPDATEs naming its columns

Revision ID: 0011_balance_guard_columns
Revises: 0010_ledger_post_one
Create Date: 2026-11-30
"""

from alembic import op

from migrations import run_sql_file

revision = "0011_balance_guard_columns"
down_revision = "0010_ledger_post_one"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Run the revision's SQL file (one trigger, recreated)."""
    run_sql_file(op.get_bind(), "0011_balance_guard_columns.sql")


def downgrade() -> None:
    """Forward-only, as every revision of this schema."""
    raise NotImplementedError("migrations are forward-only")
