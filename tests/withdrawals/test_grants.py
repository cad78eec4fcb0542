"""The database refuses what the service refuses (issue 19, revision 0030_money_table_grants):
the application role cannot insert a withdrawal or move its state with raw SQL, only through
withdrawal_reserve_record (which checks the reserve) and withdrawal_transition (which checks
the state machine)."""

from __future__ import annotations

import json

import pytest
import sqlalchemy as sa
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import Engine

from config.uow import sqlstate
from config.withdrawals import WithdrawalsConfig
from sweeps import model as sweeps_model
from withdrawals import model, service
from withdrawals.model import State
from withdrawals.repository import WithdrawalRecord

from .conftest import T0, SetOwnAddresses, req

INSERT_RAW = (
    "INSERT INTO withdrawals (user_id, request_key, fingerprint, requested_by, chain, "
    "asset_code, destination, amount_minor, fee_max_minor, fee_minor, chain_amount, "
    "approvals_required, state, reserve_transaction_id, reserve_posting_id, requested_at, "
    "state_changed_at) SELECT user_id, 'raw', fingerprint, requested_by, chain, asset_code, "
    "destination, amount_minor, fee_max_minor, fee_minor, chain_amount, approvals_required, "
    "state, reserve_transaction_id, reserve_posting_id, requested_at, state_changed_at "
    "FROM withdrawals WHERE id = :w")
TRANSITION = ("SELECT state FROM withdrawal_transition(:w, CAST(:sets AS jsonb), :f, :t, :e, "
              "'r', '{}', 'test', NULL, NULL, :at)")


def reserved(engine: Engine, cfg: WithdrawalsConfig, own: SetOwnAddresses) -> WithdrawalRecord:
    w = service.request_withdrawal(engine, cfg, own, req(), now=T0).withdrawal
    assert w.state is State.RESERVED
    return w


def refused_code(engine: Engine, statement: str, params: dict[str, object]) -> str | None:
    with engine.begin() as conn, pytest.raises(sa_exc.DBAPIError) as refused:
        conn.execute(sa.text(statement), params)
    return sqlstate(refused.value)


def test_raw_insert_of_a_withdrawal_is_refused(wbook: Engine, cfg: WithdrawalsConfig,
                                               own: SetOwnAddresses) -> None:
    w = reserved(wbook, cfg, own)
    # A copy of a reserved withdrawal under another key, naming the same reserve: a second
    # payout of one reserve, which only the reserve function's checks stop.
    assert refused_code(wbook, INSERT_RAW, {"w": w.id}) == "42501"  # insufficient_privilege
    with wbook.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM withdrawals")).scalar() == 1


@pytest.mark.parametrize("statement", [
    "UPDATE withdrawals SET state = 'settled' WHERE id = :w",
    "UPDATE withdrawals SET amount_minor = amount_minor * 2 WHERE id = :w",
    "UPDATE withdrawals SET destination = '0x' || repeat('66', 20) WHERE id = :w",
    "DELETE FROM withdrawals WHERE id = :w",
])
def test_raw_update_of_a_withdrawal_is_refused(wbook: Engine, cfg: WithdrawalsConfig,
                                               own: SetOwnAddresses, statement: str) -> None:
    w = reserved(wbook, cfg, own)
    assert refused_code(wbook, statement, {"w": w.id}) == "42501"
    assert service.get_withdrawal(wbook, w.id) == w


def test_the_lock_grant_cannot_change_an_id(wbook: Engine, cfg: WithdrawalsConfig,
                                            own: SetOwnAddresses) -> None:
    # UPDATE (id) is granted so that rows can be locked FOR UPDATE; the id never changes.
    w = reserved(wbook, cfg, own)
    with wbook.begin() as conn:
        conn.execute(sa.text("SELECT id FROM withdrawals WHERE id = :w FOR UPDATE"),
                     {"w": w.id})
    assert refused_code(wbook, "UPDATE withdrawals SET id = id + 1 WHERE id = :w",
                        {"w": w.id}) == "23503"


@pytest.mark.parametrize(("from_state", "to_state", "event", "sets"), [
    # Not a move of the machine: a reserved withdrawal settled without being sent.
    ("reserved", "settled", "final_succeeded", {}),
    # A move of the machine, but not from the state the withdrawal is in.
    ("included", "settled", "final_succeeded", {}),
    # The event does not lead there.
    ("reserved", "canceled", "nonce_assigned", {}),
    # A column no transition sets.
    ("reserved", "canceled", "canceled", {"amount_minor": "1"}),
    # p_sets naming another state than p_to.
    ("reserved", "canceled", "canceled", {"state": "settled"}),
])
def test_the_transition_function_refuses_what_the_machine_refuses(
        wbook: Engine, cfg: WithdrawalsConfig, own: SetOwnAddresses, from_state: str,
        to_state: str, event: str, sets: dict[str, str]) -> None:
    w = reserved(wbook, cfg, own)
    code = refused_code(wbook, TRANSITION, {"w": w.id, "sets": json.dumps(sets),
                                            "f": from_state, "t": to_state, "e": event,
                                            "at": T0})
    assert code == "23514"  # check_violation
    assert service.get_withdrawal(wbook, w.id) == w


def test_the_transition_function_makes_a_move_of_the_machine(
        wbook: Engine, cfg: WithdrawalsConfig, own: SetOwnAddresses) -> None:
    w = reserved(wbook, cfg, own)
    with wbook.begin() as conn:
        state = conn.execute(sa.text(TRANSITION), {
            "w": w.id, "sets": json.dumps({"nonce": 7, "hot_wallet": "0x" + "77" * 20}),
            "f": "reserved", "t": "signing", "e": "nonce_assigned", "at": T0}).scalar_one()
        events = conn.execute(sa.text(
            "SELECT from_state, to_state, event FROM withdrawal_events WHERE withdrawal_id = :w "
            "ORDER BY id"), {"w": w.id}).all()
    assert state == "signing"
    stored = service.get_withdrawal(wbook, w.id)
    assert (stored.state, stored.nonce, stored.amount_minor) == (
        State.SIGNING, 7, w.amount_minor)
    assert [tuple(e) for e in events][-1] == ("reserved", "signing", "nonce_assigned")


def test_state_moves_are_the_services_machines(engine: Engine) -> None:
    expected: set[tuple[str, str | None, str, str]] = {
        ("withdrawal", str(s), str(e), str(t)) for (s, e), (t, _) in model.TRANSITIONS.items()}
    for kind, table in sweeps_model.TRANSITIONS.items():
        for (s, e), t in table.items():
            if s is None and kind is sweeps_model.Kind.SWEEP:
                expected |= {(str(kind), None, str(e), str(start))
                             for start in sweeps_model.SWEEP_START}
            else:
                expected.add((str(kind), None if s is None else str(s), str(e), str(t)))
    expected |= {("refill_request", None, "opened", "open"),
                 ("refill_request", "open", "matched", "matched")}
    with engine.connect() as conn:
        stored = {tuple(r) for r in conn.execute(sa.text(
            "SELECT machine, from_state, event, to_state FROM state_moves"))}
    assert stored == expected


def test_the_writer_functions_run_as_the_state_writer(owner: Engine) -> None:
    with owner.connect() as conn:
        rows = conn.execute(sa.text(
            "SELECT p.proname, p.prosecdef, pg_get_userbyid(p.proowner), p.proconfig "
            "FROM pg_proc p WHERE p.proname IN ('withdrawal_transition', 'movement_insert', "
            "'movement_transition') ORDER BY 1")).all()
        member = conn.execute(sa.text(
            "SELECT pg_has_role('custody_app', 'custody_state_writer', 'MEMBER')")).scalar()
    assert [tuple(r) for r in rows] == [
        (name, True, "custody_state_writer", ["search_path=public, pg_temp"])
        for name in ("movement_insert", "movement_transition", "withdrawal_transition")]
    assert member is False
