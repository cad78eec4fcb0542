"""Definitions: the table of applied definition files; functions that no file defines are dropped.

Revision ID: 0012_definitions
Revises: 0011_balance_guard_columns
Create Date: 2026-12-01
"""

from alembic import op

from migrations import run_sql_file

revision = "0012_definitions"
down_revision = "0011_balance_guard_columns"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Run the revision's SQL file."""
    run_sql_file(op.get_bind(), "revisions/0012_definitions.sql")


def downgrade() -> None:
    """Forward-only, as every revision of this schema."""
    raise NotImplementedError("migrations are forward-only")
