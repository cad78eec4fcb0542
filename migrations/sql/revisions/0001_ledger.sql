-- Ledger core: assets, accounts, append-only transactions and postings, the balance projection,
-- periods and checkpoints: the tables and their constraints. The rules that every write of them
-- must pass are the triggers of each table (sql/triggers/<table>.sql) and the write functions
-- (sql/functions/ledger_post_arrays.sql, sql/functions/ledger_post_one.sql).
--
-- Advisory lock namespace 7301 (two-int form):
--   (7301, 1) ledger write gate: every write of transactions/postings holds it SHARED until
--             commit; closing a period and taking a checkpoint watermark hold it EXCLUSIVE, so
--             they see a ledger with no write in flight.
--   (7302, id) / (7303, id) reversal / closing checks of one original posting.

DO $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'custody_app') THEN
    CREATE ROLE custody_app NOLOGIN;
  END IF;
END
$$;

-- Amounts in minor units: integers with |x| < 2^127 (signed 128-bit), i.e. exactly the values
-- of NUMERIC(39,0). The domain is declared over plain numeric on purpose: a NUMERIC(39,0)
-- column silently rounds 1.5 to 2 before any CHECK runs, so a fraction could never be refused.
-- Here a fraction (any non-zero scale) fails the CHECK instead of being rounded.
CREATE DOMAIN money128 AS numeric
  CHECK (scale(VALUE) = 0
     AND VALUE > -170141183460469231731687303715884105728
     AND VALUE <  170141183460469231731687303715884105728);

CREATE TABLE assets (
  id          serial PRIMARY KEY,
  code        text NOT NULL UNIQUE CHECK (code ~ '^[A-Z0-9][A-Z0-9._-]{0,31}$'),
  scale       smallint NOT NULL CHECK (scale BETWEEN 0 AND 38),
  created_at  timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE assets IS 'Ledger assets; scale = number of decimals of one minor unit.';

CREATE TABLE accounts (
  id                              bigserial PRIMARY KEY,
  code                            text NOT NULL CHECK (length(code) BETWEEN 1 AND 200),
  asset_id                        int NOT NULL REFERENCES assets (id),
  type                            text NOT NULL
    CHECK (type IN ('asset', 'liability', 'equity', 'revenue', 'expense')),
  debits_must_not_exceed_credits  boolean NOT NULL DEFAULT false,
  credits_must_not_exceed_debits  boolean NOT NULL DEFAULT false,
  created_at                      timestamptz NOT NULL DEFAULT now(),
  UNIQUE (code, asset_id),
  UNIQUE (id, asset_id),
  CHECK (NOT (debits_must_not_exceed_credits AND credits_must_not_exceed_debits))
);
COMMENT ON TABLE accounts IS 'Chart of accounts, one row per (code, asset); immutable.';

CREATE TABLE ledger_transactions (
  id                       bigserial PRIMARY KEY,
  idempotency_key          text NOT NULL UNIQUE CHECK (length(idempotency_key) BETWEEN 1 AND 200),
  fingerprint              text NOT NULL CHECK (fingerprint ~ '^[0-9a-f]{64}$'),
  kind                     text NOT NULL CHECK (length(kind) BETWEEN 1 AND 64),
  reference                text,
  effective_at             timestamptz NOT NULL,
  recorded_at              timestamptz NOT NULL DEFAULT clock_timestamp(),
  reason                   text,
  source                   text NOT NULL CHECK (length(source) BETWEEN 1 AND 200),
  reverses_transaction_id  bigint REFERENCES ledger_transactions (id),
  out_of_period            boolean NOT NULL DEFAULT false,
  metadata                 jsonb NOT NULL DEFAULT '{}'::jsonb
);
COMMENT ON COLUMN ledger_transactions.recorded_at IS
  'When the ledger learned it; set by the database at insert, never by the caller.';
COMMENT ON COLUMN ledger_transactions.out_of_period IS
  'An explicit adjustment whose effective time falls in a closed period.';
CREATE INDEX ledger_transactions_reverses_idx ON ledger_transactions (reverses_transaction_id)
  WHERE reverses_transaction_id IS NOT NULL;
CREATE INDEX ledger_transactions_reference_idx ON ledger_transactions (reference);

CREATE TABLE ledger_postings (
  id                   bigserial PRIMARY KEY,
  transaction_id       bigint NOT NULL REFERENCES ledger_transactions (id),
  line_no              smallint NOT NULL CHECK (line_no >= 1),
  account_id           bigint NOT NULL,
  asset_id             int NOT NULL,
  amount               money128 NOT NULL CHECK (amount <> 0),
  closes_posting_id    bigint REFERENCES ledger_postings (id),
  reverses_posting_id  bigint REFERENCES ledger_postings (id),
  UNIQUE (transaction_id, line_no),
  -- The posting's asset must be its account's asset.
  FOREIGN KEY (account_id, asset_id) REFERENCES accounts (id, asset_id)
);
COMMENT ON COLUMN ledger_postings.amount IS 'Signed minor units: debit positive, credit negative.';
CREATE INDEX ledger_postings_account_idx ON ledger_postings (account_id, id);
CREATE INDEX ledger_postings_closes_idx ON ledger_postings (closes_posting_id)
  WHERE closes_posting_id IS NOT NULL;
CREATE INDEX ledger_postings_reverses_idx ON ledger_postings (reverses_posting_id)
  WHERE reverses_posting_id IS NOT NULL;

CREATE TABLE account_balances (
  account_id                      bigint PRIMARY KEY,
  asset_id                        int NOT NULL,
  balance                         money128 NOT NULL DEFAULT 0,
  version                         bigint NOT NULL DEFAULT 0 CHECK (version >= 0),
  debits_must_not_exceed_credits  boolean NOT NULL,
  credits_must_not_exceed_debits  boolean NOT NULL,
  updated_at                      timestamptz NOT NULL DEFAULT now(),
  FOREIGN KEY (account_id, asset_id) REFERENCES accounts (id, asset_id),
  CHECK (NOT debits_must_not_exceed_credits OR balance <= 0),
  CHECK (NOT credits_must_not_exceed_debits OR balance >= 0)
);
COMMENT ON TABLE account_balances IS
  'Projection of the postings (a cache), updated in the same transaction as the postings.';
COMMENT ON COLUMN account_balances.balance IS 'Sum of the postings: debit positive.';
COMMENT ON COLUMN account_balances.version IS 'Number of ledger transactions that touched it.';

CREATE TABLE ledger_periods (
  id         serial PRIMARY KEY,
  ends_at    timestamptz NOT NULL UNIQUE,
  closed_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
  closed_by  text NOT NULL CHECK (length(closed_by) BETWEEN 1 AND 200),
  reason     text
);
COMMENT ON TABLE ledger_periods IS
  'Closed periods: everything effective before ends_at is closed as of closed_at.';

CREATE TABLE balance_checkpoints (
  id                  serial PRIMARY KEY,
  through_posting_id  bigint NOT NULL,
  created_at          timestamptz NOT NULL DEFAULT clock_timestamp(),
  verified            boolean NOT NULL,
  accounts_count      int NOT NULL,
  digest              text NOT NULL CHECK (digest ~ '^[0-9a-f]{64}$')
);
COMMENT ON TABLE balance_checkpoints IS
  'Balances of every account covering all postings with id <= through_posting_id; verified '
  'when the replay that produced it agreed with the stored balances.';

CREATE TABLE balance_checkpoint_entries (
  checkpoint_id  int NOT NULL REFERENCES balance_checkpoints (id),
  account_id     bigint NOT NULL REFERENCES accounts (id),
  balance        money128 NOT NULL,
  version        bigint NOT NULL,
  PRIMARY KEY (checkpoint_id, account_id)
);
