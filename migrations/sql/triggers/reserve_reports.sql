-- reserve_reports: append-only (proof of reserves: a published report never changes). UPDATE, DELETE and
-- TRUNCATE raise for every role, the owner included.

DROP TRIGGER IF EXISTS reserve_reports_append_only ON reserve_reports;
CREATE TRIGGER reserve_reports_append_only BEFORE UPDATE OR DELETE ON reserve_reports
  FOR EACH ROW EXECUTE FUNCTION ledger_refuse_change();
DROP TRIGGER IF EXISTS reserve_reports_no_truncate ON reserve_reports;
CREATE TRIGGER reserve_reports_no_truncate BEFORE TRUNCATE ON reserve_reports
  FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_change();
