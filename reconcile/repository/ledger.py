"""What the ledger check reads besides ``verify``: account ids by code and asset."""

from __future__ import annotations

from collections.abc import Iterable

import sqlalchemy as sa
from sqlalchemy.engine import Connection


def account_ids(conn: Connection, names: Iterable[tuple[str, str]]) -> dict[tuple[str, str], int]:
    """(account code, asset code) -> account id, for the pairs that exist."""
    pairs = sorted(set(names))
    if not pairs:
        return {}
    rows = conn.execute(sa.text(
        "SELECT a.id, a.code, s.code AS asset FROM accounts a JOIN assets s ON s.id = a.asset_id "
        "JOIN unnest(CAST(:codes AS text[]), CAST(:assets AS text[])) AS n(code, asset) "
        "  ON n.code = a.code AND n.asset = s.code"),
        {"codes": [c for c, _ in pairs], "assets": [a for _, a in pairs]})
    return {(r.code, r.asset): int(r.id) for r in rows}
