"""Secrets at rest: webhook signing secrets, the console's cookie key and the stored answers
that carry a webhook secret are sealed under CUSTODY_SECRETS_KEY (issue 19).

Revision ID: 0032_sealed_secrets
Revises: 0030_money_table_grants
Create Date: 2026-12-03
"""

# A revision holds tables, columns, constraints, indexes, roles, table grants, data changes,
# drops and signature changes, in sql/revisions/<revision>.sql. A function, a table's triggers
# or a view is a definition file (sql/functions/, sql/triggers/, sql/views/), applied after the
# revisions whenever its text changes: edit that file instead. Then run `make schema`.
#
# The existing clear values are sealed here, in the upgrade's transaction, by the process that
# runs it (`custody db upgrade`, or an engine process at start), which has the secrets key: the
# key never reaches the database, so SQL alone cannot do it. A database with no secret in it
# (a new one, the tests' template) needs no key. One with secrets and no usable key fails the
# upgrade with a one-line configuration_invalid and nothing changes: the clear columns are never
# left beside the sealed ones, so no code path can sign from a clear column afterwards.

import sqlalchemy as sa
from alembic import op

from migrations import run_sql_file

revision = "0032_sealed_secrets"
down_revision = "0031_destination_allowlists"
branch_labels = None
depends_on = None

#: The idempotent answers that carry a webhook secret in clear (api.routes.webhooks).
SECRET_ANSWERS = ("webhook_endpoint.create", "webhook_endpoint.rotate")


def upgrade() -> None:
    """Add the sealed columns, seal what is stored in clear, drop the clear columns."""
    bind = op.get_bind()
    run_sql_file(bind, "revisions/0032_sealed_secrets.sql")
    _seal_existing(bind)
    run_sql_file(bind, "revisions/0032_sealed_secrets_finish.sql")


def _seal_existing(bind: sa.engine.Connection) -> None:
    endpoints = bind.execute(sa.text(
        "SELECT id, secret, previous_secret FROM webhook_endpoints ORDER BY id")).all()
    console = bind.execute(sa.text("SELECT secret FROM console_secrets WHERE id = 1")).first()
    answers = bind.execute(sa.text(
        "SELECT client_id, operation, key, response_body FROM api_idempotency "
        "WHERE operation = ANY (:ops) AND response_body IS NOT NULL"),
        {"ops": list(SECRET_ANSWERS)}).all()
    if not endpoints and console is None and not answers:
        return
    from config.encryption import (
        CONSOLE_PURPOSE,
        keyring,
        purpose_of_answer,
        purpose_of_endpoint,
    )

    keys = keyring()
    for endpoint_id, secret, previous in endpoints:
        purpose = purpose_of_endpoint(endpoint_id)
        bind.execute(sa.text(
            "UPDATE webhook_endpoints SET secret_sealed = :s, previous_secret_sealed = :p "
            "WHERE id = :id"), {"id": endpoint_id, "s": keys.seal(secret, purpose),
                                "p": None if previous is None else keys.seal(previous, purpose)})
    if console is not None:
        bind.execute(sa.text("UPDATE console_secrets SET secret_sealed = :s WHERE id = 1"),
                     {"s": keys.seal(console[0], CONSOLE_PURPOSE)})
    for client_id, operation, key, body in answers:
        bind.execute(sa.text(
            "UPDATE api_idempotency SET response_body = :b WHERE client_id = :c "
            "AND operation = :o AND key = :k"),
            {"b": keys.seal(body, purpose_of_answer(client_id, operation, key)),
             "c": client_id, "o": operation, "k": key})


def downgrade() -> None:
    """Forward-only, as every revision of this schema."""
    raise NotImplementedError("migrations are forward-only")
