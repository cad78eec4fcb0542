-- ledger_transactions: what the database does when a ledger transaction row is written by any
-- writer other than the ledger's write functions (the application role with raw SQL, the owner).
--
-- For those writers, in firing order:
--   1. ledger_transactions_gate (BEFORE INSERT, per statement): takes the write gate, advisory
--      lock (7301, 1) SHARED until commit, so that closing a period or taking a checkpoint
--      watermark (which take it EXCLUSIVE) sees no write in flight.
--   2. ledger_transactions_before_insert (per row): recorded_at := clock_timestamp(), after the
--      gate, so that nothing recorded after a period close carries a time before it.
--   3. ledger_transactions_after_insert (per statement, over all its rows): the period rules. An
--      entry effective inside a closed period is refused unless it is an explicit out-of-period
--      adjustment; an out-of-period adjustment must be effective inside a closed period.
--   4. ledger_transaction_balanced (constraint trigger, deferred to commit): the transaction has
--      postings, and they sum to zero per asset.
--   Always: ledger_transactions_append_only / _no_truncate (UPDATE, DELETE, TRUNCATE raise).
--
-- The write functions (functions/ledger_post_arrays.sql, functions/ledger_post_one.sql) run as
-- custody_ledger_writer, which triggers 1-4 skip (WHEN current_user <> ...): they take the gate,
-- set recorded_at, judge the period rules and the balance per asset themselves, in set-based
-- statements over the whole request, and tests/ledger checks that both ways refuse the same
-- things. The column CHECKs, the unique idempotency key and the append-only guards apply to them
-- as to anyone.
--
-- Advisory lock namespace 7301 (two-int form):
--   (7301, 1) the ledger write gate (above).
--   (7302, id) / (7303, id) the reversal / closing checks of one original posting
--             (triggers/ledger_postings.sql and ledger_post_arrays).

CREATE OR REPLACE FUNCTION ledger_write_gate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  -- Held until commit; period close and checkpoint watermarks wait for every write in flight.
  PERFORM pg_advisory_xact_lock_shared(7301, 1);
  RETURN NULL;
END
$$;

DROP TRIGGER IF EXISTS ledger_transactions_gate ON ledger_transactions;
CREATE TRIGGER ledger_transactions_gate BEFORE INSERT ON ledger_transactions
  FOR EACH STATEMENT WHEN (current_user <> 'custody_ledger_writer')
  EXECUTE FUNCTION ledger_write_gate();

CREATE OR REPLACE FUNCTION ledger_transactions_before_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  -- Set here, after the write gate is held (the statement trigger above fires first), so that
  -- nothing recorded after a period close can carry a recorded time before it. The period
  -- rules are checked once per statement, below.
  NEW.recorded_at := clock_timestamp();
  RETURN NEW;
END
$$;

DROP TRIGGER IF EXISTS ledger_transactions_before_insert ON ledger_transactions;
CREATE TRIGGER ledger_transactions_before_insert BEFORE INSERT ON ledger_transactions
  FOR EACH ROW WHEN (current_user <> 'custody_ledger_writer')
  EXECUTE FUNCTION ledger_transactions_before_insert();

CREATE OR REPLACE FUNCTION ledger_transactions_after_insert() RETURNS trigger LANGUAGE plpgsql AS $$
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

DROP TRIGGER IF EXISTS ledger_transactions_after_insert ON ledger_transactions;
CREATE TRIGGER ledger_transactions_after_insert AFTER INSERT ON ledger_transactions
  REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT WHEN (current_user <> 'custody_ledger_writer')
  EXECUTE FUNCTION ledger_transactions_after_insert();

CREATE OR REPLACE FUNCTION ledger_transaction_balanced() RETURNS trigger LANGUAGE plpgsql AS $$
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
-- transaction that created it (triggers/ledger_postings.sql), so this sees all of its postings.
DROP TRIGGER IF EXISTS ledger_transaction_balanced ON ledger_transactions;
CREATE CONSTRAINT TRIGGER ledger_transaction_balanced AFTER INSERT ON ledger_transactions
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW WHEN (current_user <> 'custody_ledger_writer')
  EXECUTE FUNCTION ledger_transaction_balanced();

DROP TRIGGER IF EXISTS ledger_transactions_append_only ON ledger_transactions;
CREATE TRIGGER ledger_transactions_append_only BEFORE UPDATE OR DELETE ON ledger_transactions
  FOR EACH ROW EXECUTE FUNCTION ledger_refuse_change();
DROP TRIGGER IF EXISTS ledger_transactions_no_truncate ON ledger_transactions;
CREATE TRIGGER ledger_transactions_no_truncate BEFORE TRUNCATE ON ledger_transactions
  FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_change();
