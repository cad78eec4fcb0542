"""Loading the configuration file for the API and the commands: the withdrawal table and the
sweeps section are optional.

``config.withdrawals.load_withdrawals_config`` refuses a file without ``[withdrawals]``; a
deployment that only follows deposits has none, and the HTTP API, the scheduler and
``custody config check`` still run on it (withdrawal requests are then refused with
``withdrawals_not_configured``). A module of its own, light to import: ``custody worker``
reads its configuration before anything else.
"""

from __future__ import annotations

from config.chains import ChainsConfig, read_config_document
from config.errors import ConfigurationInvalid
from config.sweeps import SweepsConfig, parse_sweeps_config
from config.withdrawals import WithdrawalsConfig, parse_withdrawals_config


def load_withdrawals_if_present(chains: ChainsConfig,
                                path: str | None = None) -> WithdrawalsConfig | None:
    """The ``[withdrawals]`` table of the configuration file (``path`` or
    ``$CUSTODY_CONFIG``), validated against ``chains``; None when the file has none (a
    deposits-only deployment). A table that is there but wrong is ConfigurationInvalid."""
    data = read_config_document(path)
    if "withdrawals" not in data:
        return None
    return parse_withdrawals_config(data, chains)


def load_sweeps_if_present(chains: ChainsConfig, withdrawals: WithdrawalsConfig | None,
                           path: str | None = None) -> SweepsConfig | None:
    """The ``[sweeps]`` section of the configuration file, validated against ``chains`` and
    the withdrawals' hot wallets (every sweep goes to one, every top-up and cold transfer
    leaves from one); None when the file has none (sweeps, cold transfers and refills are
    then refused with ``sweeps_not_configured``). A section that is there but wrong, or one
    without a ``[withdrawals]`` table, is ConfigurationInvalid."""
    data = read_config_document(path)
    if "sweeps" not in data:
        return None
    if withdrawals is None:
        raise ConfigurationInvalid("[sweeps] needs the hot wallets of [withdrawals], and the "
                                   "configuration has no [withdrawals] table")
    return parse_sweeps_config(data, chains, withdrawals)
