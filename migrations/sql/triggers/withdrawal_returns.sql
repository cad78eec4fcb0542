-- withdrawal_returns: append-only (returned payouts linked to their withdrawal).
-- UPDATE, DELETE and TRUNCATE raise for every role, the owner included.

DROP TRIGGER IF EXISTS withdrawal_returns_append_only ON withdrawal_returns;
CREATE TRIGGER withdrawal_returns_append_only BEFORE UPDATE OR DELETE ON withdrawal_returns
  FOR EACH ROW EXECUTE FUNCTION ledger_refuse_change();
DROP TRIGGER IF EXISTS withdrawal_returns_no_truncate ON withdrawal_returns;
CREATE TRIGGER withdrawal_returns_no_truncate BEFORE TRUNCATE ON withdrawal_returns
  FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_change();
