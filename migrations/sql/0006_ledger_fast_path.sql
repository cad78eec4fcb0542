-- 0006: the ledger's own write path runs as a role the guard triggers skip.
--
-- Every rule that money depends on stays enforced in the database for every writer. What
-- changes is who enforces it for whom:
-- * ledger_post_arrays (the write path of ledger.service, replacing ledger_post_batch, which
--   stays as a JSON front for raw callers) runs as custody_ledger_writer (SECURITY DEFINER; a
--   NOLOGIN role that no login is a member of, except the migration owner, which may alter
--   the schema anyway). It enforces every rule itself, in set-based
--   statements over the whole request: the write gate, the period rules, balance per asset,
--   at least one line per item, each line's account existing in the line's asset, the funds
--   flags and the 128-bit range under the row locks, reversals and closings mirroring and never
--   exceeding their original (under the same per-original locks as the trigger below).
--   Column CHECKs, the money128 domain, the unique idempotency key, the account_balances
--   CHECKs and the append-only triggers apply to it as to anyone.
-- * Every other writer (the application role with raw SQL, the owner) goes through the
--   triggers as before, which now skip custody_ledger_writer (WHEN current_user <> ...).
--   The postings' foreign keys (to ledger_transactions, to accounts (id, asset_id), to the
--   closed or reversed posting) are replaced by checks in the postings trigger.
--
-- Why: a single post cost the server about 2.3x the CPU of a plain transfer function, and on a
-- hot account its lock was held through all of that work. The guards ran per statement or per
-- row on work the function had already judged (the gate, recorded_at, the period check, the
-- posting check, the deferred balance check at commit, four foreign-key checks with their
-- share locks on the parent rows). Measured before/after in bench/RESULTS.md.
--
-- Mixing is covered: a raw posting added to a transaction the function wrote in the same
-- database transaction is checked by ledger_postings_balanced at commit.

DO $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'custody_ledger_writer') THEN
    CREATE ROLE custody_ledger_writer NOLOGIN;
  END IF;
  -- A non-superuser owner must be a member to hand the function over (ALTER ... OWNER TO).
  IF NOT (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) THEN
    EXECUTE format('GRANT custody_ledger_writer TO %I', current_user);
  END IF;
END
$$;

GRANT USAGE ON SCHEMA public TO custody_ledger_writer;
GRANT SELECT, INSERT ON ledger_transactions, ledger_postings TO custody_ledger_writer;
GRANT SELECT, UPDATE ON account_balances TO custody_ledger_writer;
GRANT SELECT ON ledger_periods TO custody_ledger_writer;
GRANT USAGE ON SEQUENCE ledger_transactions_id_seq, ledger_postings_id_seq
  TO custody_ledger_writer;

-- ---------------------------------------------------------------------------------------------
-- The guards skip the writer role.

DROP TRIGGER ledger_transactions_gate ON ledger_transactions;
CREATE TRIGGER ledger_transactions_gate BEFORE INSERT ON ledger_transactions
  FOR EACH STATEMENT WHEN (current_user <> 'custody_ledger_writer')
  EXECUTE FUNCTION ledger_write_gate();

DROP TRIGGER ledger_transactions_before_insert ON ledger_transactions;
CREATE TRIGGER ledger_transactions_before_insert BEFORE INSERT ON ledger_transactions
  FOR EACH ROW WHEN (current_user <> 'custody_ledger_writer')
  EXECUTE FUNCTION ledger_transactions_before_insert();

DROP TRIGGER ledger_transactions_after_insert ON ledger_transactions;
CREATE TRIGGER ledger_transactions_after_insert AFTER INSERT ON ledger_transactions
  REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT WHEN (current_user <> 'custody_ledger_writer')
  EXECUTE FUNCTION ledger_transactions_after_insert();

DROP TRIGGER ledger_transaction_balanced ON ledger_transactions;
CREATE CONSTRAINT TRIGGER ledger_transaction_balanced AFTER INSERT ON ledger_transactions
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW WHEN (current_user <> 'custody_ledger_writer')
  EXECUTE FUNCTION ledger_transaction_balanced();

-- The same check, for the transaction of every posting another writer inserts: a transaction
-- written by ledger_post_batch queues no check of its own, so a posting added to it later in
-- the same database transaction must bring one.
CREATE FUNCTION ledger_postings_balanced() RETURNS trigger LANGUAGE plpgsql AS $$
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
CREATE CONSTRAINT TRIGGER ledger_postings_balanced AFTER INSERT ON ledger_postings
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW WHEN (current_user <> 'custody_ledger_writer')
  EXECUTE FUNCTION ledger_postings_balanced();

-- The postings' foreign keys become checks of the postings trigger (other writers only): the
-- parent rows can never change or go (append-only tables), so a lookup at insert is as strong,
-- and it takes no share lock on the parent rows. The two to the original posting (closes,
-- reverses) were already implied: the trigger refuses a line whose original it cannot find
-- ("does not mirror"), and ledger_post_batch judges such an item 'mismatch'; they still cost
-- two trigger events per posting, NULL or not.
ALTER TABLE ledger_postings DROP CONSTRAINT ledger_postings_transaction_id_fkey;
ALTER TABLE ledger_postings DROP CONSTRAINT ledger_postings_account_id_asset_id_fkey;
ALTER TABLE ledger_postings DROP CONSTRAINT ledger_postings_closes_posting_id_fkey;
ALTER TABLE ledger_postings DROP CONSTRAINT ledger_postings_reverses_posting_id_fkey;

CREATE OR REPLACE FUNCTION ledger_postings_after_insert() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  bad_txn bigint;
  missing_txn bigint;
  has_refs boolean;
  orig record;
  bad record;
BEGIN
  -- Each posting's account exists in the posting's asset (was a composite foreign key).
  SELECT n.account_id, n.asset_id INTO bad
    FROM new_rows n
   WHERE (SELECT a.asset_id FROM accounts a WHERE a.id = n.account_id) IS DISTINCT FROM n.asset_id
   LIMIT 1;
  IF FOUND THEN
    RAISE EXCEPTION 'posting on account % in asset %: no such account in that asset',
      bad.account_id, bad.asset_id USING ERRCODE = 'foreign_key_violation';
  END IF;

  -- A committed transaction is closed: postings can only be written by the database
  -- transaction that wrote their ledger transaction (its row's xmin is our top-level xid). The
  -- subquery per distinct transaction keeps this a primary-key lookup whatever the planner
  -- thinks of the transition table's size. A transaction that does not exist: was a foreign key.
  SELECT min(d.transaction_id) FILTER (WHERE d.txn_xmin IS DISTINCT FROM pg_current_xact_id()::xid),
         min(d.transaction_id) FILTER (WHERE d.txn_xmin IS NULL),
         bool_or(d.refs)
    INTO bad_txn, missing_txn, has_refs
    FROM (SELECT n.transaction_id,
                 bool_or(n.reverses_posting_id IS NOT NULL OR n.closes_posting_id IS NOT NULL)
                   AS refs,
                 (SELECT t.xmin FROM ledger_transactions t WHERE t.id = n.transaction_id)
                   AS txn_xmin
            FROM new_rows n GROUP BY n.transaction_id) d;
  IF missing_txn IS NOT NULL THEN
    RAISE EXCEPTION 'postings name ledger transaction %, which does not exist', missing_txn
      USING ERRCODE = 'foreign_key_violation';
  END IF;
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

DROP TRIGGER ledger_postings_after_insert ON ledger_postings;
CREATE TRIGGER ledger_postings_after_insert AFTER INSERT ON ledger_postings
  REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT WHEN (current_user <> 'custody_ledger_writer')
  EXECUTE FUNCTION ledger_postings_after_insert();

-- ---------------------------------------------------------------------------------------------
-- ledger_post_arrays: the write path, ledger_post_batch of 0001_ledger_post.sql taking its
-- request as arrays (ledger.repository sends them; parsing the JSON cost a single post about
-- 60 us of server CPU), plus the checks the skipped triggers made (balance per asset, lines
-- per item, the line's asset, the per-original locks), and "write first" for single entries
-- as well as batches. ledger_post_batch(jsonb) stays, for raw callers: it parses and calls this.
--
-- Items are given by the i_ arrays (one element per item, all of the same length), their lines
-- by the l_ arrays (all lines, item by item, in order; i_lines[n] of them for item n).

CREATE FUNCTION ledger_post_arrays(
  i_key text[], i_fp text[], i_kind text[], i_ref text[], i_eff timestamptz[],
  i_reason text[], i_source text[], i_rev bigint[], i_oop boolean[], i_meta jsonb[],
  i_lines int[],
  l_acc bigint[], l_asset int[], l_amt numeric[], l_closes bigint[], l_revs bigint[])
RETURNS TABLE (item int, status text, transaction_id bigint)
LANGUAGE plpgsql
-- Runs as custody_ledger_writer, the role the ledger's triggers skip: see the header.
SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp
-- Every statement below takes arrays (never a join against table-sized input), so its generic
-- plan is the right one: plan it once per session instead of re-planning the custom plan
-- PostgreSQL would otherwise choose for each call (planning cost more than executing a post).
SET plan_cache_mode = force_generic_plan
AS $fn$
#variable_conflict use_column
DECLARE
  v_n          int := coalesce(cardinality(i_key), 0);
  v_lines      int := coalesce(cardinality(l_acc), 0);
  -- The item and line number of each line (derived from i_lines).
  l_item       int[];
  l_no         int[];
  l_slot       int[];      -- index of the line's account in the b_ arrays
  v_has_refs   boolean;
  v_unbalanced int;        -- the first item whose lines do not sum to zero in some asset
  v_lock_first boolean;     -- see the balance read below
  v_closed     timestamptz;
  -- Transactions already stored under one of the keys.
  e_key        text[];
  e_id         bigint[];
  e_fp         text[];
  -- The locked balance rows, in account-id order, and what the accepted items do to them.
  b_acc        bigint[];
  b_bal        numeric[];
  b_dnec       boolean[];
  b_cned       boolean[];
  b_asset      int[];
  b_delta      numeric[];
  b_txns       int[];      -- accepted items touching the row (its version increment)
  b_seen       int[];      -- the last accepted item that touched the row
  b_touched    bigint[] := '{}';  -- accounts of accepted items, in account-id order
  b_read       numeric[];  -- write first: the balances as read without the lock
  b_locked     bigint[];
  -- Remaining amount (absolute) of original postings that lines reverse or close.
  o_key        text[] := '{}';
  o_left       numeric[] := '{}';
  o_acc        bigint[] := '{}';
  o_sign       int[] := '{}';
  o_txn        bigint[] := '{}';
  -- What the item being judged has consumed of the originals (given back if it is refused).
  t_slot       int[];
  t_amt        numeric[];
  -- Verdicts.
  v_status     text[];
  v_txid       bigint[];
  v_dup_of     int[];      -- an item replaying an earlier item of this batch
  v_new_id     bigint[];   -- id of the transaction an accepted item creates
  v_wanted     int := 0;
  v_inserted   int;
  v_verdict    text;
  v_kind       text;
  v_ns         int;
  v_pid        bigint;
  v_first      int;
  v_last       int := 0;
  v_i          int;
  v_j          int;
  v_k          int;
  v_limit      numeric := 170141183460469231731687303715884105728;
BEGIN
  -- The write gate first (shared, until commit): periods cannot be closed under us, so the
  -- closed period read below stays true until we commit.
  PERFORM pg_advisory_xact_lock_shared(7301, 1);

  -- The request's shape: what the JSON form's parser guaranteed by construction.
  IF v_n = 0 THEN
    RETURN;
  END IF;
  IF cardinality(i_fp) IS DISTINCT FROM v_n OR cardinality(i_kind) IS DISTINCT FROM v_n
     OR cardinality(i_ref) IS DISTINCT FROM v_n OR cardinality(i_eff) IS DISTINCT FROM v_n
     OR cardinality(i_reason) IS DISTINCT FROM v_n OR cardinality(i_source) IS DISTINCT FROM v_n
     OR cardinality(i_rev) IS DISTINCT FROM v_n OR cardinality(i_oop) IS DISTINCT FROM v_n
     OR cardinality(i_meta) IS DISTINCT FROM v_n OR cardinality(i_lines) IS DISTINCT FROM v_n
     OR cardinality(l_asset) IS DISTINCT FROM v_lines
     OR cardinality(l_amt) IS DISTINCT FROM v_lines
     OR cardinality(l_closes) IS DISTINCT FROM v_lines
     OR cardinality(l_revs) IS DISTINCT FROM v_lines
     OR array_position(i_oop, NULL) IS NOT NULL OR array_position(i_lines, NULL) IS NOT NULL THEN
    RAISE EXCEPTION 'ledger_post_arrays: item arrays (and line arrays) must have one non-null '
      'element per item (per line)' USING ERRCODE = 'invalid_parameter_value';
  END IF;
  l_item := array_fill(NULL::int, ARRAY[v_lines]);
  l_no := array_fill(NULL::int, ARRAY[v_lines]);
  FOR v_i IN 1 .. v_n LOOP
    IF i_lines[v_i] < 1 THEN
      -- What the triggers check for other writers (they skip this function, see the header).
      RAISE EXCEPTION 'ledger_post_batch: item % has no lines', v_i
        USING ERRCODE = 'check_violation';
    END IF;
    FOR v_j IN 1 .. i_lines[v_i] LOOP
      v_last := v_last + 1;
      EXIT WHEN v_last > v_lines;
      l_item[v_last] := v_i;
      l_no[v_last] := v_j;
    END LOOP;
  END LOOP;
  IF v_last <> v_lines THEN
    RAISE EXCEPTION 'ledger_post_arrays: the items have % lines, the line arrays %', v_last,
      v_lines USING ERRCODE = 'invalid_parameter_value';
  END IF;
  v_last := 0;

  -- One statement: the closed period, the transactions already stored under these keys (an
  -- index lookup: the keys are an array, see the header), whether any line reverses or closes,
  -- and the first item that does not balance per asset (checked by a trigger for others).
  -- The key lookup needs no lock: if another request commits one of our keys after this read,
  -- the INSERT below skips it (ON CONFLICT) and we raise 40001, so the retry sees it.
  SELECT (SELECT max(p.ends_at) FROM ledger_periods p), e.keys, e.ids, e.fps,
         (SELECT coalesce(bool_or(x.r IS NOT NULL OR x.c IS NOT NULL), false)
            FROM unnest(l_revs, l_closes) x(r, c)),
         (SELECT min(u.n) FROM (SELECT x.n FROM unnest(l_item, l_asset, l_amt) x(n, s, m)
                                 GROUP BY x.n, x.s HAVING sum(x.m) <> 0) u)
    INTO v_closed, e_key, e_id, e_fp, v_has_refs, v_unbalanced
    FROM (SELECT array_agg(t.idempotency_key) AS keys, array_agg(t.id) AS ids,
                 array_agg(t.fingerprint) AS fps
            FROM ledger_transactions t
           WHERE t.idempotency_key = ANY (i_key)) e;
  IF v_unbalanced IS NOT NULL THEN
    RAISE EXCEPTION 'ledger_post_batch: item % does not balance per asset', v_unbalanced
      USING ERRCODE = 'check_violation';
  END IF;

  -- The balance rows involved, in account-id order. Locking them (FOR UPDATE, in that order:
  -- two writers never deadlock) makes every other writer of these accounts wait until we
  -- commit, so a batch takes them as late as it can:
  -- * "write first" (batches): the rows are read here without a lock, the verdicts are computed
  --   and the transactions and postings are written, and only then are the rows locked, read
  --   again and, if another writer moved them meanwhile, the funds verdicts judged again under
  --   the lock (a verdict that would change raises 40001 and the whole call is retried). The
  --   inserts then run outside the locks. Single entries too, since 0006: with the postings'
  --   foreign keys gone (see the header) concurrent writers no longer pile share locks onto the
  --   hot account's row while they insert.
  -- * "lock first": the rows are locked here, when a line reverses or closes a posting: what is
  --   left of an original is read after the locks (a concurrent reversal of the same original
  --   touches the same account, so it has committed and is counted, or waits for us).
  v_lock_first := v_has_refs;
  IF v_lock_first THEN
    SELECT array_agg(b.account_id ORDER BY b.account_id),
           array_agg(b.balance ORDER BY b.account_id),
           array_agg(b.debits_must_not_exceed_credits ORDER BY b.account_id),
           array_agg(b.credits_must_not_exceed_debits ORDER BY b.account_id),
           array_agg(b.asset_id ORDER BY b.account_id)
      INTO b_acc, b_bal, b_dnec, b_cned, b_asset
      FROM (SELECT ab.account_id, ab.balance, ab.debits_must_not_exceed_credits,
                   ab.credits_must_not_exceed_debits, ab.asset_id
              FROM account_balances ab
             WHERE ab.account_id = ANY (l_acc)
             ORDER BY ab.account_id
               FOR UPDATE) b;
  ELSE
    SELECT array_agg(ab.account_id ORDER BY ab.account_id),
           array_agg(ab.balance ORDER BY ab.account_id),
           array_agg(ab.debits_must_not_exceed_credits ORDER BY ab.account_id),
           array_agg(ab.credits_must_not_exceed_debits ORDER BY ab.account_id),
           array_agg(ab.asset_id ORDER BY ab.account_id)
      INTO b_acc, b_bal, b_dnec, b_cned, b_asset
      FROM account_balances ab
     WHERE ab.account_id = ANY (l_acc);
    b_read := b_bal;
  END IF;
  l_slot := array_fill(NULL::int, ARRAY[coalesce(cardinality(l_acc), 0)]);
  FOR v_j IN 1 .. coalesce(cardinality(l_acc), 0) LOOP
    -- b_acc is sorted and distinct: width_bucket is a binary search returning the position of
    -- an element (0, or a neighbour, for an id that is not there).
    l_slot[v_j] := width_bucket(l_acc[v_j], b_acc);
    IF l_slot[v_j] = 0 OR b_acc[l_slot[v_j]] <> l_acc[v_j] THEN
      RAISE EXCEPTION 'ledger_post_batch: account % has no balance row', l_acc[v_j]
        USING ERRCODE = 'foreign_key_violation', HINT = 'unknown account, or run rebuild-balances';
    END IF;
    -- The balance row's asset is its account's (a foreign key on account_balances).
    IF b_asset[l_slot[v_j]] <> l_asset[v_j] THEN
      RAISE EXCEPTION 'ledger_post_batch: account % is not in asset %', l_acc[v_j], l_asset[v_j]
        USING ERRCODE = 'foreign_key_violation';
    END IF;
  END LOOP;

  -- Originals that lines reverse ('r') or close ('c'), with what is left of them. Read after the
  -- balance locks: a concurrent reversal of the same original touches the same account, so it
  -- has committed (and is counted here) or waits for us. Writers that do not go through this
  -- function (raw INSERTs, checked by ledger_postings_after_insert) do not lock balance rows;
  -- they lock each original they touch, in this order, and so do we.
  IF v_has_refs THEN
    FOR v_ns, v_pid IN
      SELECT DISTINCT x.ns, x.pid
        FROM unnest(l_revs, l_closes) u(r, c),
             LATERAL (VALUES (7302, u.r), (7303, u.c)) x(ns, pid)
       WHERE x.pid IS NOT NULL
       ORDER BY x.pid, x.ns
    LOOP
      PERFORM pg_advisory_xact_lock(v_ns, (v_pid % 2147483647)::int);
    END LOOP;
    SELECT coalesce(array_agg(w.kind || w.pid::text), '{}'),
           coalesce(array_agg(abs(p.amount) - abs(p.used)), '{}'),
           coalesce(array_agg(p.account_id), '{}'), coalesce(array_agg(sign(p.amount)::int), '{}'),
           coalesce(array_agg(p.transaction_id), '{}')
      INTO o_key, o_left, o_acc, o_sign, o_txn
      FROM (SELECT DISTINCT x.kind, x.pid
              FROM unnest(l_revs, l_closes) u(r, c),
                   LATERAL (VALUES ('r', u.r), ('c', u.c)) x(kind, pid)
             WHERE x.pid IS NOT NULL) w
      -- OFFSET 0 keeps this a primary-key lookup per original, whatever the table sizes.
      JOIN LATERAL (SELECT q.amount, q.account_id, q.transaction_id,
                           CASE w.kind
                             WHEN 'r' THEN (SELECT coalesce(sum(z.amount), 0) FROM ledger_postings z
                                             WHERE z.reverses_posting_id = q.id)
                             ELSE (SELECT coalesce(sum(z.amount), 0) FROM ledger_postings z
                                    WHERE z.closes_posting_id = q.id)
                           END AS used
                      FROM ledger_postings q WHERE q.id = w.pid OFFSET 0) p ON true;
  END IF;

  v_status := array_fill(NULL::text, ARRAY[v_n]);
  v_txid := array_fill(NULL::bigint, ARRAY[v_n]);
  v_dup_of := array_fill(NULL::int, ARRAY[v_n]);
  v_new_id := array_fill(NULL::bigint, ARRAY[v_n]);
  b_delta := array_fill(0::numeric, ARRAY[coalesce(cardinality(b_acc), 0)]);
  b_txns := array_fill(0, ARRAY[coalesce(cardinality(b_acc), 0)]);
  b_seen := array_fill(0, ARRAY[coalesce(cardinality(b_acc), 0)]);

  FOR v_i IN 1 .. v_n LOOP
    v_first := v_last + 1;
    v_last := v_last + i_lines[v_i];
    v_verdict := NULL;
    t_slot := '{}';
    t_amt := '{}';

    -- Idempotency: a stored transaction with this key ...
    v_k := array_position(e_key, i_key[v_i]);
    IF v_k IS NOT NULL THEN
      v_txid[v_i] := e_id[v_k];
      v_status[v_i] := CASE WHEN e_fp[v_k] = i_fp[v_i] THEN 'replayed' ELSE 'conflict' END;
      CONTINUE;
    END IF;
    -- ... or an item of this batch, posted above (only when the key repeats: rare).
    IF array_position(i_key, i_key[v_i]) < v_i THEN
      FOR v_k IN 1 .. v_i - 1 LOOP
        CONTINUE WHEN i_key[v_k] <> i_key[v_i] OR v_status[v_k] <> 'posted';
        IF i_fp[v_k] = i_fp[v_i] THEN
          v_status[v_i] := 'replayed';
          v_dup_of[v_i] := v_k;
        ELSE
          v_status[v_i] := 'conflict';
        END IF;
      END LOOP;
      CONTINUE WHEN v_status[v_i] IS NOT NULL;
    END IF;

    IF i_oop[v_i] AND (v_closed IS NULL OR i_eff[v_i] >= v_closed) THEN
      v_verdict := 'not_out_of_period';
    ELSIF NOT i_oop[v_i] AND v_closed IS NOT NULL AND i_eff[v_i] < v_closed THEN
      v_verdict := 'period_closed';
    END IF;

    -- Reversals and closings: mirror the original and stay within what is left of it.
    IF v_verdict IS NULL AND v_has_refs THEN
      FOR v_j IN v_first .. v_last LOOP
        FOREACH v_kind IN ARRAY ARRAY['r', 'c'] LOOP
          IF v_kind = 'r' THEN
            v_pid := l_revs[v_j];
          ELSE
            v_pid := l_closes[v_j];
          END IF;
          CONTINUE WHEN v_pid IS NULL;
          v_k := array_position(o_key, v_kind || v_pid::text);
          IF v_k IS NULL OR o_acc[v_k] <> l_acc[v_j] OR o_sign[v_k] = sign(l_amt[v_j])
             OR (v_kind = 'r' AND o_txn[v_k] IS DISTINCT FROM i_rev[v_i]) THEN
            v_verdict := 'mismatch';
          ELSIF abs(l_amt[v_j]) > o_left[v_k] THEN
            v_verdict := 'reversal_exceeds';
          ELSE
            -- Consumed at once, so that two lines of one item against the same original are
            -- judged together; given back below if the item is refused.
            o_left[v_k] := o_left[v_k] - abs(l_amt[v_j]);
            t_slot := t_slot || v_k;
            t_amt := t_amt || abs(l_amt[v_j]);
          END IF;
        END LOOP;
      END LOOP;
    END IF;

    -- Funds: apply the item's lines, check the flags and the range, undo if refused.
    IF v_verdict IS NULL THEN
      FOR v_j IN v_first .. v_last LOOP
        b_bal[l_slot[v_j]] := b_bal[l_slot[v_j]] + l_amt[v_j];
      END LOOP;
      FOR v_j IN v_first .. v_last LOOP
        v_k := l_slot[v_j];
        IF abs(b_bal[v_k]) >= v_limit THEN
          v_verdict := 'balance_out_of_range';
        ELSIF (b_dnec[v_k] AND b_bal[v_k] > 0) OR (b_cned[v_k] AND b_bal[v_k] < 0) THEN
          v_verdict := coalesce(v_verdict, 'insufficient_funds');
        END IF;
      END LOOP;
      IF v_verdict IS NOT NULL THEN
        FOR v_j IN v_first .. v_last LOOP
          b_bal[l_slot[v_j]] := b_bal[l_slot[v_j]] - l_amt[v_j];
        END LOOP;
      END IF;
    END IF;

    IF v_verdict IS NOT NULL THEN
      FOR v_k IN 1 .. coalesce(cardinality(t_slot), 0) LOOP
        o_left[t_slot[v_k]] := o_left[t_slot[v_k]] + t_amt[v_k];
      END LOOP;
      v_status[v_i] := v_verdict;
      CONTINUE;
    END IF;

    -- Accepted: record what it does to each balance row (what it reverses or closes is
    -- consumed already, above, so later items in the batch see it).
    FOR v_j IN v_first .. v_last LOOP
      v_k := l_slot[v_j];
      b_delta[v_k] := b_delta[v_k] + l_amt[v_j];
      IF b_seen[v_k] <> v_i THEN
        b_txns[v_k] := b_txns[v_k] + 1;
        b_seen[v_k] := v_i;
      END IF;
    END LOOP;
    v_status[v_i] := 'posted';
    -- Taking the id here lets the postings below name their transaction directly (no join of
    -- the INSERT's RETURNING back to the items).
    v_new_id[v_i] := nextval('ledger_transactions_id_seq');
    v_wanted := v_wanted + 1;
  END LOOP;
  FOR v_k IN 1 .. coalesce(cardinality(b_acc), 0) LOOP
    IF b_txns[v_k] > 0 THEN
      b_touched := b_touched || b_acc[v_k];
    END IF;
  END LOOP;

  IF v_wanted > 0 THEN
    INSERT INTO ledger_transactions AS t (id, idempotency_key, fingerprint, kind, reference,
                                         effective_at, reason, source, reverses_transaction_id,
                                         out_of_period, metadata)
    SELECT u.id, u.key, u.fp, u.kind, u.ref, u.eff, u.reason, u.source, u.rev, u.oop, u.meta
      FROM unnest(v_new_id, i_key, i_fp, i_kind, i_ref, i_eff, i_reason, i_source, i_rev, i_oop,
                  i_meta) AS u(id, key, fp, kind, ref, eff, reason, source, rev, oop, meta)
     WHERE u.id IS NOT NULL
     ORDER BY u.id
    ON CONFLICT (idempotency_key) DO NOTHING;
    GET DIAGNOSTICS v_inserted = ROW_COUNT;
    IF v_inserted <> v_wanted THEN
      -- Only reachable when a concurrent request committed one of our keys after we looked:
      -- redo the whole batch so that its verdict (replay or conflict) is computed properly.
      RAISE EXCEPTION 'ledger_post_batch: idempotency key raced' USING ERRCODE = '40001';
    END IF;

    -- The postings of the accepted items, in one statement (the triggers run once per
    -- statement, see 0001_ledger.sql; the foreign keys once per row). v_new_id[item] names a
    -- line's transaction: no join of the INSERT's RETURNING back to the items.
    INSERT INTO ledger_postings (transaction_id, line_no, account_id, asset_id, amount,
                                 closes_posting_id, reverses_posting_id)
    SELECT v_new_id[l.n], l.no, l.a, l.s, l.m, l.c, l.r
      FROM unnest(l_item, l_no, l_acc, l_asset, l_amt, l_closes, l_revs) WITH ORDINALITY
           AS l(n, no, a, s, m, c, r, j)
     WHERE v_new_id[l.n] IS NOT NULL
     ORDER BY l.j;
  END IF;

  IF b_read IS NOT NULL AND v_wanted > 0 THEN
    -- Write first: lock the rows now (same order as above) and read them under the lock. If
    -- another writer moved one since our read, judge the funds again, in order, from the locked
    -- balances: every verdict must stay what it was, else nothing we wrote may stand.
    SELECT array_agg(b.account_id ORDER BY b.account_id), array_agg(b.balance ORDER BY b.account_id)
      INTO b_locked, b_bal
      FROM (SELECT ab.account_id, ab.balance FROM account_balances ab
             WHERE ab.account_id = ANY (b_acc)
             ORDER BY ab.account_id
               FOR UPDATE) b;
    IF b_locked IS DISTINCT FROM b_acc THEN
      RAISE EXCEPTION 'ledger_post_batch: balance rows changed under us' USING ERRCODE = '40001';
    END IF;
    IF b_bal IS DISTINCT FROM b_read THEN
      v_last := 0;
      FOR v_i IN 1 .. v_n LOOP
        v_first := v_last + 1;
        v_last := v_last + i_lines[v_i];
        CONTINUE WHEN v_status[v_i] NOT IN ('posted', 'insufficient_funds', 'balance_out_of_range');
        v_verdict := NULL;
        FOR v_j IN v_first .. v_last LOOP
          b_bal[l_slot[v_j]] := b_bal[l_slot[v_j]] + l_amt[v_j];
        END LOOP;
        FOR v_j IN v_first .. v_last LOOP
          v_k := l_slot[v_j];
          IF abs(b_bal[v_k]) >= v_limit THEN
            v_verdict := 'balance_out_of_range';
          ELSIF (b_dnec[v_k] AND b_bal[v_k] > 0) OR (b_cned[v_k] AND b_bal[v_k] < 0) THEN
            v_verdict := coalesce(v_verdict, 'insufficient_funds');
          END IF;
        END LOOP;
        IF coalesce(v_verdict, 'posted') <> v_status[v_i] THEN
          RAISE EXCEPTION 'ledger_post_batch: balances moved between read and lock'
            USING ERRCODE = '40001';
        END IF;
        IF v_verdict IS NOT NULL THEN
          FOR v_j IN v_first .. v_last LOOP
            b_bal[l_slot[v_j]] := b_bal[l_slot[v_j]] - l_amt[v_j];
          END LOOP;
        END IF;
      END LOOP;
    END IF;
  END IF;

  IF v_wanted > 0 THEN
    -- The balance rows, locked above; width_bucket (binary search in the sorted b_acc) finds a
    -- row's slot without a join.
    UPDATE account_balances b
       SET balance = b.balance + b_delta[width_bucket(b.account_id, b_acc)],
           version = b.version + b_txns[width_bucket(b.account_id, b_acc)],
           updated_at = now()
     WHERE b.account_id = ANY (b_touched);
  END IF;

  FOR v_i IN 1 .. v_n LOOP
    item := v_i;
    status := v_status[v_i];
    transaction_id := coalesce(v_txid[v_i], v_new_id[v_i], v_new_id[v_dup_of[v_i]]);
    RETURN NEXT;
  END LOOP;
END
$fn$;

ALTER FUNCTION ledger_post_arrays(text[], text[], text[], text[], timestamptz[], text[], text[],
  bigint[], boolean[], jsonb[], int[], bigint[], int[], numeric[], bigint[], bigint[])
  OWNER TO custody_ledger_writer;
REVOKE ALL ON FUNCTION ledger_post_arrays(text[], text[], text[], text[], timestamptz[], text[],
  text[], bigint[], boolean[], jsonb[], int[], bigint[], int[], numeric[], bigint[], bigint[])
  FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ledger_post_arrays(text[], text[], text[], text[], timestamptz[],
  text[], text[], bigint[], boolean[], jsonb[], int[], bigint[], int[], numeric[], bigint[],
  bigint[]) TO custody_app;

-- The JSON form, for raw callers (see 0001_ledger_post.sql for its input): parse, then the
-- above. It runs as its caller; the work and the checks happen in ledger_post_arrays.
CREATE OR REPLACE FUNCTION ledger_post_batch(p_items jsonb)
RETURNS TABLE (item int, status text, transaction_id bigint)
LANGUAGE plpgsql
-- PL/pgSQL rather than SQL: its statements' plans are cached per session (a SQL function's
-- would be planned at every call).
SET plan_cache_mode = force_generic_plan
AS $fn$
DECLARE
  i_key text[]; i_fp text[]; i_kind text[]; i_ref text[]; i_eff timestamptz[];
  i_reason text[]; i_source text[]; i_rev bigint[]; i_oop boolean[]; i_meta jsonb[];
  i_lines int[]; l_acc bigint[]; l_asset int[]; l_amt numeric[]; l_closes bigint[];
  l_revs bigint[];
BEGIN
  WITH items AS (
    SELECT x.*
      FROM ROWS FROM (jsonb_to_recordset(p_items) AS (key text, fp text, kind text, ref text,
                        eff timestamptz, reason text, source text, rev bigint, oop boolean,
                        meta jsonb, lines jsonb)) WITH ORDINALITY
           AS x(key, fp, kind, ref, eff, reason, source, rev, oop, meta, lines, n)
  ), lines AS (
    SELECT it.n, l.*
      FROM items it,
           ROWS FROM (jsonb_to_recordset(it.lines) AS (a bigint, s int, m numeric, c bigint,
                                                         r bigint)) WITH ORDINALITY
           AS l(a, s, m, c, r, no)
  )
  SELECT i.*, l.*
    INTO i_key, i_fp, i_kind, i_ref, i_eff, i_reason, i_source, i_rev, i_oop, i_meta, i_lines,
         l_acc, l_asset, l_amt, l_closes, l_revs
    FROM (SELECT array_agg(x.key ORDER BY x.n), array_agg(x.fp ORDER BY x.n),
                 array_agg(x.kind ORDER BY x.n), array_agg(x.ref ORDER BY x.n),
                 array_agg(x.eff ORDER BY x.n), array_agg(x.reason ORDER BY x.n),
                 array_agg(x.source ORDER BY x.n), array_agg(x.rev ORDER BY x.n),
                 array_agg(coalesce(x.oop, false) ORDER BY x.n),
                 array_agg(coalesce(x.meta, '{}'::jsonb) ORDER BY x.n),
                 array_agg(coalesce(jsonb_array_length(x.lines), 0) ORDER BY x.n)
            FROM items x) i,
         (SELECT coalesce(array_agg(y.a ORDER BY y.n, y.no), '{}'),
                 coalesce(array_agg(y.s ORDER BY y.n, y.no), '{}'),
                 coalesce(array_agg(y.m ORDER BY y.n, y.no), '{}'),
                 coalesce(array_agg(y.c ORDER BY y.n, y.no), '{}'),
                 coalesce(array_agg(y.r ORDER BY y.n, y.no), '{}')
            FROM lines y) l;
  RETURN QUERY
    SELECT r.item, r.status, r.transaction_id
      FROM ledger_post_arrays(i_key, i_fp, i_kind, i_ref, i_eff, i_reason, i_source, i_rev,
                              i_oop, i_meta, i_lines, l_acc, l_asset, l_amt, l_closes,
                              l_revs) r;
END
$fn$;
