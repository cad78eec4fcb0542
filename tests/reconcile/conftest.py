"""Reconciliation fixtures: the withdrawal tests' book and configuration (no chain), and small
readers of the cases table and the alerts."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from config.uow import UnitOfWork
from reconcile import service
from reconcile.model import Case
from tests.withdrawals.conftest import cfg, own, wbook  # noqa: F401  (fixtures)


def all_cases(engine: Engine) -> list[Case]:
    """Every case, oldest first."""
    with UnitOfWork(engine) as uow:
        return service.list_cases(uow)


def alerts(engine: Engine, kind: str = "case_opened") -> list[dict[str, Any]]:
    """The payloads of the ``alert.<kind>`` outbox events, oldest first."""
    with UnitOfWork(engine) as uow:
        return [dict(p) for p in uow.conn.execute(sa.text(
            "SELECT payload FROM outbox_events WHERE type = :t ORDER BY id"),
            {"t": f"alert.{kind}"}).scalars()]
