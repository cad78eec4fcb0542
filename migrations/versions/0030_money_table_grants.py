"""The database refuses what the service refuses: the money tables' rows are written only
through functions that check the state machine (issue 19).

Revision ID: 0030_money_table_grants
Revises: 0029_api_key_lifecycle
Create Date: 2026-12-03
"""

# A revision holds tables, columns, constraints, indexes, roles, table grants, data changes,
# drops and signature changes, in sql/revisions/<revision>.sql. A function, a table's triggers
# or a view is a definition file (sql/functions/, sql/triggers/, sql/views/), applied after the
# revisions whenever its text changes: edit that file instead. Then run `make schema`.

from alembic import op

from migrations import run_sql_file

revision = "0030_money_table_grants"
down_revision = "0029_api_key_lifecycle"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Run the revision's SQL file."""
    run_sql_file(op.get_bind(), "revisions/0030_money_table_grants.sql")


def downgrade() -> None:
    """Forward-only, as every revision of this schema."""
    raise NotImplementedError("migrations are forward-only")
