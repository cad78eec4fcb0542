-- withdrawal_attempts: append-only (every signed transaction, recorded before it is sent).
-- UPDATE, DELETE and TRUNCATE raise for every role, the owner included.

DROP TRIGGER IF EXISTS withdrawal_attempts_append_only ON withdrawal_attempts;
CREATE TRIGGER withdrawal_attempts_append_only BEFORE UPDATE OR DELETE ON withdrawal_attempts
  FOR EACH ROW EXECUTE FUNCTION ledger_refuse_change();
DROP TRIGGER IF EXISTS withdrawal_attempts_no_truncate ON withdrawal_attempts;
CREATE TRIGGER withdrawal_attempts_no_truncate BEFORE TRUNCATE ON withdrawal_attempts
  FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_change();
