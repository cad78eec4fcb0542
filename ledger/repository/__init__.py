"""All SQL of the ledger, one module per concern. Functions take a Connection inside an open
transaction (the ``_alone`` posts and ``snapshot`` take the Engine and open their own).

- ``accounts``: assets and accounts (idempotent inserts, lookups).
- ``posting``: the calls of the write functions ``ledger_post_arrays`` and ``ledger_post_one``
  and the SQL argument formats they take (``to_arrays``, ``to_one_params``, ``is_plain``).
- ``transactions``: stored transactions and their postings, read back.
- ``balances``: the stored projection and bitemporal sums of postings.
- ``periods``: closed periods, close proposals and their approvals.
- ``checkpoints``: balance checkpoints, the posting watermark, the replay from a checkpoint.
- ``integrity``: the queries of ``ledger.integrity.verify`` and the rebuild of the projection.
- ``seals``: the sealer's transaction watermark, the sealed facts of a range, seal rows (used
  as ``ledger.repository.seals`` by ``ledger.seals``).
- ``statements``: postings of accounts page by page.
- ``common``: ``to_int`` and ``snapshot`` (one REPEATABLE READ transaction).

Numbers leave the database as ``Decimal`` (NUMERIC(39,0)) and are turned into ``int`` here, at
the boundary (``to_int``), so nothing above this package sees a Decimal. Every public name is
re-exported here: callers write ``from ledger import repository as repo`` and ``repo.post_one``.
"""

from ledger.repository.accounts import (
    find_accounts,
    get_account,
    get_accounts_by_id,
    get_asset,
    insert_account,
    insert_asset,
)
from ledger.repository.balances import balances_at, stored_balances, stored_balances_by_code
from ledger.repository.checkpoints import (
    BEFORE_FIRST_POSTING,
    CheckpointRecord,
    checkpoint_digest,
    insert_checkpoint,
    newest_verified_checkpoint,
    posting_watermark,
    replay_params,
)
from ledger.repository.common import snapshot, to_int
from ledger.repository.integrity import (
    AccountState,
    PostingFault,
    account_ids,
    account_states,
    lock_balances_for_rebuild,
    over_consumed_postings,
    posting_faults,
    replay_accounts,
    set_balances,
    transactions_without_postings,
    unbalanced_transactions,
)
from ledger.repository.periods import (
    PeriodProposalRecord,
    PeriodRecord,
    database_now,
    get_period_proposal,
    insert_period,
    insert_period_approval,
    insert_period_proposal,
    latest_period,
)
from ledger.repository.posting import (
    OneParams,
    PostArrays,
    PreparedPost,
    is_plain,
    post_batch,
    post_batch_alone,
    post_one,
    post_one_alone,
    prepare,
    prepared_results,
    send_prepared,
    to_arrays,
    to_one_params,
)
from ledger.repository.statements import (
    StatementRow,
    last_posting_before,
    postings_after,
    sums_through,
)
from ledger.repository.transactions import (
    PostingRecord,
    TransactionRecord,
    get_transaction,
    get_transaction_id_by_key,
)

__all__ = [
    "BEFORE_FIRST_POSTING",
    "AccountState",
    "CheckpointRecord",
    "OneParams",
    "PeriodProposalRecord",
    "PeriodRecord",
    "PostArrays",
    "PreparedPost",
    "PostingFault",
    "PostingRecord",
    "StatementRow",
    "TransactionRecord",
    "account_ids",
    "account_states",
    "balances_at",
    "checkpoint_digest",
    "database_now",
    "find_accounts",
    "get_account",
    "get_accounts_by_id",
    "get_asset",
    "get_period_proposal",
    "get_transaction",
    "get_transaction_id_by_key",
    "insert_account",
    "insert_asset",
    "insert_checkpoint",
    "insert_period",
    "insert_period_approval",
    "insert_period_proposal",
    "is_plain",
    "latest_period",
    "lock_balances_for_rebuild",
    "newest_verified_checkpoint",
    "over_consumed_postings",
    "post_batch",
    "post_batch_alone",
    "post_one",
    "post_one_alone",
    "prepare",
    "prepared_results",
    "send_prepared",
    "posting_faults",
    "posting_watermark",
    "last_posting_before",
    "postings_after",
    "replay_accounts",
    "replay_params",
    "set_balances",
    "snapshot",
    "stored_balances",
    "stored_balances_by_code",
    "sums_through",
    "to_arrays",
    "to_int",
    "to_one_params",
    "transactions_without_postings",
    "unbalanced_transactions",
]
