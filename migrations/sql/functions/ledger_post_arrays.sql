-- ledger_post_arrays: the ledger's write path for batches and for every entry that reverses or
-- closes a posting (ledger.repository sends single plain entries to ledger_post_one instead).
-- It posts a batch of entries in a few set-based statements and returns one row per item:
-- (item, status, transaction_id), with status
--   'posted'             written now (transaction_id: the new transaction);
--   'replayed'           a transaction is stored under the key with the same fingerprint (its id;
--                        also an item repeating an earlier item of the same batch);
--   'conflict'           a transaction is stored under the key with another fingerprint (its id);
--   'period_closed'      effective inside a closed period, and not an out-of-period adjustment;
--   'not_out_of_period'  flagged out-of-period, but not effective inside a closed period;
--   'insufficient_funds' a funds flag would be broken; 'balance_out_of_range' |balance| >= 2^127;
--   'mismatch'           a reversal or closing line does not mirror its original, or takes more
--                        than is left of it.
-- Refused items write nothing; the others are written. Malformed requests raise: 22023 (array
-- shapes, arrays not one-dimensional from 1, a NULL key, fingerprint, effective time, flag,
-- account, asset or amount), 23514 (an item with no lines, or not balanced per
-- asset), 23503 (unknown account, account not in the line's asset). 40001 when a concurrent
-- writer took one of the keys or moved a balance so that a verdict would change: the caller
-- retries the whole call, and the retry judges again.
--
-- Items are given by the i_ arrays (one element per item, all of the same length), their lines
-- by the l_ arrays (all lines, item by item, in order; i_lines[n] of them for item n).
--
-- It runs as custody_ledger_writer (SECURITY DEFINER), the role that the ledger's guard triggers
-- skip (triggers/ledger_transactions.sql, triggers/ledger_postings.sql), and enforces what they
-- enforce for everyone else: the write gate, the period rules, balance per asset, at least one
-- line per item, each line's account existing in the line's asset, the funds flags and the
-- 128-bit range under the balance rows' locks (taken in account-id order), reversals and closings
-- mirroring and never exceeding their original (under the same per-original locks as the
-- trigger). The column CHECKs, the money128 domain, the unique idempotency key, the balance rows'
-- CHECKs and the append-only triggers apply to it as to anyone, and so does the postings' check
-- of each posting's account, asset and transaction (ledger_postings_account_and_transaction in
-- triggers/ledger_postings.sql): what this function checks of those from its arrays, the
-- database checks again on the rows it writes. custody_ledger_writer is a
-- NOLOGIN role that no login is a member of (except a non-superuser migration owner, which may
-- alter the schema anyway). tests/ledger/test_post_paths.py holds the cases that it and
-- ledger_post_one must judge alike.

CREATE OR REPLACE FUNCTION ledger_post_arrays(
  i_key text[], i_fp text[], i_kind text[], i_ref text[], i_eff timestamptz[],
  i_reason text[], i_source text[], i_rev bigint[], i_oop boolean[], i_meta jsonb[],
  i_lines int[],
  l_acc bigint[], l_asset int[], l_amt numeric[], l_closes bigint[], l_revs bigint[])
RETURNS TABLE (item int, status text, transaction_id bigint)
LANGUAGE plpgsql
-- Runs as custody_ledger_writer, the role the ledger's triggers skip (see above).
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
  -- Per item: the transaction already stored under its key (id, fingerprint; NULL: none),
  -- and the first item of the batch with the same key (itself unless the key repeats).
  e_id         bigint[];
  e_fp         text[];
  i_first      int[];
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
  -- Read by position below, and unnested elsewhere: both must see the same lines.
  IF NOT (ledger_array_ok(i_key) AND ledger_array_ok(i_fp) AND ledger_array_ok(i_kind)
          AND ledger_array_ok(i_ref) AND ledger_array_ok(i_eff) AND ledger_array_ok(i_reason)
          AND ledger_array_ok(i_source) AND ledger_array_ok(i_rev) AND ledger_array_ok(i_oop)
          AND ledger_array_ok(i_meta) AND ledger_array_ok(i_lines) AND ledger_array_ok(l_acc)
          AND ledger_array_ok(l_asset) AND ledger_array_ok(l_amt) AND ledger_array_ok(l_closes)
          AND ledger_array_ok(l_revs)) THEN
    RAISE EXCEPTION 'ledger_post_arrays: every array must be one-dimensional and numbered from 1'
      USING ERRCODE = 'invalid_parameter_value';
  END IF;

  -- The write gate (shared, until commit): periods cannot be closed under us, so the closed
  -- period read below stays true until we commit.
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
     OR array_position(i_key, NULL) IS NOT NULL OR array_position(i_fp, NULL) IS NOT NULL
     OR array_position(i_eff, NULL) IS NOT NULL OR array_position(i_oop, NULL) IS NOT NULL
     OR array_position(i_lines, NULL) IS NOT NULL OR array_position(l_acc, NULL) IS NOT NULL
     OR array_position(l_asset, NULL) IS NOT NULL OR array_position(l_amt, NULL) IS NOT NULL THEN
    RAISE EXCEPTION 'ledger_post_arrays: item arrays (and line arrays) must have one non-null '
      'element per item (per line)' USING ERRCODE = 'invalid_parameter_value';
  END IF;
  l_item := array_fill(NULL::int, ARRAY[v_lines]);
  l_no := array_fill(NULL::int, ARRAY[v_lines]);
  FOR v_i IN 1 .. v_n LOOP
    IF i_lines[v_i] < 1 THEN
      -- What the triggers check for other writers (they skip this function).
      RAISE EXCEPTION 'ledger_post_arrays: item % has no lines', v_i
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

  -- One statement: the closed period, per item the transaction already stored under its key
  -- (an index lookup per key) and the first item with the same key, whether any line reverses
  -- or closes, and the first item that does not balance per asset (checked by a trigger for
  -- others). Per item, so that the loop below looks both up by position: searching the arrays
  -- for each item's key cost a batch of n items n^2/2 text comparisons.
  -- The key lookup needs no lock: if another request commits one of our keys after this read,
  -- the INSERT below skips it (ON CONFLICT) and we raise 40001, so the retry sees it.
  SELECT (SELECT max(p.ends_at) FROM ledger_periods p), e.ids, e.fps, e.firsts,
         (SELECT coalesce(bool_or(x.r IS NOT NULL OR x.c IS NOT NULL), false)
            FROM unnest(l_revs, l_closes) x(r, c)),
         (SELECT min(u.n) FROM (SELECT x.n FROM unnest(l_item, l_asset, l_amt) x(n, s, m)
                                 GROUP BY x.n, x.s HAVING sum(x.m) <> 0) u)
    INTO v_closed, e_id, e_fp, i_first, v_has_refs, v_unbalanced
    FROM (SELECT array_agg(t.id ORDER BY k.n) AS ids, array_agg(t.fingerprint ORDER BY k.n) AS fps,
                 array_agg(k.first ORDER BY k.n) AS firsts
            FROM (SELECT u.key, u.n, min(u.n) OVER (PARTITION BY u.key) AS first
                    FROM unnest(i_key) WITH ORDINALITY u(key, n)) k
            -- OFFSET 0 keeps this an index lookup per key, whatever the table size.
            LEFT JOIN LATERAL (SELECT t.id, t.fingerprint FROM ledger_transactions t
                                WHERE t.idempotency_key = k.key OFFSET 0) t ON true) e;
  IF v_unbalanced IS NOT NULL THEN
    RAISE EXCEPTION 'ledger_post_arrays: item % does not balance per asset', v_unbalanced
      USING ERRCODE = 'check_violation';
  END IF;

  -- The balance rows involved, in account-id order. Locking them (FOR UPDATE, in that order:
  -- two writers never deadlock) makes every other writer of these accounts wait until we
  -- commit, so a batch takes them as late as it can:
  -- * "write first" (batches): the rows are read here without a lock, the verdicts are computed
  --   and the transactions and postings are written, and only then are the rows locked, read
  --   again and, if another writer moved them meanwhile, the funds verdicts judged again under
  --   the lock (a verdict that would change raises 40001 and the whole call is retried). The
  --   inserts then run outside the locks. The postings have no foreign keys (their account and
  --   transaction are checked by a trigger, which takes no lock on them), so concurrent writers
  --   pile no share locks onto a hot account's row while they insert.
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
      RAISE EXCEPTION 'ledger_post_arrays: account % has no balance row', l_acc[v_j]
        USING ERRCODE = 'foreign_key_violation', HINT = 'unknown account, or run rebuild-balances';
    END IF;
    -- The balance row's asset is its account's (a foreign key on account_balances).
    IF b_asset[l_slot[v_j]] <> l_asset[v_j] THEN
      RAISE EXCEPTION 'ledger_post_arrays: account % is not in asset %', l_acc[v_j], l_asset[v_j]
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
    IF e_id[v_i] IS NOT NULL THEN
      v_txid[v_i] := e_id[v_i];
      v_status[v_i] := CASE WHEN e_fp[v_i] = i_fp[v_i] THEN 'replayed' ELSE 'conflict' END;
      CONTINUE;
    END IF;
    -- ... or an item of this batch, posted above (only when the key repeats: rare).
    IF i_first[v_i] < v_i THEN
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
      RAISE EXCEPTION 'ledger_post_arrays: idempotency key raced' USING ERRCODE = '40001';
    END IF;

    -- The postings of the accepted items, in one statement. v_new_id[item] names a line's
    -- transaction: no join of the INSERT's RETURNING back to the items.
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
      RAISE EXCEPTION 'ledger_post_arrays: balance rows changed under us' USING ERRCODE = '40001';
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
          RAISE EXCEPTION 'ledger_post_arrays: balances moved between read and lock'
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
REVOKE ALL ON FUNCTION ledger_post_arrays(text[], text[], text[], text[], timestamptz[], text[], text[],
  bigint[], boolean[], jsonb[], int[], bigint[], int[], numeric[], bigint[], bigint[])
  FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ledger_post_arrays(text[], text[], text[], text[], timestamptz[], text[], text[],
  bigint[], boolean[], jsonb[], int[], bigint[], int[], numeric[], bigint[], bigint[])
  TO custody_app;
