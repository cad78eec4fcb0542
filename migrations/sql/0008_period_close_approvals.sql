-- Closing a period takes two people (DESIGN.md section 7, "sensitive actions need a second
-- approver"): an admin proposes a close, another admin or an approver approves it, and the
-- approval closes the period (ledger_periods, with its own guards) in the same transaction.
-- Both tables are append-only; a proposal is open until its one approval row exists.
-- The operator's CLI (`custody period close`, with database credentials) still closes directly.
-- Advisory lock (7304, proposal id): held by an approval while it judges and closes (see
-- ledger.repository.get_period_proposal), so concurrent approvals of one proposal queue.

CREATE TABLE ledger_period_proposals (
  id           serial PRIMARY KEY,
  ends_at      timestamptz NOT NULL,
  reason       text,
  proposed_by  text NOT NULL CHECK (length(proposed_by) BETWEEN 1 AND 200),
  proposed_at  timestamptz NOT NULL DEFAULT clock_timestamp()
);
COMMENT ON TABLE ledger_period_proposals IS
  'A proposed period close, waiting for a second person (ledger_period_approvals).';

CREATE TABLE ledger_period_approvals (
  proposal_id  int PRIMARY KEY REFERENCES ledger_period_proposals (id),
  period_id    int NOT NULL UNIQUE REFERENCES ledger_periods (id),
  approved_by  text NOT NULL CHECK (length(approved_by) BETWEEN 1 AND 200),
  approved_at  timestamptz NOT NULL DEFAULT clock_timestamp()
);
COMMENT ON TABLE ledger_period_approvals IS
  'The approval that closed a proposed period: by someone else than the proposer.';

CREATE FUNCTION ledger_period_approvals_check() RETURNS trigger LANGUAGE plpgsql AS $$
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
CREATE TRIGGER ledger_period_approvals_check BEFORE INSERT ON ledger_period_approvals
  FOR EACH ROW EXECUTE FUNCTION ledger_period_approvals_check();

DO $$
DECLARE t text;
BEGIN
  FOREACH t IN ARRAY ARRAY['ledger_period_proposals', 'ledger_period_approvals'] LOOP
    EXECUTE format('CREATE TRIGGER %I BEFORE UPDATE OR DELETE ON %I
                    FOR EACH ROW EXECUTE FUNCTION ledger_refuse_change()', t || '_append_only', t);
    EXECUTE format('CREATE TRIGGER %I BEFORE TRUNCATE ON %I
                    FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_change()',
                   t || '_no_truncate', t);
  END LOOP;
END
$$;

REVOKE ALL ON ledger_period_proposals, ledger_period_approvals FROM PUBLIC;
GRANT SELECT, INSERT ON ledger_period_proposals, ledger_period_approvals TO custody_app;
GRANT USAGE, SELECT ON SEQUENCE ledger_period_proposals_id_seq TO custody_app;
