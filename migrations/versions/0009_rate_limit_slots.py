"""Rate limits: one counter row per key, window and database session.

Revision ID: 0009_rate_limit_slots
Revises: 0008_period_close_approvals
Create Date: 2026-11-30
"""

from alembic import op

from migrations import run_sql_file

revision = "0009_rate_limit_slots"
down_revision = "0008_period_close_approvals"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Run the revision's SQL file."""
    run_sql_file(op.get_bind(), "revisions/0009_rate_limit_slots.sql")


def downgrade() -> None:
    """Forward-only, as every revision of this schema."""
    raise NotImplementedError("migrations are forward-only")
