-- ledger_post_one: the write path of a single entry that neither reverses nor closes anything
-- (ledger.repository routes those here; everything else goes through ledger_post_arrays). It
-- returns one row (status, transaction_id) with the statuses of ledger_post_arrays: 'posted',
-- 'replayed', 'conflict', 'period_closed', 'not_out_of_period', 'insufficient_funds',
-- 'balance_out_of_range' (nothing written; no transaction id). Malformed requests raise as
-- ledger_post_arrays does: 22023 (array shapes, NULL key, fingerprint, time or flag), 23514 (no
-- lines, or not balanced per asset), 23503 (unknown account, account not in the line's asset). 40001 when a
-- concurrent request moved a balance between the read and the UPDATE, or between the INSERT and
-- the reading of why it was refused: the caller retries, and the retry judges again. (A
-- concurrent request holding the same key is waited for by the INSERT's ON CONFLICT: then
-- replayed or conflict if it commits, posted if it rolls back.)
--
-- How: the write gate, one INSERT for the transaction row (the period, key and funds checks in
-- its WHERE, the funds judged on an unlocked read), one for the postings, and one guarded UPDATE
-- per balance row in account-id order, whose WHERE judges the funds again on the row as locked:
-- the lock is held for the UPDATE and the commit only, with no second read. Five statements for
-- a transfer; a grouping SELECT first when the entry has more than two lines or repeats an
-- account.
--
-- Same role, same rules as ledger_post_arrays: it runs as custody_ledger_writer, which the guard
-- triggers skip, and enforces what they enforce: balance per asset, at least one line, each
-- line's account existing in the line's asset, the period rules, the funds flags and the 128-bit
-- range under the row locks, the idempotency key with its fingerprint. It takes no reversal or
-- closing reference, so it cannot be used to get around the reversal limits. Its postings meet
-- the database's check of each posting's account, asset and transaction as every writer's do
-- (triggers/ledger_postings.sql).
-- tests/ledger/test_post_paths.py holds the cases that both functions must judge alike.

CREATE OR REPLACE FUNCTION ledger_post_one(
  p_key text, p_fp text, p_kind text, p_ref text, p_eff timestamptz, p_reason text,
  p_source text, p_oop boolean, p_meta jsonb,
  l_acc bigint[], l_asset int[], l_amt numeric[])
RETURNS TABLE (status text, transaction_id bigint)
LANGUAGE plpgsql
-- Runs as custody_ledger_writer, the role the ledger's triggers skip (functions/ledger_post_arrays.sql).
SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp
-- Every statement takes scalars and small arrays: the generic plan is the right one.
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

  IF cardinality(l_asset) IS DISTINCT FROM v_lines
     OR cardinality(l_amt) IS DISTINCT FROM v_lines
     -- One dimension, numbered from 1: the lines are read by position below.
     OR NOT (ledger_array_ok(l_acc) AND ledger_array_ok(l_asset) AND ledger_array_ok(l_amt))
     OR array_position(l_acc, NULL) IS NOT NULL OR array_position(l_asset, NULL) IS NOT NULL
     OR array_position(l_amt, NULL) IS NOT NULL THEN
    RAISE EXCEPTION 'ledger_post_one: the line arrays must have one non-null element per line'
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  IF v_lines = 0 THEN
    -- What the triggers check for other writers (a transaction has postings), as
    -- ledger_post_arrays refuses an item with no lines.
    RAISE EXCEPTION 'ledger_post_one: the entry has no lines' USING ERRCODE = 'check_violation';
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
    -- Refused, or a replay: find out which, in the order ledger_post_arrays judges: the
    -- accounts (a malformed request raises, whatever is stored under its key), then the key,
    -- then the period, then the funds.
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
    SELECT t.id, t.fingerprint INTO v_id, v_fp
      FROM ledger_transactions t WHERE t.idempotency_key = p_key;
    IF v_id IS NOT NULL THEN
      status := CASE WHEN v_fp = p_fp THEN 'replayed' ELSE 'conflict' END;
      transaction_id := v_id;
      RETURN NEXT;
      RETURN;
    END IF;
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
REVOKE ALL ON FUNCTION ledger_post_one(text, text, text, text, timestamptz, text, text, boolean, jsonb,
  bigint[], int[], numeric[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ledger_post_one(text, text, text, text, timestamptz, text, text, boolean, jsonb,
  bigint[], int[], numeric[]) TO custody_app;
