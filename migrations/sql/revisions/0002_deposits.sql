-- Deposits: deposit addresses, the append-only deposit history (deposit_events), the current
-- state of each deposit (a projection of its history), the watcher cursors, durable cases and
-- the custody provider's inbox. DESIGN.md section 5.
--
-- Advisory lock namespace 7311 (two-int form):
--   (7311, hashtext(chain))   one watcher step per chain at a time, across processes.
--   (7312, hashtext(family))  allocation of the next deposit address index of a family.
--   (7313, case id)           resolution of one deposit case.

CREATE TABLE deposit_addresses (
  family            text NOT NULL CHECK (family ~ '^[a-z][a-z0-9_-]{0,31}$'),
  address           text NOT NULL CHECK (address ~ '^0x[0-9a-f]{40}$'),
  derivation_index  integer NOT NULL CHECK (derivation_index >= 0),
  user_id           text NOT NULL CHECK (length(user_id) BETWEEN 1 AND 100),
  created_at        timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (family, address),
  UNIQUE (family, derivation_index),
  UNIQUE (family, user_id)
);
COMMENT ON TABLE deposit_addresses IS
  'Deposit address of each user per chain family (every chain of the family maps (chain, '
  'address) to the user through it); derived deterministically from derivation_index.';

CREATE TABLE deposits (
  id                     bigserial PRIMARY KEY,
  chain                  text NOT NULL,
  tx_hash                text NOT NULL CHECK (tx_hash ~ '^0x[0-9a-f]{64}$'),
  position               text NOT NULL CHECK (position ~ '^(log|call):[0-9]+$'),
  token                  text CHECK (token ~ '^0x[0-9a-f]{40}$'),
  from_address           text NOT NULL,
  to_address             text NOT NULL,
  value                  numeric(78, 0) NOT NULL CHECK (value >= 0),
  tx_from                text,
  tx_nonce               bigint,
  user_id                text,
  asset_code             text,
  amount_minor           money128 CHECK (amount_minor > 0),
  booking                text NOT NULL CHECK (booking IN ('user', 'suspense', 'review', 'ignore')),
  booking_reason         text,
  state                  text NOT NULL CHECK (state IN ('included', 'unconfirmed', 'final',
                           'credited', 'suspense', 'held_for_review', 'failed', 'ignored',
                           'disputed')),
  block_number           bigint,
  block_hash             text,
  confirmations          integer,
  last_event_id          bigint NOT NULL,
  ledger_transaction_id  bigint REFERENCES ledger_transactions (id),
  first_seen_at          timestamptz NOT NULL DEFAULT now(),
  updated_at             timestamptz NOT NULL DEFAULT now(),
  UNIQUE (chain, tx_hash, position)
);
COMMENT ON TABLE deposits IS
  'One row per deposit key (chain, tx_hash, position): the immutable facts of the transfer and '
  'its current state, a projection of deposit_events updated in the same transaction.';
COMMENT ON COLUMN deposits.position IS
  'log:<n>: index of the Transfer log in the receipt logs (never the block-wide logIndex); '
  'call:0: the transaction''s own top-level native value.';
COMMENT ON COLUMN deposits.value IS 'Exact on-chain amount (uint256) in the token''s units.';
COMMENT ON COLUMN deposits.amount_minor IS
  'The value in the ledger asset''s minor units; NULL when not exactly representable.';
COMMENT ON COLUMN deposits.booking IS
  'Decided once at ingestion: credit the user, book to suspense, hold for review, or ignore.';
CREATE INDEX deposits_open_idx ON deposits (chain, state)
  WHERE state IN ('included', 'unconfirmed', 'final');
CREATE INDEX deposits_user_idx ON deposits (user_id, id);
CREATE INDEX deposits_block_idx ON deposits (chain, block_number);

CREATE TABLE deposit_events (
  id                     bigserial PRIMARY KEY,
  deposit_id             bigint NOT NULL REFERENCES deposits (id),
  chain                  text NOT NULL,
  tx_hash                text NOT NULL,
  position               text NOT NULL,
  event                  text NOT NULL CHECK (event IN ('transfer_ignored', 'transfer_included',
                           'confirmations_observed', 'block_reorged_out', 'transfer_reincluded',
                           'finality_reached', 'attested_for_user', 'attested_for_suspense',
                           'custody_record_disagreed', 'conversion_inexact',
                           'provider_completed_early', 'nonce_consumed')),
  state                  text NOT NULL CHECK (state IN ('included', 'unconfirmed', 'final',
                           'credited', 'suspense', 'held_for_review', 'failed', 'ignored',
                           'disputed')),
  block_number           bigint,
  block_hash             text,
  confirmations          integer,
  rule                   text,
  evidence               jsonb NOT NULL DEFAULT '{}'::jsonb,
  reason                 text,
  ledger_transaction_id  bigint REFERENCES ledger_transactions (id),
  inbox_event_id         text,
  observed_at            timestamptz NOT NULL,
  recorded_at            timestamptz NOT NULL DEFAULT clock_timestamp()
);
COMMENT ON TABLE deposit_events IS
  'Append-only deposit history: one row per observation of a deposit keyed by (chain, tx_hash, '
  'position); event is the fact observed, state the deposit''s state after it.';
CREATE INDEX deposit_events_key_idx ON deposit_events (chain, tx_hash, position, id);
CREATE INDEX deposit_events_deposit_idx ON deposit_events (deposit_id, id);

CREATE TABLE watcher_cursors (
  chain       text PRIMARY KEY,
  recent      jsonb NOT NULL CHECK (jsonb_typeof(recent) = 'array'),
  updated_at  timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE watcher_cursors IS
  'Recent [height, hash] pairs the watcher accepted per chain, ascending; the last is the tip.';

CREATE TABLE deposit_cases (
  id                     bigserial PRIMARY KEY,
  kind                   text NOT NULL CHECK (kind IN ('deep_reorg')),
  deposit_id             bigint NOT NULL REFERENCES deposits (id),
  ledger_transaction_id  bigint REFERENCES ledger_transactions (id),
  expected               jsonb NOT NULL,
  observed               jsonb NOT NULL,
  opened_at              timestamptz NOT NULL DEFAULT clock_timestamp(),
  UNIQUE (kind, deposit_id)
);
COMMENT ON TABLE deposit_cases IS
  'Durable cases the watcher opened (a credited deposit whose block stopped being canonical). '
  'Open until a row in deposit_case_resolutions references it.';

CREATE TABLE deposit_case_resolutions (
  case_id                  bigint PRIMARY KEY REFERENCES deposit_cases (id),
  reversal_transaction_id  bigint REFERENCES ledger_transactions (id),
  resolved_by              text NOT NULL CHECK (length(resolved_by) BETWEEN 1 AND 200),
  reason                   text NOT NULL CHECK (length(reason) >= 1),
  resolved_at              timestamptz NOT NULL DEFAULT clock_timestamp()
);

CREATE TABLE provider_inbox (
  event_id      text PRIMARY KEY CHECK (length(event_id) BETWEEN 1 AND 200),
  provider      text NOT NULL,
  chain         text NOT NULL,
  tx_hash       text NOT NULL,
  position      text NOT NULL,
  status        text NOT NULL,
  to_address    text NOT NULL,
  asset_code    text NOT NULL,
  amount_minor  numeric(78, 0) NOT NULL,
  payload       jsonb NOT NULL,
  received_at   timestamptz NOT NULL DEFAULT clock_timestamp()
);
COMMENT ON TABLE provider_inbox IS
  'Custody provider notifications, stored with their unique event id before processing.';
CREATE INDEX provider_inbox_key_idx ON provider_inbox (chain, tx_hash, position, received_at);
