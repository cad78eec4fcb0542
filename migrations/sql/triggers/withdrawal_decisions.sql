-- withdrawal_decisions: append-only (approvals and write-off votes).
-- UPDATE, DELETE and TRUNCATE raise for every role, the owner included.

DROP TRIGGER IF EXISTS withdrawal_decisions_append_only ON withdrawal_decisions;
CREATE TRIGGER withdrawal_decisions_append_only BEFORE UPDATE OR DELETE ON withdrawal_decisions
  FOR EACH ROW EXECUTE FUNCTION ledger_refuse_change();
DROP TRIGGER IF EXISTS withdrawal_decisions_no_truncate ON withdrawal_decisions;
CREATE TRIGGER withdrawal_decisions_no_truncate BEFORE TRUNCATE ON withdrawal_decisions
  FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_change();
