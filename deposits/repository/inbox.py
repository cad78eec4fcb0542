"""The provider inbox: custody provider notifications, stored once per event id."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from deposits.repository.common import Key, _int, _json


@dataclass(frozen=True)
class InboxRecord:
    """A stored custody provider notification."""

    event_id: str
    provider: str
    chain: str
    tx_hash: str
    position: str
    status: str
    to_address: str
    asset_code: str
    amount_minor: int
    payload: dict[str, Any]
    received_at: datetime


def _inbox(row: Any) -> InboxRecord:
    data = dict(row._mapping)
    data["amount_minor"] = _int(data["amount_minor"])
    data["payload"] = dict(data["payload"])
    return InboxRecord(**data)


def insert_inbox(conn: Connection, record: Mapping[str, Any]) -> bool:
    """Store a notification; False if its event id was already stored."""
    result = conn.execute(
        sa.text("INSERT INTO provider_inbox (event_id, provider, chain, tx_hash, position, "
                "status, to_address, asset_code, amount_minor, payload) VALUES (:event_id, "
                ":provider, :chain, :tx_hash, :position, :status, :to_address, :asset_code, "
                "CAST(:amount_minor AS numeric), CAST(:payload AS jsonb)) "
                "ON CONFLICT (event_id) DO NOTHING"),
        {**record, "amount_minor": str(record["amount_minor"]),
         "payload": _json(record["payload"])},
    )
    return result.rowcount == 1


def get_inbox(conn: Connection, event_id: str) -> InboxRecord | None:
    """One stored notification."""
    row = conn.execute(sa.text("SELECT * FROM provider_inbox WHERE event_id = :e"),
                       {"e": event_id}).first()
    return None if row is None else _inbox(row)


def inbox_for(conn: Connection, keys: Iterable[Key]) -> dict[Key, list[InboxRecord]]:
    """Notifications for these deposit keys, oldest first."""
    wanted = sorted(set(keys))
    if not wanted:
        return {}
    rows = conn.execute(
        sa.text("SELECT * FROM provider_inbox WHERE (chain, tx_hash, position) IN "
                "(SELECT * FROM jsonb_to_recordset(CAST(:j AS jsonb)) "
                " AS x(chain text, tx_hash text, position text)) ORDER BY received_at, event_id"),
        {"j": _json([{"chain": c, "tx_hash": t, "position": p} for c, t, p in wanted])},
    ).all()
    found: dict[Key, list[InboxRecord]] = {}
    for r in rows:
        found.setdefault((r.chain, r.tx_hash, r.position), []).append(_inbox(r))
    return found
