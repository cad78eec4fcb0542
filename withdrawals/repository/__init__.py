"""All SQL of withdrawals, one module per concern. Functions take a Connection inside an open
transaction.

- ``withdrawals``: the withdrawal rows (``WithdrawalRecord``), their lookups, and their
  history: ``record_transition`` sets the ``TRANSITION_COLUMNS`` and appends the history row
  (``HistoryRow``) in one statement; ``list_events`` reads the history back, ``last_event``
  its latest row of one event.
- ``reserve``: the calls of the reserve's SQL functions ``withdrawal_reserve_open`` (the daily
  limit lock and what a reserve reads under it) and ``withdrawal_reserve_record`` (the reserved
  withdrawal, its history row and outbox event), on the psycopg connection directly.
- ``decisions``: approvals and write-off votes.
- ``allowlist``: destination allowlists, the votes that shorten an address's activation delay,
  and the reserve's destination and velocity reads (``reserve_limits``).
- ``attempts``: the withdrawal side of ``outgoing.repository`` (hot wallet nonces, signed
  attempts) and the processor's per-chain lock.
- ``returns``: returned payouts linked to their withdrawals.
- ``holds``: the gas float's reads (the maximum gas still committed on a chain, the
  withdrawals waiting for it) and the cases a hold opens, with their resolutions.
- ``ledger_reads``: what withdrawals read from the ledger's tables (the user's accounts, open
  reserve postings, a withdrawal's ledger transactions).

Amounts leave the database as ``Decimal`` and become ``int`` here (``ledger.repository.to_int``).
Every public name is re-exported here: callers write ``from withdrawals import repository as
repo`` and ``repo.get_withdrawal``.
"""

from withdrawals.repository.allowlist import (
    AllowlistEntry,
    ReserveLimits,
    VoteRecord,
    WindowUse,
    reserve_limits,
)
from withdrawals.repository.attempts import (
    AttemptRecord,
    allocate_nonce,
    insert_attempt,
    list_attempts,
    try_lock_chain,
    withdrawal_of_tx_hash,
)
from withdrawals.repository.decisions import DecisionRecord, insert_decision, list_decisions
from withdrawals.repository.holds import (
    GAS_FLOAT_LOW,
    CaseRecord,
    ids_signing_since,
    ids_waiting_for_gas,
    in_flight_max_gas,
    insert_case,
    list_cases,
    open_cases,
    resolve_case,
    tokens_of,
)
from withdrawals.repository.ledger_reads import (
    OpenItemRow,
    find_accounts,
    ledger_transaction_ids,
    open_reserves,
)
from withdrawals.repository.reserve import ReserveOpened, open_reserve, record_reserve
from withdrawals.repository.returns import ReturnRecord, find_return, insert_return, list_returns
from withdrawals.repository.withdrawals import (
    TRANSITION_COLUMNS,
    EventRecord,
    HistoryRow,
    WithdrawalRecord,
    find_by_key,
    get_withdrawal,
    last_event,
    list_events,
    list_ids_in_states,
    list_ids_with_open_nonce,
    record_transition,
    withdrawals_of_user,
)

__all__ = [
    "GAS_FLOAT_LOW",
    "AllowlistEntry",
    "ReserveLimits",
    "VoteRecord",
    "WindowUse",
    "reserve_limits",
    "TRANSITION_COLUMNS",
    "AttemptRecord",
    "CaseRecord",
    "DecisionRecord",
    "EventRecord",
    "HistoryRow",
    "OpenItemRow",
    "ReserveOpened",
    "ReturnRecord",
    "WithdrawalRecord",
    "allocate_nonce",
    "find_accounts",
    "find_by_key",
    "find_return",
    "get_withdrawal",
    "withdrawals_of_user",
    "withdrawal_of_tx_hash",
    "ids_signing_since",
    "ids_waiting_for_gas",
    "in_flight_max_gas",
    "insert_case",
    "insert_attempt",
    "insert_decision",
    "insert_return",
    "last_event",
    "ledger_transaction_ids",
    "list_attempts",
    "list_cases",
    "list_decisions",
    "list_events",
    "list_ids_in_states",
    "list_ids_with_open_nonce",
    "list_returns",
    "open_cases",
    "open_reserve",
    "open_reserves",
    "record_reserve",
    "record_transition",
    "resolve_case",
    "tokens_of",
    "try_lock_chain",
]
