-- ledger_postings: what the database does when a posting is written.
--
-- For every writer, the ledger's write functions included (issue 14):
--   0. ledger_postings_account_and_transaction (AFTER INSERT, per statement, over all its rows,
--      no WHEN clause): each posting's account exists in the posting's asset, and its ledger
--      transaction exists (23503). This is the database's own check of the write functions:
--      they run as custody_ledger_writer, which skips 1 and 2 below, and check these rules
--      themselves from the arrays they were given; a bug in how they read those arrays
--      (revision 0010 records one: arrays not numbered from 1 let a posting of one asset land
--      on an account of another) would otherwise reach the table unchecked. The function cannot
--      skip this trigger: its role does not own the table (no ALTER TABLE ... DISABLE TRIGGER)
--      and may not set session_replication_role; only a superuser (or the owner) can, and what
--      they write that way is found by `custody verify` (ledger/integrity.py). It takes no row
--      lock on the parents, as a foreign key would (FOR KEY SHARE on the one hot custody
--      account by every concurrent writer: multixacts, which revision 0006 measured), and is
--      as strong for these parents: accounts and ledger transactions are append-only (their
--      triggers refuse UPDATE, DELETE and TRUNCATE), so a parent seen at insert stays. Its
--      cost on the write path: bench/ledger_bench.py --posting-checks.
--      Named to fire first (triggers of one event fire in name order): a posting naming no
--      transaction is refused here as a missing parent, before 1 looks at that transaction.
--
-- For every other writer (the application role with raw SQL, the owner):
--   1. ledger_postings_after_insert (AFTER INSERT, per statement, over all its rows):
--      - its ledger transaction was written by this same top-level database transaction (its
--        row's xmin is ours): a committed transaction is closed, and a row written in a
--        subtransaction is refused. That INSERT took the write gate
--        (triggers/ledger_transactions.sql), so every posting is written with the gate held;
--      - reversals and closings: under a per-original advisory lock (7302 / 7303, taken in
--        posting-id order so that two writers never deadlock), each line mirrors its original
--        (same account, opposite sign, the reversed transaction's posting) and all lines
--        together never take more than the original.
--   2. ledger_postings_balanced (constraint trigger, deferred to commit): the posting's
--      transaction sums to zero per asset. A transaction written by a write function queues no
--      check of its own (it judged the balance itself), so a raw posting added to it later in
--      the same database transaction brings this one.
--   Always: ledger_postings_append_only / _no_truncate (UPDATE, DELETE, TRUNCATE raise), the
--   column CHECKs (amount <> 0, line_no >= 1) and the money128 domain (integers, |x| < 2^127).
--
-- The write functions run as custody_ledger_writer, which 1 and 2 skip: they check the same
-- rules themselves (see triggers/ledger_transactions.sql). The foreign keys of this table were
-- replaced by checks at insert (revision 0006): the account and transaction ones by 0 (for
-- every writer since revision 0019; before it, for the other writers only), the reversed and
-- closed postings' by 1 (lookups at insert are as strong for append-only parents, and take no
-- share lock on the parent rows).

CREATE OR REPLACE FUNCTION ledger_postings_account_and_transaction() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  bad record;
  account_asset int;
BEGIN
  -- One primary-key lookup per posting in accounts and in ledger_transactions (scalar
  -- subqueries, so that a plan cached while the tables were small never becomes a scan). Only
  -- the two in WHERE: each subquery in the select list would be set up again on every call
  -- (measured: a single post's two-row INSERT paid about twice as much with four).
  SELECT n.account_id, n.asset_id, n.transaction_id INTO bad
    FROM new_rows n
   WHERE (SELECT a.asset_id FROM accounts a WHERE a.id = n.account_id) IS DISTINCT FROM n.asset_id
      OR (SELECT t.id FROM ledger_transactions t WHERE t.id = n.transaction_id) IS NULL
   LIMIT 1;
  IF NOT FOUND THEN
    RETURN NULL;
  END IF;
  -- Refused: say why, for that posting.
  IF NOT EXISTS (SELECT 1 FROM ledger_transactions t WHERE t.id = bad.transaction_id) THEN
    RAISE EXCEPTION 'postings name ledger transaction %, which does not exist', bad.transaction_id
      USING ERRCODE = 'foreign_key_violation';
  END IF;
  SELECT a.asset_id INTO account_asset FROM accounts a WHERE a.id = bad.account_id;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'posting on account %, which does not exist', bad.account_id
      USING ERRCODE = 'foreign_key_violation';
  END IF;
  RAISE EXCEPTION 'posting on account % in asset %: the account is in asset %', bad.account_id,
    bad.asset_id, account_asset USING ERRCODE = 'foreign_key_violation';
END
$$;

DROP TRIGGER IF EXISTS ledger_postings_account_and_transaction ON ledger_postings;
CREATE TRIGGER ledger_postings_account_and_transaction AFTER INSERT ON ledger_postings
  REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION ledger_postings_account_and_transaction();

CREATE OR REPLACE FUNCTION ledger_postings_after_insert() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  bad_txn bigint;
  has_refs boolean;
  orig record;
  bad record;
BEGIN
  -- A committed transaction is closed: postings can only be written by the database
  -- transaction that wrote their ledger transaction (its row's xmin is our top-level xid). The
  -- subquery per distinct transaction keeps this a primary-key lookup whatever the planner
  -- thinks of the transition table's size. (That each posting's account exists in its asset
  -- and its transaction exists, ledger_postings_account_and_transaction checked, above.)
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

DROP TRIGGER IF EXISTS ledger_postings_after_insert ON ledger_postings;
CREATE TRIGGER ledger_postings_after_insert AFTER INSERT ON ledger_postings
  REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT WHEN (current_user <> 'custody_ledger_writer')
  EXECUTE FUNCTION ledger_postings_after_insert();

CREATE OR REPLACE FUNCTION ledger_postings_balanced() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE bad int;
BEGIN
  SELECT min(g.asset_id) FILTER (WHERE g.total <> 0) INTO bad
    FROM (SELECT p.asset_id, sum(p.amount) AS total
            FROM ledger_postings p WHERE p.transaction_id = NEW.transaction_id
           GROUP BY p.asset_id) g;
  IF bad IS NOT NULL THEN
    RAISE EXCEPTION 'ledger transaction % does not balance in asset %', NEW.transaction_id, bad
      USING ERRCODE = 'check_violation';
  END IF;
  RETURN NULL;
END
$$;

DROP TRIGGER IF EXISTS ledger_postings_balanced ON ledger_postings;
CREATE CONSTRAINT TRIGGER ledger_postings_balanced AFTER INSERT ON ledger_postings
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW WHEN (current_user <> 'custody_ledger_writer')
  EXECUTE FUNCTION ledger_postings_balanced();

DROP TRIGGER IF EXISTS ledger_postings_append_only ON ledger_postings;
CREATE TRIGGER ledger_postings_append_only BEFORE UPDATE OR DELETE ON ledger_postings
  FOR EACH ROW EXECUTE FUNCTION ledger_refuse_change();
DROP TRIGGER IF EXISTS ledger_postings_no_truncate ON ledger_postings;
CREATE TRIGGER ledger_postings_no_truncate BEFORE TRUNCATE ON ledger_postings
  FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_change();
