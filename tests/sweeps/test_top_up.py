"""A token sweep waits for its gas top-up, against a real anvil and a real PostgreSQL.

- The token transfer is signed only once the top-up is final under ``confirmations:3``: after
  every sweeper step, a sweep with a nonce or an attempt has a final top-up; the history
  (``sweep_events``, ``gas_top_up_events``), the attempts (``outgoing_attempts``) and the chain
  (the receipts' block numbers) all say the same.
- A top-up reorged out before finality delays the sweep and does not lose it: anvil drops the
  top-up's transaction, the sweeper sends the same signed bytes again (same hash), the sweep
  completes, and exactly one top-up transfer lands.
- A token sweep stuck behind a fee spike is never replaced by an attempt whose gas its address
  cannot pay (its only native is the top-up), and lands once fees fall. FAILS on this branch:
  ``sending._replace_if_due`` bumps a token sweep past its gas budget; the node refuses the
  replacement ("insufficient funds"), the original is gone from anvil's pool, and every later
  step re-sends the unpayable replacement (the last attempt): the sweep stays ``unknown``.
- With an xpub address source (no key) sweeps are only proposed: no attempt, no nonce, no
  top-up, nothing signed or sent.
"""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy.engine import Engine

from devtools.anvil import AnvilNode
from ledger.integrity import verify
from sweeps.model import Kind

from .conftest import ETH, USDC, SweepRig, make_rig

pytestmark = pytest.mark.anvil
#: The rig's finality rule is ``confirmations:3``.
CONFIRMATIONS = 3


def _movements(rig: SweepRig) -> tuple[Any, Any]:
    """The only sweep and the only top-up (None before they are planned)."""
    sweeps = rig.rows("SELECT * FROM sweeps")
    top_ups = rig.rows("SELECT * FROM gas_top_ups")
    assert len(sweeps) <= 1 and len(top_ups) <= 1, (sweeps, top_ups)
    return (sweeps[0] if sweeps else None), (top_ups[0] if top_ups else None)


def _attempts(rig: SweepRig, column: str, movement_id: int) -> list[Any]:
    return rig.rows(f"SELECT * FROM outgoing_attempts WHERE {column} = :m ORDER BY id",
                    m=movement_id)


def _one_event(rig: SweepRig, kind: Kind, movement_id: int, event: str) -> Any:
    found = [e for e in rig.events(kind, movement_id) if e.event == event]
    assert len(found) == 1, (kind, movement_id, event, found)
    return found[0]


def _step_checking_the_wait(rig: SweepRig, seen: list[tuple[str, str]]) -> None:
    """One sweeper step, then the claim under test: a sweep that has a nonce or an attempt
    has a top-up that is final."""
    rig.sweep()
    sweep, top_up = _movements(rig)
    if sweep is None:
        return
    assert top_up is not None and sweep.top_up_id in (top_up.id, None)
    if sweep.nonce is not None or _attempts(rig, "sweep_id", sweep.id):
        assert top_up.state == "final", (sweep.state, top_up.state)
    seen.append((top_up.state, sweep.state))


def _assert_signed_after_final(rig: SweepRig, sweep: Any, top_up: Any) -> None:
    """The records and the chain agree that the token transfer was signed only after the
    top-up was final."""
    [top_up_attempt] = _attempts(rig, "top_up_id", top_up.id)
    [sweep_attempt] = _attempts(rig, "sweep_id", sweep.id)
    top_up_final = _one_event(rig, Kind.GAS_TOP_UP, top_up.id, "final_succeeded")
    gas_arrived = _one_event(rig, Kind.SWEEP, sweep.id, "gas_arrived")
    assigned = _one_event(rig, Kind.SWEEP, sweep.id, "nonce_assigned")
    signed = _one_event(rig, Kind.SWEEP, sweep.id, "attempt_signed")
    # The history: final top-up, then gas arrived, then the nonce, then the signature.
    assert gas_arrived.evidence["top_up_id"] == top_up.id
    assert gas_arrived.evidence["tx_hash"] == top_up_attempt.tx_hash
    assert top_up_final.recorded_at <= gas_arrived.recorded_at < assigned.recorded_at
    assert assigned.recorded_at < signed.recorded_at
    assert signed.attempt_id == sweep_attempt.id
    # The attempts: the top-up's first, the sweep's recorded after the top-up was final (at a
    # later or the same step: the step's clock).
    assert top_up_attempt.id < sweep_attempt.id
    assert sweep_attempt.created_at >= top_up_final.occurred_at
    # The chain: the top-up had its confirmations under the head the sweep was mined on.
    top_up_block = rig.receipt_block(top_up_attempt.tx_hash)
    sweep_block = rig.receipt_block(sweep_attempt.tx_hash)
    assert top_up_block is not None and sweep_block is not None
    assert top_up_final.evidence["tx_block"] == top_up_block
    assert top_up_final.evidence["confirmations"] >= CONFIRMATIONS
    assert top_up_final.evidence["head_block"] < sweep_block
    assert (sweep_block - 1) - top_up_block + 1 >= CONFIRMATIONS


def _assert_exactly_once(rig: SweepRig, address: str, deposited: int, top_up: Any,
                         sweep: Any) -> None:
    """One top-up transfer and one token transfer, booked once; the holdings add up."""
    assert rig.node.rpc.get_transaction_count(rig.hot, "latest") == 1  # Only the top-up.
    assert rig.node.rpc.get_transaction_count(address, "latest") == 1  # Only the sweep.
    arrived = rig.rows("SELECT state, value FROM deposits WHERE to_address = :a AND "
                       "from_address = :h", a=address, h=rig.hot)
    assert [(r.state, int(r.value)) for r in arrived] == [("internal", int(top_up.amount))]
    assert rig.usdc_transfers_to(rig.hot) == {address: 1}
    assert rig.on_chain(address) == (int(top_up.amount) - int(sweep.gas_paid), 0)
    assert rig.on_chain(rig.hot)[1] == deposited == int(sweep.swept_amount)
    gas = rig.rows("SELECT idempotency_key FROM ledger_transactions "
                   "WHERE kind IN ('sweep_gas', 'gas_top_up_gas') ORDER BY idempotency_key")
    assert [g.idempotency_key for g in gas] == [f"gas_top_up:{top_up.id}:gas",
                                                f"sweep:{sweep.id}:gas"]
    assert rig.balance("expense:network_fees", "ETH") == int(top_up.gas_paid) + int(
        sweep.gas_paid)
    for asset, (on_chain, booked) in rig.holdings().items():
        assert on_chain == booked, asset
    report = verify(rig.engine)
    assert report.ok, report.discrepancies


def test_token_sweep_is_signed_only_after_its_top_up_is_final(rig: SweepRig) -> None:
    rig.fund_treasury(ETH)
    rig.deposit_usdc("u", 50 * USDC)
    rig.settle(sweep=False)
    address = rig.user("u")
    seen: list[tuple[str, str]] = []

    for _ in range(20):
        rig.node.mine(1)
        rig.watch()
        _step_checking_the_wait(rig, seen)
        if seen and seen[-1][1] == "final":
            break
    rig.settle()

    sweep, top_up = _movements(rig)
    assert (sweep.state, top_up.state) == ("final", "final")
    assert sweep.address == top_up.address == address and sweep.token == rig.usdc.address
    # The sweep really waited: a step saw its top-up on chain but not final yet.
    assert ("included", "waiting_gas") in seen
    assert [e.event for e in rig.events(Kind.SWEEP, sweep.id)][:4] == [
        "planned", "top_up_planned", "gas_arrived", "nonce_assigned"]
    _assert_signed_after_final(rig, sweep, top_up)
    _assert_exactly_once(rig, address, 50 * USDC, top_up, sweep)


def test_top_up_reorged_out_before_finality_delays_the_sweep_and_is_sent_again(
        rig: SweepRig) -> None:
    rig.fund_treasury(ETH)
    rig.deposit_usdc("u", 50 * USDC)
    rig.settle(sweep=False)
    address = rig.user("u")
    rig.node.set_automine(False)

    rig.sweep()  # Plans the sweep and its top-up; the top-up is signed and sent.
    sweep, top_up = _movements(rig)
    assert (sweep.state, top_up.state) == ("waiting_gas", "broadcast")
    [attempt] = _attempts(rig, "top_up_id", top_up.id)
    first_block = rig.node.mine(1)
    assert rig.receipt_block(attempt.tx_hash) == first_block
    for _ in range(CONFIRMATIONS - 2):  # Included, one confirmation short of final.
        rig.watch()
        rig.sweep()
        rig.node.mine(1)
    rig.watch()
    rig.sweep()
    sweep, top_up = _movements(rig)
    assert (sweep.state, top_up.state) == ("waiting_gas", "included")
    head = rig.node.head()
    assert head - first_block + 1 == CONFIRMATIONS - 1

    rig.node.reorg(head - first_block + 1)  # The blocks since the top-up's are replaced.
    assert rig.node.head() == head
    assert rig.node.rpc.get_receipt(attempt.tx_hash) is None
    assert rig.node.rpc.get_transaction(attempt.tx_hash) is None  # Dropped, not pending.

    rig.watch()
    rig.sweep()
    sweep, top_up = _movements(rig)
    assert (sweep.state, top_up.state, sweep.nonce) == ("waiting_gas", "broadcast", None)
    assert rig.node.rpc.get_transaction(attempt.tx_hash) is not None  # The same bytes again.
    assert _attempts(rig, "top_up_id", top_up.id) == [attempt]
    assert not _attempts(rig, "sweep_id", sweep.id)

    seen: list[tuple[str, str]] = []
    for _ in range(20):
        rig.node.mine(1)
        rig.watch()
        _step_checking_the_wait(rig, seen)
        if seen and seen[-1][1] == "final":
            break
    rig.settle()

    sweep, top_up = _movements(rig)
    assert (sweep.state, top_up.state) == ("final", "final")
    assert _attempts(rig, "top_up_id", top_up.id) == [attempt]
    landed_block = rig.receipt_block(attempt.tx_hash)
    assert landed_block is not None and landed_block > head
    top_up_events = [e.event for e in rig.events(Kind.GAS_TOP_UP, top_up.id)]
    on_chain_events = [e for e in top_up_events
                       if e in {"receipt_observed", "reorged_out", "final_succeeded"}]
    assert on_chain_events == ["receipt_observed", "reorged_out", "receipt_observed",
                               "final_succeeded"]
    assert ("included", "waiting_gas") in seen
    _assert_signed_after_final(rig, sweep, top_up)
    _assert_exactly_once(rig, address, 50 * USDC, top_up, sweep)


def test_xpub_source_proposes_sweeps_and_signs_nothing(
        engine: Engine, node: AnvilNode, monkeypatch: pytest.MonkeyPatch) -> None:
    rig = make_rig(engine, node, monkeypatch, xpub=True)
    rig.fund_treasury(ETH)
    rig.deposit_eth("e", ETH // 2)
    rig.deposit_usdc("u", 50 * USDC)
    rig.deposit_usdc("both", 20 * USDC)
    rig.deposit_eth("both", ETH // 4)
    rig.settle(sweep=False)
    before = {a: rig.on_chain(a) for a in [rig.hot, *rig.users.values()]}
    custody = (rig.custody("ETH"), rig.custody("USDC"))

    first = rig.sweep()
    rig.settle()
    for _ in range(3):
        rig.node.mine(1)
        rig.sweep()

    assert first.proposed == 3 and first.planned == 0 and first.signed == 0
    sweeps = rig.rows("SELECT * FROM sweeps ORDER BY address")
    assert sorted((s.address, s.token) for s in sweeps) == sorted([
        (rig.user("e"), None), (rig.user("u"), rig.usdc.address),
        (rig.user("both"), rig.usdc.address)])  # One at a time per address: token first.
    assert {(s.state, s.nonce, s.top_up_id) for s in sweeps} == {("proposed", None, None)}
    for s in sweeps:
        assert [(e.event, e.to_state) for e in rig.events(Kind.SWEEP, s.id)] == [
            ("planned", "proposed")]
    for table in ("outgoing_attempts", "sender_nonces", "gas_top_ups", "internal_transfers"):
        assert rig.rows(f"SELECT count(*) AS n FROM {table}")[0].n == 0, table
    for address, held in before.items():
        assert rig.on_chain(address) == held
        assert rig.node.rpc.get_transaction_count(address, "latest") == 0
    assert (rig.custody("ETH"), rig.custody("USDC")) == custody


def _assert_attempts_affordable(rig: SweepRig, sweep_id: int, address: str) -> None:
    """Every attempt of a token sweep could be paid by the top-ups of its address that were
    final before it (the address's only native; more top-ups may follow a fee spike)."""
    final_top_ups = [(_one_event(rig, Kind.GAS_TOP_UP, t.id, "final_succeeded").occurred_at,
                      int(t.amount)) for t in rig.rows(
                          "SELECT id, amount FROM gas_top_ups WHERE address = :a "
                          "AND state = 'final'", a=address)]
    for a in _attempts(rig, "sweep_id", sweep_id):
        paid_for = sum(amount for at, amount in final_top_ups if at <= a.created_at)
        cost = a.gas_limit * int(a.max_fee_per_gas)
        assert cost <= paid_for, f"attempt {a.attempt_no} may cost {cost}, top-ups {paid_for}"


def test_a_stuck_token_sweep_is_never_replaced_by_more_gas_than_its_address_holds(
        rig: SweepRig) -> None:
    rig.fund_treasury(ETH)
    rig.deposit_usdc("u", 50 * USDC)
    rig.settle(sweep=False)
    address = rig.user("u")
    rig.node.set_automine(False)
    for _ in range(10):  # The top-up to finality, then the token transfer signed and sent.
        rig.sweep()
        if _movements(rig)[0].state == "broadcast":
            break
        rig.node.mine(1)
        rig.watch()
    sweep, top_up = _movements(rig)
    assert (sweep.state, top_up.state) == ("broadcast", "final")
    [first] = _attempts(rig, "sweep_id", sweep.id)
    # The address's only native is the top-up: the gas of every attempt must fit in it.
    budget = int(top_up.amount)
    assert rig.on_chain(address)[0] == budget
    assert first.gas_limit * int(first.max_fee_per_gas) <= budget

    # The base fee jumps above the attempt's cap: blocks come, the transfer is not mined, and
    # it is stuck long enough for a fee bump.
    for _ in range(2):
        rig.node.rpc.request("anvil_setNextBlockBaseFeePerGas",
                             [hex(5 * int(first.max_fee_per_gas))])
        rig.node.mine(1)
        rig.watch()
    assert rig.node.rpc.get_receipt(first.tx_hash) is None
    rig.sweep(advance_s=rig.cfg.bump_after_s + 1)
    _assert_attempts_affordable(rig, sweep.id, address)
    # Then fees fall back, and the sweep lands.
    rig.node.rpc.request("anvil_setNextBlockBaseFeePerGas", [hex(10**9)])
    rig.settle()

    _assert_attempts_affordable(rig, sweep.id, address)
    [sweep] = rig.rows("SELECT * FROM sweeps")
    assert sweep.state == "final" and int(sweep.swept_amount) == 50 * USDC
    assert rig.usdc_transfers_to(rig.hot) == {address: 1}
    assert rig.node.rpc.get_transaction_count(address, "latest") == 1
    for asset, (on_chain, booked) in rig.holdings().items():
        assert on_chain == booked, asset
    report = verify(rig.engine)
    assert report.ok, report.discrepancies
