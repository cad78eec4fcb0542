"""Secrets at rest (issue 19): a copy of the database (pg_dump) holds no webhook secret and no
console key in clear, nor the key that seals them; after a rotation of CUSTODY_SECRETS_KEY
(``custody secrets rotate-key``) deliveries are still signed with the same secrets and the old
key is no longer needed; a sealed secret moved to another endpoint does not sign there."""

from __future__ import annotations

import base64
import os
import re
import subprocess
import uuid
from collections.abc import Iterator

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from api import outbox
from config.encryption import (
    CONSOLE_PURPOSE,
    KEY_ENV,
    OLD_KEY_ENV,
    SecretUnreadable,
    keyring,
)
from devtools.e2e import WebhookReceiver
from migrations.snapshot import pg_dump_binary
from tests.api.conftest import Api
from tests.api.test_cli import custody


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    """A real HTTP receiver on a free local port."""
    r = WebhookReceiver().start()
    yield r
    r.stop()


def make_endpoint(api: Api, url: str, client: str = "acme") -> tuple[dict[str, str], str]:
    """An endpoint made through the admin API, and the Idempotency-Key of that request."""
    key = uuid.uuid4().hex
    r = api.call("POST", "/v1/admin/webhook-endpoints", "carol", idem=key,
                 json={"client": client, "url": url})
    assert r.status_code == 201, r.text
    return dict(r.json()), key


def rotate(api: Api, endpoint_id: str) -> str:
    r = api.call("POST", f"/v1/admin/webhook-endpoints/{endpoint_id}/rotate", "carol",
                 idem=uuid.uuid4().hex)
    assert r.status_code == 200, r.text
    return str(r.json()["secret"])


def sign_in_to_console(api: Api) -> None:
    """A console sign-in (the first one stores the console's cookie key)."""
    form = api.http.get("/console/login")
    token = re.search(r'name="csrf" value="([^"]+)"', form.text).group(1)  # type: ignore[union-attr]
    signed_in = api.http.post("/console/login", data={"key": api.keys["sam"], "csrf": token})
    assert signed_in.status_code == 303, signed_in.text
    api.http.cookies.clear()


def console_key(engine: Engine) -> str:
    """The console's cookie key in clear (opened with this process's key)."""
    with engine.connect() as conn:
        sealed = conn.execute(sa.text("SELECT secret_sealed FROM console_secrets")).scalar_one()
    return keyring().open(sealed, CONSOLE_PURPOSE)


def pg_dump(database_url: str) -> str:
    """A full dump (schema and data) of the database, as a backup would take it."""
    parsed = sa.make_url(database_url).set(drivername="postgresql")
    return subprocess.run(
        [pg_dump_binary(), "--no-tablespaces",
         f"--dbname={parsed.render_as_string(hide_password=False)}"],
        check=True, capture_output=True, text=True, timeout=120).stdout


def test_a_database_dump_holds_no_secret_in_clear(api: Api, database_url: str,
                                                  receiver: WebhookReceiver) -> None:
    made, _ = make_endpoint(api, receiver.url)
    first = made["secret"]
    second = receiver.secret = rotate(api, made["id"])  # the first stays valid for 24 hours
    cli = custody(database_url, "webhooks", "endpoint", "globex", "https://example.com/hook")
    assert cli.returncode == 0, cli.stderr
    third = cli.stdout.strip()
    sign_in_to_console(api)
    cookie_key = console_key(api.engine)
    user = api.funded_user()
    api.withdraw(user)
    assert outbox.deliver_due(api.engine).delivered == 1
    assert outbox.verify_signature(first, receiver.requests[0].signature,
                                   receiver.requests[0].body)

    dump = pg_dump(database_url)
    assert "COPY public.webhook_endpoints" in dump and "COPY public.api_idempotency" in dump
    with api.engine.connect() as conn:
        sealed = conn.execute(sa.text(
            "SELECT secret_sealed FROM webhook_endpoints ORDER BY id")).scalars().all()
    assert len(sealed) == 2 and all(s in dump for s in sealed)  # the dump has the rows
    kek = os.environ[KEY_ENV]
    for secret in (first, second, third, cookie_key, kek, base64.b64decode(kek).hex()):
        assert secret not in dump, secret
        if secret.startswith("whsec_"):
            assert secret.removeprefix("whsec_") not in dump


def test_signing_goes_on_after_a_rotation_of_the_key(
        api: Api, database_url: str, receiver: WebhookReceiver,
        monkeypatch: pytest.MonkeyPatch) -> None:
    made, create_key = make_endpoint(api, receiver.url)
    old_secret = made["secret"]
    new_secret = receiver.secret = rotate(api, made["id"])
    sign_in_to_console(api)
    cookie_key = console_key(api.engine)
    old_key = os.environ[KEY_ENV]
    new_key = base64.b64encode(os.urandom(32)).decode()

    # Every process now has the new key and the old one: rotate-key re-wraps what is stored.
    monkeypatch.setenv(KEY_ENV, new_key)
    monkeypatch.setenv(OLD_KEY_ENV, old_key)
    rotated = custody(database_url, "secrets", "rotate-key")
    assert rotated.returncode == 0, rotated.stderr
    assert ("1 webhook endpoints, 1 console secret, 2 stored answers; 0 still under another key"
            in rotated.stdout), rotated.stdout
    again = custody(database_url, "secrets", "rotate-key")
    assert "0 webhook endpoints, 0 console secret, 0 stored answers" in again.stdout
    for secret in (old_key, new_key, old_secret, new_secret, cookie_key):
        assert secret not in rotated.stdout + rotated.stderr

    # The old key is dropped: everything still opens, and deliveries carry both signatures.
    monkeypatch.delenv(OLD_KEY_ENV)
    status = custody(database_url, "secrets", "status")
    assert status.returncode == 0 and "0 stored secrets under another key" in status.stdout
    assert console_key(api.engine) == cookie_key
    user = api.funded_user()
    api.withdraw(user)
    assert outbox.deliver_due(api.engine).delivered == 1
    delivered = receiver.requests[0]
    assert outbox.verify_signature(new_secret, delivered.signature, delivered.body)
    assert outbox.verify_signature(old_secret, delivered.signature, delivered.body)
    # The stored answer of the create (re-wrapped) replays the same secret.
    replay = api.call("POST", "/v1/admin/webhook-endpoints", "carol", idem=create_key,
                      json={"client": "acme", "url": receiver.url})
    assert replay.status_code == 201 and replay.headers["Idempotent-Replayed"] == "true"
    assert replay.json()["secret"] == old_secret

    # Without the key they were sealed under, nothing opens: a dump alone cannot sign.
    monkeypatch.setenv(KEY_ENV, old_key)
    api.withdraw(user)
    with pytest.raises(SecretUnreadable, match="sealed under key"):
        outbox.deliver_due(api.engine)


def test_a_secret_moved_to_another_endpoint_does_not_sign(
        api: Api, owner: Engine, receiver: WebhookReceiver) -> None:
    mine, _ = make_endpoint(api, receiver.url)
    other, _ = make_endpoint(api, "https://example.com/other", client="globex")
    with owner.begin() as conn:
        # Someone with write access to the database copies globex's sealed secret to acme's.
        conn.execute(sa.text(
            "UPDATE webhook_endpoints SET secret_sealed = "
            "(SELECT secret_sealed FROM webhook_endpoints WHERE id = :other) WHERE id = :mine"),
            {"other": int(other["id"]), "mine": int(mine["id"])})
    user = api.funded_user()
    api.withdraw(user)
    with pytest.raises(SecretUnreadable, match="belongs to another row"):
        outbox.deliver_due(api.engine)
    assert receiver.requests == []
