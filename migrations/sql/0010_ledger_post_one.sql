-- 0010: a single entry without reversals or closings posts through ledger_post_one, a write
-- path of its own: the write gate, one INSERT for the transaction row (the period, key and
-- funds checks in its WHERE), one for the postings, and one guarded UPDATE per balance row in
-- account-id order (five statements for a transfer; a grouping SELECT first when the entry has
-- more than two lines or repeats an account) instead of ledger_post_arrays' eight with their
-- loops over arrays.
--
-- Same role, same rules: it runs as custody_ledger_writer (see 0006; the guard triggers skip
-- it) and enforces what they enforce for everyone else: balance per asset, at least one line,
-- each line's account existing in the line's asset, the period rules, the funds flags and the
-- 128-bit range under the row locks, the idempotency key with its fingerprint. It takes no
-- reversal or closing reference (those entries keep going through ledger_post_arrays, which
-- takes the per-original locks), so it cannot be used to bypass the reversal limits.
--
-- Why: a single post cost the server and the machine about twice a plain transfer function
-- (bench/RESULTS.md). Judging the funds from an unlocked read and writing first, then taking
-- each balance row's lock with the UPDATE itself (whose WHERE re-checks the flags on the row
-- as locked), keeps the lock for the UPDATE and the commit only, with no second read.
--
-- Also: the transactions' reference index no longer holds the NULL references (most entries
-- have none, and nothing looks them up), so most inserts skip one index; and
-- ledger_post_arrays takes only arrays numbered from 1 (see the end of this file).

DROP INDEX ledger_transactions_reference_idx;
CREATE INDEX ledger_transactions_reference_idx ON ledger_transactions (reference)
  WHERE reference IS NOT NULL;

-- Post one entry: returns one row (status, transaction_id) with the statuses of
-- ledger_post_arrays: 'posted', 'replayed' (the stored transaction under the key, same
-- fingerprint), 'conflict' (same key, another fingerprint; the stored transaction's id),
-- 'period_closed', 'not_out_of_period', 'insufficient_funds', 'balance_out_of_range' (nothing
-- written; no transaction id). Malformed requests raise as ledger_post_arrays does: 22023
-- (array shapes), 23514 (not balanced per asset), 23503 (unknown account, account not in the
-- line's asset). 40001 when a concurrent request moved a balance between the read and the
-- UPDATE, or between the INSERT and the reading of why it was refused: the caller retries, and
-- the retry judges again. (A concurrent request holding the same key is waited for by the
-- INSERT's ON CONFLICT: then replayed or conflict if it commits, posted if it rolls back.)
-- Where this differs from ledger_post_arrays: a stored key is judged before the accounts, so a
-- conflicting request naming an unknown account is 'conflict' rather than 23503.
CREATE FUNCTION ledger_post_one(
  p_key text, p_fp text, p_kind text, p_ref text, p_eff timestamptz, p_reason text,
  p_source text, p_oop boolean, p_meta jsonb,
  l_acc bigint[], l_asset int[], l_amt numeric[])
RETURNS TABLE (status text, transaction_id bigint)
LANGUAGE plpgsql
-- Runs as custody_ledger_writer, the role the ledger's triggers skip: see the header of 0006.
SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp
-- Every statement takes scalars and small arrays: the generic plan is the right one (0006).
SET plan_cache_mode = force_generic_plan
AS $fn$
#variable_conflict use_column
DECLARE
  v_lines   int := coalesce(cardinality(l_acc), 0);
  v_id      bigint;
  v_fp      text;
  v_closed  timestamptz;
  v_bad     boolean;
  -- The accounts of the entry, distinct and in account-id order, with the entry's net amount
  -- on each and the asset of its lines.
  d_acc     bigint[];
  d_delta   numeric[];
  d_asset   int[];
  v_k       int;
  v_bal     numeric;
  v_dnec    boolean;
  v_cned    boolean;
  v_asset   int;
  v_verdict text;
  v_limit   numeric := 170141183460469231731687303715884105728;
BEGIN
  -- The write gate first (shared, until commit): periods cannot be closed under us, so the
  -- closed period read below stays true until we commit.
  PERFORM pg_advisory_xact_lock_shared(7301, 1);

  IF v_lines = 0 OR cardinality(l_asset) IS DISTINCT FROM v_lines
     OR cardinality(l_amt) IS DISTINCT FROM v_lines
     -- One dimension, numbered from 1: the lines are read by position below.
     OR array_ndims(l_acc) <> 1 OR array_ndims(l_asset) <> 1 OR array_ndims(l_amt) <> 1
     OR array_lower(l_acc, 1) <> 1 OR array_lower(l_asset, 1) <> 1
     OR array_lower(l_amt, 1) <> 1
     OR array_position(l_acc, NULL) IS NOT NULL OR array_position(l_asset, NULL) IS NOT NULL
     OR array_position(l_amt, NULL) IS NOT NULL THEN
    RAISE EXCEPTION 'ledger_post_one: the line arrays must have one non-null element per line, '
      'and at least one line' USING ERRCODE = 'invalid_parameter_value';
  END IF;
  -- What the judging below reads (a NULL would make it judge nothing, or retry forever).
  IF p_key IS NULL OR p_fp IS NULL OR p_eff IS NULL OR p_oop IS NULL THEN
    RAISE EXCEPTION 'ledger_post_one: key, fingerprint, effective time and out-of-period flag '
      'must not be NULL' USING ERRCODE = 'invalid_parameter_value';
  END IF;

  IF v_lines = 2 AND l_acc[1] <> l_acc[2] AND l_asset[1] = l_asset[2] THEN
    -- The common entry (two accounts, one asset), without a statement.
    v_bad := l_amt[1] + l_amt[2] <> 0;
    IF l_acc[1] < l_acc[2] THEN
      d_acc := l_acc;
      d_delta := l_amt;
    ELSE
      d_acc := ARRAY[l_acc[2], l_acc[1]];
      d_delta := ARRAY[l_amt[2], l_amt[1]];
    END IF;
    d_asset := l_asset;
  ELSE
    SELECT array_agg(g.a ORDER BY g.a), array_agg(g.m ORDER BY g.a),
           array_agg(CASE WHEN g.s_min = g.s_max THEN g.s_max END ORDER BY g.a),
           (SELECT bool_or(u.total <> 0)
              FROM (SELECT sum(x.m) AS total FROM unnest(l_asset, l_amt) x(s, m)
                     GROUP BY x.s) u)
      INTO d_acc, d_delta, d_asset, v_bad
      FROM (SELECT x.a, sum(x.m) AS m, min(x.s) AS s_min, max(x.s) AS s_max
              FROM unnest(l_acc, l_asset, l_amt) x(a, s, m)
             GROUP BY x.a) g;
    v_k := array_position(d_asset, NULL);
    IF v_k IS NOT NULL THEN
      -- Lines of two assets on one account: one of them is not the account's asset.
      RAISE EXCEPTION 'ledger_post_one: account % is not in every asset of its lines', d_acc[v_k]
        USING ERRCODE = 'foreign_key_violation';
    END IF;
  END IF;
  IF v_bad IS NOT FALSE THEN
    -- What the triggers check for other writers (they skip this function).
    RAISE EXCEPTION 'ledger_post_one: the entry does not balance per asset'
      USING ERRCODE = 'check_violation';
  END IF;

  -- The transaction row, written only if the period rules allow the effective time and every
  -- balance row exists in its lines' asset and, as read now (no lock), takes the entry within
  -- its flags and the 128-bit range. A stored transaction under the key makes it nothing
  -- (ON CONFLICT: a concurrent request holding the key is waited for).
  INSERT INTO ledger_transactions AS t (idempotency_key, fingerprint, kind, reference,
                                       effective_at, reason, source, out_of_period, metadata)
  SELECT p_key, p_fp, p_kind, p_ref, p_eff, p_reason, p_source, p_oop, p_meta
   WHERE (SELECT CASE WHEN p_oop THEN c.closed IS NOT NULL AND p_eff < c.closed
                      ELSE c.closed IS NULL OR p_eff >= c.closed END
            FROM (SELECT max(p.ends_at) AS closed FROM ledger_periods p) c)
     AND (SELECT count(*)
            FROM unnest(d_acc, d_delta, d_asset) d(a, m, s)
            JOIN account_balances b ON b.account_id = d.a
           WHERE b.asset_id = d.s AND abs(b.balance + d.m) < v_limit
             AND NOT (b.debits_must_not_exceed_credits AND b.balance + d.m > 0)
             AND NOT (b.credits_must_not_exceed_debits AND b.balance + d.m < 0))
         = cardinality(d_acc)
  ON CONFLICT (idempotency_key) DO NOTHING
  RETURNING t.id INTO v_id;

  IF v_id IS NULL THEN
    -- Refused, or a replay: find out which, in the order ledger_post_arrays judges.
    SELECT t.id, t.fingerprint INTO v_id, v_fp
      FROM ledger_transactions t WHERE t.idempotency_key = p_key;
    IF v_id IS NOT NULL THEN
      status := CASE WHEN v_fp = p_fp THEN 'replayed' ELSE 'conflict' END;
      transaction_id := v_id;
      RETURN NEXT;
      RETURN;
    END IF;
    SELECT max(p.ends_at) INTO v_closed FROM ledger_periods p;
    IF p_oop AND (v_closed IS NULL OR p_eff >= v_closed) THEN
      v_verdict := 'not_out_of_period';
    ELSIF NOT p_oop AND v_closed IS NOT NULL AND p_eff < v_closed THEN
      v_verdict := 'period_closed';
    END IF;
    FOR v_k IN 1 .. cardinality(d_acc) LOOP
      SELECT b.balance + d_delta[v_k], b.debits_must_not_exceed_credits,
             b.credits_must_not_exceed_debits, b.asset_id
        INTO v_bal, v_dnec, v_cned, v_asset
        FROM account_balances b WHERE b.account_id = d_acc[v_k];
      IF v_asset IS NULL THEN
        RAISE EXCEPTION 'ledger_post_one: account % has no balance row', d_acc[v_k]
          USING ERRCODE = 'foreign_key_violation',
                HINT = 'unknown account, or run rebuild-balances';
      ELSIF v_asset <> d_asset[v_k] THEN
        RAISE EXCEPTION 'ledger_post_one: account % is not in asset %', d_acc[v_k], d_asset[v_k]
          USING ERRCODE = 'foreign_key_violation';
      END IF;
      CONTINUE WHEN v_verdict IN ('not_out_of_period', 'period_closed');
      IF abs(v_bal) >= v_limit THEN
        v_verdict := 'balance_out_of_range';
      ELSIF (v_dnec AND v_bal > 0) OR (v_cned AND v_bal < 0) THEN
        v_verdict := coalesce(v_verdict, 'insufficient_funds');
      END IF;
    END LOOP;
    IF v_verdict IS NULL THEN
      -- Nothing refuses it now: a balance moved since the INSERT looked (a credit came in).
      -- Judge it again from the start.
      RAISE EXCEPTION 'ledger_post_one: the entry''s state moved while it was judged'
        USING ERRCODE = '40001';
    END IF;
    status := v_verdict;
    RETURN NEXT;
    RETURN;
  END IF;

  INSERT INTO ledger_postings (transaction_id, line_no, account_id, asset_id, amount)
  SELECT v_id, l.no, l.a, l.s, l.m
    FROM unnest(l_acc, l_asset, l_amt) WITH ORDINALITY AS l(a, s, m, no);

  -- Each balance row, in account-id order (two writers never deadlock): the UPDATE takes the
  -- row's lock and its WHERE judges the row as locked. If another writer moved it since the
  -- read above so that the entry no longer fits, nothing we wrote may stand: 40001, and the
  -- retry judges the entry again (and refuses it, if it still does not fit).
  FOR v_k IN 1 .. cardinality(d_acc) LOOP
    UPDATE account_balances b
       SET balance = b.balance + d_delta[v_k], version = b.version + 1, updated_at = now()
     WHERE b.account_id = d_acc[v_k]
       AND abs(b.balance + d_delta[v_k]) < v_limit
       AND NOT (b.debits_must_not_exceed_credits AND b.balance + d_delta[v_k] > 0)
       AND NOT (b.credits_must_not_exceed_debits AND b.balance + d_delta[v_k] < 0);
    IF NOT FOUND THEN
      RAISE EXCEPTION 'ledger_post_one: balances moved between read and lock'
        USING ERRCODE = '40001';
    END IF;
  END LOOP;

  status := 'posted';
  transaction_id := v_id;
  RETURN NEXT;
END
$fn$;

ALTER FUNCTION ledger_post_one(text, text, text, text, timestamptz, text, text, boolean, jsonb,
  bigint[], int[], numeric[]) OWNER TO custody_ledger_writer;
REVOKE ALL ON FUNCTION ledger_post_one(text, text, text, text, timestamptz, text, text, boolean,
  jsonb, bigint[], int[], numeric[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ledger_post_one(text, text, text, text, timestamptz, text, text,
  boolean, jsonb, bigint[], int[], numeric[]) TO custody_app;

-- ---------------------------------------------------------------------------------------------
-- ledger_post_arrays reads its arrays by position (from 1) in some places and unnests them in
-- others: an array numbered from another index (a raw caller's '[0:1]={...}') made the two
-- disagree, so that a line's account could escape the asset check and a posting of one asset
-- land on an account of another. Its arrays must now be one-dimensional and numbered from 1,
-- checked by a front that keeps the name and the grants; the body is renamed and callable only
-- by its owner (the writer role, through the front).
CREATE FUNCTION ledger_array_ok(a anyarray) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog
AS $$ SELECT a IS NULL OR cardinality(a) = 0 OR (array_ndims(a) = 1 AND array_lower(a, 1) = 1) $$;

ALTER FUNCTION ledger_post_arrays(text[], text[], text[], text[], timestamptz[], text[], text[],
  bigint[], boolean[], jsonb[], int[], bigint[], int[], numeric[], bigint[], bigint[])
  RENAME TO ledger_post_arrays_body;
REVOKE ALL ON FUNCTION ledger_post_arrays_body(text[], text[], text[], text[], timestamptz[],
  text[], text[], bigint[], boolean[], jsonb[], int[], bigint[], int[], numeric[], bigint[],
  bigint[]) FROM PUBLIC, custody_app;

CREATE FUNCTION ledger_post_arrays(
  i_key text[], i_fp text[], i_kind text[], i_ref text[], i_eff timestamptz[],
  i_reason text[], i_source text[], i_rev bigint[], i_oop boolean[], i_meta jsonb[],
  i_lines int[],
  l_acc bigint[], l_asset int[], l_amt numeric[], l_closes bigint[], l_revs bigint[])
RETURNS TABLE (item int, status text, transaction_id bigint)
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp
AS $fn$
BEGIN
  IF NOT (ledger_array_ok(i_key) AND ledger_array_ok(i_fp) AND ledger_array_ok(i_kind)
          AND ledger_array_ok(i_ref) AND ledger_array_ok(i_eff) AND ledger_array_ok(i_reason)
          AND ledger_array_ok(i_source) AND ledger_array_ok(i_rev) AND ledger_array_ok(i_oop)
          AND ledger_array_ok(i_meta) AND ledger_array_ok(i_lines) AND ledger_array_ok(l_acc)
          AND ledger_array_ok(l_asset) AND ledger_array_ok(l_amt) AND ledger_array_ok(l_closes)
          AND ledger_array_ok(l_revs)) THEN
    RAISE EXCEPTION 'ledger_post_arrays: every array must be one-dimensional and numbered from 1'
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  RETURN QUERY SELECT b.item, b.status, b.transaction_id
                 FROM ledger_post_arrays_body(i_key, i_fp, i_kind, i_ref, i_eff, i_reason,
                                              i_source, i_rev, i_oop, i_meta, i_lines, l_acc,
                                              l_asset, l_amt, l_closes, l_revs) b;
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
