"""Request and response bodies of the HTTP API (pydantic), and their conversions.

Amounts travel as strings: requests take minor units as a string of digits (a JSON number, even
``1.5`` or ``1e3``, is refused: pydantic would turn floats into lossy values), responses give
``{"minor": "...", "decimal": "..."}`` because JavaScript clients lose precision above 2^53.
Request bodies forbid unknown fields; every string has a bound.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StrictBool
from pydantic_core import PydanticCustomError, to_json

from api.problems import AMOUNT_ERROR, RequestInvalid
from config.money import AmountTextInvalid, parse_decimal_amount
from ledger.errors import AmountInvalid
from ledger.model import AMOUNT_LIMIT, amount_json, check_amount
from ledger.repository import TransactionRecord
from ledger.service import UserBalance

CHAIN_PATTERN = r"^[a-z][a-z0-9_-]{0,31}$"
ASSET_PATTERN = r"^[A-Z0-9][A-Z0-9._-]{0,31}$"
TX_HASH_PATTERN = r"^0x[0-9a-fA-F]{64}$"
#: ``log:N``, ``call:0`` or an internal call's path ``call:0.<i>.<j>...`` (chains.traces).
POSITION_PATTERN = r"^(log:[0-9]{1,9}|call:[0-9]{1,9}(\.[0-9]{1,9}){0,1024})$"
MINOR_PATTERN = r"^[0-9]{1,40}$"
#: A request amount: a positive integer of minor units, as a string, no sign, no leading zero,
#: no spaces, no exponent (39 digits at most; ``parse_minor`` also refuses 2^127 and above).
AMOUNT_PATTERN = r"^[1-9][0-9]{0,38}$"
#: A reason, a label: 1-500 characters, not only spaces (services strip it).
Text = Annotated[str, Field(min_length=1, max_length=500, pattern=r"\S")]
#: The one error ``type`` of a refused request amount: ``api.problems`` answers 422
#: ``amount_invalid`` when every error of a request is this one.
_AMOUNT = re.compile(AMOUNT_PATTERN)


def _amount_text(value: object) -> object:
    """A request amount as it came, if it is a positive integer string below 2^127; else the
    pydantic error ``amount_invalid`` (a JSON number too: floats lose digits)."""
    if isinstance(value, str) and _AMOUNT.fullmatch(value) and int(value) < AMOUNT_LIMIT:
        return value
    shown = repr(value)[:50]
    raise PydanticCustomError(AMOUNT_ERROR, "amount must be a positive integer string of "
                              "minor units below 2^127, got {shown}", {"shown": shown})


MinorUnits = Annotated[str, BeforeValidator(_amount_text), Field(
    pattern=AMOUNT_PATTERN, max_length=39, examples=["30000000"],
    json_schema_extra={"pattern": AMOUNT_PATTERN},
    description=("Minor units of the asset: a positive integer as a string of digits (no "
                 "sign, leading zero, spaces, fraction or exponent; below 2^127). Anything "
                 "else is refused with 422 ``amount_invalid``."))]


def parse_minor(text: str, *, what: str = "amount") -> int:
    """A positive amount of minor units (``AMOUNT_PATTERN``, below 2^127) as an int; else
    422 ``amount_invalid``."""
    if not _AMOUNT.fullmatch(text):
        raise AmountInvalid(f"{what} must be a positive integer string of minor units, "
                            f"got {text[:50]!r}")
    try:
        return check_amount(parse_decimal_amount(text, 0), what=what)
    except (AmountTextInvalid, AmountInvalid) as exc:
        raise AmountInvalid(f"{what} must be minor units below 2^127, got {text[:50]!r}") from exc


#: What ``parse_instant`` accepts, for the document: an ISO 8601 time whose year (as written)
#: is 1970 to 9998 (``format: date-time`` alone would admit year 1 and 9999).
INSTANT_PATTERN = r"^(19[7-9][0-9]|[2-8][0-9]{3}|9[0-8][0-9]{2}|99[0-8][0-9]|999[0-8])-"
INSTANT_RANGE = "The year must be 1970 to 9998 (else 422 ``request_invalid``)."


def parse_instant(text: str | None, *, what: str) -> datetime | None:
    """An ISO 8601 time (naive: UTC) of a year (as written) 1970 to 9998, in UTC; 422
    otherwise."""
    if text is None:
        return None
    try:
        written = datetime.fromisoformat(text)
    except ValueError as exc:
        raise RequestInvalid(f"{what} is not an ISO 8601 time: {text[:60]!r}") from exc
    # The year as written (the document's pattern says the same): an offset that moves
    # 1970-01-01 into 1969 in UTC is still accepted.
    if not 1970 <= written.year <= 9998:
        raise RequestInvalid(f"{what} must fall between 1970 and 9998")
    return (written if written.tzinfo else written.replace(tzinfo=UTC)).astimezone(UTC)


class Body(BaseModel):
    """Base of request bodies: unknown fields are refused."""

    model_config = ConfigDict(extra="forbid")


class Amount(BaseModel):
    """An amount: minor units and the exact decimal rendering, both strings."""

    minor: str
    decimal: str


def amount(minor: int, scale: int) -> Amount:
    """An Amount from minor units and the asset's scale."""
    return Amount(**amount_json(minor, scale))


class Page(BaseModel):
    """The pagination fields every list shares (``api.routes.paging``): its ``items`` are a
    page; pass ``next_cursor`` as ``cursor`` (same filters) for the next one."""

    has_more: bool = Field(default=False, description="Whether another page follows.")
    next_cursor: str | None = Field(default=None, description=(
        "The ``cursor`` of the next page; null on the last page."))


# --- users, addresses, balances -------------------------------------------------------------


class UserCreate(Body):
    """A new user; ``reference`` is the client's own id (the same reference: the same user)."""

    reference: str | None = Field(default=None, min_length=1, max_length=200)


class User(BaseModel):
    """A user created through the API."""

    id: str
    reference: str | None
    created_at: datetime


class AddressCreate(Body):
    """Which chain to get a deposit address on."""

    chain: str = Field(pattern=CHAIN_PATTERN)


class DepositAddress(BaseModel):
    """A user's deposit address on a chain (shared by every chain of its family)."""

    chain: str
    family: str
    address: str


class DepositAddresses(BaseModel):
    """A user's deposit addresses."""

    user_id: str
    addresses: list[DepositAddress]


class Balance(BaseModel):
    """A user's balances in one asset (DESIGN.md section 4, "three balances")."""

    asset: str
    scale: int
    posted: Amount
    pending_incoming: Amount
    pending_outgoing: Amount
    available: Amount
    projected: Amount
    version: int
    as_of: datetime


class Balances(BaseModel):
    """A user's balances per asset, as of an effective time and as known at a recorded time."""

    user_id: str
    as_of: datetime
    known_at: datetime | None
    balances: list[Balance]


def balances_json(user_id: str, as_of: datetime, known_at: datetime | None,
                  rows: Sequence[UserBalance]) -> bytes:
    """The JSON of ``Balances`` for ``rows``, byte for byte what
    ``Balances(...).model_dump_json()`` gives, without building the models: the hot read's body.

    Plain dicts and lists go through ``pydantic_core.to_json``, the serializer of
    ``model_dump_json`` itself (same string escaping, same datetime format); the amounts are
    ``amount_json``'s strings. Building and validating eight models per asset cost more CPU
    than the rest of the rendering (tests/api/test_schemas.py checks the equality).
    """
    balances = []
    for b in rows:
        scale = b.asset.scale
        balances.append({
            "asset": b.asset.code, "scale": scale,
            "posted": amount_json(b.posted_minor, scale),
            "pending_incoming": amount_json(b.pending_incoming_minor, scale),
            "pending_outgoing": amount_json(b.pending_outgoing_minor, scale),
            "available": amount_json(b.available_minor, scale),
            "projected": amount_json(b.projected_minor, scale),
            "version": b.version, "as_of": as_of})
    return to_json({"user_id": user_id, "as_of": as_of, "known_at": known_at,
                    "balances": balances})


# --- deposits ---------------------------------------------------------------------------------


class Deposit(BaseModel):
    """A deposit: its facts and its current state."""

    id: int
    chain: str
    tx_hash: str
    position: str
    token: str | None
    from_address: str
    to_address: str
    user_id: str | None
    asset: str | None
    amount: Amount | None
    booking: str
    booking_reason: str | None
    state: str
    block_number: int | None
    confirmations: int | None
    ledger_transaction_id: int | None
    first_seen_at: datetime
    updated_at: datetime


class StatementBalance(BaseModel):
    """The user's balances in the statement's asset at one point of it."""

    available: Amount = Field(description="The wallet: what the user can spend.")
    posted: Amount = Field(description="Wallet plus withdrawals in flight.")


class StatementLine(BaseModel):
    """One posting on a user's statement, with the running balances after it."""

    posting_id: int
    transaction_id: int
    account: str = Field(description="wallet (available) or withdrawals (reserved in flight)")
    amount: Amount = Field(description="Change of the user's balance (negative: it fell)")
    available: Amount
    posted: Amount
    kind: str
    reference: str | None
    reason: str | None
    effective_at: datetime
    recorded_at: datetime


class StatementPage(Page):
    """A page of a user's statement in one asset, oldest first; pass ``next_cursor`` as
    ``cursor`` for the next page. ``opening`` is the balance before the page's first line
    (for the first page of a range: just before ``from``), ``closing`` the balance after its
    last line (``opening`` plus the lines); on the last page of a range, ``closing`` is the
    balance at ``to``."""

    user_id: str
    asset: str
    scale: int
    #: The range asked (``from``/``to``; null: open), by the time each posting was recorded.
    range_from: datetime | None = Field(serialization_alias="from")
    range_to: datetime | None = Field(serialization_alias="to")
    opening: StatementBalance
    closing: StatementBalance
    items: list[StatementLine]


class DepositPage(Page):
    """A page of deposits, newest first; pass ``next_cursor`` as ``cursor`` for the next."""

    items: list[Deposit]


class Posting(BaseModel):
    """A posting: signed minor units, debit positive."""

    id: int
    account_id: int
    amount_minor: str
    closes_posting_id: int | None
    reverses_posting_id: int | None


class LedgerTransaction(BaseModel):
    """A ledger transaction with its postings."""

    id: int
    kind: str
    reference: str | None
    effective_at: datetime
    recorded_at: datetime
    reason: str | None
    source: str
    reverses_transaction_id: int | None
    out_of_period: bool
    postings: list[Posting]


def ledger_transaction(t: TransactionRecord) -> LedgerTransaction:
    """The response form of a stored transaction."""
    return LedgerTransaction(
        id=t.id, kind=t.kind, reference=t.reference, effective_at=t.effective_at,
        recorded_at=t.recorded_at, reason=t.reason, source=t.source,
        reverses_transaction_id=t.reverses_transaction_id, out_of_period=t.out_of_period,
        postings=[Posting(id=p.id, account_id=p.account_id, amount_minor=str(p.amount_minor),
                          closes_posting_id=p.closes_posting_id,
                          reverses_posting_id=p.reverses_posting_id) for p in t.postings])


class DepositEvent(BaseModel):
    """One row of a deposit's history."""

    id: int
    event: str
    state: str
    block_number: int | None
    block_hash: str | None
    confirmations: int | None
    rule: str | None
    evidence: dict[str, Any]
    reason: str | None
    ledger_transaction_id: int | None
    observed_at: datetime
    recorded_at: datetime


class Case(BaseModel):
    """A durable reconciliation case."""

    id: int
    kind: str
    deposit_id: int
    ledger_transaction_id: int | None
    expected: dict[str, Any]
    observed: dict[str, Any]
    opened_at: datetime
    resolved_by: str | None
    reversal_transaction_id: int | None
    #: How an own-address case was resolved: ``capital``, ``return`` or ``refund`` (null:
    #: open, or another kind of case).
    outcome: str | None = None
    #: The second admin who approved the resolution.
    approved_by: str | None = None
    #: The ledger transaction of a ``capital`` or ``refund`` resolution.
    resolution_transaction_id: int | None = None
    #: The withdrawal a ``return`` was linked to, or the withdrawal paying a ``refund`` back to
    #: the sender (null until it is requested).
    withdrawal_id: int | None = None


class Transfer(BaseModel):
    """One transfer of a transaction with its full history and ledger transactions."""

    deposit: Deposit
    events: list[DepositEvent]
    ledger_transactions: list[LedgerTransaction]
    cases: list[Case]


class DepositTimeline(BaseModel):
    """Every transfer to us in one transaction."""

    chain: str
    tx_hash: str
    transfers: list[Transfer]


class Cases(BaseModel):
    """Open reconciliation cases."""

    items: list[Case]


# --- withdrawals ------------------------------------------------------------------------------


#: A withdrawal's destination as the document states it: 0x and 40 hex digits, and ``not`` the
#: zero address (the EIP-55 checksum of a mixed-case address is checked by the service:
#: ``withdrawals.model.normalize_address``).
WITHDRAWAL_TO_PATTERN = r"^0x[0-9a-fA-F]{40}$"
ZERO_ADDRESS = "0x" + "0" * 40


def _to_schema(schema: dict[str, Any]) -> None:
    """The document's ``to``: the pattern (which fixes the length) and ``not`` the zero address;
    the server's own bound (100 characters) is not repeated, as generators of clients and test
    data fail to combine a pattern with length bounds efficiently."""
    schema.pop("minLength", None)
    schema.pop("maxLength", None)
    schema.update({"pattern": WITHDRAWAL_TO_PATTERN, "not": {"const": ZERO_ADDRESS}})


class WithdrawalCreate(Body):
    """A withdrawal request: ``amount`` in minor units of the ledger asset, as a string."""

    asset: str = Field(pattern=ASSET_PATTERN)
    chain: str = Field(pattern=CHAIN_PATTERN)
    to: str = Field(min_length=1, max_length=100, description=(
        "EVM address: 0x and 40 hex digits, all lower case, all upper case or with a valid "
        "EIP-55 checksum; not the zero address. A bad checksum or a malformed address is "
        "422 ``address_invalid``, the zero address 422 ``address_zero``."),
        json_schema_extra=_to_schema)
    amount: MinorUnits


class Withdrawal(BaseModel):
    """A withdrawal's current state."""

    id: int
    user_id: str
    state: str
    state_reason: str | None
    chain: str
    asset: str
    to: str
    amount: Amount
    fee: Amount
    fee_max: Amount
    approvals_required: int
    nonce: int | None
    requested_by: str
    requested_at: datetime
    state_changed_at: datetime
    unknown_since: datetime | None


class WithdrawalPage(Page):
    """A page of withdrawals, newest first; pass ``next_cursor`` as ``cursor`` for the next."""

    items: list[Withdrawal]


class WithdrawalEvent(BaseModel):
    """One row of a withdrawal's history."""

    id: int
    event: str
    from_state: str | None
    to_state: str
    actor: str
    reason: str | None
    evidence: dict[str, Any]
    ledger_transaction_id: int | None
    occurred_at: datetime


class Attempt(BaseModel):
    """A signed broadcast attempt."""

    attempt_no: int
    tx_hash: str
    nonce: int
    max_fee_per_gas: str
    max_priority_fee_per_gas: str
    gas_limit: int
    created_at: datetime


class Decision(BaseModel):
    """An approval or a write-off vote."""

    kind: str
    decision: str
    actor: str
    reason: str | None
    decided_at: datetime


class Return(BaseModel):
    """A returned payout linked to the withdrawal."""

    chain: str
    tx_hash: str
    position: str
    amount: Amount
    arrived_at: datetime
    booked_to: str
    ledger_transaction_id: int | None
    linked_by: str


class WithdrawalTimeline(BaseModel):
    """A withdrawal with everything that happened to it."""

    withdrawal: Withdrawal
    events: list[WithdrawalEvent]
    attempts: list[Attempt]
    decisions: list[Decision]
    returns: list[Return]
    ledger_transactions: list[LedgerTransaction]


class CancelRequest(Body):
    """Why the withdrawal is canceled."""

    reason: Text | None = None


class ApprovalCreate(Body):
    """An approver's decision: approve, or reject (with a reason)."""

    # A rejection without a reason is refused (422): the document says so as a condition.
    model_config = ConfigDict(json_schema_extra={
        "if": {"properties": {"decision": {"const": "reject"}}, "required": ["decision"]},
        "then": {"required": ["reason"], "properties": {"reason": {"type": "string"}}}})

    decision: Literal["approve", "reject"] = "approve"
    reason: Text | None = None


# --- admin ------------------------------------------------------------------------------------


class ReversalCreate(Body):
    """Reverse a ledger transaction in full; ``out_of_period`` for a closed period."""

    reason: Text
    out_of_period: StrictBool = False


class Reversal(BaseModel):
    """The reversal transaction."""

    transaction_id: int
    reverses_transaction_id: int
    replayed: bool


class PeriodClose(Body):
    """Close everything effective before ``ends_at``."""

    ends_at: str = Field(max_length=64, description=(
        "ISO 8601 time (naive: UTC): entries effective before it are closed. " + INSTANT_RANGE),
        json_schema_extra={"format": "date-time", "pattern": INSTANT_PATTERN})
    reason: Text | None = None


class PeriodProposal(BaseModel):
    """A proposed period close: nothing is closed until someone else approves it."""

    id: int
    ends_at: datetime
    reason: str | None
    proposed_by: str
    proposed_at: datetime
    state: Literal["awaiting_approval", "closed"]
    period_id: int | None = Field(description="The closed period, once approved.")


class Period(BaseModel):
    """A closed period."""

    id: int
    ends_at: datetime
    closed_at: datetime
    closed_by: str
    reason: str | None


class WriteOffVote(Body):
    """An admin's vote on an undetermined withdrawal; two different admins must agree."""

    decision: Literal["sent", "not_sent"]
    reason: Text


class ReturnLink(Body):
    """Link an incoming transfer (deposit key) to the settled payout it returns."""

    chain: str = Field(pattern=CHAIN_PATTERN)
    tx_hash: str = Field(pattern=TX_HASH_PATTERN)
    position: str = Field(pattern=POSITION_PATTERN)
    amount: MinorUnits
    reason: Text


class StoredRequest(BaseModel):
    """The request an ``Idempotency-Key`` was first used for."""

    operation: str
    method: str | None = Field(description="Null for a key stored before this was recorded.")
    path: str | None = Field(description="Null for a key stored before this was recorded.")
    received_at: datetime
    state: Literal["in_progress", "completed"]
    #: The id of the resource its response created or changed, if any.
    resource_id: int | str | None


class Problem(BaseModel):
    """An RFC 9457 problem document with the engine's stable ``code``."""

    type: str
    title: str
    status: int
    detail: str
    code: str
    request_id: str
    errors: list[dict[str, Any]] | None = None
    #: ``insufficient_funds``: the balance that was short, in the user's terms.
    account: str | None = Field(default=None, description=(
        "insufficient_funds: the account whose available balance was short."))
    asset: str | None = Field(default=None, description="insufficient_funds: its asset.")
    available: Amount | None = Field(default=None, description=(
        "insufficient_funds: the available balance."))
    needed: Amount | None = Field(default=None, description=(
        "insufficient_funds: what the request needed (a withdrawal: amount plus fee_max)."))
    shortfall: Amount | None = Field(default=None, description=(
        "insufficient_funds: needed minus available."))
    stored_request: StoredRequest | None = Field(default=None, description=(
        "idempotency_key_reused: the request already stored under the key."))
    reason: Literal["not_listed", "not_active", "removed"] | None = Field(
        default=None, description="destination_not_allowed: why the destination cannot be "
                                  "used (not on the client's allowlist, listed but not active "
                                  "yet, or removed).", examples=["not_active"])
    at: str | None = Field(default=None, json_schema_extra={"format": "date-time"},
                           description="destination_not_allowed: when the destination becomes "
                                       "usable (not_active) or was removed (removed).")


class Health(BaseModel):
    """Liveness and database reachability."""

    status: str


# --- treasury: fundings, own-address cases, the report ---------------------------------------

ADDRESS_PATTERN = r"^0x[0-9a-fA-F]{40}$"


class FundingCreate(Body):
    """Company capital expected on chain, declared before it is sent."""

    chain: str = Field(pattern=CHAIN_PATTERN)
    asset: str = Field(pattern=ASSET_PATTERN)
    #: Minor units of the asset as a string of digits (``"2500000000000000000"`` for 2.5 ETH).
    amount: MinorUnits
    from_address: str = Field(pattern=ADDRESS_PATTERN)
    reason: Text


class Funding(BaseModel):
    """A declared funding; ``state`` ``matched`` once the final transfer that brought it was
    booked (``DR treasury`` / ``CR equity:owner``)."""

    id: int
    chain: str
    asset: str
    amount: Amount
    from_address: str
    reason: str
    declared_by: str
    declared_at: datetime
    state: Literal["expected", "matched"]
    deposit_id: int | None
    ledger_transaction_id: int | None
    matched_at: datetime | None


class Fundings(Page):
    """Declared fundings, newest first."""

    items: list[Funding]


class CaseProposalCreate(Body):
    """An admin's proposed resolution of an unattributed own-address case."""

    #: ``refund``: back to the transfer's sender, the received amount minus the withdrawal
    #: policy's ``fee_max``, as a withdrawal of the company user ``company:refunds``.
    outcome: Literal["capital", "return", "refund"]
    reason: Text
    #: For ``return``: the settled withdrawal the transfer returns.
    withdrawal_id: int | None = Field(default=None, ge=1, le=2**63 - 1)


class CaseDecision(BaseModel):
    """A case decision: ``proposed`` by one admin, ``resolved`` once another approved it."""

    case_id: int
    state: Literal["proposed", "resolved"]
    outcome: str
    proposed_by: str
    reason: str
    approved_by: str | None
    #: ``return``: the withdrawal returned; ``refund``: the withdrawal paying the sender.
    withdrawal_id: int | None
    ledger_transaction_id: int | None


class TreasuryAsset(BaseModel):
    """One chain and asset of the treasury report; amounts in the ledger asset's units."""

    chain: str
    asset: str
    native: bool
    #: The node's finalized block the on-chain figures were read at (null: not read).
    block_number: int | None
    treasury: Amount
    #: The gas float (the native asset's treasury balance); null for other assets.
    gas_float: Amount | None
    #: The on-chain figures below are null when the node could not be read (``unavailable``).
    hot_onchain: Amount | None
    hot_custody: Amount | None
    hot_treasury: Amount | None
    #: All our addresses (deposit, hot, cold) on chain at ``block_number``.
    onchain: Amount | None
    custody: Amount
    custody_plus_treasury: Amount
    #: ``onchain - custody_plus_treasury``.
    difference: Amount | None
    addresses: int
    exact: bool
    #: Why the on-chain figures are missing (the node's error); null when they were read.
    unavailable: str | None = None


class Treasury(BaseModel):
    """The treasury report, per chain and asset."""

    items: list[TreasuryAsset]


# --- holdings (``sweeps.holdings.report_json`` gives this shape; on-chain units unless said) ---

HoldingsStatus = Literal["ok", "in_flight", "unexplained"]


class HoldingsAddress(BaseModel):
    """One of our addresses and one asset. Hot and cold addresses have no ledger figures
    (``expected`` ... ``difference`` null): the ledger has no per-address accounts for them."""

    address: str
    kind: Literal["deposit", "hot", "cold"]
    asset: str
    #: The token contract; null for the native coin.
    token: str | None
    on_chain: Amount
    #: ``customer + treasury + suspense``: what the ledger says the address should hold.
    expected: Amount | None
    customer: Amount | None
    treasury: Amount | None
    suspense: Amount | None
    #: ``on_chain - expected``.
    difference: Amount | None
    in_flight_in: Amount
    in_flight_out: Amount
    #: Received and held for review (not booked).
    held: Amount
    #: A transaction of ours from this address is in flight (it pays gas in the native coin).
    sending: bool
    status: HoldingsStatus | None


class HoldingsGroup(BaseModel):
    """The hot and cold addresses together against the ledger's residual: custody + treasury
    minus what the deposit addresses should hold."""

    on_chain: Amount
    expected: Amount
    customer: Amount
    treasury: Amount
    suspense: Amount
    difference: Amount
    in_flight_in: Amount
    in_flight_out: Amount
    held: Amount
    sending: bool
    status: HoldingsStatus


class HoldingsLedger(BaseModel):
    """The ledger's own balances of an asset on a chain, in its minor units (``scale``)."""

    scale: int
    custody: Amount
    treasury: Amount
    custody_plus_treasury: Amount


class HoldingsAsset(BaseModel):
    """One asset of a chain in total: all our addresses on chain against custody + treasury."""

    asset: str
    token: str | None
    #: The on-chain decimals of every amount here except ``ledger``.
    decimals: int
    on_chain: Amount
    custody: Amount
    treasury: Amount
    custody_plus_treasury: Amount
    #: ``on_chain - custody_plus_treasury``: 0 when nothing is in flight.
    difference: Amount
    deposits_expected: Amount
    in_flight_in: Amount
    in_flight_out: Amount
    held: Amount
    sending: bool
    status: HoldingsStatus
    #: False when a ledger balance had digits below the token's unit (shown rounded down).
    exact: bool
    #: How many addresses were read.
    addresses: int
    ledger: HoldingsLedger
    hot_cold: HoldingsGroup


class HoldingsChain(BaseModel):
    """One chain at the newest block final under its rule."""

    chain: str
    finality: str
    block_number: int
    block_hash: str
    deposit_addresses: int
    hot_addresses: int
    cold_addresses: int
    ledger_read_ms: int
    chain_read_ms: int
    assets: list[HoldingsAsset]
    #: Hot and cold addresses, then every deposit address with anything non-zero (every one
    #: with ``include_empty``).
    addresses: list[HoldingsAddress]


class Holdings(BaseModel):
    """The holdings report, chain by chain."""

    chains: list[HoldingsChain]
