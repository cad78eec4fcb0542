"""What every module of the deposit repository shares: the deposit key, amounts back as
``int`` and rows sent as JSON text (for ``jsonb_to_recordset``)."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

Key = tuple[str, str, str]  # (chain, tx_hash, position)


def _int(value: Decimal | int | None) -> int | None:
    if value is None:
        return None
    assert value == int(value), f"integral amount expected, got {value}"
    return int(value)


def _json(rows: Any) -> str:
    return json.dumps(rows, separators=(",", ":"), default=str)
