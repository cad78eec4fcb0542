"""Model-based test of the withdrawal machine: random event sequences through the pure
``model.transition``, with the money invariants checked after every step against a small
in-memory model of what the effects posted. No database, no chain."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from withdrawals import errors, model
from withdrawals.model import Effect, Event, State

#: The only events that may release the reserve of a withdrawal that was ever signed: proof
#: from the chain (nonce consumed by another final transaction; a final reverted receipt) or
#: the write-off decided by two admins.
PROOF_OF_NOT_PAID = frozenset({Event.PROVEN_NOT_SENT, Event.FINAL_REVERTED,
                               Event.WRITTEN_OFF_AS_NOT_SENT})
RESERVE_CLOSERS = frozenset({Effect.POST_SETTLE, Effect.POST_RELEASE})


def allowed(state: State) -> list[Event]:
    return sorted(e for (s, e) in model.TRANSITIONS if s is state)


class WithdrawalMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.state = State.REQUESTED
        self.now = datetime(2026, 11, 29, tzinfo=UTC)
        self.reserves = self.settles = self.releases = 0
        self.was_terminal = False
        self.signed = False
        self.was_unknown = False
        self.included = False

    def _move(self, event: Event) -> None:
        self.now += timedelta(seconds=1)
        before = self.state
        t = model.transition(before, event, now=self.now)
        assert (t.from_state, t.event, t.at) == (before, event, self.now)
        effects = set(t.effects)
        self.reserves += Effect.POST_RESERVE in effects
        self.settles += Effect.POST_SETTLE in effects
        self.releases += Effect.POST_RELEASE in effects
        if Effect.POST_RELEASE in effects and self.signed:
            assert event in PROOF_OF_NOT_PAID, f"{before} released by {event} without proof"
        if event in (Event.WRITTEN_OFF_AS_SENT, Event.WRITTEN_OFF_AS_NOT_SENT):
            # Only after escalation from unknown, where the two admins vote.
            assert before is State.AWAITING_WRITE_OFF and self.was_unknown
        if event is Event.FINAL_SUCCEEDED:
            assert before is State.INCLUDED  # settled only on a landed attempt
        if Effect.POST_GAS in effects and event is not Event.NONCE_CLOSED:
            assert before is State.INCLUDED  # gas only for an attempt with a receipt
        if event in (Event.NONCE_ASSIGNED, Event.ATTEMPT_SIGNED):
            # From the nonce on, the withdrawal may be paid: never released without proof.
            self.signed = True
        self.state = t.to_state
        self.was_unknown |= self.state is State.UNKNOWN
        self.was_terminal |= self.state.terminal

    @precondition(lambda self: bool(allowed(self.state)))
    @rule(data=st.data())
    def an_allowed_event(self, data: st.DataObject) -> None:
        self._move(data.draw(st.sampled_from(allowed(self.state))))

    @rule(event=st.sampled_from(sorted(Event)))
    def any_event(self, event: Event) -> None:
        if (self.state, event) not in model.TRANSITIONS:
            before = self.state
            try:
                model.transition(self.state, event, now=self.now)
            except errors.TransitionRefused:
                assert self.state is before
                return
            raise AssertionError(f"{event} accepted in {self.state} outside the table")
        self._move(event)

    @invariant()
    def reserved_at_most_once(self) -> None:
        assert self.reserves == (0 if self.state is State.REQUESTED else 1)

    @invariant()
    def closed_exactly_once_when_terminal(self) -> None:
        closings = self.settles + self.releases
        assert closings == (1 if self.state.terminal else 0), (self.state, closings)

    @invariant()
    def terminal_stays_terminal(self) -> None:
        assert self.state.terminal or not self.was_terminal

    @invariant()
    def in_flight_is_never_cancelable(self) -> None:
        if self.signed and not self.state.terminal:
            assert self.state not in model.CANCELABLE


WithdrawalMachine.TestCase.settings = settings(
    max_examples=400, stateful_step_count=40, deadline=None,
    suppress_health_check=[HealthCheck.too_slow])
TestWithdrawalMachine = WithdrawalMachine.TestCase
