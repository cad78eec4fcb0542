-- reserve_report_addresses: append-only (proof of reserves: a published report never changes). UPDATE, DELETE and
-- TRUNCATE raise for every role, the owner included.

DROP TRIGGER IF EXISTS reserve_report_addresses_append_only ON reserve_report_addresses;
CREATE TRIGGER reserve_report_addresses_append_only BEFORE UPDATE OR DELETE ON reserve_report_addresses
  FOR EACH ROW EXECUTE FUNCTION ledger_refuse_change();
DROP TRIGGER IF EXISTS reserve_report_addresses_no_truncate ON reserve_report_addresses;
CREATE TRIGGER reserve_report_addresses_no_truncate BEFORE TRUNCATE ON reserve_report_addresses
  FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_change();
