-- deposit_case_resolutions: append-only (how and by whom a deposit case was resolved).
-- UPDATE, DELETE and TRUNCATE raise for every role, the owner included; an insert resolves
-- the case in cases.

DROP TRIGGER IF EXISTS deposit_case_resolutions_append_only ON deposit_case_resolutions;
CREATE TRIGGER deposit_case_resolutions_append_only BEFORE UPDATE OR DELETE ON deposit_case_resolutions
  FOR EACH ROW EXECUTE FUNCTION ledger_refuse_change();

-- A resolution resolves the deposit case's row in cases in the same transaction: its outcome
-- and reason (and the approving admin) as the resolution, the reversal or the resolution's
-- ledger transaction as the fix.
CREATE OR REPLACE FUNCTION cases_resolve_deposit_case() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE cases SET status = 'resolved',
                   resolution = coalesce(NEW.outcome || ': ', '') || NEW.reason
                                || coalesce(' (approved by ' || NEW.approved_by || ')', ''),
                   resolved_by = NEW.resolved_by, resolved_at = NEW.resolved_at,
                   resolution_transaction_id = coalesce(NEW.reversal_transaction_id,
                                                        NEW.ledger_transaction_id)
   WHERE id = (SELECT case_id FROM deposit_cases WHERE id = NEW.case_id) AND status = 'open';
  RETURN NULL;
END
$$;

DROP TRIGGER IF EXISTS deposit_case_resolutions_resolve_case ON deposit_case_resolutions;
CREATE TRIGGER deposit_case_resolutions_resolve_case AFTER INSERT ON deposit_case_resolutions
  FOR EACH ROW EXECUTE FUNCTION cases_resolve_deposit_case();
DROP TRIGGER IF EXISTS deposit_case_resolutions_no_truncate ON deposit_case_resolutions;
CREATE TRIGGER deposit_case_resolutions_no_truncate BEFORE TRUNCATE ON deposit_case_resolutions
  FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_change();
