-- reserve_signatures: append-only (proof of reserves: a published report never changes). UPDATE, DELETE and
-- TRUNCATE raise for every role, the owner included.

DROP TRIGGER IF EXISTS reserve_signatures_append_only ON reserve_signatures;
CREATE TRIGGER reserve_signatures_append_only BEFORE UPDATE OR DELETE ON reserve_signatures
  FOR EACH ROW EXECUTE FUNCTION ledger_refuse_change();
DROP TRIGGER IF EXISTS reserve_signatures_no_truncate ON reserve_signatures;
CREATE TRIGGER reserve_signatures_no_truncate BEFORE TRUNCATE ON reserve_signatures
  FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_change();
