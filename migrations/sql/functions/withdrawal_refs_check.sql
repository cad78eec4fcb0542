-- withdrawal_refs_check: the references of withdrawals (reserve transaction and posting) and of
-- withdrawal_events (withdrawal, ledger transaction), checked at insert for every writer except
-- withdrawal_reserve_record, which has checked them itself (it finds the reserve transaction and
-- posting by primary key, and names the withdrawal it has just inserted). These were foreign
-- keys; the parents never change or go (ledger rows are append-only, withdrawals are never
-- deleted and their id is fixed), so a lookup at insert is as strong and takes no share lock on
-- the parent rows. Refusals are SQLSTATE 23503, as the foreign keys' were. Used by
-- triggers/withdrawals.sql and triggers/withdrawal_events.sql.

CREATE OR REPLACE FUNCTION withdrawal_refs_check() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_TABLE_NAME = 'withdrawals' THEN
    IF NEW.reserve_transaction_id IS NOT NULL AND NOT EXISTS (
         SELECT 1 FROM ledger_transactions t WHERE t.id = NEW.reserve_transaction_id) THEN
      RAISE EXCEPTION 'withdrawal %: reserve transaction % does not exist', NEW.id,
        NEW.reserve_transaction_id USING ERRCODE = 'foreign_key_violation';
    END IF;
    IF NEW.reserve_posting_id IS NOT NULL AND NOT EXISTS (
         SELECT 1 FROM ledger_postings p WHERE p.id = NEW.reserve_posting_id) THEN
      RAISE EXCEPTION 'withdrawal %: reserve posting % does not exist', NEW.id,
        NEW.reserve_posting_id USING ERRCODE = 'foreign_key_violation';
    END IF;
  ELSE
    IF NOT EXISTS (SELECT 1 FROM withdrawals w WHERE w.id = NEW.withdrawal_id) THEN
      RAISE EXCEPTION 'withdrawal history row names withdrawal %, which does not exist',
        NEW.withdrawal_id USING ERRCODE = 'foreign_key_violation';
    END IF;
    IF NEW.ledger_transaction_id IS NOT NULL AND NOT EXISTS (
         SELECT 1 FROM ledger_transactions t WHERE t.id = NEW.ledger_transaction_id) THEN
      RAISE EXCEPTION 'withdrawal history row names ledger transaction %, which does not exist',
        NEW.ledger_transaction_id USING ERRCODE = 'foreign_key_violation';
    END IF;
  END IF;
  RETURN NULL;
END
$$;
COMMENT ON FUNCTION withdrawal_refs_check() IS
  'The foreign keys of withdrawals (reserve transaction and posting) and withdrawal_events '
  '(withdrawal, ledger transaction), for writers other than withdrawal_reserve_record.';
