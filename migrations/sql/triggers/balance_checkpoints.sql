-- balance_checkpoints: append-only (a checkpoint is a fact about the ledger at one point).
-- UPDATE, DELETE and TRUNCATE raise for every role, the owner included.

DROP TRIGGER IF EXISTS balance_checkpoints_append_only ON balance_checkpoints;
CREATE TRIGGER balance_checkpoints_append_only BEFORE UPDATE OR DELETE ON balance_checkpoints
  FOR EACH ROW EXECUTE FUNCTION ledger_refuse_change();
DROP TRIGGER IF EXISTS balance_checkpoints_no_truncate ON balance_checkpoints;
CREATE TRIGGER balance_checkpoints_no_truncate BEFORE TRUNCATE ON balance_checkpoints
  FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_change();
