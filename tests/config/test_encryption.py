"""Secrets at rest (config.encryption): sealed values open only for their purpose and under a
key the process has; a rotation re-wraps without changing the secret; the key's settings fail
in one line that never shows the key."""

from __future__ import annotations

import base64
import os
import stat
from pathlib import Path

import pytest

from config.encryption import (
    KEY_ENV,
    KEY_FILE_ENV,
    OLD_KEY_ENV,
    TOKEN_PATTERN,
    Kek,
    Keyring,
    SecretUnreadable,
    dev_key_file,
    load_keyring,
    parse_key,
)
from config.errors import ConfigurationInvalid

SECRET = "whsec_" + "ab" * 32


def new_key() -> str:
    return base64.b64encode(os.urandom(32)).decode()


def ring(current: str, old: str | None = None) -> Keyring:
    env = {KEY_ENV: current, **({OLD_KEY_ENV: old} if old else {})}
    return load_keyring(env, database_url="postgresql://db/custody", data_dir=Path("/unused"))


class TestSealing:
    def test_a_sealed_value_opens_for_its_purpose_and_holds_no_clear_text(self) -> None:
        keys = ring(new_key())
        token = keys.seal(SECRET, "webhook_endpoint:7")
        import re

        assert re.fullmatch(TOKEN_PATTERN, token)
        assert SECRET not in token and "ab" * 32 not in token
        assert keys.open(token, "webhook_endpoint:7") == SECRET
        # A data key per value: the same secret sealed twice gives two tokens.
        assert keys.seal(SECRET, "webhook_endpoint:7") != token

    def test_a_token_moved_to_another_row_does_not_open(self) -> None:
        keys = ring(new_key())
        token = keys.seal(SECRET, "webhook_endpoint:7")
        with pytest.raises(SecretUnreadable, match="altered or belongs to another row"):
            keys.open(token, "webhook_endpoint:8")

    def test_an_altered_token_does_not_open(self) -> None:
        keys = ring(new_key())
        head, kid, wrapped, body = keys.seal(SECRET, "p").split(".")
        flipped = body[:-2] + ("A" if body[-2] != "A" else "B") + body[-1]
        for bad in (f"{head}.{kid}.{wrapped}.{flipped}", f"{head}.{kid}.{wrapped[::-1]}.{body}",
                    "not a token", SECRET):
            with pytest.raises(SecretUnreadable):
                keys.open(bad, "p")

    def test_another_key_cannot_open_and_the_error_names_key_ids_only(self) -> None:
        first, second = new_key(), new_key()
        token = ring(first).seal(SECRET, "p")
        with pytest.raises(SecretUnreadable) as raised:
            ring(second).open(token, "p")
        message = str(raised.value)
        assert parse_key(first, KEY_ENV).id in message and KEY_ENV in message
        assert first not in message and second not in message and SECRET not in message

    def test_rotation_rewraps_under_the_new_key_and_keeps_the_secret(self) -> None:
        old, new = new_key(), new_key()
        token = ring(old).seal(SECRET, "p")
        during = ring(new, old)
        assert during.open(token, "p") == SECRET  # both keys open during a rotation
        rewrapped = during.rewrap(token, "p")
        assert during.is_current(rewrapped) and not during.is_current(token)
        assert rewrapped.split(".")[3] == token.split(".")[3]  # the secret's ciphertext is kept
        assert ring(new).open(rewrapped, "p") == SECRET  # the old key is no longer needed
        assert during.rewrap(rewrapped, "p") == rewrapped
        with pytest.raises(SecretUnreadable):
            ring(new).open(token, "p")

    def test_a_kek_never_shows_its_bytes(self) -> None:
        kek = Kek.from_bytes(b"k" * 32)
        assert "kkkk" not in repr(kek) and kek.id in repr(kek)


class TestSettings:
    @pytest.mark.parametrize(("value", "said"), [
        ("not base64!", "not base64"),
        (base64.b64encode(b"short").decode(), "5 bytes, expected 32"),
    ])
    def test_a_bad_key_is_one_line_without_the_value(self, value: str, said: str) -> None:
        with pytest.raises(ConfigurationInvalid) as raised:
            ring(value)
        message = str(raised.value)
        assert raised.value.code == "configuration_invalid"
        assert message.startswith(f"setting {KEY_ENV}: ") and said in message
        assert "\n" not in message and value not in message

    def test_a_bad_old_key_is_named(self) -> None:
        with pytest.raises(ConfigurationInvalid, match=f"setting {OLD_KEY_ENV}: not base64"):
            ring(new_key(), "nope!")

    def test_a_configured_database_without_a_key_refuses(self) -> None:
        with pytest.raises(ConfigurationInvalid,
                           match=f"setting {KEY_ENV}: required with CUSTODY_DATABASE_URL"):
            load_keyring({}, database_url="postgresql://db/custody", data_dir=Path("/x"))

    def test_the_embedded_database_makes_a_key_file_beside_its_data_dir(
            self, tmp_path: Path) -> None:
        data_dir = tmp_path / "var" / "pg"
        first = load_keyring({}, database_url="", data_dir=data_dir)
        path = dev_key_file(data_dir)
        assert path == tmp_path / "var" / "pg-secrets.key" and not path.is_relative_to(data_dir)
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        again = load_keyring({}, database_url="", data_dir=data_dir)
        assert again.current == first.current  # the same key on the next start
        assert again.open(first.seal(SECRET, "p"), "p") == SECRET

    def test_a_key_file_named_by_the_environment(self, tmp_path: Path) -> None:
        key = new_key()
        (tmp_path / "k").write_text(key + "\n")
        keys = load_keyring({KEY_FILE_ENV: str(tmp_path / "k")},
                            database_url="postgresql://db/custody", data_dir=Path("/x"))
        assert keys.current == parse_key(key, KEY_ENV)
        with pytest.raises(ConfigurationInvalid, match=f"setting {KEY_FILE_ENV}: cannot read"):
            load_keyring({KEY_FILE_ENV: str(tmp_path / "missing")},
                         database_url="postgresql://db/custody", data_dir=Path("/x"))
