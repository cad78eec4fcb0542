"""Use cases of withdrawals that need no chain call: request and reserve, approve, reject,
cancel, write-off votes, returned payouts, the retry of a held withdrawal, open items, what is
waiting for an operator (held withdrawals' cases, payouts waiting for the gas float) and the
timeline.

Every state change goes through ``model.transition`` and is written, with its history row and
its ledger entries (posted with ``ledger.service.post``, keys ``withdrawal:{id}:{step}``), in one
unit of work run by ``config.uow.run_in_transaction``. The chain side (sign, send, track,
settle) lives in ``withdrawals.processor`` and uses ``apply`` and ``Gas`` (``transitions``).

The package, one module per concern:

- ``requests``: validate a request, then reserve and insert it (``request_withdrawal``).
- ``transitions``: ``apply`` (one event: the transition, its ledger effects, the history row)
  and the settlement and gas entries.
- ``decisions``: approve, reject, cancel, write-off votes.
- ``holds``: the retry of a held withdrawal, and what is ``waiting`` for an operator.
- ``returns``: returned payouts linked to their withdrawals.
- ``allowlist``: destination allowlists (add, remove, list) and the two-admin shortening of
  one address's activation delay; the reserve checks them (``requests``).
- ``views``: a withdrawal, unknown outcomes, open items, the timeline.
- ``common``: the roles, ``Actor``, and what the others share.

Every public name is re-exported here: callers write ``from withdrawals import service`` and
``service.request_withdrawal``.
"""

# The record this service returns, re-exported for its callers (routes never import a
# repository).
from withdrawals.repository import AllowlistEntry as AllowlistEntryRecord
from withdrawals.repository import WithdrawalRecord as WithdrawalRecord
from withdrawals.service.allowlist import (
    Added,
    NewAddress,
    Shortening,
    add_address,
    announce_activations,
    get_entry,
    list_entries,
    remove_address,
    vote_shorten,
    votes_of,
)
from withdrawals.service.common import ADMIN, APPROVER, SOURCE, Actor, log
from withdrawals.service.decisions import approve, cancel, reject, vote_write_off
from withdrawals.service.holds import SIGNING_OVERDUE_S, Waiting, retry_held, waiting
from withdrawals.service.requests import (
    OwnAddresses,
    Requested,
    WithdrawalRequest,
    request_withdrawal,
    validate_request,
)
from withdrawals.service.returns import IncomingTransfer, IncomingTransfers, link_return
from withdrawals.service.transitions import Gas, Settlement, apply, gas_entry, settle_entry
from withdrawals.service.views import (
    OpenItem,
    Timeline,
    find_withdrawal,
    get_withdrawal,
    open_items,
    timeline,
    unknown_outcomes,
    user_withdrawals,
    withdrawal_of_tx_hash,
    withdrawals_in_states,
)

__all__ = [
    "ADMIN",
    "Added",
    "AllowlistEntryRecord",
    "NewAddress",
    "Shortening",
    "add_address",
    "announce_activations",
    "get_entry",
    "list_entries",
    "remove_address",
    "vote_shorten",
    "votes_of",
    "APPROVER",
    "SIGNING_OVERDUE_S",
    "SOURCE",
    "Actor",
    "Gas",
    "IncomingTransfer",
    "IncomingTransfers",
    "OpenItem",
    "OwnAddresses",
    "Requested",
    "Settlement",
    "Timeline",
    "Waiting",
    "WithdrawalRecord",
    "WithdrawalRequest",
    "apply",
    "approve",
    "cancel",
    "gas_entry",
    "find_withdrawal",
    "get_withdrawal",
    "link_return",
    "log",
    "open_items",
    "reject",
    "request_withdrawal",
    "retry_held",
    "settle_entry",
    "timeline",
    "unknown_outcomes",
    "user_withdrawals",
    "withdrawal_of_tx_hash",
    "withdrawals_in_states",
    "validate_request",
    "vote_write_off",
    "waiting",
]
