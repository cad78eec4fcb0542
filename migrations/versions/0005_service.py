"""Service: webhook endpoints, the outbox, deliveries, attempts and the job run log.
and the delivery log.

Revision ID: 0005_service
Revises: 0004_api
Create Date: 2026-11-30
"""

from alembic import op

from migrations import run_sql_file

revision = "0005_service"
down_revision = "0004_api"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create the outbox tables and grant the application role its rights."""
    bind = op.get_bind()
    run_sql_file(bind, "revisions/0005_service.sql")
    run_sql_file(bind, "revisions/0005_service_grants.sql")


def downgrade() -> None:
    """Forward-only: the outbox and the delivery log are append-only."""
    raise NotImplementedError("the outbox is append-only: migrations are forward-only")
