-- withdrawal_cases: durable cases about withdrawals (one per hold: a final receipt whose
-- settlement could not be posted). Append-only: a case is open until a row in
-- withdrawal_case_resolutions names it. UPDATE, DELETE and TRUNCATE raise for every role, the
-- owner included.

DROP TRIGGER IF EXISTS withdrawal_cases_append_only ON withdrawal_cases;
CREATE TRIGGER withdrawal_cases_append_only BEFORE UPDATE OR DELETE ON withdrawal_cases
  FOR EACH ROW EXECUTE FUNCTION ledger_refuse_change();
DROP TRIGGER IF EXISTS withdrawal_cases_no_truncate ON withdrawal_cases;
CREATE TRIGGER withdrawal_cases_no_truncate BEFORE TRUNCATE ON withdrawal_cases
  FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_change();
