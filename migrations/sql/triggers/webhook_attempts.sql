-- webhook_attempts: append-only (the log of every delivery attempt).
-- UPDATE, DELETE and TRUNCATE raise for every role, the owner included.

DROP TRIGGER IF EXISTS webhook_attempts_append_only ON webhook_attempts;
CREATE TRIGGER webhook_attempts_append_only BEFORE UPDATE OR DELETE ON webhook_attempts
  FOR EACH ROW EXECUTE FUNCTION ledger_refuse_change();
DROP TRIGGER IF EXISTS webhook_attempts_no_truncate ON webhook_attempts;
CREATE TRIGGER webhook_attempts_no_truncate BEFORE TRUNCATE ON webhook_attempts
  FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_change();
