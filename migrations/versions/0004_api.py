"""HTTP API: clients, users, keys, idempotency records, audit trail, rate-limit counters.

Revision ID: 0004_api
Revises: 0003_withdrawals
Create Date: 2026-11-30
"""

from alembic import op

from migrations import run_sql_file

revision = "0004_api"
down_revision = "0003_withdrawals"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create the API tables and grant the application role its rights."""
    bind = op.get_bind()
    run_sql_file(bind, "revisions/0004_api.sql")
    run_sql_file(bind, "revisions/0004_api_grants.sql")


def downgrade() -> None:
    """Forward-only: the audit trail is append-only."""
    raise NotImplementedError("the API audit trail is append-only: migrations are forward-only")
