-- The application role: SELECT and INSERT only on the ledger's append-only tables; it may
-- update the balance projection (the post function and rebuild-balances do), nothing else.
REVOKE ALL ON assets, accounts, ledger_transactions, ledger_postings, account_balances,
  ledger_periods, balance_checkpoints, balance_checkpoint_entries FROM PUBLIC;
GRANT USAGE ON SCHEMA public TO custody_app;
GRANT SELECT, INSERT ON assets, accounts, ledger_transactions, ledger_postings, ledger_periods,
  balance_checkpoints, balance_checkpoint_entries TO custody_app;
GRANT SELECT, INSERT, UPDATE ON account_balances TO custody_app;
GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO custody_app;
-- A non-superuser owner must be a member of the role to SET ROLE to it.
DO $$
BEGIN
  IF NOT (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) THEN
    EXECUTE format('GRANT custody_app TO %I', current_user);
  END IF;
END
$$;
