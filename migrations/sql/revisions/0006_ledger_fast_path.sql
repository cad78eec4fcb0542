-- The ledger's own write path runs as custody_ledger_writer, a NOLOGIN role that the ledger's
-- guard triggers skip (sql/functions/ledger_post_arrays.sql says what it enforces instead): the
-- role, what it may read and write, and the postings' foreign keys, which become checks of the
-- postings trigger (sql/triggers/ledger_postings.sql) for the other writers.

DO $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'custody_ledger_writer') THEN
    CREATE ROLE custody_ledger_writer NOLOGIN;
  END IF;
  -- A non-superuser owner must be a member to hand the function over (ALTER ... OWNER TO).
  IF NOT (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) THEN
    EXECUTE format('GRANT custody_ledger_writer TO %I', current_user);
  END IF;
END
$$;

GRANT USAGE ON SCHEMA public TO custody_ledger_writer;
GRANT SELECT, INSERT ON ledger_transactions, ledger_postings TO custody_ledger_writer;
GRANT SELECT, UPDATE ON account_balances TO custody_ledger_writer;
GRANT SELECT ON ledger_periods TO custody_ledger_writer;
GRANT USAGE ON SEQUENCE ledger_transactions_id_seq, ledger_postings_id_seq
  TO custody_ledger_writer;

-- The postings' foreign keys become checks of the postings trigger (other writers only): the
-- parent rows can never change or go (append-only tables), so a lookup at insert is as strong,
-- and it takes no share lock on the parent rows. The two to the original posting (closes,
-- reverses) were already implied: the trigger refuses a line whose original it cannot find
-- ("does not mirror"), and ledger_post_arrays judges such an item 'mismatch'.
ALTER TABLE ledger_postings DROP CONSTRAINT ledger_postings_transaction_id_fkey;
ALTER TABLE ledger_postings DROP CONSTRAINT ledger_postings_account_id_asset_id_fkey;
ALTER TABLE ledger_postings DROP CONSTRAINT ledger_postings_closes_posting_id_fkey;
ALTER TABLE ledger_postings DROP CONSTRAINT ledger_postings_reverses_posting_id_fkey;
