"""Secrets at rest: envelope encryption under a key that is never in the database.

The secrets the engine must read back in clear to use them (webhook signing secrets, the
console's cookie key, an idempotent answer that carries a new webhook secret) are stored
*sealed*: each value gets its own random data key (AES-256-GCM), and that data key is stored
wrapped (AES-256-GCM again) under the key-encryption key (KEK) from the environment. A database
dump, a backup or a replica holds only ciphertext: without the KEK it cannot sign a webhook
nor forge a console session.

- The KEK: ``CUSTODY_SECRETS_KEY``, base64 of 32 random bytes (``openssl rand -base64 32``),
  read from the environment only (never a settings file, never logged), or from the file
  that ``CUSTODY_SECRETS_KEY_FILE`` names (a mounted secret). Its id is derived from it (16
  hex digits of a SHA-256), so that a stored value names the key that opens it.
- Rotation without downtime: set the new key as ``CUSTODY_SECRETS_KEY`` and the previous one
  as ``CUSTODY_SECRETS_KEY_OLD`` on every process; both open, new values are sealed under the
  new one, and ``custody secrets rotate-key`` re-wraps every stored data key under the new KEK
  (the ciphertext of the secret itself does not change). Then drop the old key.
- A sealed value is one text token, ``cs1.<key id>.<wrapped data key>.<ciphertext>`` (base64url,
  each with its 96-bit nonce in front). Both layers authenticate the *purpose* of the value
  (the AAD: ``webhook_endpoint:<id>``, ``console_secret:1``, ...): a token copied into another
  row, or another table, does not open there.
- Without ``CUSTODY_SECRETS_KEY``: a deployment on a configured database
  (``CUSTODY_DATABASE_URL``) refuses to start (``configuration_invalid``); the embedded
  development database (``make demo``) uses a key file beside its data directory
  (``var/pg-secrets.key``, mode 0600, generated on first use, and said so in a warning line):
  outside the database, so that a dump of it holds no usable secret there either.

Only this module touches key material. It reads the settings but no table: repositories store
and return tokens, services seal and open them.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import logging
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from config.errors import ConfigurationInvalid

KEY_ENV = "CUSTODY_SECRETS_KEY"
OLD_KEY_ENV = "CUSTODY_SECRETS_KEY_OLD"
#: A file holding the key instead (a mounted secret, or the development key file).
KEY_FILE_ENV = "CUSTODY_SECRETS_KEY_FILE"
#: The version tag every sealed token starts with.
TOKEN_PREFIX = "cs1"
KEY_BYTES = 32
NONCE_BYTES = 12
#: What a sealed token looks like (the tables' CHECKs use the same pattern).
TOKEN_PATTERN = r"^cs1\.[0-9a-f]{16}\.[A-Za-z0-9_-]{80}\.[A-Za-z0-9_-]{38,}$"
log = logging.getLogger("custody.secrets")


class SecretUnreadable(ConfigurationInvalid):
    """A stored secret cannot be opened with the configured keys: it was sealed under a key
    that is neither ``CUSTODY_SECRETS_KEY`` nor ``CUSTODY_SECRETS_KEY_OLD``, or it was altered
    or moved to another row."""

    code = "secret_unreadable"


@dataclass(frozen=True)
class Kek:
    """A key-encryption key and its id (the bytes never appear in a repr)."""

    id: str
    key: bytes = field(repr=False)

    @classmethod
    def from_bytes(cls, key: bytes) -> Kek:
        """The KEK ``key`` (32 bytes) with its derived id."""
        assert len(key) == KEY_BYTES
        return cls(hashlib.sha256(b"custody secrets key id:" + key).hexdigest()[:16], key)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass(frozen=True)
class Keyring:
    """The current KEK (seals) and, during a rotation, the previous one (still opens)."""

    current: Kek
    old: Kek | None = None

    def seal(self, plaintext: str, purpose: str) -> str:
        """``plaintext`` sealed for ``purpose`` under a fresh data key wrapped by the current
        KEK."""
        data_key = AESGCM.generate_key(bit_length=256)
        nonce = os.urandom(NONCE_BYTES)
        body = nonce + AESGCM(data_key).encrypt(nonce, plaintext.encode(),
                                                f"data:{purpose}".encode())
        return f"{TOKEN_PREFIX}.{self.current.id}.{self._wrap(data_key, purpose)}.{_b64(body)}"

    def open(self, token: str, purpose: str) -> str:
        """The plaintext of ``token``, which must have been sealed for ``purpose``;
        SecretUnreadable otherwise (unknown key, altered or moved token)."""
        key_id, wrapped, body = self._parts(token, purpose)
        data_key = self._unwrap(key_id, wrapped, purpose)
        try:
            raw = _unb64(body)
            return AESGCM(data_key).decrypt(raw[:NONCE_BYTES], raw[NONCE_BYTES:],
                                            f"data:{purpose}".encode()).decode()
        except (InvalidTag, ValueError, binascii.Error):
            raise SecretUnreadable(f"the stored {purpose} secret was altered or belongs to "
                                   "another row") from None

    def is_current(self, token: str) -> bool:
        """Whether ``token`` is sealed under the current KEK."""
        return token.startswith(f"{TOKEN_PREFIX}.{self.current.id}.")

    def rewrap(self, token: str, purpose: str) -> str:
        """``token`` with its data key wrapped under the current KEK (the ciphertext of the
        secret is kept); the same token if it already is. Checks the secret still opens."""
        key_id, wrapped, body = self._parts(token, purpose)
        if key_id == self.current.id:
            return token
        data_key = self._unwrap(key_id, wrapped, purpose)
        rewrapped = f"{TOKEN_PREFIX}.{self.current.id}.{self._wrap(data_key, purpose)}.{body}"
        self.open(rewrapped, purpose)
        return rewrapped

    def _wrap(self, data_key: bytes, purpose: str) -> str:
        nonce = os.urandom(NONCE_BYTES)
        aad = f"key:{self.current.id}:{purpose}".encode()
        return _b64(nonce + AESGCM(self.current.key).encrypt(nonce, data_key, aad))

    def _unwrap(self, key_id: str, wrapped: str, purpose: str) -> bytes:
        kek = next((k for k in (self.current, self.old) if k is not None and k.id == key_id),
                   None)
        if kek is None:
            raise SecretUnreadable(
                f"the stored {purpose} secret is sealed under key {key_id}, which is neither "
                f"{KEY_ENV} (key {self.current.id}) nor {OLD_KEY_ENV}"
                + ("" if self.old is None else f" (key {self.old.id})"))
        try:
            raw = _unb64(wrapped)
            return AESGCM(kek.key).decrypt(raw[:NONCE_BYTES], raw[NONCE_BYTES:],
                                           f"key:{key_id}:{purpose}".encode())
        except (InvalidTag, ValueError, binascii.Error):
            raise SecretUnreadable(f"the stored {purpose} secret was altered or belongs to "
                                   "another row") from None

    @staticmethod
    def _parts(token: str, purpose: str) -> tuple[str, str, str]:
        parts = token.split(".")
        if len(parts) != 4 or parts[0] != TOKEN_PREFIX:
            raise SecretUnreadable(f"the stored {purpose} secret is not a sealed value")
        return parts[1], parts[2], parts[3]


def purpose_of_endpoint(endpoint_id: int) -> str:
    """The purpose a webhook endpoint's secrets (current and previous) are sealed for."""
    return f"webhook_endpoint:{endpoint_id}"


#: The purpose the console's cookie key is sealed for.
CONSOLE_PURPOSE = "console_secret:1"


def purpose_of_answer(client_id: int, operation: str, key: str) -> str:
    """The purpose of a stored idempotent answer that carries a secret."""
    return f"api_idempotency:{client_id}:{operation}:{key}"


def parse_key(value: str, name: str) -> Kek:
    """The KEK in ``value`` (base64 of 32 bytes) of the variable ``name``; a one-line
    ConfigurationInvalid that never shows the value."""
    try:
        raw = base64.b64decode(value.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise ConfigurationInvalid(f"setting {name}: not base64 (expected 32 random bytes in "
                                   "base64, e.g. `openssl rand -base64 32`)") from None
    if len(raw) != KEY_BYTES:
        raise ConfigurationInvalid(f"setting {name}: {len(raw)} bytes, expected {KEY_BYTES} "
                                   "(e.g. `openssl rand -base64 32`)")
    return Kek.from_bytes(raw)


def dev_key_file(data_dir: Path) -> Path:
    """The development key file of the embedded database in ``data_dir``: beside it, never in
    it (a copy of the data directory alone then holds no usable secret)."""
    return data_dir.parent / f"{data_dir.name}-secrets.key"


def _dev_key(path: Path) -> Kek:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        text = path.read_text()
        if not text.strip():  # Another process is writing it right now.
            threading.Event().wait(0.2)
            text = path.read_text()
        return parse_key(text, f"key file {path}")
    except OSError as exc:
        raise ConfigurationInvalid(f"cannot create the development secrets key {path}: "
                                   f"{exc.strerror}; set {KEY_ENV}") from None
    with os.fdopen(fd, "w") as f:
        f.write(base64.b64encode(os.urandom(KEY_BYTES)).decode() + "\n")
    log.warning("generated a development secrets key in %s (outside the database; set %s in "
                "production)", path, KEY_ENV, extra={"key_file": str(path)})
    return parse_key(path.read_text(), f"key file {path}")


def load_keyring(environ: Mapping[str, str], *, database_url: str, data_dir: Path) -> Keyring:
    """The keyring of a process with ``environ`` and these settings (see the module's
    docstring); ConfigurationInvalid in one line if it cannot have one."""
    given = environ.get(KEY_ENV, "").strip()
    key_file = environ.get(KEY_FILE_ENV, "").strip()
    if given:
        current = parse_key(given, KEY_ENV)
    elif key_file:
        try:
            text = Path(key_file).read_text()
        except OSError as exc:
            raise ConfigurationInvalid(f"setting {KEY_FILE_ENV}: cannot read {key_file}: "
                                       f"{exc.strerror}") from None
        current = parse_key(text, f"{KEY_FILE_ENV} ({key_file})")
    elif database_url:
        raise ConfigurationInvalid(
            f"setting {KEY_ENV}: required with CUSTODY_DATABASE_URL (base64 of 32 random "
            f"bytes, e.g. `openssl rand -base64 32`; or {KEY_FILE_ENV} naming a file holding "
            "it): webhook and console secrets are stored encrypted under it")
    else:
        current = _dev_key(dev_key_file(data_dir))
    old_given = environ.get(OLD_KEY_ENV, "").strip()
    old = parse_key(old_given, OLD_KEY_ENV) if old_given else None
    if old is not None and old.id == current.id:
        old = None
    return Keyring(current, old)


_lock = threading.Lock()
_keyrings: dict[tuple[str, str, str, str, str], Keyring] = {}


def keyring() -> Keyring:
    """This process's keyring, from the environment and the settings (read again whenever
    they change, so a test or a rotation can switch keys)."""
    from config.settings import get_settings

    settings = get_settings()
    cache_key = (os.environ.get(KEY_ENV, ""), os.environ.get(OLD_KEY_ENV, ""),
                 os.environ.get(KEY_FILE_ENV, ""), settings.database_url,
                 str(settings.data_dir))
    with _lock:
        found = _keyrings.get(cache_key)
        if found is not None:
            return found
        found = load_keyring(os.environ, database_url=settings.database_url,
                             data_dir=settings.data_dir)
        _keyrings[cache_key] = found
    from config.logging import register_secret

    # Never in a log line, whatever logs it (the key file's too).
    for kek in (found.current, found.old):
        if kek is not None:
            register_secret(base64.b64encode(kek.key).decode())
            register_secret(kek.key.hex())
    return found


def use_dev_key_file() -> Path | None:
    """For the development tools (``custody demo``): unless this process has a key
    (``CUSTODY_SECRETS_KEY`` or ``CUSTODY_SECRETS_KEY_FILE``), use the development key file of
    the embedded data directory (generated if needed), named in ``CUSTODY_SECRETS_KEY_FILE``
    for this process and the shells it tells how to reach it, even on a configured database.
    The file's path (None: the process has a key of its own)."""
    from config.settings import get_settings

    if os.environ.get(KEY_ENV, "").strip():
        return None
    given = os.environ.get(KEY_FILE_ENV, "").strip()
    if given:
        return Path(given).resolve()
    path = dev_key_file(get_settings().data_dir)
    _dev_key(path)
    os.environ[KEY_FILE_ENV] = str(path)
    return path
