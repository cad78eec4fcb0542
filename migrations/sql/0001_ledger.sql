-- Ledger core: assets, accounts, append-only transactions and postings, the balance projection,
-- periods and checkpoints. Every rule that money depends on is enforced here, so that no code
-- path (including raw SQL by the application role) can skip it.
--
-- Advisory lock namespace 7301 (two-int form):
--   (7301, 1) ledger write gate: every write of transactions/postings holds it SHARED until
--             commit; closing a period and taking a checkpoint watermark hold it EXCLUSIVE, so
--             they see a ledger with no write in flight.
--   (7301, 2) reversal/closing checks of one original posting (hashed id in objid 7302/7303).

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

-- ---------------------------------------------------------------------------------------------
-- Append-only guards.

CREATE FUNCTION ledger_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'table % is append-only: % refused', TG_TABLE_NAME, TG_OP
    USING ERRCODE = 'raise_exception', HINT = 'post a correcting transaction instead';
END
$$;

DO $$
DECLARE t text;
BEGIN
  FOREACH t IN ARRAY ARRAY['assets', 'accounts', 'ledger_transactions', 'ledger_postings',
                           'ledger_periods', 'balance_checkpoints', 'balance_checkpoint_entries']
  LOOP
    EXECUTE format('CREATE TRIGGER %I BEFORE UPDATE OR DELETE ON %I
                    FOR EACH ROW EXECUTE FUNCTION ledger_refuse_change()', t || '_append_only', t);
    EXECUTE format('CREATE TRIGGER %I BEFORE TRUNCATE ON %I
                    FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_change()',
                   t || '_no_truncate', t);
  END LOOP;
END
$$;

-- The balance row of an account carries its flags; they never change.
CREATE FUNCTION account_balances_guard() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE a accounts%ROWTYPE;
BEGIN
  IF TG_OP = 'INSERT' THEN
    SELECT * INTO a FROM accounts WHERE id = NEW.account_id;
    NEW.debits_must_not_exceed_credits := a.debits_must_not_exceed_credits;
    NEW.credits_must_not_exceed_debits := a.credits_must_not_exceed_debits;
    RETURN NEW;
  END IF;
  -- UPDATE: only reached when the WHEN clause below saw an immutable column change.
  RAISE EXCEPTION 'account_balances: only balance and version may change';
END
$$;
CREATE TRIGGER account_balances_guard BEFORE INSERT ON account_balances
  FOR EACH ROW EXECUTE FUNCTION account_balances_guard();
-- Every post updates balance rows: the WHEN clause is evaluated without calling PL/pgSQL, so an
-- ordinary update (balance, version, updated_at) costs nothing here, and any change of the
-- account, asset or flags still raises.
CREATE TRIGGER account_balances_immutable BEFORE UPDATE ON account_balances
  FOR EACH ROW
  WHEN (NEW.account_id IS DISTINCT FROM OLD.account_id OR NEW.asset_id IS DISTINCT FROM OLD.asset_id
        OR NEW.debits_must_not_exceed_credits IS DISTINCT FROM OLD.debits_must_not_exceed_credits
        OR NEW.credits_must_not_exceed_debits IS DISTINCT FROM OLD.credits_must_not_exceed_debits)
  EXECUTE FUNCTION account_balances_guard();

CREATE FUNCTION accounts_open_balance() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO account_balances (account_id, asset_id, debits_must_not_exceed_credits,
                                credits_must_not_exceed_debits)
  VALUES (NEW.id, NEW.asset_id, NEW.debits_must_not_exceed_credits,
          NEW.credits_must_not_exceed_debits);
  RETURN NULL;
END
$$;
CREATE TRIGGER accounts_open_balance AFTER INSERT ON accounts
  FOR EACH ROW EXECUTE FUNCTION accounts_open_balance();

-- ---------------------------------------------------------------------------------------------
-- Writes of transactions: the write gate, the recorded time and the closed periods.

CREATE FUNCTION ledger_write_gate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  -- Held until commit; period close and checkpoint watermarks wait for every write in flight.
  PERFORM pg_advisory_xact_lock_shared(7301, 1);
  RETURN NULL;
END
$$;
CREATE TRIGGER ledger_transactions_gate BEFORE INSERT ON ledger_transactions
  FOR EACH STATEMENT EXECUTE FUNCTION ledger_write_gate();
-- Postings need no gate trigger of their own: a posting is only accepted when its ledger
-- transaction row was written by the same top-level database transaction (its xmin is ours, see
-- ledger_postings_after_insert). That INSERT ran at top level (a row written in a subtransaction
-- carries the subtransaction's xid and is refused), so its statement trigger above took the gate
-- in the top-level transaction, which holds it until commit. Every posting insert therefore
-- runs with the gate held.

CREATE FUNCTION ledger_transactions_before_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  -- Set here, after the write gate is held (the statement trigger above fires first), so that
  -- nothing recorded after a period close can carry a recorded time before it. The period
  -- rules are checked once per statement, below.
  NEW.recorded_at := clock_timestamp();
  RETURN NEW;
END
$$;
CREATE TRIGGER ledger_transactions_before_insert BEFORE INSERT ON ledger_transactions
  FOR EACH ROW EXECUTE FUNCTION ledger_transactions_before_insert();

CREATE FUNCTION ledger_transactions_after_insert() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE bad record;
BEGIN
  -- One query for every row of the statement (a batch of 100 used to run 100 lookups). The
  -- gate is held, so no period can be closed between this check and our commit.
  SELECT n.idempotency_key, n.effective_at, n.out_of_period, p.closed_through
    INTO bad
    FROM new_rows n, (SELECT max(ends_at) AS closed_through FROM ledger_periods) p
   WHERE CASE WHEN n.out_of_period
              THEN p.closed_through IS NULL OR n.effective_at >= p.closed_through
              ELSE n.effective_at < p.closed_through END
   LIMIT 1;
  IF NOT FOUND THEN
    RETURN NULL;
  END IF;
  IF bad.out_of_period THEN
    RAISE EXCEPTION 'out-of-period adjustment % is effective at %, not in a closed period',
      bad.idempotency_key, bad.effective_at USING ERRCODE = 'check_violation';
  END IF;
  RAISE EXCEPTION 'transaction % is effective at %, inside a period closed through %',
    bad.idempotency_key, bad.effective_at, bad.closed_through USING ERRCODE = 'check_violation';
END
$$;
CREATE TRIGGER ledger_transactions_after_insert AFTER INSERT ON ledger_transactions
  REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION ledger_transactions_after_insert();

CREATE FUNCTION ledger_periods_before_insert() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE latest timestamptz;
BEGIN
  -- Exclusive: wait for every posting in flight, so "as known at close" is final.
  PERFORM pg_advisory_xact_lock(7301, 1);
  NEW.closed_at := clock_timestamp();
  SELECT max(ends_at) INTO latest FROM ledger_periods;
  IF latest IS NOT NULL AND NEW.ends_at <= latest THEN
    RAISE EXCEPTION 'period already closed through %', latest USING ERRCODE = 'check_violation';
  END IF;
  IF NEW.ends_at > NEW.closed_at THEN
    RAISE EXCEPTION 'cannot close a period ending in the future (%)', NEW.ends_at
      USING ERRCODE = 'check_violation';
  END IF;
  RETURN NEW;
END
$$;
CREATE TRIGGER ledger_periods_before_insert BEFORE INSERT ON ledger_periods
  FOR EACH ROW EXECUTE FUNCTION ledger_periods_before_insert();

-- ---------------------------------------------------------------------------------------------
-- Postings: written only with their transaction; reversals and closings never exceed the
-- original; every transaction balances per asset at commit.

-- Checked once per INSERT statement over all its rows (the transition table), not per row: one
-- query covers every posting of a batch. The rows are already in the table when this runs, so
-- the sums below include them.
CREATE FUNCTION ledger_postings_after_insert() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  bad_txn bigint;
  has_refs boolean;
  orig record;
  bad record;
BEGIN
  -- A committed transaction is closed: postings can only be written by the database
  -- transaction that wrote their ledger transaction (its row's xmin is our top-level xid). The
  -- subquery per distinct transaction keeps this a primary-key lookup whatever the planner
  -- thinks of the transition table's size.
  SELECT min(d.transaction_id) FILTER (WHERE d.txn_xmin IS DISTINCT FROM pg_current_xact_id()::xid),
         bool_or(d.refs)
    INTO bad_txn, has_refs
    FROM (SELECT n.transaction_id,
                 bool_or(n.reverses_posting_id IS NOT NULL OR n.closes_posting_id IS NOT NULL)
                   AS refs,
                 (SELECT t.xmin FROM ledger_transactions t WHERE t.id = n.transaction_id)
                   AS txn_xmin
            FROM new_rows n GROUP BY n.transaction_id) d;
  IF bad_txn IS NOT NULL THEN
    RAISE EXCEPTION 'postings of ledger transaction % can only be written with it', bad_txn
      USING ERRCODE = 'check_violation';
  END IF;
  IF NOT has_refs THEN
    RETURN NULL;
  END IF;

  -- Reversals ('r') and closings ('c'): lock each original posting involved (in a fixed order,
  -- so two writers never deadlock here), then, reading after the lock, check that every line
  -- mirrors its original and that all of them together never exceed it. A concurrent writer of
  -- the same original waits for the lock until we commit, then sees our postings.
  FOR orig IN
    SELECT DISTINCT x.kind, x.pid
      FROM new_rows n,
           LATERAL (VALUES (7302, n.reverses_posting_id), (7303, n.closes_posting_id)) x(kind, pid)
     WHERE x.pid IS NOT NULL
     ORDER BY x.pid, x.kind
  LOOP
    PERFORM pg_advisory_xact_lock(orig.kind, (orig.pid % 2147483647)::int);
  END LOOP;

  -- Scalar subqueries (one index lookup per row) rather than joins: a plan cached while the
  -- tables were small must not turn into a scan of the whole ledger later.
  SELECT n.reverses_posting_id AS pid INTO bad
    FROM new_rows n
   WHERE n.reverses_posting_id IS NOT NULL
     AND (SELECT o.account_id = n.account_id AND sign(o.amount) <> sign(n.amount)
                 AND o.transaction_id = (SELECT t.reverses_transaction_id FROM ledger_transactions t
                                          WHERE t.id = n.transaction_id)
            FROM ledger_postings o WHERE o.id = n.reverses_posting_id) IS NOT TRUE
   LIMIT 1;
  IF FOUND THEN
    RAISE EXCEPTION 'posting reverses % but does not mirror it', bad.pid
      USING ERRCODE = 'check_violation';
  END IF;
  SELECT n.closes_posting_id AS pid INTO bad
    FROM new_rows n
   WHERE n.closes_posting_id IS NOT NULL
     AND (SELECT o.account_id = n.account_id AND sign(o.amount) <> sign(n.amount)
            FROM ledger_postings o WHERE o.id = n.closes_posting_id) IS NOT TRUE
   LIMIT 1;
  IF FOUND THEN
    RAISE EXCEPTION 'posting closes % but is not on its account with the opposite sign', bad.pid
      USING ERRCODE = 'check_violation';
  END IF;

  -- What all postings (committed, and ours) take from each original, against the original.
  SELECT x.kind, x.pid INTO bad
    FROM (SELECT DISTINCT 'r' AS kind, n.reverses_posting_id AS pid FROM new_rows n
           WHERE n.reverses_posting_id IS NOT NULL
          UNION
          SELECT DISTINCT 'c', n.closes_posting_id FROM new_rows n
           WHERE n.closes_posting_id IS NOT NULL) x
   WHERE abs((SELECT o.amount FROM ledger_postings o WHERE o.id = x.pid))
         < abs(CASE x.kind
                 WHEN 'r' THEN (SELECT sum(q.amount) FROM ledger_postings q
                                 WHERE q.reverses_posting_id = x.pid)
                 ELSE (SELECT sum(q.amount) FROM ledger_postings q
                        WHERE q.closes_posting_id = x.pid)
               END)
   LIMIT 1;
  IF FOUND THEN
    IF bad.kind = 'r' THEN
      RAISE EXCEPTION 'reversal of posting % exceeds the original', bad.pid
        USING ERRCODE = 'check_violation';
    END IF;
    RAISE EXCEPTION 'closing of posting % exceeds the open amount', bad.pid
      USING ERRCODE = 'check_violation';
  END IF;
  RETURN NULL;
END
$$;
CREATE TRIGGER ledger_postings_after_insert AFTER INSERT ON ledger_postings
  REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION ledger_postings_after_insert();

CREATE FUNCTION ledger_transaction_balanced() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  n_lines bigint;
  bad int;
BEGIN
  -- One query: how many postings, and the first asset whose postings do not sum to zero.
  SELECT sum(g.lines), min(g.asset_id) FILTER (WHERE g.total <> 0)
    INTO n_lines, bad
    FROM (SELECT p.asset_id, count(*) AS lines, sum(p.amount) AS total
            FROM ledger_postings p WHERE p.transaction_id = NEW.id GROUP BY p.asset_id) g;
  IF n_lines IS NULL THEN
    RAISE EXCEPTION 'ledger transaction % has no postings', NEW.id
      USING ERRCODE = 'check_violation';
  END IF;
  IF bad IS NOT NULL THEN
    RAISE EXCEPTION 'ledger transaction % does not balance in asset %', NEW.id, bad
      USING ERRCODE = 'check_violation';
  END IF;
  RETURN NULL;
END
$$;
-- Checked at commit, once per transaction: postings can only join a transaction in the database
-- transaction that created it (see above), so this sees its complete set of postings.
CREATE CONSTRAINT TRIGGER ledger_transaction_balanced AFTER INSERT ON ledger_transactions
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION ledger_transaction_balanced();
