-- assets: append-only (ledger assets; a scale never changes).
-- UPDATE, DELETE and TRUNCATE raise for every role, the owner included.

DROP TRIGGER IF EXISTS assets_append_only ON assets;
CREATE TRIGGER assets_append_only BEFORE UPDATE OR DELETE ON assets
  FOR EACH ROW EXECUTE FUNCTION ledger_refuse_change();
DROP TRIGGER IF EXISTS assets_no_truncate ON assets;
CREATE TRIGGER assets_no_truncate BEFORE TRUNCATE ON assets
  FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_change();
