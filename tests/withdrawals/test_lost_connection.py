"""A withdrawal request whose COMMIT answer is lost (the connection cut for real after the
server committed, or before it got the COMMIT): the request is resolved by its key on a new
connection, never by assuming either outcome: one withdrawal, one reserve."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from config.withdrawals import WithdrawalsConfig
from tests.support.pg_proxy import PgCutProxy
from withdrawals import service

from .conftest import T0, SetOwnAddresses, balance, req


@pytest.mark.parametrize(("mode", "replayed"), [("after_answer", True), ("before", False)])
def test_request_in_doubt_is_resolved_by_its_key(
        wbook: Engine, cfg: WithdrawalsConfig, own: SetOwnAddresses, cut_engine: Engine,
        cut_proxy: PgCutProxy, mode: str, replayed: bool) -> None:
    cut = cut_proxy.arm("COMMIT", mode)
    result = service.request_withdrawal(cut_engine, cfg, own, req(), now=T0)
    assert cut.fired == 1
    # Found under its key (the lost COMMIT had committed), or made by the resolution.
    assert result.replayed is replayed
    with wbook.connect() as conn:
        ids = list(conn.execute(sa.text(
            "SELECT id FROM withdrawals WHERE request_key = 'k1'")).scalars())
    assert ids == [result.withdrawal.id]
    # Reserved once: 150 - (30 + 2 max fee).
    assert balance(wbook, "user:u1:wallet") == 118_000_000
