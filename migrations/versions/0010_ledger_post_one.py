"""Ledger: the reference index leaves out NULL references.

Revision ID: 0010_ledger_post_one
Revises: 0009_rate_limit_slots
Create Date: 2026-11-30
"""

from alembic import op

from migrations import run_sql_file

revision = "0010_ledger_post_one"
down_revision = "0009_rate_limit_slots"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Run the revision's SQL file."""
    run_sql_file(op.get_bind(), "revisions/0010_ledger_post_one.sql")


def downgrade() -> None:
    """Forward-only, as every revision of this schema."""
    raise NotImplementedError("migrations are forward-only")
