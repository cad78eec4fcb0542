-- Refund to the sender (issue 12): an unattributed own-address case may be resolved as
-- 'refund' by two admins. The approval posts DR suspense:unattributed / CR
-- user:company:refunds:wallet (ledger_transaction_id of the resolution) and then requests a
-- withdrawal of that company user to the transfer's sender, keyed case:{id}:refund. The
-- withdrawal is requested after the resolution committed, so its id is recorded here, in
-- deposit_case_refunds, once known (append-only: a replayed request writes nothing new).

ALTER TABLE deposit_case_votes DROP CONSTRAINT deposit_case_votes_outcome_check;
ALTER TABLE deposit_case_votes ADD CONSTRAINT deposit_case_votes_outcome_check
  CHECK (outcome IN ('capital', 'return', 'refund'));
ALTER TABLE deposit_case_resolutions DROP CONSTRAINT deposit_case_resolutions_outcome_check;
ALTER TABLE deposit_case_resolutions ADD CONSTRAINT deposit_case_resolutions_outcome_check
  CHECK (outcome IN ('capital', 'return', 'refund'));
COMMENT ON COLUMN deposit_case_resolutions.outcome IS
  'For an unattributed own-address transfer: capital (ledger_transaction_id moved it from '
  'suspense to the treasury), return (linked to withdrawal_id) or refund (ledger_transaction_id '
  'moved it from suspense to the company refund wallet; the withdrawal to the sender is in '
  'deposit_case_refunds). NULL for older kinds.';

CREATE TABLE deposit_case_refunds (
  case_id        bigint PRIMARY KEY REFERENCES deposit_cases (id),
  withdrawal_id  bigint NOT NULL UNIQUE,
  recorded_at    timestamptz NOT NULL DEFAULT clock_timestamp()
);
COMMENT ON TABLE deposit_case_refunds IS
  'The withdrawal that pays a refund-resolved case back to the transfer''s sender (a '
  'withdrawal of the company user company:refunds, request key case:{id}:refund).';
COMMENT ON COLUMN deposit_case_refunds.withdrawal_id IS
  'The withdrawal (withdrawals.id; no foreign key: deposits and withdrawals stay apart).';

REVOKE ALL ON deposit_case_refunds FROM PUBLIC;
GRANT SELECT, INSERT ON deposit_case_refunds TO custody_app;
