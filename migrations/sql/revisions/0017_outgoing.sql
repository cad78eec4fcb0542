-- One machine for outgoing transactions (issue 13). Withdrawals, sweeps, gas top-ups and
-- hot-to-cold transfers all send from addresses we control and share the sending mechanism
-- (package ``outgoing``): nonces per sending address (sender_nonces, was hot_wallet_nonces),
-- every signed attempt in one table (outgoing_attempts, was withdrawal_attempts: same rows,
-- same ids), naming the one movement it belongs to by a real foreign key. Each movement kind
-- keeps its own row, state machine and append-only history (sweeps / sweep_events,
-- gas_top_ups / gas_top_up_events, cold_transfers / cold_transfer_events).

-- Nonces of every sending address, not only hot wallets.
ALTER TABLE hot_wallet_nonces RENAME TO sender_nonces;
ALTER TABLE sender_nonces RENAME CONSTRAINT hot_wallet_nonces_pkey TO sender_nonces_pkey;
ALTER TABLE sender_nonces RENAME CONSTRAINT hot_wallet_nonces_address_check
  TO sender_nonces_address_check;
ALTER TABLE sender_nonces RENAME CONSTRAINT hot_wallet_nonces_next_nonce_check
  TO sender_nonces_next_nonce_check;
COMMENT ON TABLE sender_nonces IS
  'Next nonce of each address we send from (hot wallets, deposit addresses being swept); '
  'allocated under a row lock, never handed out twice.';

-- The attempts of every movement. The old triggers go with the old name; the definition file
-- triggers/outgoing_attempts.sql restates them.
DROP TRIGGER IF EXISTS withdrawal_attempts_append_only ON withdrawal_attempts;
DROP TRIGGER IF EXISTS withdrawal_attempts_no_truncate ON withdrawal_attempts;
ALTER TABLE withdrawal_attempts RENAME TO outgoing_attempts;
ALTER SEQUENCE withdrawal_attempts_id_seq RENAME TO outgoing_attempts_id_seq;
ALTER TABLE outgoing_attempts RENAME COLUMN hot_wallet TO sender;
ALTER TABLE outgoing_attempts RENAME CONSTRAINT withdrawal_attempts_pkey TO outgoing_attempts_pkey;
ALTER TABLE outgoing_attempts RENAME CONSTRAINT withdrawal_attempts_tx_hash_key
  TO outgoing_attempts_tx_hash_key;
ALTER TABLE outgoing_attempts RENAME CONSTRAINT withdrawal_attempts_withdrawal_id_attempt_no_key
  TO outgoing_attempts_withdrawal_id_attempt_no_key;
ALTER TABLE outgoing_attempts RENAME CONSTRAINT withdrawal_attempts_withdrawal_id_fkey
  TO outgoing_attempts_withdrawal_id_fkey;
ALTER TABLE outgoing_attempts RENAME CONSTRAINT withdrawal_attempts_attempt_no_check
  TO outgoing_attempts_attempt_no_check;
ALTER TABLE outgoing_attempts RENAME CONSTRAINT withdrawal_attempts_gas_limit_check
  TO outgoing_attempts_gas_limit_check;
ALTER TABLE outgoing_attempts RENAME CONSTRAINT withdrawal_attempts_hot_wallet_check
  TO outgoing_attempts_sender_check;
ALTER TABLE outgoing_attempts RENAME CONSTRAINT withdrawal_attempts_max_fee_per_gas_check
  TO outgoing_attempts_max_fee_per_gas_check;
ALTER TABLE outgoing_attempts RENAME CONSTRAINT withdrawal_attempts_max_priority_fee_per_gas_check
  TO outgoing_attempts_max_priority_fee_per_gas_check;
ALTER TABLE outgoing_attempts RENAME CONSTRAINT withdrawal_attempts_nonce_check
  TO outgoing_attempts_nonce_check;
ALTER TABLE outgoing_attempts RENAME CONSTRAINT withdrawal_attempts_purpose_check
  TO outgoing_attempts_purpose_check;
ALTER TABLE outgoing_attempts RENAME CONSTRAINT withdrawal_attempts_raw_tx_check
  TO outgoing_attempts_raw_tx_check;
ALTER TABLE outgoing_attempts RENAME CONSTRAINT withdrawal_attempts_tx_hash_check
  TO outgoing_attempts_tx_hash_check;

-- The movements other than withdrawals.
CREATE TABLE gas_top_ups (
  id                 bigserial PRIMARY KEY,
  chain              text NOT NULL,
  sender             text NOT NULL CHECK (sender ~ '^0x[0-9a-f]{40}$'),
  address            text NOT NULL CHECK (address ~ '^0x[0-9a-f]{40}$'),
  amount             numeric(78, 0) NOT NULL CHECK (amount > 0),
  state              text NOT NULL CHECK (state IN ('ready', 'signing', 'signed', 'broadcast',
                       'unknown', 'included', 'final', 'reverted', 'dropped')),
  state_reason       text,
  nonce              bigint CHECK (nonce >= 0),
  gas_limit          bigint NOT NULL CHECK (gas_limit > 0),
  landed_attempt_id  bigint,
  gas_paid           numeric(78, 0) CHECK (gas_paid >= 0),
  created_at         timestamptz NOT NULL,
  updated_at         timestamptz NOT NULL
);
COMMENT ON TABLE gas_top_ups IS
  'Native asset sent from the hot wallet to a deposit address so that it can pay the gas of '
  'a token sweep (amount in the chain''s smallest unit). Treasury money while it sits there.';

CREATE TABLE sweeps (
  id                 bigserial PRIMARY KEY,
  chain              text NOT NULL,
  address            text NOT NULL CHECK (address ~ '^0x[0-9a-f]{40}$'),
  derivation_index   integer NOT NULL CHECK (derivation_index >= 0),
  destination        text NOT NULL CHECK (destination ~ '^0x[0-9a-f]{40}$'),
  asset              text NOT NULL,
  token              text CHECK (token ~ '^0x[0-9a-f]{40}$'),
  available          numeric(78, 0) NOT NULL CHECK (available > 0),
  customer_amount    numeric(78, 0) NOT NULL CHECK (customer_amount >= 0),
  state              text NOT NULL CHECK (state IN ('proposed', 'waiting_gas', 'ready', 'signing',
                       'signed', 'broadcast', 'unknown', 'included', 'final', 'reverted',
                       'dropped')),
  state_reason       text,
  top_up_id          bigint REFERENCES gas_top_ups (id),
  nonce              bigint CHECK (nonce >= 0),
  gas_limit          bigint NOT NULL CHECK (gas_limit > 0),
  landed_attempt_id  bigint,
  swept_amount       numeric(78, 0) CHECK (swept_amount >= 0),
  gas_paid           numeric(78, 0) CHECK (gas_paid >= 0),
  created_at         timestamptz NOT NULL,
  updated_at         timestamptz NOT NULL,
  CHECK (customer_amount <= available)
);
COMMENT ON TABLE sweeps IS
  'A move of credited, final funds from a deposit address to the chain''s hot wallet (amounts '
  'in the chain''s smallest unit). available: what the address holds of the asset by the '
  'engine''s records when the sweep was planned (customer_amount of it customer money, the '
  'rest treasury money: native dust of earlier top-ups). A native sweep sends available minus '
  'gas_limit * max_fee_per_gas of its attempt; a token sweep sends available. swept_amount and '
  'gas_paid: from the final receipt. At most one open sweep per address.';
CREATE UNIQUE INDEX sweeps_one_open_per_address ON sweeps (chain, address)
  WHERE state NOT IN ('final', 'reverted', 'dropped');
CREATE INDEX sweeps_state_idx ON sweeps (chain, state, id);
CREATE INDEX gas_top_ups_state_idx ON gas_top_ups (chain, state, id);

CREATE TABLE cold_transfers (
  id                  bigserial PRIMARY KEY,
  chain               text NOT NULL,
  asset               text NOT NULL,
  token               text CHECK (token ~ '^0x[0-9a-f]{40}$'),
  sender              text NOT NULL CHECK (sender ~ '^0x[0-9a-f]{40}$'),
  destination         text NOT NULL CHECK (destination ~ '^0x[0-9a-f]{40}$'),
  amount              numeric(78, 0) NOT NULL CHECK (amount > 0),
  approvals_required  integer NOT NULL CHECK (approvals_required BETWEEN 1 AND 2),
  proposed_by         text NOT NULL CHECK (length(proposed_by) BETWEEN 1 AND 200),
  reason              text NOT NULL CHECK (length(reason) BETWEEN 1 AND 500),
  state               text NOT NULL CHECK (state IN ('proposed', 'approved', 'signing', 'signed',
                        'broadcast', 'unknown', 'included', 'final', 'reverted', 'dropped',
                        'rejected')),
  state_reason        text,
  nonce               bigint CHECK (nonce >= 0),
  gas_limit           bigint NOT NULL CHECK (gas_limit > 0),
  landed_attempt_id   bigint,
  gas_paid            numeric(78, 0) CHECK (gas_paid >= 0),
  created_at          timestamptz NOT NULL,
  updated_at          timestamptz NOT NULL
);
COMMENT ON TABLE cold_transfers IS
  'The excess of the hot wallet over its configured maximum, moved to the configured cold '
  'address (amount in the chain''s smallest unit). Signed only once approved: by one admin, '
  'or by two different admins above the configured amount; never by the one who proposed it.';
CREATE INDEX cold_transfers_state_idx ON cold_transfers (chain, state, id);

CREATE TABLE cold_transfer_approvals (
  cold_transfer_id  bigint NOT NULL REFERENCES cold_transfers (id),
  approver          text NOT NULL CHECK (length(approver) BETWEEN 1 AND 200),
  decision          text NOT NULL CHECK (decision IN ('approve', 'reject')),
  reason            text,
  decided_at        timestamptz NOT NULL,
  PRIMARY KEY (cold_transfer_id, approver)
);
COMMENT ON TABLE cold_transfer_approvals IS
  'One decision per admin per cold transfer (a second one by the same admin is refused).';

CREATE TABLE refill_requests (
  id                bigserial PRIMARY KEY,
  chain             text NOT NULL,
  asset             text NOT NULL,
  token             text CHECK (token ~ '^0x[0-9a-f]{40}$'),
  source            text NOT NULL CHECK (source ~ '^0x[0-9a-f]{40}$'),
  destination       text NOT NULL CHECK (destination ~ '^0x[0-9a-f]{40}$'),
  amount            numeric(78, 0) NOT NULL CHECK (amount > 0),
  requested_by      text NOT NULL CHECK (length(requested_by) BETWEEN 1 AND 200),
  reason            text NOT NULL CHECK (length(reason) BETWEEN 1 AND 500),
  state             text NOT NULL CHECK (state IN ('open', 'matched', 'canceled')),
  matched_tx_hash   text CHECK (matched_tx_hash ~ '^0x[0-9a-f]{64}$'),
  matched_position  text,
  created_at        timestamptz NOT NULL,
  updated_at        timestamptz NOT NULL,
  CHECK ((state = 'matched') = (matched_tx_hash IS NOT NULL))
);
COMMENT ON TABLE refill_requests IS
  'A request to refill the hot wallet from a cold address (signed outside the engine: cold '
  'addresses are watch-only). The incoming transfer from that cold address to the hot wallet '
  'is matched to the oldest open request of the same chain, asset and amount once final, '
  'and is then an internal movement (custody-neutral).';
CREATE UNIQUE INDEX refill_requests_match_key ON refill_requests (chain, matched_tx_hash,
  matched_position) WHERE matched_tx_hash IS NOT NULL;

-- The attempts name their movement.
ALTER TABLE outgoing_attempts
  ADD COLUMN movement_kind text NOT NULL DEFAULT 'withdrawal'
    CHECK (movement_kind IN ('withdrawal', 'sweep', 'gas_top_up', 'cold_transfer')),
  ADD COLUMN sweep_id bigint REFERENCES sweeps (id),
  ADD COLUMN top_up_id bigint REFERENCES gas_top_ups (id),
  ADD COLUMN cold_transfer_id bigint REFERENCES cold_transfers (id),
  ALTER COLUMN withdrawal_id DROP NOT NULL;
ALTER TABLE outgoing_attempts ALTER COLUMN movement_kind DROP DEFAULT;
ALTER TABLE outgoing_attempts ADD CONSTRAINT outgoing_attempts_one_movement CHECK (
  num_nonnulls(withdrawal_id, sweep_id, top_up_id, cold_transfer_id) = 1
  AND (withdrawal_id IS NOT NULL) = (movement_kind = 'withdrawal')
  AND (sweep_id IS NOT NULL) = (movement_kind = 'sweep')
  AND (top_up_id IS NOT NULL) = (movement_kind = 'gas_top_up')
  AND (cold_transfer_id IS NOT NULL) = (movement_kind = 'cold_transfer'));
CREATE UNIQUE INDEX outgoing_attempts_sweep_attempt_no ON outgoing_attempts (sweep_id, attempt_no)
  WHERE sweep_id IS NOT NULL;
CREATE UNIQUE INDEX outgoing_attempts_top_up_attempt_no
  ON outgoing_attempts (top_up_id, attempt_no) WHERE top_up_id IS NOT NULL;
CREATE UNIQUE INDEX outgoing_attempts_cold_attempt_no
  ON outgoing_attempts (cold_transfer_id, attempt_no) WHERE cold_transfer_id IS NOT NULL;
CREATE INDEX outgoing_attempts_sender_nonce_idx ON outgoing_attempts (chain, sender, nonce);
COMMENT ON TABLE outgoing_attempts IS
  'Signed attempts of every transaction we send (withdrawals, sweeps, gas top-ups, cold '
  'transfers), recorded and committed before they are sent; each names its one movement. All '
  'attempts of a movement share its nonce. purpose = cancel: a zero-value transfer from the '
  'sender to itself that consumes the nonce of a withdrawal written off as not sent.';

-- The histories, one per movement kind, the shape of withdrawal_events.
CREATE TABLE sweep_events (
  id                     bigserial PRIMARY KEY,
  sweep_id               bigint NOT NULL REFERENCES sweeps (id),
  from_state             text,
  to_state               text NOT NULL,
  event                  text NOT NULL,
  reason                 text,
  evidence               jsonb NOT NULL DEFAULT '{}'::jsonb,
  actor                  text NOT NULL,
  ledger_transaction_id  bigint REFERENCES ledger_transactions (id),
  attempt_id             bigint REFERENCES outgoing_attempts (id),
  occurred_at            timestamptz NOT NULL,
  recorded_at            timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX sweep_events_sweep_idx ON sweep_events (sweep_id, id);
CREATE TABLE gas_top_up_events (LIKE sweep_events INCLUDING DEFAULTS INCLUDING CONSTRAINTS);
ALTER TABLE gas_top_up_events RENAME COLUMN sweep_id TO top_up_id;
CREATE SEQUENCE gas_top_up_events_id_seq OWNED BY gas_top_up_events.id;
ALTER TABLE gas_top_up_events ALTER COLUMN id SET DEFAULT nextval('gas_top_up_events_id_seq'),
  ADD PRIMARY KEY (id),
  ADD FOREIGN KEY (top_up_id) REFERENCES gas_top_ups (id),
  ADD FOREIGN KEY (ledger_transaction_id) REFERENCES ledger_transactions (id),
  ADD FOREIGN KEY (attempt_id) REFERENCES outgoing_attempts (id);
CREATE INDEX gas_top_up_events_top_up_idx ON gas_top_up_events (top_up_id, id);
CREATE TABLE cold_transfer_events (LIKE sweep_events INCLUDING DEFAULTS INCLUDING CONSTRAINTS);
ALTER TABLE cold_transfer_events RENAME COLUMN sweep_id TO cold_transfer_id;
CREATE SEQUENCE cold_transfer_events_id_seq OWNED BY cold_transfer_events.id;
ALTER TABLE cold_transfer_events
  ALTER COLUMN id SET DEFAULT nextval('cold_transfer_events_id_seq'),
  ADD PRIMARY KEY (id),
  ADD FOREIGN KEY (cold_transfer_id) REFERENCES cold_transfers (id),
  ADD FOREIGN KEY (ledger_transaction_id) REFERENCES ledger_transactions (id),
  ADD FOREIGN KEY (attempt_id) REFERENCES outgoing_attempts (id);
CREATE INDEX cold_transfer_events_cold_idx ON cold_transfer_events (cold_transfer_id, id);
COMMENT ON TABLE sweep_events IS 'The append-only history of each sweep.';
COMMENT ON TABLE gas_top_up_events IS 'The append-only history of each gas top-up.';
COMMENT ON TABLE cold_transfer_events IS 'The append-only history of each cold transfer.';

REVOKE ALL ON sweeps, sweep_events, gas_top_ups, gas_top_up_events, cold_transfers,
  cold_transfer_events, cold_transfer_approvals, refill_requests FROM PUBLIC;
GRANT SELECT, INSERT, UPDATE ON sweeps, gas_top_ups, cold_transfers, refill_requests
  TO custody_app;
GRANT SELECT, INSERT ON sweep_events, gas_top_up_events, cold_transfer_events,
  cold_transfer_approvals TO custody_app;
GRANT USAGE ON SEQUENCE sweeps_id_seq, sweep_events_id_seq, gas_top_ups_id_seq,
  gas_top_up_events_id_seq, cold_transfers_id_seq, cold_transfer_events_id_seq,
  refill_requests_id_seq TO custody_app;
