-- deposit_case_votes: the two admins of a case resolution. An approval needs the case's
-- proposal, of the same outcome (and withdrawal), by someone else than the proposer.
-- Append-only.

CREATE OR REPLACE FUNCTION deposit_case_votes_check() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  proposal deposit_case_votes%ROWTYPE;
BEGIN
  IF NEW.role <> 'approval' THEN
    RETURN NEW;
  END IF;
  SELECT * INTO proposal FROM deposit_case_votes
   WHERE case_id = NEW.case_id AND role = 'proposal';
  IF NOT FOUND THEN
    RAISE EXCEPTION 'case %: an approval needs a proposal', NEW.case_id
      USING ERRCODE = 'check_violation';
  END IF;
  IF proposal.voted_by = NEW.voted_by THEN
    RAISE EXCEPTION 'case %: the proposer cannot approve it', NEW.case_id
      USING ERRCODE = 'check_violation';
  END IF;
  IF (proposal.outcome, proposal.withdrawal_id) IS DISTINCT FROM
     (NEW.outcome, NEW.withdrawal_id) THEN
    RAISE EXCEPTION 'case %: the approval is not of the proposed outcome', NEW.case_id
      USING ERRCODE = 'check_violation';
  END IF;
  RETURN NEW;
END
$$;

DROP TRIGGER IF EXISTS deposit_case_votes_check ON deposit_case_votes;
CREATE TRIGGER deposit_case_votes_check BEFORE INSERT ON deposit_case_votes
  FOR EACH ROW EXECUTE FUNCTION deposit_case_votes_check();

DROP TRIGGER IF EXISTS deposit_case_votes_append_only ON deposit_case_votes;
CREATE TRIGGER deposit_case_votes_append_only BEFORE UPDATE OR DELETE ON deposit_case_votes
  FOR EACH ROW EXECUTE FUNCTION ledger_refuse_change();
DROP TRIGGER IF EXISTS deposit_case_votes_no_truncate ON deposit_case_votes;
CREATE TRIGGER deposit_case_votes_no_truncate BEFORE TRUNCATE ON deposit_case_votes
  FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_change();
