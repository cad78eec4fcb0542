-- The reserve's last statement, withdrawal_reserve_record, runs as custody_withdrawal_writer
-- (sql/functions/withdrawal_reserve_record.sql): the role and what it may read and write; and the
-- four foreign keys of the reserve's rows, which become checks that skip that role
-- (sql/functions/withdrawal_refs_check.sql), since it checks those references itself.

DO $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'custody_withdrawal_writer') THEN
    CREATE ROLE custody_withdrawal_writer NOLOGIN;
  END IF;
  -- A non-superuser owner must be a member to hand the function over (ALTER ... OWNER TO).
  IF NOT (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) THEN
    EXECUTE format('GRANT custody_withdrawal_writer TO %I', current_user);
  END IF;
END
$$;

-- What withdrawal_reserve_record reads and writes, and what the triggers its inserts fire need
-- (they run as the current user: the outbox fan-out inserts deliveries).
GRANT USAGE ON SCHEMA public TO custody_withdrawal_writer;
GRANT SELECT, INSERT ON withdrawals, withdrawal_events, outbox_events, webhook_deliveries
  TO custody_withdrawal_writer;
GRANT SELECT ON ledger_transactions, ledger_postings, accounts, assets, api_users,
  webhook_endpoints TO custody_withdrawal_writer;
GRANT USAGE ON SEQUENCE withdrawal_events_id_seq, outbox_events_id_seq,
  webhook_deliveries_id_seq TO custody_withdrawal_writer;

-- Foreign keys of the reserve's rows -> checks. withdrawal_reserve_record has checked them
-- already (the reserve transaction and posting it names are found by primary key, the history
-- row names the withdrawal it has just inserted), so for it the four foreign keys were only cost:
-- a trigger event and an SPI query each, and a share lock (a WAL record) on every parent row,
-- all written by this transaction. The parents never change or go: ledger rows are append-only,
-- withdrawals are never deleted, and their id is fixed (sql/triggers/withdrawals.sql). Every other
-- writer is checked by withdrawal_refs_check, as the foreign keys did (SQLSTATE 23503).
ALTER TABLE withdrawals DROP CONSTRAINT withdrawals_reserve_transaction_id_fkey;
ALTER TABLE withdrawals DROP CONSTRAINT withdrawals_reserve_posting_id_fkey;
ALTER TABLE withdrawal_events DROP CONSTRAINT withdrawal_events_withdrawal_id_fkey;
ALTER TABLE withdrawal_events DROP CONSTRAINT withdrawal_events_ledger_transaction_id_fkey;
