-- reserve_leaves: append-only (proof of reserves: a published report never changes). UPDATE, DELETE and
-- TRUNCATE raise for every role, the owner included.

DROP TRIGGER IF EXISTS reserve_leaves_append_only ON reserve_leaves;
CREATE TRIGGER reserve_leaves_append_only BEFORE UPDATE OR DELETE ON reserve_leaves
  FOR EACH ROW EXECUTE FUNCTION ledger_refuse_change();
DROP TRIGGER IF EXISTS reserve_leaves_no_truncate ON reserve_leaves;
CREATE TRIGGER reserve_leaves_no_truncate BEFORE TRUNCATE ON reserve_leaves
  FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_change();
