"""Events: what webhooks deliver and ``GET /v1/events`` lists, and the webhook endpoints of
the admin API (pydantic models; the OpenAPI ``webhooks`` section is built from them by
``api.openapi.install_webhooks``).

An event is ``{"id", "type", "version", "created_at", "data"}``. ``version`` 2 (every event
written since migration 0026) carries the API's shapes: the deposit or withdrawal under the
field names of the GET routes' models, amounts as ``{"minor", "decimal"}`` strings, ids as
strings (they can exceed 2^53). Events written before (version 1: a flat ``data`` with
``amount_minor``/``amount``) are rendered as they were delivered, without ``version``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool

from api.schemas import Amount, Body

#: Deposit event types: the history row that writes each (``triggers/deposit_events.sql``).
DEPOSIT_EVENTS: dict[str, str] = {
    "deposit.seen": "A transfer to a user's deposit address was included in a block (not final).",
    "deposit.reorged": "The block that held the deposit left the canonical chain (not failed: "
                       "it usually comes back).",
    "deposit.reincluded": "The deposit is in a canonical block again; its confirmations count "
                          "again from there.",
    "deposit.credited": "Final under the chain's rule and attested: the user's wallet was "
                        "credited (``ledger_transaction_id``).",
    "deposit.held": "Held for review (amount not representable, attestor disagrees, below "
                    "minimum...): nothing was credited.",
    "deposit.failed": "Proven gone (its sender's nonce was used by another final transaction): "
                      "nothing was credited.",
}
#: Withdrawal event types: a withdrawal entering the state (``functions/outbox_withdrawal_type``).
WITHDRAWAL_EVENTS: dict[str, str] = {
    "withdrawal.pending_approval": "Reserved, waiting for an approver.",
    "withdrawal.reserved": "Amount plus the most the fee can be is reserved (available fell).",
    "withdrawal.broadcast": "Signed and sent to the network (``tx_hash``).",
    "withdrawal.unknown": "The outcome is unknown: it stays reserved until resolved.",
    "withdrawal.settled": "Final on chain and booked: ``fee`` is what was charged, the unused "
                          "reserve came back.",
    "withdrawal.reverted": "Reverted on chain: the reserve was released.",
    "withdrawal.released": "Refused before broadcast: the reserve was released.",
    "withdrawal.canceled": "Canceled before broadcast: the reserve was released.",
    "withdrawal.rejected": "Rejected by an approver: the reserve was released.",
    "withdrawal.written_off": "Decided by two admins after an unknown outcome.",
}
#: Alert kinds (``alert.<kind>``): operators' events (every payload says what to do, ``next``).
#: Alerts about a client's deposit (``deep_reorg``, ``unattributed_own_address``) also go to
#: that client; the others only to endpoints that take alerts.
ALERT_EVENTS: dict[str, str] = {
    "alert.deep_reorg": "A credited deposit's block is no longer canonical (a case is open).",
    "alert.unattributed_own_address": "An unexpected transfer to a hot or cold address "
                                      "(a case is open).",
    "alert.case_opened": "A reconciliation check opened a case.",
    "alert.ledger_drift": "Stored balances or the seals disagree with the postings.",
    "alert.withdrawal_overdue": "A withdrawal is still open past the SLA.",
    "alert.hot_wallet_low": "A hot wallet is below its minimum.",
    "alert.cold_transfer_proposed": "A transfer to cold storage waits for approvals.",
    "alert.withdrawal_held": "A payout is held with a case.",
    "alert.gas_float_low": "A payout waits for the gas float.",
    "alert.signer_unavailable": "A payout could not be signed in time.",
    "alert.config_mismatch": "A chain's configuration disagrees with its node.",
}
#: Allowlist event types: a change to one of the client's allowlisted destinations
#: (``triggers/withdrawal_allowlist.sql``).
ALLOWLIST_EVENTS: dict[str, str] = {
    "allowlist.address_added": "A destination was added to the client's allowlist: usable "
                               "from ``active_at`` (remove it before then if it is not yours).",
    "allowlist.address_removed": "A destination was removed from the allowlist: withdrawals to "
                                 "it are refused from now on.",
    "allowlist.activation_shortened": "Two admins made the destination usable earlier, from "
                                      "``active_at``.",
    "allowlist.address_active": "The destination became usable (its ``active_at`` passed).",
}
#: Every event type, with what it means.
EVENT_TYPES: dict[str, str] = {**DEPOSIT_EVENTS, **WITHDRAWAL_EVENTS, **ALLOWLIST_EVENTS,
                               **ALERT_EVENTS}
#: The payload version the engine writes now.
CURRENT_VERSION = 2


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


class EventDeposit(_Out):
    """The deposit as the event saw it (the names of the API's ``Deposit``)."""

    id: str = Field(description="Deposit id (a string: ids can exceed 2^53).",
                    examples=["42"])
    user_id: str
    chain: str
    tx_hash: str
    position: str = Field(description="The transfer's place in its transaction (log:<n>, "
                                      "call:<n>).")
    token: str | None = Field(description="Token contract (null: the native coin).")
    from_address: str
    to_address: str
    asset: str | None
    amount: Amount | None
    state: str
    block_number: int | None
    confirmations: int | None
    ledger_transaction_id: str | None


class EventDepositHistory(_Out):
    """The deposit history row that wrote the event (the names of ``DepositEvent``)."""

    id: str
    event: str
    state: str
    block_number: int | None
    block_hash: str | None
    confirmations: int | None
    rule: str | None
    reason: str | None
    ledger_transaction_id: str | None
    observed_at: datetime
    recorded_at: datetime


class DepositEventData(_Out):
    """``data`` of a ``deposit.*`` event."""

    deposit: EventDeposit
    history: EventDepositHistory


class EventWithdrawal(_Out):
    """The withdrawal as the event saw it (the names of the API's ``Withdrawal``)."""

    id: str = Field(description="Withdrawal id (a string: ids can exceed 2^53).")
    user_id: str
    request_key: str = Field(description="The Idempotency-Key it was requested with.")
    state: str
    state_reason: str | None
    chain: str
    asset: str
    token: str | None
    to: str
    amount: Amount
    fee: Amount
    fee_max: Amount
    tx_hash: str | None = Field(description="The transaction that carries it, once signed.")


class EventWithdrawalHistory(_Out):
    """The withdrawal history row that wrote the event (the names of ``WithdrawalEvent``)."""

    id: str
    event: str
    from_state: str | None
    to_state: str
    reason: str | None
    ledger_transaction_id: str | None
    occurred_at: datetime


class WithdrawalEventData(_Out):
    """``data`` of a ``withdrawal.*`` event."""

    withdrawal: EventWithdrawal
    history: EventWithdrawalHistory


class EventAllowlistEntry(_Out):
    """The allowlist entry as the event saw it (the names of the API's ``AllowlistEntry``)."""

    id: str = Field(description="Allowlist entry id (a string: ids can exceed 2^53).",
                    examples=["7"])
    client: str = Field(description="The API client whose allowlist it is.", examples=["acme"])
    user_id: str | None = Field(description="The one user it is for; null: every user of the "
                                            "client.", examples=["usr_42"])
    chain: str = Field(description="Chain name as configured.", examples=["ethereum"])
    address: str = Field(description="The destination, lower-case hex.",
                         examples=["0x3c44cdddb6a900fa2b585dd299e03d12fa4293bc"])
    label: str = Field(description="The client's name for the destination.",
                       examples=["cold store"])
    added_by: str = Field(description="Who added it (an actor name).", examples=["acme"])
    added_at: datetime = Field(description="When it was added (the engine's clock).")
    active_at: datetime = Field(description="From then on withdrawals to it are accepted.")
    removed_at: datetime | None = Field(description="When it was removed; null: listed.")
    removed_by: str | None = Field(description="Who removed it; null: listed.")


class AllowlistEventData(_Out):
    """``data`` of an ``allowlist.*`` event."""

    entry: EventAllowlistEntry = Field(description="The entry after the change.")


class DepositCaseAlertData(_Out):
    """``data`` of ``alert.deep_reorg`` and ``alert.unattributed_own_address``."""

    case_id: str
    kind: str
    deposit_id: str
    user_id: str | None
    chain: str
    tx_hash: str
    position: str
    asset: str | None
    amount: Amount | None
    ledger_transaction_id: str | None
    expected: dict[str, Any]
    observed: dict[str, Any]
    opened_at: datetime
    next: str = Field(description="What an operator does about it.")


class AlertData(BaseModel):
    """``data`` of the other ``alert.*`` events: kind-specific fields (ids and amounts as
    strings) and ``next``, what an operator does about it."""

    model_config = ConfigDict(extra="allow")

    next: str


DepositType = Literal["deposit.seen", "deposit.reorged", "deposit.reincluded",
                      "deposit.credited", "deposit.held", "deposit.failed"]
WithdrawalType = Literal[
    "withdrawal.pending_approval", "withdrawal.reserved", "withdrawal.broadcast",
    "withdrawal.unknown", "withdrawal.settled", "withdrawal.reverted", "withdrawal.released",
    "withdrawal.canceled", "withdrawal.rejected", "withdrawal.written_off"]
AllowlistType = Literal["allowlist.address_added", "allowlist.address_removed",
                        "allowlist.activation_shortened", "allowlist.address_active"]
DEPOSIT_CASE_ALERTS = ("alert.deep_reorg", "alert.unattributed_own_address")
AlertType = Literal[
    "alert.case_opened", "alert.ledger_drift", "alert.withdrawal_overdue", "alert.hot_wallet_low",
    "alert.cold_transfer_proposed", "alert.withdrawal_held", "alert.gas_float_low",
    "alert.signer_unavailable", "alert.config_mismatch"]
DepositCaseAlertType = Literal["alert.deep_reorg", "alert.unattributed_own_address"]
#: Any event type.
EventType = Literal[DepositType, WithdrawalType, AllowlistType, DepositCaseAlertType, AlertType]


class _EventBase(_Out):
    id: str = Field(description="Stable event id: receivers dedupe on it.",
                    examples=["evt_dep_17"])
    version: Literal[2] = Field(description="Payload version (docs/webhooks.md).")
    created_at: datetime


class DepositEventBody(_EventBase):
    """A ``deposit.*`` event."""

    type: DepositType
    data: DepositEventData


class WithdrawalEventBody(_EventBase):
    """A ``withdrawal.*`` event."""

    type: WithdrawalType
    data: WithdrawalEventData


class AllowlistEventBody(_EventBase):
    """An ``allowlist.*`` event."""

    type: AllowlistType
    data: AllowlistEventData


class DepositCaseAlertBody(_EventBase):
    """An alert about a client's deposit."""

    type: DepositCaseAlertType
    data: DepositCaseAlertData


class AlertBody(_EventBase):
    """An operators' alert."""

    type: AlertType
    data: AlertData


#: The body model of each event type (what a delivery's JSON is).
def body_model(event_type: str) -> type[_EventBase]:
    """The model of a version 2 event of ``event_type``."""
    if event_type in DEPOSIT_EVENTS:
        return DepositEventBody
    if event_type in WITHDRAWAL_EVENTS:
        return WithdrawalEventBody
    if event_type in ALLOWLIST_EVENTS:
        return AllowlistEventBody
    if event_type in DEPOSIT_CASE_ALERTS:
        return DepositCaseAlertBody
    return AlertBody


class Event(BaseModel):
    """An event as ``GET /v1/events`` lists it: exactly the JSON a webhook delivers (``data``
    per type: see the OpenAPI ``webhooks`` section); ``version`` is absent from events written
    before version 2."""

    id: str = Field(examples=["evt_dep_17"])
    type: str = Field(description="One of the event types of the webhooks section.")
    version: int | None = Field(default=None, description="Payload version (absent: 1).")
    created_at: str = Field(json_schema_extra={"format": "date-time"},
                            description="When the event was written (as delivered).")
    data: dict[str, Any]


class EventPage(BaseModel):
    """A page of events; pass ``next_cursor`` as ``cursor`` for the next page (null: none)."""

    items: list[Event]
    has_more: bool
    next_cursor: str | None


# --- webhook endpoints (admin API) ------------------------------------------------------------


class WebhookEndpointCreate(Body):
    """A new webhook endpoint of an API client."""

    client: str = Field(min_length=1, max_length=200, description="API client name.")
    url: str = Field(min_length=8, max_length=2000, pattern=r"^https?://\S+$")
    events: list[EventType] | None = Field(
        default=None, min_length=1, max_length=100,
        description="Event types to receive (null: all). See the webhooks section.")
    alerts: StrictBool = Field(default=False,
                               description="Also receive operators' alert.* events.")


class WebhookEndpoint(BaseModel):
    """A webhook endpoint (its secret is only ever shown by create and rotate)."""

    id: str
    client: str
    url: str
    events: list[str] | None = Field(description="Event types received (null: all).")
    alerts: bool
    state: Literal["enabled", "disabled"]
    created_at: datetime
    updated_at: datetime
    rotated_at: datetime | None
    previous_secret_expires_at: datetime | None = Field(
        description="Until then deliveries are signed with the old secret too.")


class WebhookEndpointSecret(WebhookEndpoint):
    """An endpoint with its new signing secret: shown once, keep it."""

    secret: str


class WebhookEndpointPage(BaseModel):
    """A page of endpoints by id; pass ``next_cursor`` as ``cursor`` for the next page."""

    items: list[WebhookEndpoint]
    has_more: bool
    next_cursor: str | None
