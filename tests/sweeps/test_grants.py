"""The database refuses what the service refuses (issue 19, revision 0030_money_table_grants):
the application role cannot insert sweeps, gas top-ups, cold transfers or refill requests, or
move their state, with raw SQL; only movement_insert (a starting state of the kind's machine)
and movement_transition (a move of it) write them."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
import sqlalchemy as sa
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import Engine

from config.uow import sqlstate
from sweeps import repository as repo
from sweeps.model import Kind, State

AT = datetime(2026, 12, 3, 8, 0, tzinfo=UTC)
A1, A2, A3 = "0x" + "11" * 20, "0x" + "22" * 20, "0x" + "33" * 20


def movements(engine: Engine) -> dict[str, int]:
    """One row of each table, written the service's way."""
    with engine.begin() as conn:
        sweep = repo.insert_sweep(
            conn, chain="devnet", address=A1, derivation_index=1, destination=A2, asset="ETH",
            token=None, available=10, customer_amount=10, state=State.READY, gas_limit=21000,
            actor="planner", at=AT, reason="r", evidence={})
        top_up = repo.insert_top_up(conn, chain="devnet", sender=A2, address=A1, amount=5,
                                    gas_limit=21000, actor="planner", at=AT, reason="r",
                                    evidence={})
        cold = repo.insert_cold_transfer(
            conn, chain="devnet", asset="ETH", token=None, sender=A2, destination=A3,
            amount=7, approvals_required=2, proposed_by="alice", reason="r", gas_limit=21000,
            at=AT, evidence={})
        refill = repo.insert_refill(conn, chain="devnet", asset="ETH", token=None, source=A3,
                                    destination=A2, amount=9, requested_by="bob", reason="r",
                                    request_key="k1", at=AT)
    assert sweep is not None and refill is not None
    return {"sweeps": sweep, "gas_top_ups": top_up, "cold_transfers": cold,
            "refill_requests": refill}


def refused_code(engine: Engine, statement: str, params: dict[str, object]) -> str | None:
    with engine.begin() as conn, pytest.raises(sa_exc.DBAPIError) as refused:
        conn.execute(sa.text(statement), params)
    return sqlstate(refused.value)


def states(engine: Engine) -> dict[str, str]:
    with engine.connect() as conn:
        return {t: conn.execute(sa.text(f"SELECT state FROM {t}")).scalar_one()
                for t in ("sweeps", "gas_top_ups", "cold_transfers", "refill_requests")}


BEFORE = {"sweeps": "ready", "gas_top_ups": "ready", "cold_transfers": "proposed",
          "refill_requests": "open"}


@pytest.mark.parametrize(("table", "state"), [
    ("sweeps", "final"), ("gas_top_ups", "final"), ("cold_transfers", "approved"),
    ("refill_requests", "matched")])
def test_raw_state_update_is_refused(engine: Engine, table: str, state: str) -> None:
    ids = movements(engine)
    assert refused_code(engine, f"UPDATE {table} SET state = :s WHERE id = :i",
                        {"s": state, "i": ids[table]}) == "42501"
    assert refused_code(engine, f"DELETE FROM {table} WHERE id = :i",
                        {"i": ids[table]}) == "42501"
    assert states(engine) == BEFORE


@pytest.mark.parametrize("table", ["sweeps", "gas_top_ups", "cold_transfers",
                                   "refill_requests"])
def test_raw_insert_is_refused(engine: Engine, table: str) -> None:
    ids = movements(engine)
    # A copy of the stored row (another id from the sequence), in any state it likes.
    with engine.connect() as conn:
        columns = [c for c in conn.execute(sa.text(
            "SELECT attname FROM pg_attribute WHERE attrelid = CAST(:t AS regclass) "
            "AND attnum > 0 AND NOT attisdropped AND attname NOT IN ('id', 'request_key')"),
            {"t": table}).scalars()]
    listed = ", ".join(columns)
    assert refused_code(engine, f"INSERT INTO {table} ({listed}) SELECT {listed} FROM {table} "
                        "WHERE id = :i", {"i": ids[table]}) == "42501"
    with engine.connect() as conn:
        assert conn.execute(sa.text(f"SELECT count(*) FROM {table}")).scalar() == 1


def test_the_lock_grant_cannot_change_an_id(engine: Engine) -> None:
    ids = movements(engine)
    for table, i in ids.items():
        assert refused_code(engine, f"UPDATE {table} SET id = id + 100 WHERE id = :i",
                            {"i": i}) == "23503", table


def test_insert_function_refuses_a_row_not_in_a_starting_state(engine: Engine) -> None:
    row = {"chain": "devnet", "address": A3, "derivation_index": 2, "destination": A2,
           "asset": "ETH", "available": "5", "customer_amount": "5", "state": "final",
           "gas_limit": 21000, "created_at": str(AT), "updated_at": str(AT)}
    insert = ("SELECT movement_insert(:k, CAST(:row AS jsonb), true, 'x', 'r', '{}', "
              "CAST(:at AS timestamptz))")
    assert refused_code(engine, insert, {"k": "sweep", "row": json.dumps(row),
                                         "at": AT}) == "23514"
    # Nor a column a new row may not name (a refill request already matched).
    refill = {"chain": "devnet", "asset": "ETH", "source": A3, "destination": A2,
              "amount": "9", "requested_by": "bob", "reason": "r", "state": "open",
              "matched_tx_hash": "0x" + "ab" * 32, "created_at": str(AT),
              "updated_at": str(AT)}
    assert refused_code(engine, insert, {"k": "refill_request", "row": json.dumps(refill),
                                         "at": AT}) == "23514"
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM sweeps")).scalar() == 0
        assert conn.execute(sa.text("SELECT count(*) FROM refill_requests")).scalar() == 0


@pytest.mark.parametrize(("kind", "table", "from_state", "to_state", "event", "sets"), [
    # A ready sweep declared final without being sent.
    ("sweep", "sweeps", "ready", "final", "final_succeeded", {}),
    # A cold transfer approved by an event that does not approve it.
    ("cold_transfer", "cold_transfers", "proposed", "approved", "approval_recorded", {}),
    # A move of the machine from a state the row is not in.
    ("gas_top_up", "gas_top_ups", "included", "final", "final_succeeded", {}),
    # A column a transition does not set.
    ("cold_transfer", "cold_transfers", "proposed", "proposed", "approval_recorded",
     {"amount": "1"}),
    ("refill_request", "refill_requests", "open", "matched", "matched", {"amount": "1"}),
])
def test_transition_function_refuses_what_the_machine_refuses(
        engine: Engine, kind: str, table: str, from_state: str, to_state: str, event: str,
        sets: dict[str, str]) -> None:
    ids = movements(engine)
    assert refused_code(engine, (
        "SELECT movement_transition(:k, :i, CAST(:sets AS jsonb), :f, :t, :e, 'r', '{}', 'x', "
        "NULL, NULL, CAST(:at AS timestamptz))"), {
            "k": kind, "i": ids[table], "sets": json.dumps(sets), "f": from_state,
            "t": to_state, "e": event, "at": AT}) == "23514"
    assert states(engine) == BEFORE


def test_transition_function_makes_a_move_of_the_machine(engine: Engine) -> None:
    ids = movements(engine)
    with engine.begin() as conn:
        m = repo.get(conn, Kind.SWEEP, ids["sweeps"], for_update=True)
        assert m is not None
        moved = repo.record(conn, m, to_state=State.SIGNING, event="nonce_assigned",
                            actor="signer", at=AT, nonce=3)
    assert (moved.state, moved.nonce) == (State.SIGNING, 3)
    with engine.connect() as conn:
        events = conn.execute(sa.text(
            "SELECT from_state, to_state, event FROM sweep_events WHERE sweep_id = :i "
            "ORDER BY id"), {"i": ids["sweeps"]}).all()
    assert [tuple(e) for e in events] == [(None, "ready", "planned"),
                                          ("ready", "signing", "nonce_assigned")]
