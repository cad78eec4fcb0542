-- withdrawal_case_resolutions: append-only (how and by whom a withdrawal case was resolved).
-- UPDATE, DELETE and TRUNCATE raise for every role, the owner included; an insert resolves
-- the case in cases.

DROP TRIGGER IF EXISTS withdrawal_case_resolutions_append_only ON withdrawal_case_resolutions;
CREATE TRIGGER withdrawal_case_resolutions_append_only BEFORE UPDATE OR DELETE
  ON withdrawal_case_resolutions
  FOR EACH ROW EXECUTE FUNCTION ledger_refuse_change();
DROP TRIGGER IF EXISTS withdrawal_case_resolutions_no_truncate ON withdrawal_case_resolutions;
CREATE TRIGGER withdrawal_case_resolutions_no_truncate BEFORE TRUNCATE
  ON withdrawal_case_resolutions
  FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_change();

-- A resolution resolves the withdrawal case's row in cases in the same transaction (already
-- resolved: a second withdrawal case that joined the same open case; nothing to do).
CREATE OR REPLACE FUNCTION cases_resolve_withdrawal_case() RETURNS trigger LANGUAGE plpgsql
AS $$
BEGIN
  UPDATE cases SET status = 'resolved', resolution = NEW.reason, resolved_by = NEW.resolved_by,
                   resolved_at = NEW.resolved_at
   WHERE id = (SELECT case_id FROM withdrawal_cases WHERE id = NEW.case_id) AND status = 'open';
  RETURN NULL;
END
$$;

DROP TRIGGER IF EXISTS withdrawal_case_resolutions_resolve_case ON withdrawal_case_resolutions;
CREATE TRIGGER withdrawal_case_resolutions_resolve_case AFTER INSERT
  ON withdrawal_case_resolutions
  FOR EACH ROW EXECUTE FUNCTION cases_resolve_withdrawal_case();
