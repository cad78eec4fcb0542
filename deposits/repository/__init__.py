"""All SQL of the deposit side, one module per concern. Functions take a connection and never
commit.

- ``deposits``: deposits and their append-only history (``deposit_events``), the bulk inserts
  of a watcher step, ``append_events`` (history rows and each deposit's current state in one
  statement) and the reads by key, state, user and transaction.
- ``addresses``: deposit addresses and the allocation of derivation indexes.
- ``accounts``: the ledger accounts deposits book to, opened many at a time.
- ``cursors``: the watcher's per-chain lock and its cursor of recent blocks.
- ``cases``: durable cases, their resolutions and the withdrawals that pay refunds.
- ``inbox``: the custody provider's stored notifications.
- ``own``: our own addresses' side tables: internal transfers, treasury fundings and their
  matches, the votes of two-admin case resolutions.
- ``common``: the deposit ``Key`` and the JSON and integer conversions the modules share.

Bulk writes go through ``jsonb_to_recordset`` so that a watcher step writes hundreds of
deposits with a few statements. Amounts travel as decimal strings and come back as ``int``.
Every public name is re-exported here: callers write ``from deposits import repository as
repo`` and ``repo.lock_deposits``.
"""

from deposits.repository.accounts import AccountRow, open_accounts
from deposits.repository.addresses import (
    address_of_user,
    insert_addresses,
    lock_address_family,
    next_address_index,
    user_has_address,
    users_of_addresses,
)
from deposits.repository.cases import (
    CaseRecord,
    get_cases,
    insert_case,
    insert_case_refund,
    insert_case_resolution,
    lock_case,
)
from deposits.repository.common import Key
from deposits.repository.cursors import (
    CURSOR_MOVED,
    get_cursor,
    lock_chain,
    save_cursor,
    swap_cursor,
)
from deposits.repository.deposits import (
    DepositRecord,
    EventRecord,
    append_events,
    deposit_by_id,
    deposits_above,
    deposits_in_states,
    deposits_of_transaction,
    deposits_of_user,
    deposits_to_recheck,
    deposits_waiting,
    events_of,
    finality_evidence,
    insert_deposits,
    insert_with_history,
    lock_deposits,
    pending_incoming,
    reserve_ids,
)
from deposits.repository.inbox import InboxRecord, get_inbox, inbox_for, insert_inbox
from deposits.repository.own import (
    FundingRecord,
    InternalTransfer,
    VoteRecord,
    case_votes,
    deposit_addresses,
    funding_by_key,
    fundings,
    insert_case_vote,
    insert_funding,
    insert_funding_match,
    insert_internal_transfer,
    internal_transfer,
    internal_transfer_keys,
    lock_case_votes,
    lock_unmatched_funding,
    match_refill,
)

__all__ = [
    "CURSOR_MOVED",
    "AccountRow",
    "CaseRecord",
    "DepositRecord",
    "EventRecord",
    "FundingRecord",
    "InboxRecord",
    "InternalTransfer",
    "VoteRecord",
    "Key",
    "address_of_user",
    "append_events",
    "case_votes",
    "deposit_addresses",
    "deposit_by_id",
    "deposits_above",
    "deposits_in_states",
    "deposits_waiting",
    "deposits_of_transaction",
    "deposits_of_user",
    "deposits_to_recheck",
    "events_of",
    "finality_evidence",
    "funding_by_key",
    "fundings",
    "get_cases",
    "get_cursor",
    "get_inbox",
    "inbox_for",
    "insert_addresses",
    "insert_case",
    "insert_case_refund",
    "insert_case_vote",
    "insert_case_resolution",
    "insert_deposits",
    "insert_with_history",
    "insert_funding",
    "insert_funding_match",
    "insert_inbox",
    "insert_internal_transfer",
    "internal_transfer",
    "internal_transfer_keys",
    "match_refill",
    "lock_address_family",
    "lock_case",
    "lock_case_votes",
    "lock_chain",
    "lock_deposits",
    "reserve_ids",
    "lock_unmatched_funding",
    "next_address_index",
    "open_accounts",
    "pending_incoming",
    "save_cursor",
    "swap_cursor",
    "user_has_address",
    "users_of_addresses",
]
