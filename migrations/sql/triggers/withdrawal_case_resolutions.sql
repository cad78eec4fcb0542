-- withdrawal_case_resolutions: append-only (how and by whom a withdrawal case was resolved).
-- UPDATE, DELETE and TRUNCATE raise for every role, the owner included.

DROP TRIGGER IF EXISTS withdrawal_case_resolutions_append_only ON withdrawal_case_resolutions;
CREATE TRIGGER withdrawal_case_resolutions_append_only BEFORE UPDATE OR DELETE
  ON withdrawal_case_resolutions
  FOR EACH ROW EXECUTE FUNCTION ledger_refuse_change();
DROP TRIGGER IF EXISTS withdrawal_case_resolutions_no_truncate ON withdrawal_case_resolutions;
CREATE TRIGGER withdrawal_case_resolutions_no_truncate BEFORE TRUNCATE
  ON withdrawal_case_resolutions
  FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_change();
