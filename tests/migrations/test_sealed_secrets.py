"""Revision 0032 seals the secrets stored in clear before it (webhook endpoints' current and
previous secrets, the console's cookie key, the stored answers that carry a webhook secret)
and drops the clear columns; without a usable key it refuses and changes nothing."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
import sqlalchemy as sa

import migrations
from config.database import owner_engine
from config.encryption import CONSOLE_PURPOSE, KEY_ENV, keyring, purpose_of_answer
from config.errors import ConfigurationInvalid
from config.settings import get_settings
from tests.migrations.test_upgrade import empty_url  # noqa: F401  (a fixture)

BEFORE = "0030_money_table_grants"
SECRET = "whsec_" + "c0" * 32
PREVIOUS = "whsec_" + "d1" * 32
COOKIE_KEY = "k" * 64
ANSWER = json.dumps({"id": "1", "secret": SECRET})


def _clear_rows(url: str) -> None:
    """What a database at 0030 holds: the secrets in clear."""
    eng = owner_engine(url)
    with eng.begin() as conn:
        client = conn.execute(sa.text(
            "INSERT INTO api_clients (name) VALUES ('acme') RETURNING id")).scalar_one()
        conn.execute(sa.text(
            "INSERT INTO webhook_endpoints (id, client_id, url, secret, previous_secret, "
            "previous_secret_expires_at) VALUES (5, :c, 'https://example.com/h', :s, :p, "
            "now() + interval '1 hour')"), {"c": client, "s": SECRET, "p": PREVIOUS})
        conn.execute(sa.text("INSERT INTO console_secrets (id, secret, created_at) "
                             "VALUES (1, :s, now())"), {"s": COOKIE_KEY})
        conn.execute(sa.text(
            "INSERT INTO api_idempotency (client_id, operation, key, fingerprint, state, "
            "response_status, response_body) VALUES (:c, 'webhook_endpoint.create', 'k1', "
            ":f, 'completed', 201, :b)"), {"c": client, "f": "0" * 64, "b": ANSWER})
    eng.dispose()


@pytest.fixture
def configured_without_key(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A process on a configured database without CUSTODY_SECRETS_KEY."""
    monkeypatch.delenv(KEY_ENV)
    monkeypatch.setenv("CUSTODY_DATABASE_URL", "postgresql://db.example/custody")
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


def test_clear_secrets_are_sealed_and_the_clear_columns_dropped(empty_url: str) -> None:  # noqa: F811
    migrations.upgrade(empty_url, BEFORE)
    _clear_rows(empty_url)
    migrations.upgrade(empty_url)
    eng = owner_engine(empty_url)
    with eng.connect() as conn:
        endpoint = conn.execute(sa.text(
            "SELECT id, secret_sealed, previous_secret_sealed FROM webhook_endpoints")).one()
        cookie = conn.execute(sa.text("SELECT secret_sealed FROM console_secrets")).scalar_one()
        client, body = conn.execute(sa.text(
            "SELECT client_id, response_body FROM api_idempotency")).one()
        columns = set(conn.execute(sa.text(
            "SELECT table_name || '.' || column_name FROM information_schema.columns "
            "WHERE table_name IN ('webhook_endpoints', 'console_secrets')")).scalars())
    eng.dispose()
    keys = keyring()
    assert keys.open(endpoint.secret_sealed, "webhook_endpoint:5") == SECRET
    assert keys.open(endpoint.previous_secret_sealed, "webhook_endpoint:5") == PREVIOUS
    assert keys.open(cookie, CONSOLE_PURPOSE) == COOKIE_KEY
    assert keys.open(body, purpose_of_answer(client, "webhook_endpoint.create", "k1")) == ANSWER
    assert not {"webhook_endpoints.secret", "webhook_endpoints.previous_secret",
                "console_secrets.secret"} & columns


def test_without_a_key_the_upgrade_refuses_and_changes_nothing(
        empty_url: str, configured_without_key: None) -> None:  # noqa: F811
    migrations.upgrade(empty_url, BEFORE)
    _clear_rows(empty_url)
    with pytest.raises(ConfigurationInvalid, match=f"setting {KEY_ENV}: required"):
        migrations.upgrade(empty_url)
    eng = owner_engine(empty_url)
    with eng.connect() as conn:
        version = conn.execute(sa.text("SELECT version_num FROM alembic_version")).scalar_one()
        secret = conn.execute(sa.text("SELECT secret FROM webhook_endpoints")).scalar_one()
    eng.dispose()
    assert (version, secret) == (BEFORE, SECRET)


def test_a_database_without_secrets_needs_no_key(
        empty_url: str, configured_without_key: None) -> None:  # noqa: F811
    migrations.upgrade(empty_url)
    eng = owner_engine(empty_url)
    with eng.connect() as conn:
        version = conn.execute(sa.text("SELECT version_num FROM alembic_version")).scalar_one()
    eng.dispose()
    assert version == migrations.head_revision()
