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

REVOKE ALL ON ledger_period_proposals, ledger_period_approvals FROM PUBLIC;
GRANT SELECT, INSERT ON ledger_period_proposals, ledger_period_approvals TO custody_app;
GRANT USAGE, SELECT ON SEQUENCE ledger_period_proposals_id_seq TO custody_app;
