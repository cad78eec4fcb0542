-- provider_statement_records: append-only (custody provider statements as imported). UPDATE, DELETE and TRUNCATE
-- raise for every role, the owner included.

DROP TRIGGER IF EXISTS provider_statement_records_append_only ON provider_statement_records;
CREATE TRIGGER provider_statement_records_append_only BEFORE UPDATE OR DELETE ON provider_statement_records
  FOR EACH ROW EXECUTE FUNCTION ledger_refuse_change();
DROP TRIGGER IF EXISTS provider_statement_records_no_truncate ON provider_statement_records;
CREATE TRIGGER provider_statement_records_no_truncate BEFORE TRUNCATE ON provider_statement_records
  FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_change();
