"""Settings from the environment (``CUSTODY_*``) and an optional TOML file.

Precedence: environment variables, then the TOML file named by ``CUSTODY_SETTINGS_FILE``
(table ``[custody]``), then defaults. Secrets are read only from the environment.
"""

from __future__ import annotations

import os
import tomllib
from functools import lru_cache
from pathlib import Path
from typing import Any

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from config.errors import ConfigurationInvalid


class Settings(BaseSettings):
    """Runtime settings of the engine."""

    model_config = SettingsConfigDict(env_prefix="CUSTODY_", extra="ignore")

    #: PostgreSQL URL (``postgresql://...``). Empty: start the embedded PostgreSQL.
    database_url: str = ""
    #: Data directory of the embedded PostgreSQL, used only when ``database_url`` is empty.
    data_dir: Path = Path("var/pg")
    #: Role the engine's sessions run as; the login switches to it when it is a superuser.
    app_role: str = "custody_app"
    #: Connection pool size per process.
    pool_size: int = Field(default=10, ge=1, le=200)
    #: Attempts of one ledger transaction on serialization failures and deadlocks.
    post_attempts_max: int = Field(default=8, ge=1, le=100)
    #: Statement timeout of the engine's sessions.
    statement_timeout_ms: int = Field(default=30_000, ge=100)


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
    """Settings of this process (read once)."""
    return Settings(**_file_values())
