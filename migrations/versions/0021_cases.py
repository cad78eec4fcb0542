"""One list of every case in the engine: the cases table; deposit and withdrawal cases join it.

Revision ID: 0021_cases
Revises: 0018_cold_limits
Create Date: 2026-12-02
"""

# A revision holds tables, columns, constraints, indexes, roles, table grants, data changes,
# drops and signature changes, in sql/revisions/<revision>.sql. A function, a table's triggers
# or a view is a definition file (sql/functions/, sql/triggers/, sql/views/), applied after the
# revisions whenever its text changes: edit that file instead. Then run `make schema`.

from alembic import op

from migrations import run_sql_file

revision = "0021_cases"
down_revision = "0020_ledger_seals"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Run the revision's SQL file."""
    run_sql_file(op.get_bind(), "revisions/0021_cases.sql")


def downgrade() -> None:
    """Forward-only, as every revision of this schema."""
    raise NotImplementedError("migrations are forward-only")
