"""Settings from the environment (``CUSTODY_*``) and an optional TOML file.

Precedence: environment variables, then the TOML file named by ``CUSTODY_SETTINGS_FILE``
(table ``[custody]``), then defaults. Secrets are read only from the environment.

A setting that cannot be used (a value that does not parse, a database URL that is not a
PostgreSQL URL) is a :class:`ConfigurationInvalid` naming the variable, never a validation
traceback.

The embedded database's data directory is found the same way from any working directory: by
default ``var/pg`` under the project root (the checkout holding ``pyproject.toml``) or, for an
installed package without a checkout, ``$XDG_DATA_HOME/custody/pg`` (``~/.local/share``). A
relative ``CUSTODY_DATA_DIR`` is resolved once, against the current directory of the process
that reads the settings, and used as that absolute path from then on.
"""

from __future__ import annotations

import os
import tomllib
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from config.errors import ConfigurationInvalid

#: The checkout this code runs from (the directory above ``config/``), if it is one.
PROJECT_ROOT = Path(__file__).resolve().parent.parent


def default_data_dir() -> Path:
    """Where the embedded PostgreSQL keeps its data when ``CUSTODY_DATA_DIR`` is not set."""
    if (PROJECT_ROOT / "pyproject.toml").is_file():
        return PROJECT_ROOT / "var" / "pg"
    data_home = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data_home) / "custody" / "pg"


class Settings(BaseSettings):
    """Runtime settings of the engine."""

    model_config = SettingsConfigDict(env_prefix="CUSTODY_", extra="ignore")

    #: PostgreSQL URL (``postgresql://...``). Empty: start the embedded PostgreSQL. It may name
    #: several hosts, libpq's way (``postgresql://u@a:5432,b:5432/db?target_session_attrs=
    #: read-write``, or ``host=a,b ... target_session_attrs=read-write``): a new connection goes
    #: to whichever of them is the primary (docs/operations.md, "Failover").
    database_url: str = ""
    #: What sits between the engine and PostgreSQL: ``none`` (PostgreSQL itself, or a pooler in
    #: session mode) or ``transaction`` (PgBouncer in transaction pooling mode): no server-side
    #: prepared statements, and the role and statement timeout set in every transaction
    #: (``SET LOCAL``) instead of once per connection.
    database_pooler: Literal["none", "transaction"] = "none"
    #: A read replica for reads that may be a little behind (statements, histories, reports,
    #: proofs of reserves); empty: they read the primary. Reads that approve spending never use it.
    database_replica_url: str = ""
    #: Data directory of the embedded PostgreSQL, used only when ``database_url`` is empty.
    #: Absolute; a relative value is resolved against the current directory when read.
    data_dir: Path = Field(default_factory=default_data_dir)
    #: Role the engine's sessions run as; the login switches to it when it is a superuser.
    app_role: str = "custody_app"
    #: Connection pool size per process.
    pool_size: int = Field(default=10, ge=1, le=200)
    #: Attempts of one ledger transaction on serialization failures and deadlocks.
    post_attempts_max: int = Field(default=8, ge=1, le=100)
    #: Statement timeout of the engine's sessions.
    statement_timeout_ms: int = Field(default=30_000, ge=100)

    @field_validator("database_url", "database_replica_url")
    @classmethod
    def _postgresql_url(cls, value: str) -> str:
        if not value:
            return value
        from sqlalchemy.engine import make_url
        from sqlalchemy.exc import ArgumentError

        from config.database import to_sqlalchemy_url

        try:
            url = make_url(to_sqlalchemy_url(value))
        except (ArgumentError, ValueError):
            raise ValueError("not a URL (expected postgresql://USER@HOST/DATABASE)") from None
        if url.get_backend_name() not in ("postgresql", "postgres"):
            raise ValueError(f"not a PostgreSQL URL (scheme {url.drivername!r}; expected "
                             "postgresql://USER@HOST/DATABASE)")
        return value

    @field_validator("data_dir")
    @classmethod
    def _absolute(cls, value: Path) -> Path:
        return value if value.is_absolute() else Path.cwd() / value


def _problem(error: ValidationError, from_file: dict[str, Any]) -> str:
    """The first validation error of the settings in one line, naming the variable (or the
    settings file's key) and the value, except a database URL's (it may hold a password)."""
    first = error.errors()[0]
    key = "_".join(str(part) for part in first["loc"])
    name = (f"{os.environ.get('CUSTODY_SETTINGS_FILE')} [custody] {key}" if key in from_file
            else f"CUSTODY_{key.upper()}")
    shown = "" if key in ("database_url", "database_replica_url") else f"={first.get('input')!r}"
    message = first["msg"]
    if message.startswith("Value error, "):
        message = message[len("Value error, "):]
    more = f" (and {error.error_count() - 1} more)" if error.error_count() > 1 else ""
    return f"setting {name}{shown}: {message}{more}"


def _file_values() -> dict[str, Any]:
    path = os.environ.get("CUSTODY_SETTINGS_FILE")
    if not path:
        return {}
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigurationInvalid(f"cannot read settings file {path}: {exc}") from exc
    section = data.get("custody", {})
    if not isinstance(section, dict):
        raise ConfigurationInvalid(f"{path}: [custody] must be a table")
    # Environment variables win over the file: drop keys the environment sets.
    return {k: v for k, v in section.items() if f"CUSTODY_{k.upper()}" not in os.environ}


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """Settings of this process (read once); :class:`ConfigurationInvalid` names a setting
    that cannot be used."""
    from_file = _file_values()
    try:
        settings = Settings(**from_file)
    except ValidationError as exc:
        raise ConfigurationInvalid(_problem(exc, from_file)) from None
    given = os.environ.get("CUSTODY_DATA_DIR")
    if given and not Path(given).is_absolute():
        # Resolved once, here: the processes this one starts (`custody api --workers N`, a
        # job's subprocess) inherit the absolute path, whatever directory they run in.
        os.environ["CUSTODY_DATA_DIR"] = str(settings.data_dir)
    return settings
