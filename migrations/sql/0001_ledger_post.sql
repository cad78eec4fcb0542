-- ledger_post_batch: the single write path of the ledger.
--
-- Posts many independent ledger transactions with a handful of set-based statements: one lock
-- statement for every balance row involved (in account-id order, so two batches never deadlock),
-- one INSERT for all transactions, one INSERT for all postings and one UPDATE of the balances.
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

CREATE FUNCTION ledger_post_batch(p_items jsonb)
RETURNS TABLE (item int, status text, transaction_id bigint)
LANGUAGE plpgsql AS $fn$
#variable_conflict use_column
DECLARE
  v_n          int := jsonb_array_length(p_items);
  v_status     text[] := array_fill(NULL::text, ARRAY[jsonb_array_length(p_items)]);
  v_txid       bigint[] := array_fill(NULL::bigint, ARRAY[jsonb_array_length(p_items)]);
  v_acc        bigint[];
  v_bal        numeric[];
  v_dnec       boolean[];
  v_cned       boolean[];
  v_wanted     int;
  v_ids        bigint[];
  v_keys       text[];
  v_refs       text[];
  v_existing   jsonb;
  v_closed     timestamptz;
  -- Remaining amount (absolute) of original postings that lines reverse or close.
  v_orig_key   text[] := '{}';
  v_orig_left  numeric[] := '{}';
  v_orig_acc   bigint[] := '{}';
  v_orig_sign  int[] := '{}';
  v_orig_txn   bigint[] := '{}';
  v_accepted   int[] := '{}';
  v_inserted   int;
  r            record;
  i            int;
  j            int;
  k            int;
  v_verdict    text;
  v_kind       text;
  v_pid        bigint;
  v_limit      numeric := 170141183460469231731687303715884105728;
BEGIN
  PERFORM pg_advisory_xact_lock_shared(7301, 1);
  SELECT max(ends_at) INTO v_closed FROM ledger_periods;

  -- Lock every balance row involved, in account-id order (deadlock-free), and read it under the
  -- lock: the funds checks below see every committed posting of these accounts. The ids are
  -- collected into an array first so that the lookups below are index scans (a join against
  -- jsonb_array_elements lets the planner pick a sequential scan of the whole table).
  v_ids := ARRAY(SELECT DISTINCT (l.v ->> 'a')::bigint
                   FROM jsonb_array_elements(p_items) it(v),
                        jsonb_array_elements(it.v -> 'lines') l(v));
  v_keys := ARRAY(SELECT it.v ->> 'key' FROM jsonb_array_elements(p_items) it(v));
  SELECT array_agg(b.account_id ORDER BY b.account_id), array_agg(b.balance ORDER BY b.account_id),
         array_agg(b.debits_must_not_exceed_credits ORDER BY b.account_id),
         array_agg(b.credits_must_not_exceed_debits ORDER BY b.account_id)
    INTO v_acc, v_bal, v_dnec, v_cned
    FROM (SELECT ab.account_id, ab.balance, ab.debits_must_not_exceed_credits,
                 ab.credits_must_not_exceed_debits
            FROM account_balances ab
           WHERE ab.account_id = ANY (v_ids)
           ORDER BY ab.account_id
             FOR UPDATE) b;
  v_wanted := coalesce(array_length(v_ids, 1), 0);
  IF coalesce(array_length(v_acc, 1), 0) <> v_wanted THEN
    RAISE EXCEPTION 'ledger_post_batch: % of % accounts have no balance row',
      v_wanted - coalesce(array_length(v_acc, 1), 0), v_wanted
      USING ERRCODE = 'foreign_key_violation', HINT = 'unknown account, or run rebuild-balances';
  END IF;

  SELECT jsonb_object_agg(t.idempotency_key, jsonb_build_array(t.id, t.fingerprint))
    INTO v_existing
    FROM ledger_transactions t
   WHERE t.idempotency_key = ANY (v_keys);

  -- Originals that lines reverse ('r') or close ('c'), with what is left of them. Read after the
  -- balance locks: a concurrent reversal of the same original touches the same account, so it
  -- has committed (and is counted here) or waits for us.
  v_refs := ARRAY(SELECT DISTINCT x.kind || x.pid::text
                    FROM jsonb_array_elements(p_items) it(v),
                         jsonb_array_elements(it.v -> 'lines') l(v),
                         LATERAL (VALUES ('r', (l.v ->> 'r')::bigint),
                                         ('c', (l.v ->> 'c')::bigint)) x(kind, pid)
                   WHERE x.pid IS NOT NULL);
  IF cardinality(v_refs) > 0 THEN
    SELECT coalesce(array_agg(o.key), '{}'), coalesce(array_agg(abs(o.amount) - abs(o.used)), '{}'),
           coalesce(array_agg(o.account_id), '{}'), coalesce(array_agg(sign(o.amount)::int), '{}'),
           coalesce(array_agg(o.transaction_id), '{}')
      INTO v_orig_key, v_orig_left, v_orig_acc, v_orig_sign, v_orig_txn
      FROM (SELECT w.key, p.amount, p.account_id, p.transaction_id,
                   CASE left(w.key, 1)
                     WHEN 'r' THEN (SELECT coalesce(sum(q.amount), 0) FROM ledger_postings q
                                     WHERE q.reverses_posting_id = p.id)
                     ELSE (SELECT coalesce(sum(q.amount), 0) FROM ledger_postings q
                            WHERE q.closes_posting_id = p.id)
                   END AS used
              FROM unnest(v_refs) w(key)
              JOIN ledger_postings p ON p.id = substr(w.key, 2)::bigint) o;
  END IF;

  FOR r IN
    SELECT it.ord::int AS n, it.v ->> 'key' AS key, it.v ->> 'fp' AS fp,
           (it.v ->> 'eff')::timestamptz AS eff, coalesce((it.v ->> 'oop')::boolean, false) AS oop,
           (it.v ->> 'rev')::bigint AS rev,
           array_agg(ax.idx::int ORDER BY l.ord) AS idxs,
           array_agg((l.v ->> 'm')::numeric ORDER BY l.ord) AS amts,
           array_agg((l.v ->> 'r')::bigint ORDER BY l.ord) AS revs,
           array_agg((l.v ->> 'c')::bigint ORDER BY l.ord) AS closes
      FROM jsonb_array_elements(p_items) WITH ORDINALITY it(v, ord)
      CROSS JOIN LATERAL jsonb_array_elements(it.v -> 'lines') WITH ORDINALITY l(v, ord)
      JOIN unnest(v_acc) WITH ORDINALITY ax(id, idx) ON ax.id = (l.v ->> 'a')::bigint
     GROUP BY it.ord, it.v
     ORDER BY it.ord
  LOOP
    v_verdict := NULL;
    IF v_existing ? r.key THEN
      v_txid[r.n] := (v_existing -> r.key ->> 0)::bigint;
      v_status[r.n] := CASE WHEN v_existing -> r.key ->> 1 = r.fp THEN 'replayed' ELSE 'conflict' END;
      CONTINUE;
    END IF;
    IF r.oop AND (v_closed IS NULL OR r.eff >= v_closed) THEN
      v_verdict := 'not_out_of_period';
    ELSIF NOT r.oop AND v_closed IS NOT NULL AND r.eff < v_closed THEN
      v_verdict := 'period_closed';
    END IF;

    -- Reversals and closings: mirror the original and stay within what is left of it.
    IF v_verdict IS NULL THEN
      FOR j IN 1 .. array_length(r.idxs, 1) LOOP
        FOREACH v_kind IN ARRAY ARRAY['r', 'c'] LOOP
          IF v_kind = 'r' THEN
            v_pid := r.revs[j];
          ELSE
            v_pid := r.closes[j];
          END IF;
          CONTINUE WHEN v_pid IS NULL;
          k := array_position(v_orig_key, v_kind || v_pid::text);
          IF k IS NULL OR v_orig_acc[k] <> v_acc[r.idxs[j]] OR v_orig_sign[k] = sign(r.amts[j])
             OR (v_kind = 'r' AND v_orig_txn[k] IS DISTINCT FROM r.rev) THEN
            v_verdict := 'mismatch';
          ELSIF abs(r.amts[j]) > v_orig_left[k] THEN
            v_verdict := 'reversal_exceeds';
          END IF;
        END LOOP;
      END LOOP;
    END IF;

    -- Funds: apply the item's lines, check the flags and the range, undo if refused.
    IF v_verdict IS NULL THEN
      FOR j IN 1 .. array_length(r.idxs, 1) LOOP
        v_bal[r.idxs[j]] := v_bal[r.idxs[j]] + r.amts[j];
      END LOOP;
      FOR j IN 1 .. array_length(r.idxs, 1) LOOP
        i := r.idxs[j];
        IF abs(v_bal[i]) >= v_limit THEN
          v_verdict := 'balance_out_of_range';
        ELSIF (v_dnec[i] AND v_bal[i] > 0) OR (v_cned[i] AND v_bal[i] < 0) THEN
          v_verdict := coalesce(v_verdict, 'insufficient_funds');
        END IF;
      END LOOP;
      IF v_verdict IS NOT NULL THEN
        FOR j IN 1 .. array_length(r.idxs, 1) LOOP
          v_bal[r.idxs[j]] := v_bal[r.idxs[j]] - r.amts[j];
        END LOOP;
      END IF;
    END IF;

    IF v_verdict IS NOT NULL THEN
      v_status[r.n] := v_verdict;
      CONTINUE;
    END IF;
    -- Accepted: consume what it reverses or closes, so later items in the batch see it.
    FOR j IN 1 .. array_length(r.idxs, 1) LOOP
      IF r.revs[j] IS NOT NULL THEN
        k := array_position(v_orig_key, 'r' || r.revs[j]::text);
        v_orig_left[k] := v_orig_left[k] - abs(r.amts[j]);
      END IF;
      IF r.closes[j] IS NOT NULL THEN
        k := array_position(v_orig_key, 'c' || r.closes[j]::text);
        v_orig_left[k] := v_orig_left[k] - abs(r.amts[j]);
      END IF;
    END LOOP;
    v_existing := coalesce(v_existing, '{}'::jsonb)
                  || jsonb_build_object(r.key, jsonb_build_array(NULL, r.fp));
    v_status[r.n] := 'posted';
    v_accepted := v_accepted || r.n;
  END LOOP;

  v_wanted := coalesce(array_length(v_accepted, 1), 0);
  IF v_wanted > 0 THEN
    WITH ins AS (
      INSERT INTO ledger_transactions AS t (idempotency_key, fingerprint, kind, reference,
                                           effective_at, reason, source, reverses_transaction_id,
                                           out_of_period, metadata)
      SELECT it.v ->> 'key', it.v ->> 'fp', it.v ->> 'kind', it.v ->> 'ref',
             (it.v ->> 'eff')::timestamptz, it.v ->> 'reason', it.v ->> 'source',
             (it.v ->> 'rev')::bigint, coalesce((it.v ->> 'oop')::boolean, false),
             coalesce(it.v -> 'meta', '{}'::jsonb)
        FROM jsonb_array_elements(p_items) WITH ORDINALITY it(v, ord)
       WHERE it.ord = ANY (v_accepted)
       ORDER BY it.ord
      ON CONFLICT (idempotency_key) DO NOTHING
      RETURNING t.id, t.idempotency_key
    )
    SELECT count(*)::int, array_agg(it.ord::int ORDER BY it.ord), array_agg(ins.id ORDER BY it.ord)
      INTO v_inserted, v_accepted, v_acc
      FROM ins JOIN jsonb_array_elements(p_items) WITH ORDINALITY it(v, ord)
        ON it.v ->> 'key' = ins.idempotency_key AND it.ord = ANY (v_accepted);
    IF v_inserted <> v_wanted THEN
      -- Only reachable when a concurrent request committed one of our keys after we looked:
      -- redo the whole batch so that its verdict (replay or conflict) is computed properly.
      RAISE EXCEPTION 'ledger_post_batch: idempotency key raced' USING ERRCODE = '40001';
    END IF;

    WITH posted AS (
      INSERT INTO ledger_postings (transaction_id, line_no, account_id, asset_id, amount,
                                   closes_posting_id, reverses_posting_id)
      SELECT m.id, l.ord, (l.v ->> 'a')::bigint, (l.v ->> 's')::int, (l.v ->> 'm')::numeric,
             (l.v ->> 'c')::bigint, (l.v ->> 'r')::bigint
        FROM unnest(v_accepted, v_acc) m(n, id)
        JOIN jsonb_array_elements(p_items) WITH ORDINALITY it(v, ord) ON it.ord = m.n
        CROSS JOIN LATERAL jsonb_array_elements(it.v -> 'lines') WITH ORDINALITY l(v, ord)
       ORDER BY m.id, l.ord
      RETURNING account_id, amount, ledger_postings.transaction_id
    )
    UPDATE account_balances b
       SET balance = b.balance + d.delta, version = b.version + d.txns, updated_at = now()
      FROM (SELECT p.account_id, sum(p.amount) AS delta, count(DISTINCT p.transaction_id) AS txns
              FROM posted p GROUP BY p.account_id) d
     -- The ANY keeps this an index lookup of the rows locked above (see the lock statement).
     WHERE b.account_id = ANY (v_ids) AND b.account_id = d.account_id;

    FOR i IN 1 .. v_inserted LOOP
      v_txid[v_accepted[i]] := v_acc[i];
    END LOOP;
  END IF;

  RETURN QUERY SELECT g.n, v_status[g.n], v_txid[g.n] FROM generate_series(1, v_n) g(n);
END
$fn$;
