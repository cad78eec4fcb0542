-- Withdrawal holds (issue 12, "payouts never stall a chain"): a withdrawal whose final receipt
-- cannot be settled (a settlement mismatch, a ledger refusal, any broken invariant) moves to
-- the state 'held' (its reserve stays open) and opens a durable case; an admin's retry resolves
-- the case and sends the withdrawal back to 'included'. Cases are append-only, as deposit
-- cases: a case is open until a row in withdrawal_case_resolutions names it.

ALTER TABLE withdrawals DROP CONSTRAINT withdrawals_state_check;
ALTER TABLE withdrawals ADD CONSTRAINT withdrawals_state_check CHECK (state IN ('requested',
  'pending_approval', 'reserved', 'signing', 'signed', 'broadcast', 'included', 'unknown',
  'awaiting_write_off', 'held', 'settled', 'reverted', 'released', 'canceled', 'rejected',
  'written_off'));

CREATE TABLE withdrawal_cases (
  id             bigserial PRIMARY KEY,
  withdrawal_id  bigint NOT NULL REFERENCES withdrawals (id),
  kind           text NOT NULL CHECK (kind IN ('settlement_mismatch', 'ledger_refused',
                                               'invariant_broken')),
  reason         text NOT NULL CHECK (length(reason) >= 1),
  evidence       jsonb NOT NULL,
  opened_by      text NOT NULL CHECK (length(opened_by) BETWEEN 1 AND 200),
  opened_at      timestamptz NOT NULL
);
COMMENT ON TABLE withdrawal_cases IS
  'Durable cases the processor opened when it held a withdrawal (its final receipt could not be '
  'settled). Open until a row in withdrawal_case_resolutions references it.';
COMMENT ON COLUMN withdrawal_cases.kind IS
  'settlement_mismatch: the receipt does not pay what was asked; ledger_refused: the ledger '
  'refused the settlement (an account past its limit, an idempotency conflict...); '
  'invariant_broken: anything else.';
COMMENT ON COLUMN withdrawal_cases.evidence IS
  'The error, the landed transaction (hash, nonce, block, gas) and what was being booked.';
CREATE INDEX withdrawal_cases_withdrawal_idx ON withdrawal_cases (withdrawal_id, id);

CREATE TABLE withdrawal_case_resolutions (
  case_id      bigint PRIMARY KEY REFERENCES withdrawal_cases (id),
  resolved_by  text NOT NULL CHECK (length(resolved_by) BETWEEN 1 AND 200),
  reason       text NOT NULL CHECK (length(reason) >= 1),
  resolved_at  timestamptz NOT NULL
);
COMMENT ON TABLE withdrawal_case_resolutions IS
  'How and by whom a withdrawal case was resolved (an admin lifted the hold after fixing its '
  'cause).';

REVOKE ALL ON withdrawal_cases, withdrawal_case_resolutions FROM PUBLIC;
GRANT SELECT, INSERT ON withdrawal_cases, withdrawal_case_resolutions TO custody_app;
GRANT USAGE, SELECT ON SEQUENCE withdrawal_cases_id_seq TO custody_app;
