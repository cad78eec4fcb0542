"""Loading the configuration file for the API and the commands: the withdrawal table is
optional.

``config.withdrawals.load_withdrawals_config`` refuses a file without ``[withdrawals]``; a
deployment that only follows deposits has none, and the HTTP API, the scheduler and
``custody config check`` still run on it (withdrawal requests are then refused with
``withdrawals_not_configured``). A module of its own, light to import: ``custody worker``
reads its configuration before anything else.
"""

from __future__ import annotations

import os
import tomllib

from config.chains import CONFIG_ENV, ChainsConfig
from config.errors import ConfigurationInvalid
from config.withdrawals import WithdrawalsConfig, parse_withdrawals_config


def load_withdrawals_if_present(chains: ChainsConfig,
                                path: str | None = None) -> WithdrawalsConfig | None:
    """The ``[withdrawals]`` table of the configuration file (``path`` or
    ``$CUSTODY_CONFIG``), validated against ``chains``; None when the file has none (a
    deposits-only deployment). A table that is there but wrong is ConfigurationInvalid."""
    chosen = path if path is not None else os.environ.get(CONFIG_ENV)
    if not chosen:
        raise ConfigurationInvalid(f"no configuration: set {CONFIG_ENV}")
    try:
        with open(chosen, "rb") as f:
            data = tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigurationInvalid(f"cannot read configuration {chosen}: {exc}") from exc
    if "withdrawals" not in data:
        return None
    return parse_withdrawals_config(data, chains)
