-- api_audit: append-only (the audit trail of every staff action and refusal).
-- UPDATE, DELETE and TRUNCATE raise for every role, the owner included.

DROP TRIGGER IF EXISTS api_audit_append_only ON api_audit;
CREATE TRIGGER api_audit_append_only BEFORE UPDATE OR DELETE ON api_audit
  FOR EACH ROW EXECUTE FUNCTION ledger_refuse_change();
DROP TRIGGER IF EXISTS api_audit_no_truncate ON api_audit;
CREATE TRIGGER api_audit_no_truncate BEFORE TRUNCATE ON api_audit
  FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_change();
