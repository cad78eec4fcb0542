"""What every module of the ledger repository shares: numbers at the boundary, snapshots."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine


def to_int(value: Decimal | int | None) -> int:
    """Exact conversion of a NUMERIC(39,0) value to ``int`` (None counts as 0)."""
    if value is None:
        return 0
    if isinstance(value, Decimal):
        assert value == value.to_integral_value(), f"fractional amount from the database: {value}"
    return int(value)


@contextmanager
def snapshot(engine: Engine, *, read_only: bool) -> Iterator[Connection]:
    """A REPEATABLE READ transaction on a connection of its own: every statement in it sees the
    same snapshot of the ledger. It commits when the block ends normally (``read_only``: it may
    not write) and rolls back on an exception."""
    with engine.connect() as conn:
        conn = conn.execution_options(isolation_level="REPEATABLE READ")
        with conn.begin():
            if read_only:
                conn.execute(sa.text("SET TRANSACTION READ ONLY"))
            yield conn
