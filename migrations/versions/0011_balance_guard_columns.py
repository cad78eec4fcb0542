"""Ledger: nothing left (the balance guard's trigger is in sql/triggers/account_balances.sql).

Revision ID: 0011_balance_guard_columns
Revises: 0010_ledger_post_one
Create Date: 2026-11-30
"""

revision = "0011_balance_guard_columns"
down_revision = "0010_ledger_post_one"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Nothing: this revision only recreated a trigger, which is now a definition file."""


def downgrade() -> None:
    """Forward-only, as every revision of this schema."""
    raise NotImplementedError("migrations are forward-only")
