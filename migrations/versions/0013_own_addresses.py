"""Own addresses: hot and cold addresses watched, internal transfers, treasury fundings, case votes.

Revision ID: 0013_own_addresses
Revises: 0012_definitions
Create Date: 2026-12-01
"""

# A revision holds tables, columns, constraints, indexes, roles, table grants, data changes,
# drops and signature changes, in sql/revisions/<revision>.sql. A function, a table's triggers
# or a view is a definition file (sql/functions/, sql/triggers/, sql/views/), applied after the
# revisions whenever its text changes: edit that file instead. Then run `make schema`.

from alembic import op

from migrations import run_sql_file

revision = "0013_own_addresses"
down_revision = "0012_definitions"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Run the revision's SQL file."""
    run_sql_file(op.get_bind(), "revisions/0013_own_addresses.sql")


def downgrade() -> None:
    """Forward-only, as every revision of this schema."""
    raise NotImplementedError("migrations are forward-only")
