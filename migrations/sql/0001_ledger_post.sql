-- ledger_post_batch: the single write path of the ledger.
--
-- Posts many independent ledger transactions with a handful of set-based statements: one
-- statement parses the whole request (and reads the closed period and the stored keys), one
-- locks every balance row involved (in account-id order, so two batches never deadlock), and one
-- writes everything: all transactions, all postings and the balance updates.
-- Each item keeps its own verdict: 'posted', 'replayed' (same key, same fingerprint: the first
-- transaction, nothing moves), 'conflict' (same key, different request), 'insufficient_funds'
-- (an account flag would be violated), 'reversal_exceeds' (a reversal or closing would exceed
-- the original), 'mismatch' (a reversal or closing that does not mirror its original),
-- 'period_closed' / 'not_out_of_period' (period rules), 'balance_out_of_range'.
-- Items are judged in order; a refused item moves nothing and does not affect the others.
--
-- Input: a JSON array of
--   {"key", "fp", "kind", "ref", "eff" (ISO time), "reason", "source", "rev" (txn id|null),
--    "oop" (bool), "meta" (object),
--    "lines": [{"a": account_id, "s": asset_id, "m": "amount as decimal string",
--               "c": closes_posting_id|null, "r": reverses_posting_id|null}]}
-- The caller (ledger.service) has validated shapes, balance per asset and ranges; the triggers
-- and constraints enforce them again.
--
-- Cost notes (see bench/RESULTS.md): a single post is dominated by fixed per-statement costs,
-- so the work is packed into few statements, and the balance rows are locked as late as
-- possible: everything that does not depend on the balances (parsing, the idempotency lookup,
-- the closed period) happens before, so the locks are held only for the verdicts, the write
-- and the commit.

CREATE FUNCTION ledger_post_batch(p_items jsonb)
RETURNS TABLE (item int, status text, transaction_id bigint)
LANGUAGE plpgsql
-- Every statement below takes arrays (never a join against table-sized input), so its generic
-- plan is the right one: plan it once per session instead of re-planning the custom plan
-- PostgreSQL would otherwise choose for each call (planning cost more than executing a post).
SET plan_cache_mode = force_generic_plan
AS $fn$
#variable_conflict use_column
DECLARE
  v_n          int;
  -- Items, index 1 .. v_n, parsed once from p_items.
  i_key        text[];
  i_fp         text[];
  i_kind       text[];
  i_ref        text[];
  i_eff        timestamptz[];
  i_reason     text[];
  i_source     text[];
  i_rev        bigint[];
  i_oop        boolean[];
  i_meta       jsonb[];
  i_lines      int[];      -- number of lines of the item
  -- Lines of all items, item by item, in order.
  l_item       int[];
  l_no         int[];
  l_acc        bigint[];
  l_asset      int[];
  l_amt        numeric[];
  l_closes     bigint[];
  l_revs       bigint[];
  l_slot       int[];      -- index of the line's account in the b_ arrays
  v_has_refs   boolean;
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

  -- One pass over the request: item and line arrays, the closed period and the transactions
  -- already stored under these keys (an index lookup: the keys are an array, see the header).
  -- The key lookup needs no lock: if another request commits one of our keys after this read,
  -- the INSERT below skips it (ON CONFLICT) and we raise 40001, so the retry sees it.
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
  SELECT i.*, l.*, (SELECT max(p.ends_at) FROM ledger_periods p), e.*
    INTO v_n, i_key, i_fp, i_kind, i_ref, i_eff, i_reason, i_source, i_rev, i_oop, i_meta,
         i_lines, l_item, l_no, l_acc, l_asset, l_amt, l_closes, l_revs, v_has_refs, v_closed,
         e_key, e_id, e_fp
    FROM (SELECT count(*)::int, array_agg(key ORDER BY n), array_agg(fp ORDER BY n),
                 array_agg(kind ORDER BY n), array_agg(ref ORDER BY n), array_agg(eff ORDER BY n),
                 array_agg(reason ORDER BY n), array_agg(source ORDER BY n),
                 array_agg(rev ORDER BY n), array_agg(coalesce(oop, false) ORDER BY n),
                 array_agg(coalesce(meta, '{}'::jsonb) ORDER BY n),
                 array_agg(coalesce(jsonb_array_length(lines), 0) ORDER BY n)
            FROM items) i,
         (SELECT array_agg(n::int ORDER BY n, no), array_agg(no::int ORDER BY n, no),
                 array_agg(a ORDER BY n, no), array_agg(s ORDER BY n, no),
                 array_agg(m ORDER BY n, no), array_agg(c ORDER BY n, no),
                 array_agg(r ORDER BY n, no), coalesce(bool_or(c IS NOT NULL OR r IS NOT NULL), false)
            FROM lines) l,
         (SELECT array_agg(t.idempotency_key), array_agg(t.id), array_agg(t.fingerprint)
            FROM ledger_transactions t
           WHERE t.idempotency_key = ANY (ARRAY(SELECT key FROM items))) e;

  -- The balance rows involved, in account-id order. Locking them (FOR UPDATE, in that order:
  -- two writers never deadlock) makes every other writer of these accounts wait until we
  -- commit, so a batch takes them as late as it can:
  -- * "write first" (batches): the rows are read here without a lock, the verdicts are computed
  --   and the transactions and postings are written, and only then are the rows locked, read
  --   again and, if another writer moved them meanwhile, the funds verdicts judged again under
  --   the lock (a verdict that would change raises 40001 and the whole call is retried). The
  --   inserts, their foreign-key checks and triggers then run outside the locks.
  -- * "lock first": the rows are locked here. Always when a line reverses or closes a posting:
  --   what is left of an original is read after the locks (a concurrent reversal of the same
  --   original touches the same account, so it has committed and is counted, or waits for us).
  --   And for a single entry: it has little to gain (its inserts are short), it would pay one
  --   more statement, and with many concurrent single posts on one hot account, writing first
  --   let all of them take the foreign key's share lock on that account's row at once, which
  --   measured slower (bench/RESULTS.md).
  v_lock_first := v_has_refs OR v_n = 1;
  IF v_lock_first THEN
    SELECT array_agg(b.account_id ORDER BY b.account_id),
           array_agg(b.balance ORDER BY b.account_id),
           array_agg(b.debits_must_not_exceed_credits ORDER BY b.account_id),
           array_agg(b.credits_must_not_exceed_debits ORDER BY b.account_id)
      INTO b_acc, b_bal, b_dnec, b_cned
      FROM (SELECT ab.account_id, ab.balance, ab.debits_must_not_exceed_credits,
                   ab.credits_must_not_exceed_debits
              FROM account_balances ab
             WHERE ab.account_id = ANY (l_acc)
             ORDER BY ab.account_id
               FOR UPDATE) b;
  ELSE
    SELECT array_agg(ab.account_id ORDER BY ab.account_id),
           array_agg(ab.balance ORDER BY ab.account_id),
           array_agg(ab.debits_must_not_exceed_credits ORDER BY ab.account_id),
           array_agg(ab.credits_must_not_exceed_debits ORDER BY ab.account_id)
      INTO b_acc, b_bal, b_dnec, b_cned
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
  END LOOP;

  -- Originals that lines reverse ('r') or close ('c'), with what is left of them. Read after the
  -- balance locks: a concurrent reversal of the same original touches the same account, so it
  -- has committed (and is counted here) or waits for us.
  IF v_has_refs THEN
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
