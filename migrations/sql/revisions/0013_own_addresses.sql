-- Our own addresses (DESIGN.md section 6a): every incoming transfer to a hot wallet or a cold
-- (watch-only) address is a deposit row of the same history, keyed (chain, tx_hash, position),
-- with the kind of address it arrived at and the booking 'own', classified once final:
--   internal  matched by key to an outgoing movement we made (internal_transfers): no posting;
--   capital   matched to a funding an operator declared in advance (treasury_fundings, one
--             match each in treasury_funding_matches): DR treasury / CR equity:owner;
--   suspense  anything else: DR custody / CR suspense:unattributed and a case of kind
--             'unattributed_own_address', resolved by two admins (deposit_case_votes).
-- Advisory lock namespace 7311 (deposits): (7314, case id) one vote on a case at a time.

ALTER TABLE deposits ADD COLUMN address_kind text NOT NULL DEFAULT 'deposit'
  CHECK (address_kind IN ('deposit', 'hot', 'cold'));
COMMENT ON COLUMN deposits.address_kind IS
  'The kind of our address the transfer arrived at: a user''s deposit address, a hot wallet, '
  'or a cold (watch-only) address; user_id is NULL for hot and cold.';

ALTER TABLE deposits DROP CONSTRAINT deposits_booking_check;
ALTER TABLE deposits ADD CONSTRAINT deposits_booking_check
  CHECK (booking IN ('user', 'suspense', 'review', 'ignore', 'own'));
ALTER TABLE deposits DROP CONSTRAINT deposits_state_check;
ALTER TABLE deposits ADD CONSTRAINT deposits_state_check
  CHECK (state IN ('included', 'unconfirmed', 'final', 'credited', 'suspense',
                   'held_for_review', 'failed', 'ignored', 'disputed', 'internal', 'capital'));
ALTER TABLE deposit_events DROP CONSTRAINT deposit_events_state_check;
ALTER TABLE deposit_events ADD CONSTRAINT deposit_events_state_check
  CHECK (state IN ('included', 'unconfirmed', 'final', 'credited', 'suspense',
                   'held_for_review', 'failed', 'ignored', 'disputed', 'internal', 'capital'));
ALTER TABLE deposit_events DROP CONSTRAINT deposit_events_event_check;
ALTER TABLE deposit_events ADD CONSTRAINT deposit_events_event_check
  CHECK (event IN ('transfer_ignored', 'transfer_included', 'confirmations_observed',
                   'block_reorged_out', 'transfer_reincluded', 'finality_reached',
                   'attested_for_user', 'attested_for_suspense', 'custody_record_disagreed',
                   'conversion_inexact', 'provider_completed_early', 'nonce_consumed',
                   'internal_matched', 'funding_matched', 'own_unattributed',
                   'capital_decided'));
ALTER TABLE deposit_cases DROP CONSTRAINT deposit_cases_kind_check;
ALTER TABLE deposit_cases ADD CONSTRAINT deposit_cases_kind_check
  CHECK (kind IN ('deep_reorg', 'unattributed_own_address'));

CREATE TABLE internal_transfers (
  chain        text NOT NULL,
  tx_hash      text NOT NULL CHECK (tx_hash ~ '^0x[0-9a-f]{64}$'),
  position     text NOT NULL CHECK (position ~ '^(log|call):[0-9]+$'),
  kind         text NOT NULL CHECK (kind IN ('sweep', 'gas_top_up', 'cold_transfer',
                                             'hot_transfer')),
  reference    text NOT NULL CHECK (length(reference) BETWEEN 1 AND 200),
  recorded_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
  PRIMARY KEY (chain, tx_hash, position)
);
COMMENT ON TABLE internal_transfers IS
  'Outgoing movements we made between our own addresses, by the deposit key of the transfer '
  'they produce: written by the outgoing-transaction mechanism before it sends (sweeps, gas '
  'top-ups, hot/cold transfers), read when that transfer is final (custody-neutral).';
COMMENT ON COLUMN internal_transfers.reference IS 'The movement that made it, e.g. sweep:<id>.';

CREATE TABLE treasury_fundings (
  id               bigserial PRIMARY KEY,
  chain            text NOT NULL,
  asset_code       text NOT NULL,
  amount_minor     money128 NOT NULL CHECK (amount_minor > 0),
  from_address     text NOT NULL CHECK (from_address ~ '^0x[0-9a-f]{40}$'),
  reason           text NOT NULL CHECK (length(reason) BETWEEN 1 AND 1000),
  declared_by      text NOT NULL CHECK (length(declared_by) BETWEEN 1 AND 200),
  idempotency_key  text NOT NULL UNIQUE CHECK (length(idempotency_key) BETWEEN 1 AND 300),
  fingerprint      text NOT NULL CHECK (fingerprint ~ '^[0-9a-f]{64}$'),
  declared_at      timestamptz NOT NULL DEFAULT clock_timestamp()
);
COMMENT ON TABLE treasury_fundings IS
  'Company capital an operator expects on chain: matched once, at finality, to a transfer to '
  'a hot or cold address by (chain, asset, from address, exact amount), oldest first.';
COMMENT ON COLUMN treasury_fundings.amount_minor IS 'In the ledger asset''s minor units.';
COMMENT ON COLUMN treasury_fundings.fingerprint IS
  'SHA-256 of the declared fields: the same idempotency key with other fields is refused.';
CREATE INDEX treasury_fundings_match_idx
  ON treasury_fundings (chain, asset_code, from_address, amount_minor, id);

CREATE TABLE treasury_funding_matches (
  funding_id             bigint PRIMARY KEY REFERENCES treasury_fundings (id),
  deposit_id             bigint NOT NULL UNIQUE REFERENCES deposits (id),
  ledger_transaction_id  bigint NOT NULL REFERENCES ledger_transactions (id),
  matched_at             timestamptz NOT NULL DEFAULT clock_timestamp()
);
COMMENT ON TABLE treasury_funding_matches IS
  'The final transfer that brought a declared funding, and its ledger transaction (DR '
  'treasury / CR equity:owner): at most one per funding and one per deposit.';

CREATE TABLE deposit_case_votes (
  id             bigserial PRIMARY KEY,
  case_id        bigint NOT NULL REFERENCES deposit_cases (id),
  role           text NOT NULL CHECK (role IN ('proposal', 'approval')),
  outcome        text NOT NULL CHECK (outcome IN ('capital', 'return')),
  withdrawal_id  bigint,
  reason         text NOT NULL CHECK (length(reason) BETWEEN 1 AND 1000),
  voted_by       text NOT NULL CHECK (length(voted_by) BETWEEN 1 AND 200),
  voted_at       timestamptz NOT NULL DEFAULT clock_timestamp(),
  UNIQUE (case_id, role),
  CHECK ((outcome = 'return') = (withdrawal_id IS NOT NULL))
);
COMMENT ON TABLE deposit_case_votes IS
  'Two-admin resolution of a case: one proposal (an outcome and a reason) and one approval of '
  'the same outcome by another admin (a trigger refuses the proposer).';

ALTER TABLE deposit_case_resolutions
  ADD COLUMN outcome text CHECK (outcome IN ('capital', 'return')),
  ADD COLUMN approved_by text CHECK (length(approved_by) BETWEEN 1 AND 200),
  ADD COLUMN ledger_transaction_id bigint REFERENCES ledger_transactions (id),
  ADD COLUMN withdrawal_id bigint;
COMMENT ON COLUMN deposit_case_resolutions.outcome IS
  'For an unattributed own-address transfer: capital (ledger_transaction_id moved it from '
  'suspense to the treasury) or return (linked to withdrawal_id). NULL for older kinds.';

REVOKE ALL ON internal_transfers, treasury_fundings, treasury_funding_matches,
  deposit_case_votes FROM PUBLIC;
GRANT SELECT, INSERT ON internal_transfers, treasury_fundings, treasury_funding_matches,
  deposit_case_votes TO custody_app;
-- SELECT ... FOR UPDATE (the matcher locks the funding it takes) needs an UPDATE privilege on
-- some column; the append-only trigger still refuses every actual UPDATE.
GRANT UPDATE (id) ON treasury_fundings TO custody_app;
GRANT USAGE, SELECT ON SEQUENCE treasury_fundings_id_seq, deposit_case_votes_id_seq
  TO custody_app;
