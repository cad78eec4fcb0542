-- provider_statements: append-only (custody provider statements as imported). UPDATE, DELETE and TRUNCATE
-- raise for every role, the owner included.

DROP TRIGGER IF EXISTS provider_statements_append_only ON provider_statements;
CREATE TRIGGER provider_statements_append_only BEFORE UPDATE OR DELETE ON provider_statements
  FOR EACH ROW EXECUTE FUNCTION ledger_refuse_change();
DROP TRIGGER IF EXISTS provider_statements_no_truncate ON provider_statements;
CREATE TRIGGER provider_statements_no_truncate BEFORE TRUNCATE ON provider_statements
  FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_change();
