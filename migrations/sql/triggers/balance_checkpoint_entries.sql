-- balance_checkpoint_entries: append-only (the balances a checkpoint recorded).
-- UPDATE, DELETE and TRUNCATE raise for every role, the owner included.

DROP TRIGGER IF EXISTS balance_checkpoint_entries_append_only ON balance_checkpoint_entries;
CREATE TRIGGER balance_checkpoint_entries_append_only BEFORE UPDATE OR DELETE ON balance_checkpoint_entries
  FOR EACH ROW EXECUTE FUNCTION ledger_refuse_change();
DROP TRIGGER IF EXISTS balance_checkpoint_entries_no_truncate ON balance_checkpoint_entries;
CREATE TRIGGER balance_checkpoint_entries_no_truncate BEFORE TRUNCATE ON balance_checkpoint_entries
  FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_change();
