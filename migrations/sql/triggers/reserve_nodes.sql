-- reserve_nodes: append-only (proof of reserves: a published report never changes). UPDATE, DELETE and
-- TRUNCATE raise for every role, the owner included.

DROP TRIGGER IF EXISTS reserve_nodes_append_only ON reserve_nodes;
CREATE TRIGGER reserve_nodes_append_only BEFORE UPDATE OR DELETE ON reserve_nodes
  FOR EACH ROW EXECUTE FUNCTION ledger_refuse_change();
DROP TRIGGER IF EXISTS reserve_nodes_no_truncate ON reserve_nodes;
CREATE TRIGGER reserve_nodes_no_truncate BEFORE TRUNCATE ON reserve_nodes
  FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_change();
