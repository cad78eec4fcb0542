"""Reconciliation thresholds: how long an item may wait before it becomes a case.

Read from the optional ``[reconcile]`` section of the TOML file named by ``CUSTODY_CONFIG``
(every key optional; without the section, or without the file, the defaults below)::

    [reconcile]
    reserve_sla_s = 7200               # an open withdrawal reserve older than this
                                       # (default: [withdrawals] open_item_sla_s, else 2 h)
    unknown_withdrawal_after_s = 3600  # a withdrawal in 'unknown' for longer than this
    held_withdrawal_after_s = 3600     # a withdrawal 'held' (a case already) for longer
    review_deposit_after_s = 86400     # a deposit held for review for longer than this
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from config.chains import read_config_document
from config.errors import ConfigurationInvalid

#: The longest threshold accepted (a year).
THRESHOLD_MAX_S = 366 * 86_400


@dataclass(frozen=True)
class ReconcileConfig:
    """How long (seconds) each kind of item may wait before it is a case."""

    reserve_sla_s: int = 7_200
    unknown_withdrawal_after_s: int = 3_600
    held_withdrawal_after_s: int = 3_600
    review_deposit_after_s: int = 86_400


def parse_reconcile_config(data: Mapping[str, Any]) -> ReconcileConfig:
    """Validate the parsed TOML document's ``[reconcile]`` section (absent: the defaults;
    ``reserve_sla_s`` defaults to ``[withdrawals] open_item_sla_s`` when that is set)."""
    raw = data.get("reconcile", {})
    if not isinstance(raw, Mapping):
        raise ConfigurationInvalid("[reconcile] must be a table")
    unknown = set(raw) - set(ReconcileConfig.__dataclass_fields__)
    if unknown:
        raise ConfigurationInvalid(f"[reconcile]: unknown keys {sorted(unknown)}")
    withdrawals = data.get("withdrawals", {})
    sla = withdrawals.get("open_item_sla_s") if isinstance(withdrawals, Mapping) else None
    defaults = ReconcileConfig(**({"reserve_sla_s": sla} if isinstance(sla, int) else {}))
    values = {}
    for key in ReconcileConfig.__dataclass_fields__:
        value = raw.get(key, getattr(defaults, key))
        if isinstance(value, bool) or not isinstance(value, int) or not (
                1 <= value <= THRESHOLD_MAX_S):
            raise ConfigurationInvalid(
                f"reconcile.{key} must be an integer number of seconds in [1, {THRESHOLD_MAX_S}]")
        values[key] = value
    return ReconcileConfig(**values)


def load_reconcile_config(path: str | Path | None = None) -> ReconcileConfig:
    """The ``[reconcile]`` section from ``path`` or ``$CUSTODY_CONFIG``; the defaults when no
    file is configured."""
    try:
        data = read_config_document(path)
    except ConfigurationInvalid:
        if path is not None:
            raise
        return ReconcileConfig()
    return parse_reconcile_config(data)
