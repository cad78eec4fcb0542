-- withdrawals: the current state of each withdrawal (its history is withdrawal_events). Never
-- deleted, its id never changes (history rows name it), and the ledger rows it names exist
-- (functions/withdrawal_refs_check.sql; withdrawal_reserve_record checks them itself).

-- Named to fire before the outbox trigger of withdrawal_events (same event: alphabetical
-- order), as the foreign keys' triggers did: a bad reference fails as 23503.
DROP TRIGGER IF EXISTS withdrawals_check_refs ON withdrawals;
CREATE TRIGGER withdrawals_check_refs AFTER INSERT OR UPDATE OF reserve_transaction_id,
  reserve_posting_id ON withdrawals
  FOR EACH ROW WHEN (current_user <> 'custody_withdrawal_writer')
  EXECUTE FUNCTION withdrawal_refs_check();

-- History rows name their withdrawal by id (the foreign key refused changing a referenced id).
CREATE OR REPLACE FUNCTION withdrawal_refuse_id_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'withdrawal %: its id cannot change (history rows name it)', OLD.id
    USING ERRCODE = 'foreign_key_violation';
END
$$;

DROP TRIGGER IF EXISTS withdrawals_id_fixed ON withdrawals;
CREATE TRIGGER withdrawals_id_fixed BEFORE UPDATE OF id ON withdrawals
  FOR EACH ROW WHEN (OLD.id IS DISTINCT FROM NEW.id)
  EXECUTE FUNCTION withdrawal_refuse_id_change();

DROP TRIGGER IF EXISTS withdrawals_no_delete ON withdrawals;
CREATE TRIGGER withdrawals_no_delete BEFORE DELETE ON withdrawals
  FOR EACH ROW EXECUTE FUNCTION ledger_refuse_change();
DROP TRIGGER IF EXISTS withdrawals_no_truncate ON withdrawals;
CREATE TRIGGER withdrawals_no_truncate BEFORE TRUNCATE ON withdrawals
  FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_change();
