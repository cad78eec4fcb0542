"""Withdrawals: the writer role of the reserve; four foreign keys become checks.

Revision ID: 0007_withdrawal_fast_path
Revises: 0006_ledger_fast_path
Create Date: 2026-11-30
"""

from alembic import op

from migrations import run_sql_file

revision = "0007_withdrawal_fast_path"
down_revision = "0006_ledger_fast_path"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Run the revision's SQL file."""
    run_sql_file(op.get_bind(), "revisions/0007_withdrawal_fast_path.sql")


def downgrade() -> None:
    """Forward-only, as every revision of this schema."""
    raise NotImplementedError("migrations are forward-only")
