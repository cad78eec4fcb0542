"""Conversions of the services' records into response bodies (no logic, no database)."""

from __future__ import annotations

from api.schemas import (
    Attempt,
    Case,
    Decision,
    Deposit,
    DepositEvent,
    Return,
    Transfer,
    Withdrawal,
    WithdrawalEvent,
    WithdrawalTimeline,
    amount,
    ledger_transaction,
)
from config.chains import ChainsConfig
from deposits.service import CaseRecord, DepositRecord, TimelineEntry
from withdrawals.service import Timeline, WithdrawalRecord


def scale_of(chains: ChainsConfig, asset_code: str) -> int:
    """The ledger scale of a configured asset (0 for an unknown one: minor units as they are)."""
    found = chains.assets.get(asset_code)
    return found.scale if found else 0


def deposit_view(chains: ChainsConfig, d: DepositRecord) -> Deposit:
    """A deposit's response body."""
    value = None
    if d.amount_minor is not None and d.asset_code is not None:
        value = amount(d.amount_minor, scale_of(chains, d.asset_code))
    return Deposit(
        id=d.id, chain=d.chain, tx_hash=d.tx_hash, position=d.position, token=d.token,
        from_address=d.from_address, to_address=d.to_address, user_id=d.user_id,
        asset=d.asset_code, amount=value, booking=d.booking, booking_reason=d.booking_reason,
        state=d.state, block_number=d.block_number, confirmations=d.confirmations,
        ledger_transaction_id=d.ledger_transaction_id, first_seen_at=d.first_seen_at,
        updated_at=d.updated_at)


def case_view(c: CaseRecord) -> Case:
    """A case's response body."""
    return Case(id=c.id, kind=c.kind, deposit_id=c.deposit_id,
                ledger_transaction_id=c.ledger_transaction_id, expected=c.expected,
                observed=c.observed, opened_at=c.opened_at, resolved_by=c.resolved_by,
                reversal_transaction_id=c.reversal_transaction_id, outcome=c.outcome,
                approved_by=c.approved_by,
                resolution_transaction_id=c.resolution_transaction_id,
                withdrawal_id=c.withdrawal_id)


def transfer_view(chains: ChainsConfig, e: TimelineEntry) -> Transfer:
    """One transfer of a deposit timeline."""
    return Transfer(
        deposit=deposit_view(chains, e.deposit),
        events=[DepositEvent(
            id=x.id, event=x.event, state=x.state, block_number=x.block_number,
            block_hash=x.block_hash, confirmations=x.confirmations, rule=x.rule,
            evidence=x.evidence, reason=x.reason, ledger_transaction_id=x.ledger_transaction_id,
            observed_at=x.observed_at, recorded_at=x.recorded_at) for x in e.events],
        ledger_transactions=[ledger_transaction(t) for t in e.ledger_transactions],
        cases=[case_view(c) for c in e.cases])


def withdrawal_view(chains: ChainsConfig, w: WithdrawalRecord) -> Withdrawal:
    """A withdrawal's response body."""
    scale = scale_of(chains, w.asset_code)
    return Withdrawal(
        id=w.id, user_id=w.user_id, state=str(w.state), state_reason=w.state_reason,
        chain=w.chain, asset=w.asset_code, to=w.destination, amount=amount(w.amount_minor, scale),
        fee=amount(w.fee_minor, scale), fee_max=amount(w.fee_max_minor, scale),
        approvals_required=w.approvals_required, nonce=w.nonce, requested_by=w.requested_by,
        requested_at=w.requested_at, state_changed_at=w.state_changed_at,
        unknown_since=w.unknown_since)


def timeline_view(chains: ChainsConfig, tl: Timeline) -> WithdrawalTimeline:
    """A withdrawal timeline's response body."""
    scale = scale_of(chains, tl.withdrawal.asset_code)
    return WithdrawalTimeline(
        withdrawal=withdrawal_view(chains, tl.withdrawal),
        events=[WithdrawalEvent(
            id=e.id, event=e.event, from_state=e.from_state, to_state=e.to_state, actor=e.actor,
            reason=e.reason, evidence=e.evidence, ledger_transaction_id=e.ledger_transaction_id,
            occurred_at=e.occurred_at) for e in tl.events],
        attempts=[Attempt(
            attempt_no=a.attempt_no, tx_hash=a.tx_hash, nonce=a.nonce,
            max_fee_per_gas=str(a.max_fee_per_gas),
            max_priority_fee_per_gas=str(a.max_priority_fee_per_gas), gas_limit=a.gas_limit,
            created_at=a.created_at) for a in tl.attempts],
        decisions=[Decision(kind=d.kind, decision=d.decision, actor=d.actor, reason=d.reason,
                            decided_at=d.decided_at) for d in tl.decisions],
        returns=[Return(chain=r.chain, tx_hash=r.tx_hash, position=r.position,
                        amount=amount(r.amount_minor, scale), arrived_at=r.arrived_at,
                        booked_to=r.booked_to, ledger_transaction_id=r.ledger_transaction_id,
                        linked_by=r.linked_by) for r in tl.returns],
        ledger_transactions=[ledger_transaction(t) for t in tl.transactions])
