-- outgoing_attempts: append-only (every signed transaction of every movement kind, recorded before it is sent).
-- UPDATE, DELETE and TRUNCATE raise for every role, the owner included.

DROP TRIGGER IF EXISTS outgoing_attempts_append_only ON outgoing_attempts;
CREATE TRIGGER outgoing_attempts_append_only BEFORE UPDATE OR DELETE ON outgoing_attempts
  FOR EACH ROW EXECUTE FUNCTION ledger_refuse_change();
DROP TRIGGER IF EXISTS outgoing_attempts_no_truncate ON outgoing_attempts;
CREATE TRIGGER outgoing_attempts_no_truncate BEFORE TRUNCATE ON outgoing_attempts
  FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_change();
