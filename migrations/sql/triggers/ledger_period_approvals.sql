-- ledger_period_approvals: the second person's approval of a proposed period close. The
-- approver must not be the proposer, and the period the approval names must end where the
-- proposal said. Append-only (a proposal is open until its one approval row exists).

CREATE OR REPLACE FUNCTION ledger_period_approvals_check() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  proposal ledger_period_proposals%ROWTYPE;
  closed_through timestamptz;
BEGIN
  SELECT * INTO proposal FROM ledger_period_proposals WHERE id = NEW.proposal_id;
  IF proposal.proposed_by = NEW.approved_by THEN
    RAISE EXCEPTION 'period close proposal %: the proposer cannot approve it', NEW.proposal_id
      USING ERRCODE = 'check_violation';
  END IF;
  SELECT ends_at INTO closed_through FROM ledger_periods WHERE id = NEW.period_id;
  IF closed_through IS DISTINCT FROM proposal.ends_at THEN
    RAISE EXCEPTION 'period close proposal %: period % does not end where proposed',
      NEW.proposal_id, NEW.period_id USING ERRCODE = 'check_violation';
  END IF;
  RETURN NEW;
END
$$;

DROP TRIGGER IF EXISTS ledger_period_approvals_check ON ledger_period_approvals;
CREATE TRIGGER ledger_period_approvals_check BEFORE INSERT ON ledger_period_approvals
  FOR EACH ROW EXECUTE FUNCTION ledger_period_approvals_check();

DROP TRIGGER IF EXISTS ledger_period_approvals_append_only ON ledger_period_approvals;
CREATE TRIGGER ledger_period_approvals_append_only BEFORE UPDATE OR DELETE ON ledger_period_approvals
  FOR EACH ROW EXECUTE FUNCTION ledger_refuse_change();
DROP TRIGGER IF EXISTS ledger_period_approvals_no_truncate ON ledger_period_approvals;
CREATE TRIGGER ledger_period_approvals_no_truncate BEFORE TRUNCATE ON ledger_period_approvals
  FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_change();
