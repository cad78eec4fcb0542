-- deposit_case_refunds: append-only. UPDATE, DELETE and TRUNCATE raise for every role, the owner included.

DROP TRIGGER IF EXISTS deposit_case_refunds_append_only ON deposit_case_refunds;
CREATE TRIGGER deposit_case_refunds_append_only BEFORE UPDATE OR DELETE ON deposit_case_refunds
  FOR EACH ROW EXECUTE FUNCTION ledger_refuse_change();
DROP TRIGGER IF EXISTS deposit_case_refunds_no_truncate ON deposit_case_refunds;
CREATE TRIGGER deposit_case_refunds_no_truncate BEFORE TRUNCATE ON deposit_case_refunds
  FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_change();
