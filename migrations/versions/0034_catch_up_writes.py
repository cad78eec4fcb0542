"""What a credited deposit costs the database: deposit events render their payload when read,
the deposit tables' foreign keys become lookups per statement, an unused history index goes.

Revision ID: 0034_catch_up_writes
Revises: 0033_audit_trail
Create Date: 2026-12-07
"""

# A revision holds tables, columns, constraints, indexes, roles, table grants, data changes,
# drops and signature changes, in sql/revisions/<revision>.sql. A function, a table's triggers
# or a view is a definition file (sql/functions/, sql/triggers/, sql/views/), applied after the
# revisions whenever its text changes: edit that file instead. Then run `make schema`.

from alembic import op

from migrations import run_sql_file

revision = "0034_catch_up_writes"
down_revision = "0033_audit_trail"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Run the revision's SQL file."""
    run_sql_file(op.get_bind(), "revisions/0034_catch_up_writes.sql")


def downgrade() -> None:
    """Forward-only, as every revision of this schema."""
    raise NotImplementedError("migrations are forward-only")
