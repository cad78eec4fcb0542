-- deposit_case_resolutions: append-only (how and by whom a deposit case was resolved).
-- UPDATE and DELETE raise for every role, the owner included.

DROP TRIGGER IF EXISTS deposit_case_resolutions_append_only ON deposit_case_resolutions;
CREATE TRIGGER deposit_case_resolutions_append_only BEFORE UPDATE OR DELETE ON deposit_case_resolutions
  FOR EACH ROW EXECUTE FUNCTION ledger_refuse_change();
