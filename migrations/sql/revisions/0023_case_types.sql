-- Case types of the posting checks (revision 0019) and of the seal chain (revision 0020):
-- verify's findings of those kinds are cases of their own type (reconcile.model.CaseType), keyed
-- by the posting or the seal they are about, no longer generic ledger_finding cases.

ALTER TABLE cases DROP CONSTRAINT cases_type_check;
ALTER TABLE cases ADD CONSTRAINT cases_type_check CHECK (type IN (
    -- ledger.integrity.verify, one type per kind of finding (ledger_finding: a kind this
    -- list does not know yet, its kind in the evidence)
    'balance_drift', 'balance_missing', 'flag_violated', 'trial_balance', 'custody_mismatch',
    'transaction_unbalanced', 'transaction_empty', 'posting_over_reversed',
    'posting_over_closed', 'checkpoint_digest', 'posting_asset_mismatch', 'posting_orphan',
    -- the seal chain (ledger.seals)
    'seal_range', 'seal_chain_broken', 'seal_hash_mismatch', 'seal_root_mismatch', 'seal_counts',
    'seal_diagnosis_unavailable', 'seal_transaction_changed', 'seal_transaction_missing',
    'seal_transaction_inserted', 'seal_transactions_reordered', 'checkpoint_seal_link',
    'ledger_finding',
    -- deposit histories against the ledger
    'deposit_transaction_missing', 'deposit_transaction_extra', 'deposit_history_missing',
    -- items waiting too long
    'reserve_overdue', 'withdrawal_unknown_aged', 'withdrawal_held_aged',
    'deposit_review_aged',
    -- custody against the chain, custody provider statements
    'custody_chain_mismatch', 'provider_amount_mismatch', 'provider_missing_in_ledger',
    'provider_missing_at_provider',
    -- the cases that the deposit watcher and the withdrawal processor open
    'deep_reorg', 'unattributed_own_address', 'settlement_mismatch', 'ledger_refused',
    'invariant_broken'));
