-- ledger_period_proposals: append-only (a proposed period close stays as it was proposed).
-- UPDATE, DELETE and TRUNCATE raise for every role, the owner included.

DROP TRIGGER IF EXISTS ledger_period_proposals_append_only ON ledger_period_proposals;
CREATE TRIGGER ledger_period_proposals_append_only BEFORE UPDATE OR DELETE ON ledger_period_proposals
  FOR EACH ROW EXECUTE FUNCTION ledger_refuse_change();
DROP TRIGGER IF EXISTS ledger_period_proposals_no_truncate ON ledger_period_proposals;
CREATE TRIGGER ledger_period_proposals_no_truncate BEFORE TRUNCATE ON ledger_period_proposals
  FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_change();
