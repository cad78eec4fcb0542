-- Withdrawals (DESIGN.md section 6): the current state of each withdrawal, its append-only
-- history (withdrawal_events), every broadcast attempt (written and committed BEFORE it is
-- sent), approval and write-off decisions, returned payouts, and the hot wallets' nonces.
--
-- Advisory lock namespace 7321 (two-int form):
--   (7321, hashtext(user_id || '/' || asset))  daily-limit check of one user and asset.
--   (7322, hashtext(chain))                      one processor step per chain at a time.

CREATE TABLE withdrawals (
  id                      bigserial PRIMARY KEY,
  user_id                 text NOT NULL CHECK (length(user_id) BETWEEN 1 AND 100),
  request_key             text NOT NULL CHECK (length(request_key) BETWEEN 1 AND 200),
  fingerprint             text NOT NULL CHECK (fingerprint ~ '^[0-9a-f]{64}$'),
  requested_by            text NOT NULL CHECK (length(requested_by) BETWEEN 1 AND 200),
  chain                   text NOT NULL,
  asset_code              text NOT NULL,
  token                   text CHECK (token ~ '^0x[0-9a-f]{40}$'),
  destination             text NOT NULL CHECK (destination ~ '^0x[0-9a-f]{40}$'
                                               AND destination <> '0x0000000000000000000000000000000000000000'),
  amount_minor            money128 NOT NULL CHECK (amount_minor > 0),
  fee_max_minor           money128 NOT NULL CHECK (fee_max_minor >= 0),
  fee_minor               money128 NOT NULL CHECK (fee_minor >= 0 AND fee_minor <= fee_max_minor),
  chain_amount            numeric(78, 0) NOT NULL CHECK (chain_amount > 0),
  approvals_required      smallint NOT NULL CHECK (approvals_required BETWEEN 0 AND 2),
  state                   text NOT NULL CHECK (state IN ('requested', 'pending_approval',
                            'reserved', 'signed', 'broadcast', 'included', 'unknown',
                            'awaiting_write_off', 'settled', 'reverted', 'released', 'canceled',
                            'rejected', 'written_off')),
  state_reason            text,
  hot_wallet              text CHECK (hot_wallet ~ '^0x[0-9a-f]{40}$'),
  nonce                   bigint CHECK (nonce >= 0),
  reserve_transaction_id  bigint REFERENCES ledger_transactions (id),
  reserve_posting_id      bigint REFERENCES ledger_postings (id),
  closing_transaction_id  bigint REFERENCES ledger_transactions (id),
  landed_attempt_id       bigint,
  requested_at            timestamptz NOT NULL,
  state_changed_at        timestamptz NOT NULL,
  unknown_since           timestamptz,
  nonce_closed_at         timestamptz,
  UNIQUE (user_id, request_key),
  -- One nonce per withdrawal, one withdrawal per nonce: replacements reuse it, so at most one
  -- of a withdrawal's attempts can ever be included, and two withdrawals never share one.
  UNIQUE (chain, hot_wallet, nonce),
  CHECK ((nonce IS NULL) = (hot_wallet IS NULL)),
  CHECK (state IN ('requested') OR reserve_posting_id IS NOT NULL)
);
COMMENT ON TABLE withdrawals IS
  'Current state of each withdrawal (a projection of withdrawal_events); amounts in the ledger '
  'asset''s minor units, chain_amount in the token''s on-chain units.';
COMMENT ON COLUMN withdrawals.request_key IS 'The caller''s idempotency key, unique per user.';
COMMENT ON COLUMN withdrawals.fingerprint IS 'SHA-256 of the request; same key + other request = conflict.';
COMMENT ON COLUMN withdrawals.fee_minor IS 'Fee charged at settlement (from the fee schedule).';
COMMENT ON COLUMN withdrawals.fee_max_minor IS 'Most the fee can be; reserved with the amount.';
COMMENT ON COLUMN withdrawals.reserve_posting_id IS
  'The reserve posting on user:{id}:withdrawals that the settle or release posting closes.';
COMMENT ON COLUMN withdrawals.unknown_since IS 'When the outcome first became unknown.';
COMMENT ON COLUMN withdrawals.nonce_closed_at IS
  'Written-off withdrawals: when their nonce was seen consumed and final (by a cancel '
  'transaction, the payout itself, or another transaction). Until then later payouts of the '
  'hot wallet wait behind it, so the processor keeps closing it.';
CREATE INDEX withdrawals_state_idx ON withdrawals (state, id)
  WHERE state NOT IN ('settled', 'reverted', 'released', 'canceled', 'rejected', 'written_off');
CREATE INDEX withdrawals_user_asset_idx ON withdrawals (user_id, asset_code, requested_at);
CREATE INDEX withdrawals_nonce_open_idx ON withdrawals (chain, id)
  WHERE state = 'written_off' AND nonce IS NOT NULL AND nonce_closed_at IS NULL;

CREATE TABLE withdrawal_events (
  id                     bigserial PRIMARY KEY,
  withdrawal_id          bigint NOT NULL REFERENCES withdrawals (id),
  from_state             text,
  to_state               text NOT NULL,
  event                  text NOT NULL,
  reason                 text,
  evidence               jsonb NOT NULL DEFAULT '{}'::jsonb,
  actor                  text NOT NULL,
  ledger_transaction_id  bigint REFERENCES ledger_transactions (id),
  attempt_id             bigint,
  occurred_at            timestamptz NOT NULL,
  recorded_at            timestamptz NOT NULL DEFAULT clock_timestamp()
);
COMMENT ON TABLE withdrawal_events IS
  'Append-only history: every accepted transition with its reason and evidence.';
CREATE INDEX withdrawal_events_withdrawal_idx ON withdrawal_events (withdrawal_id, id);

CREATE TABLE withdrawal_attempts (
  id                        bigserial PRIMARY KEY,
  withdrawal_id             bigint NOT NULL REFERENCES withdrawals (id),
  attempt_no                int NOT NULL CHECK (attempt_no >= 1),
  purpose                   text NOT NULL DEFAULT 'payout' CHECK (purpose IN ('payout', 'cancel')),
  chain                     text NOT NULL,
  hot_wallet                text NOT NULL CHECK (hot_wallet ~ '^0x[0-9a-f]{40}$'),
  nonce                     bigint NOT NULL CHECK (nonce >= 0),
  tx_hash                   text NOT NULL UNIQUE CHECK (tx_hash ~ '^0x[0-9a-f]{64}$'),
  raw_tx                    text NOT NULL CHECK (raw_tx ~ '^0x[0-9a-f]+$'),
  max_fee_per_gas           numeric(78, 0) NOT NULL CHECK (max_fee_per_gas > 0),
  max_priority_fee_per_gas  numeric(78, 0) NOT NULL CHECK (max_priority_fee_per_gas >= 0),
  gas_limit                 bigint NOT NULL CHECK (gas_limit > 0),
  created_at                timestamptz NOT NULL,
  UNIQUE (withdrawal_id, attempt_no)
);
COMMENT ON TABLE withdrawal_attempts IS
  'Signed broadcast attempts, recorded and committed before they are sent. All attempts of a '
  'withdrawal share its nonce. purpose = cancel: a zero-value transfer from the hot wallet to '
  'itself that consumes the nonce of a withdrawal written off as not sent.';

CREATE TABLE withdrawal_decisions (
  id             bigserial PRIMARY KEY,
  withdrawal_id  bigint NOT NULL REFERENCES withdrawals (id),
  kind           text NOT NULL CHECK (kind IN ('approval', 'write_off')),
  decision       text NOT NULL CHECK (decision IN ('approve', 'reject', 'sent', 'not_sent')),
  actor          text NOT NULL CHECK (length(actor) BETWEEN 1 AND 200),
  reason         text,
  decided_at     timestamptz NOT NULL,
  UNIQUE (withdrawal_id, kind, actor),
  CHECK (kind <> 'write_off' OR (decision IN ('sent', 'not_sent') AND length(reason) > 0))
);
COMMENT ON TABLE withdrawal_decisions IS
  'Approvals and write-off votes; one per person and kind (a second vote is refused).';

CREATE TABLE withdrawal_returns (
  id                     bigserial PRIMARY KEY,
  withdrawal_id          bigint NOT NULL REFERENCES withdrawals (id),
  chain                  text NOT NULL,
  tx_hash                text NOT NULL CHECK (tx_hash ~ '^0x[0-9a-f]{64}$'),
  position               text NOT NULL CHECK (position ~ '^(log|call):[0-9]+$'),
  amount_minor           money128 NOT NULL CHECK (amount_minor > 0),
  arrived_at             timestamptz NOT NULL,
  booked_to              text NOT NULL CHECK (booked_to IN ('suspense', 'user')),
  ledger_transaction_id  bigint REFERENCES ledger_transactions (id),
  linked_by              text NOT NULL,
  reason                 text NOT NULL,
  recorded_at            timestamptz NOT NULL DEFAULT clock_timestamp(),
  UNIQUE (chain, tx_hash, position)
);
COMMENT ON TABLE withdrawal_returns IS
  'Returned payouts: an incoming transfer (deposit key) linked to the payout it returns.';

CREATE TABLE hot_wallet_nonces (
  chain       text NOT NULL,
  address     text NOT NULL CHECK (address ~ '^0x[0-9a-f]{40}$'),
  next_nonce  bigint NOT NULL CHECK (next_nonce >= 0),
  updated_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (chain, address)
);
COMMENT ON TABLE hot_wallet_nonces IS
  'Next nonce of each hot wallet; allocated under a row lock, never handed out twice.';
