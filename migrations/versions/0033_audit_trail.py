"""The audit trail of every staff action: its channel (api, console, cli), a refusal's reason,
command line rows (no API key), indexes for reading it by actor and time.

Revision ID: 0033_audit_trail
Revises: 0030_money_table_grants
Create Date: 2026-12-03
"""

# A revision holds tables, columns, constraints, indexes, roles, table grants, data changes,
# drops and signature changes, in sql/revisions/<revision>.sql. A function, a table's triggers
# or a view is a definition file (sql/functions/, sql/triggers/, sql/views/), applied after the
# revisions whenever its text changes: edit that file instead. Then run `make schema`.

from alembic import op

from migrations import run_sql_file

revision = "0033_audit_trail"
down_revision = "0032_sealed_secrets"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Run the revision's SQL file."""
    run_sql_file(op.get_bind(), "revisions/0033_audit_trail.sql")


def downgrade() -> None:
    """Forward-only, as every revision of this schema."""
    raise NotImplementedError("migrations are forward-only")
