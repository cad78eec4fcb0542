-- One list of every case in the engine (issue 14, reconciliation). Every discrepancy a check
-- finds is a durable case: what it is about (type and subject, the stable key: the same
-- discrepancy seen again is the same open case), its references, expected and observed amounts
-- (decimal strings of minor units), its evidence, when it was first and last seen and how
-- often, which check or job opened it, and its one-time resolution (who, when, how, and the
-- new ledger transaction that fixed it, when a fix moved money: nothing is ever edited).
--
-- The cases that existed before (deposit_cases: deep_reorg, unattributed_own_address;
-- withdrawal_cases: settlement_mismatch, ledger_refused, invariant_broken) join this table:
-- each row of theirs names its case (case_id), filled here for the rows that exist and by a
-- BEFORE INSERT trigger for new ones (which also gives the new row the case's id, so that one
-- number names the case everywhere); an insert into their resolution tables resolves the case
-- by trigger. The deposit and withdrawal code is unchanged.
--
-- The known types are reconcile.model.CaseType (a test checks that they agree).

CREATE TABLE cases (
  id                         bigserial PRIMARY KEY,
  type                       text NOT NULL CONSTRAINT cases_type_check CHECK (type IN (
    -- ledger.integrity.verify, one type per kind of finding (ledger_finding: a kind this
    -- list does not know yet, its kind in the evidence)
    'balance_drift', 'balance_missing', 'flag_violated', 'trial_balance', 'custody_mismatch',
    'transaction_unbalanced', 'transaction_empty', 'posting_over_reversed',
    'posting_over_closed', 'checkpoint_digest', 'ledger_finding',
    -- deposit histories against the ledger
    'deposit_transaction_missing', 'deposit_transaction_extra', 'deposit_history_missing',
    -- items waiting too long
    'reserve_overdue', 'withdrawal_unknown_aged', 'withdrawal_held_aged',
    'deposit_review_aged',
    -- custody against the chain, custody provider statements
    'custody_chain_mismatch', 'provider_amount_mismatch', 'provider_missing_in_ledger',
    'provider_missing_at_provider',
    -- the cases that the deposit watcher and the withdrawal processor open
    'deep_reorg', 'unattributed_own_address', 'settlement_mismatch', 'ledger_refused',
    'invariant_broken')),
  subject                    text NOT NULL CHECK (length(subject) BETWEEN 1 AND 300),
  refs                       jsonb NOT NULL CHECK (jsonb_typeof(refs) = 'object'),
  expected                   text CHECK (length(expected) <= 1000),
  observed                   text CHECK (length(observed) <= 1000),
  evidence                   jsonb NOT NULL CHECK (jsonb_typeof(evidence) = 'object'),
  status                     text NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'resolved')),
  first_seen_at              timestamptz NOT NULL,
  last_seen_at               timestamptz NOT NULL,
  seen_count                 integer NOT NULL DEFAULT 1 CHECK (seen_count >= 1),
  opened_by                  text NOT NULL CHECK (length(opened_by) BETWEEN 1 AND 200),
  resolution                 text CHECK (length(resolution) BETWEEN 1 AND 2000),
  resolved_by                text CHECK (length(resolved_by) BETWEEN 1 AND 200),
  resolved_at                timestamptz,
  resolution_transaction_id  bigint REFERENCES ledger_transactions (id),
  CHECK (last_seen_at >= first_seen_at),
  CONSTRAINT cases_resolved_check CHECK (
    (status = 'open' AND resolution IS NULL AND resolved_by IS NULL AND resolved_at IS NULL
     AND resolution_transaction_id IS NULL)
    OR (status = 'resolved' AND resolution IS NOT NULL AND resolved_by IS NOT NULL
        AND resolved_at IS NOT NULL))
);
COMMENT ON TABLE cases IS
  'Every case of the engine: a discrepancy a check found, or a deposit or withdrawal case '
  '(deposit_cases, withdrawal_cases name theirs in case_id). Changed only by a re-sighting of an '
  'open case or its one-time resolution (trigger cases_guard); never deleted.';
COMMENT ON COLUMN cases.type IS 'What kind of discrepancy (reconcile.model.CaseType).';
COMMENT ON COLUMN cases.subject IS
  'The stable key of the discrepancy (account:42, deposit:17, withdrawal:9, '
  'custody:devnet:0xabc...:ETH, provider:acme:REF123): at most one open case per type and '
  'subject, so the same discrepancy seen again updates its case.';
COMMENT ON COLUMN cases.refs IS
  'What the case is about, as ids in strings (account_id, deposit_id, withdrawal_id, '
  'ledger_transaction_id, deposit_case_id, withdrawal_case_id, ...).';
COMMENT ON COLUMN cases.expected IS
  'What our records say (a decimal string of minor units where it is an amount); NULL: none.';
COMMENT ON COLUMN cases.observed IS
  'What the check observed, as of the last sighting (minor units where an amount); NULL: none.';
COMMENT ON COLUMN cases.evidence IS 'What the check saw, as of the last sighting.';
COMMENT ON COLUMN cases.seen_count IS 'How many runs of a check saw it (1 when opened).';
COMMENT ON COLUMN cases.opened_by IS 'The check or job that opened the case.';
COMMENT ON COLUMN cases.resolution IS 'How it was resolved (the resolver''s words).';
COMMENT ON COLUMN cases.resolution_transaction_id IS
  'The new ledger transaction that fixed it, when the fix moved money (it references the case).';
CREATE UNIQUE INDEX cases_open_key ON cases (type, subject) WHERE status = 'open';
CREATE INDEX cases_status_type_idx ON cases (status, type, id);

-- The existing cases join the table, keeping their ids where they can: deposit cases first
-- (same id), then withdrawal cases (a new id where a deposit case holds theirs).
ALTER TABLE deposit_cases ADD COLUMN case_id bigint UNIQUE REFERENCES cases (id);
COMMENT ON COLUMN deposit_cases.case_id IS
  'The case in cases (set by trigger; equal to id for every case opened since revision 0021).';
ALTER TABLE withdrawal_cases ADD COLUMN case_id bigint REFERENCES cases (id);
COMMENT ON COLUMN withdrawal_cases.case_id IS
  'The case in cases (set by trigger; equal to id for every case opened since revision 0021, '
  'unless an open case of the same kind and withdrawal existed: then that one).';
CREATE INDEX withdrawal_cases_case_idx ON withdrawal_cases (case_id);

INSERT INTO cases (id, type, subject, refs, expected, observed, evidence, status,
                   first_seen_at, last_seen_at, opened_by, resolution, resolved_by, resolved_at,
                   resolution_transaction_id)
SELECT c.id, c.kind, 'deposit:' || c.deposit_id,
       jsonb_strip_nulls(jsonb_build_object(
         'deposit_id', c.deposit_id::text, 'deposit_case_id', c.id::text,
         'ledger_transaction_id', c.ledger_transaction_id::text, 'chain', d.chain,
         'tx_hash', d.tx_hash, 'position', d.position, 'asset', d.asset_code)),
       d.amount_minor::text, NULL,
       jsonb_build_object('expected', c.expected, 'observed', c.observed),
       CASE WHEN r.case_id IS NULL THEN 'open' ELSE 'resolved' END,
       c.opened_at, c.opened_at, 'deposits.watcher',
       CASE WHEN r.case_id IS NOT NULL THEN coalesce(r.outcome || ': ', '') || r.reason
            || coalesce(' (approved by ' || r.approved_by || ')', '') END,
       r.resolved_by, r.resolved_at,
       coalesce(r.reversal_transaction_id, r.ledger_transaction_id)
  FROM deposit_cases c JOIN deposits d ON d.id = c.deposit_id
  LEFT JOIN deposit_case_resolutions r ON r.case_id = c.id
 ORDER BY c.id;

SELECT setval('cases_id_seq', greatest(
  (SELECT max(id) FROM cases), (SELECT max(id) FROM withdrawal_cases), 1));

INSERT INTO cases (id, type, subject, refs, expected, observed, evidence, status,
                   first_seen_at, last_seen_at, opened_by, resolution, resolved_by, resolved_at)
SELECT CASE WHEN EXISTS (SELECT 1 FROM cases x WHERE x.id = c.id) THEN nextval('cases_id_seq')
            ELSE c.id END,
       c.kind, 'withdrawal:' || c.withdrawal_id,
       jsonb_build_object('withdrawal_id', c.withdrawal_id::text,
                          'withdrawal_case_id', c.id::text, 'chain', w.chain),
       NULL, NULL, c.evidence || jsonb_build_object('reason', c.reason),
       CASE WHEN r.case_id IS NULL THEN 'open' ELSE 'resolved' END,
       c.opened_at, c.opened_at, c.opened_by, r.reason, r.resolved_by, r.resolved_at
  FROM withdrawal_cases c JOIN withdrawals w ON w.id = c.withdrawal_id
  LEFT JOIN withdrawal_case_resolutions r ON r.case_id = c.id
 ORDER BY c.id;

SELECT setval('cases_id_seq', greatest((SELECT max(id) FROM cases),
                                       (SELECT max(id) FROM withdrawal_cases), 1));

-- The two case tables are append-only (their triggers refuse every UPDATE): their own
-- triggers are set aside, for this one data change by the owner, inside the upgrade's
-- transaction.
ALTER TABLE deposit_cases DISABLE TRIGGER USER;
UPDATE deposit_cases SET case_id = id;
ALTER TABLE deposit_cases ENABLE TRIGGER USER;
ALTER TABLE withdrawal_cases DISABLE TRIGGER USER;
UPDATE withdrawal_cases c SET case_id = x.id
  FROM cases x WHERE x.refs ->> 'withdrawal_case_id' = c.id::text;
ALTER TABLE withdrawal_cases ENABLE TRIGGER USER;

ALTER TABLE deposit_cases ALTER COLUMN case_id SET NOT NULL;
ALTER TABLE withdrawal_cases ALTER COLUMN case_id SET NOT NULL;

REVOKE ALL ON cases FROM PUBLIC;
-- A re-sighting updates the open case and a resolution resolves it (cases_guard refuses every
-- other change); the application may update exactly those columns.
GRANT SELECT, INSERT ON cases TO custody_app;
GRANT UPDATE (last_seen_at, seen_count, observed, evidence, status, resolution, resolved_by,
              resolved_at, resolution_transaction_id) ON cases TO custody_app;
GRANT USAGE, SELECT ON SEQUENCE cases_id_seq TO custody_app;
