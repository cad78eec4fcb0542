"""Withdrawals: the state ``signing`` (a nonce and fee caps assigned, the signature asked for
outside any transaction).

Revision ID: 0014_withdrawal_signing
Revises: 0013_own_addresses
Create Date: 2026-12-01
"""

# A revision holds tables, columns, constraints, indexes, roles, table grants, data changes,
# drops and signature changes, in sql/revisions/<revision>.sql. A function, a table's triggers
# or a view is a definition file (sql/functions/, sql/triggers/, sql/views/), applied after the
# revisions whenever its text changes: edit that file instead. Then run `make schema`.

from alembic import op

from migrations import run_sql_file

revision = "0014_withdrawal_signing"
down_revision = "0013_own_addresses"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Run the revision's SQL file."""
    run_sql_file(op.get_bind(), "revisions/0014_withdrawal_signing.sql")


def downgrade() -> None:
    """Forward-only, as every revision of this schema."""
    raise NotImplementedError("migrations are forward-only")
