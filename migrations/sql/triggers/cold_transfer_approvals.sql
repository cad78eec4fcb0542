-- cold_transfer_approvals: append-only. UPDATE, DELETE and TRUNCATE raise for every role, the owner included.

DROP TRIGGER IF EXISTS cold_transfer_approvals_append_only ON cold_transfer_approvals;
CREATE TRIGGER cold_transfer_approvals_append_only BEFORE UPDATE OR DELETE ON cold_transfer_approvals
  FOR EACH ROW EXECUTE FUNCTION ledger_refuse_change();
DROP TRIGGER IF EXISTS cold_transfer_approvals_no_truncate ON cold_transfer_approvals;
CREATE TRIGGER cold_transfer_approvals_no_truncate BEFORE TRUNCATE ON cold_transfer_approvals
  FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_change();
