--
-- PostgreSQL database dump
--


SET statement_timeout = 0;
SET lock_timeout = 0;
SET idle_in_transaction_session_timeout = 0;
SET client_encoding = 'UTF8';
SET standard_conforming_strings = on;
SELECT pg_catalog.set_config('search_path', '', false);
SET check_function_bodies = false;
SET xmloption = content;
SET client_min_messages = warning;
SET row_security = off;

--
-- Name: money128; Type: DOMAIN; Schema: public; Owner: CURRENT_USER
--

CREATE DOMAIN public.money128 AS numeric
	CONSTRAINT money128_check CHECK (((scale(VALUE) = 0) AND (VALUE > '-170141183460469231731687303715884105728'::numeric) AND (VALUE < '170141183460469231731687303715884105728'::numeric)));


ALTER DOMAIN public.money128 OWNER TO CURRENT_USER;

--
-- Name: account_balances_guard(); Type: FUNCTION; Schema: public; Owner: CURRENT_USER
--

CREATE FUNCTION public.account_balances_guard() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
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


ALTER FUNCTION public.account_balances_guard() OWNER TO CURRENT_USER;

--
-- Name: accounts_open_balance(); Type: FUNCTION; Schema: public; Owner: CURRENT_USER
--

CREATE FUNCTION public.accounts_open_balance() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
  INSERT INTO account_balances (account_id, asset_id, debits_must_not_exceed_credits,
                                credits_must_not_exceed_debits)
  VALUES (NEW.id, NEW.asset_id, NEW.debits_must_not_exceed_credits,
          NEW.credits_must_not_exceed_debits);
  RETURN NULL;
END
$$;


ALTER FUNCTION public.accounts_open_balance() OWNER TO CURRENT_USER;

--
-- Name: api_idempotency_guard(); Type: FUNCTION; Schema: public; Owner: CURRENT_USER
--

CREATE FUNCTION public.api_idempotency_guard() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
  IF OLD.state = 'completed' AND OLD.created_at > now() - interval '24 hours' THEN
    RAISE EXCEPTION 'idempotency record % is younger than 24 hours', OLD.key
      USING ERRCODE = 'check_violation';
  END IF;
  RETURN OLD;
END
$$;


ALTER FUNCTION public.api_idempotency_guard() OWNER TO CURRENT_USER;

--
-- Name: api_keys_guard(); Type: FUNCTION; Schema: public; Owner: CURRENT_USER
--

CREATE FUNCTION public.api_keys_guard() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
  RAISE EXCEPTION 'api key %: its identity never changes and a revocation is final', OLD.id
    USING ERRCODE = 'integrity_constraint_violation';
END
$$;


ALTER FUNCTION public.api_keys_guard() OWNER TO CURRENT_USER;

--
-- Name: cases_guard(); Type: FUNCTION; Schema: public; Owner: CURRENT_USER
--

CREATE FUNCTION public.cases_guard() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    IF NEW.status <> 'open' OR NEW.seen_count <> 1 OR NEW.last_seen_at <> NEW.first_seen_at THEN
      RAISE EXCEPTION 'a case is opened open and seen once (case type %, subject %)',
        NEW.type, NEW.subject USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
  END IF;
  IF TG_OP = 'DELETE' THEN
    RAISE EXCEPTION 'table cases is append-only: DELETE refused'
      USING ERRCODE = 'raise_exception', HINT = 'resolve the case instead';
  END IF;
  IF (NEW.id, NEW.type, NEW.subject, NEW.refs, NEW.expected, NEW.first_seen_at, NEW.opened_by)
     IS DISTINCT FROM
     (OLD.id, OLD.type, OLD.subject, OLD.refs, OLD.expected, OLD.first_seen_at, OLD.opened_by)
  THEN
    RAISE EXCEPTION 'case %: what a case is about never changes', OLD.id
      USING ERRCODE = 'raise_exception';
  END IF;
  IF OLD.status = 'open' AND NEW.status = 'open' THEN
    IF NEW.last_seen_at < OLD.last_seen_at OR NEW.seen_count <> OLD.seen_count + 1 THEN
      RAISE EXCEPTION 'case %: a re-sighting moves last_seen_at forward and counts one more',
        OLD.id USING ERRCODE = 'raise_exception';
    END IF;
    RETURN NEW;
  END IF;
  IF OLD.status = 'open' AND NEW.status = 'resolved' THEN
    IF (NEW.last_seen_at, NEW.seen_count, NEW.observed, NEW.evidence)
       IS DISTINCT FROM (OLD.last_seen_at, OLD.seen_count, OLD.observed, OLD.evidence) THEN
      RAISE EXCEPTION 'case %: a resolution changes only the resolution', OLD.id
        USING ERRCODE = 'raise_exception';
    END IF;
    RETURN NEW;
  END IF;
  RAISE EXCEPTION 'case % is resolved: it never changes again', OLD.id
    USING ERRCODE = 'raise_exception';
END
$$;


ALTER FUNCTION public.cases_guard() OWNER TO CURRENT_USER;

--
-- Name: cases_open_deposit_case(); Type: FUNCTION; Schema: public; Owner: CURRENT_USER
--

CREATE FUNCTION public.cases_open_deposit_case() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
DECLARE
  d record;
  known record;
BEGIN
  SELECT c.id, c.case_id INTO known FROM deposit_cases c
   WHERE c.kind = NEW.kind AND c.deposit_id = NEW.deposit_id;
  IF FOUND THEN
    UPDATE cases SET last_seen_at = greatest(last_seen_at, NEW.opened_at),
                     seen_count = seen_count + 1, evidence = jsonb_build_object(
                       'expected', NEW.expected, 'observed', NEW.observed)
     WHERE id = known.case_id AND status = 'open';
    RETURN NULL;
  END IF;
  SELECT dep.chain, dep.tx_hash, dep.position, dep.asset_code, dep.amount_minor INTO d
    FROM deposits dep WHERE dep.id = NEW.deposit_id;
  NEW.id := nextval('cases_id_seq');
  NEW.case_id := NEW.id;
  INSERT INTO cases (id, type, subject, refs, expected, observed, evidence, first_seen_at,
                     last_seen_at, opened_by)
  VALUES (NEW.id, NEW.kind, 'deposit:' || NEW.deposit_id,
          jsonb_strip_nulls(jsonb_build_object(
            'deposit_id', NEW.deposit_id::text, 'deposit_case_id', NEW.id::text,
            'ledger_transaction_id', NEW.ledger_transaction_id::text, 'chain', d.chain,
            'tx_hash', d.tx_hash, 'position', d.position, 'asset', d.asset_code)),
          d.amount_minor::text, NULL,
          jsonb_build_object('expected', NEW.expected, 'observed', NEW.observed),
          NEW.opened_at, NEW.opened_at, 'deposits.watcher');
  RETURN NEW;
END
$$;


ALTER FUNCTION public.cases_open_deposit_case() OWNER TO CURRENT_USER;

--
-- Name: cases_open_withdrawal_case(); Type: FUNCTION; Schema: public; Owner: CURRENT_USER
--

CREATE FUNCTION public.cases_open_withdrawal_case() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
DECLARE
  known bigint;
BEGIN
  NEW.id := nextval('cases_id_seq');
  SELECT id INTO known FROM cases
   WHERE type = NEW.kind AND subject = 'withdrawal:' || NEW.withdrawal_id AND status = 'open';
  IF FOUND THEN
    UPDATE cases SET last_seen_at = greatest(last_seen_at, NEW.opened_at),
                     seen_count = seen_count + 1,
                     evidence = NEW.evidence || jsonb_build_object('reason', NEW.reason)
     WHERE id = known;
    NEW.case_id := known;
    RETURN NEW;
  END IF;
  NEW.case_id := NEW.id;
  INSERT INTO cases (id, type, subject, refs, expected, observed, evidence, first_seen_at,
                     last_seen_at, opened_by)
  SELECT NEW.id, NEW.kind, 'withdrawal:' || NEW.withdrawal_id,
         jsonb_build_object('withdrawal_id', NEW.withdrawal_id::text,
                            'withdrawal_case_id', NEW.id::text, 'chain', w.chain),
         NULL, NULL, NEW.evidence || jsonb_build_object('reason', NEW.reason),
         NEW.opened_at, NEW.opened_at, NEW.opened_by
    FROM withdrawals w WHERE w.id = NEW.withdrawal_id;
  RETURN NEW;
END
$$;


ALTER FUNCTION public.cases_open_withdrawal_case() OWNER TO CURRENT_USER;

--
-- Name: cases_resolve_deposit_case(); Type: FUNCTION; Schema: public; Owner: CURRENT_USER
--

CREATE FUNCTION public.cases_resolve_deposit_case() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
  UPDATE cases SET status = 'resolved',
                   resolution = coalesce(NEW.outcome || ': ', '') || NEW.reason
                                || coalesce(' (approved by ' || NEW.approved_by || ')', ''),
                   resolved_by = NEW.resolved_by, resolved_at = NEW.resolved_at,
                   resolution_transaction_id = coalesce(NEW.reversal_transaction_id,
                                                        NEW.ledger_transaction_id)
   WHERE id = (SELECT case_id FROM deposit_cases WHERE id = NEW.case_id) AND status = 'open';
  RETURN NULL;
END
$$;


ALTER FUNCTION public.cases_resolve_deposit_case() OWNER TO CURRENT_USER;

--
-- Name: cases_resolve_withdrawal_case(); Type: FUNCTION; Schema: public; Owner: CURRENT_USER
--

CREATE FUNCTION public.cases_resolve_withdrawal_case() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
  UPDATE cases SET status = 'resolved', resolution = NEW.reason, resolved_by = NEW.resolved_by,
                   resolved_at = NEW.resolved_at
   WHERE id = (SELECT case_id FROM withdrawal_cases WHERE id = NEW.case_id) AND status = 'open';
  RETURN NULL;
END
$$;


ALTER FUNCTION public.cases_resolve_withdrawal_case() OWNER TO CURRENT_USER;

--
-- Name: console_session_end_only(); Type: FUNCTION; Schema: public; Owner: CURRENT_USER
--

CREATE FUNCTION public.console_session_end_only() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
  IF OLD.ended_at IS NOT NULL OR NEW.ended_at IS NULL
     OR (NEW.id, NEW.token_digest, NEW.key_id, NEW.csrf_token, NEW.created_at, NEW.expires_at)
        IS DISTINCT FROM
        (OLD.id, OLD.token_digest, OLD.key_id, OLD.csrf_token, OLD.created_at, OLD.expires_at)
  THEN
    RAISE EXCEPTION 'console session %: only ended_at may be set, once', OLD.id
      USING ERRCODE = 'integrity_constraint_violation';
  END IF;
  RETURN NEW;
END
$$;


ALTER FUNCTION public.console_session_end_only() OWNER TO CURRENT_USER;

--
-- Name: deposit_case_votes_check(); Type: FUNCTION; Schema: public; Owner: CURRENT_USER
--

CREATE FUNCTION public.deposit_case_votes_check() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
DECLARE
  proposal deposit_case_votes%ROWTYPE;
BEGIN
  IF NEW.role <> 'approval' THEN
    RETURN NEW;
  END IF;
  SELECT * INTO proposal FROM deposit_case_votes
   WHERE case_id = NEW.case_id AND role = 'proposal';
  IF NOT FOUND THEN
    RAISE EXCEPTION 'case %: an approval needs a proposal', NEW.case_id
      USING ERRCODE = 'check_violation';
  END IF;
  IF proposal.voted_by = NEW.voted_by THEN
    RAISE EXCEPTION 'case %: the proposer cannot approve it', NEW.case_id
      USING ERRCODE = 'check_violation';
  END IF;
  IF (proposal.outcome, proposal.withdrawal_id) IS DISTINCT FROM
     (NEW.outcome, NEW.withdrawal_id) THEN
    RAISE EXCEPTION 'case %: the approval is not of the proposed outcome', NEW.case_id
      USING ERRCODE = 'check_violation';
  END IF;
  RETURN NEW;
END
$$;


ALTER FUNCTION public.deposit_case_votes_check() OWNER TO CURRENT_USER;

--
-- Name: deposit_events_refs_check(); Type: FUNCTION; Schema: public; Owner: CURRENT_USER
--

CREATE FUNCTION public.deposit_events_refs_check() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
DECLARE
  bad record;
BEGIN
  -- One primary-key lookup per row in each parent (scalar subqueries, so that a plan cached
  -- while the tables were small never becomes a scan of them: measured here, a hashed subplan
  -- over deposits cost five times these lookups), only in WHERE; which parent is missing is
  -- looked up again for the one row refused.
  SELECT n.id, n.deposit_id, n.ledger_transaction_id INTO bad
    FROM new_rows n
   WHERE (SELECT d.id FROM deposits d WHERE d.id = n.deposit_id) IS NULL
      OR (n.ledger_transaction_id IS NOT NULL
          AND (SELECT t.id FROM ledger_transactions t WHERE t.id = n.ledger_transaction_id) IS NULL)
   LIMIT 1;
  IF NOT FOUND THEN
    RETURN NULL;
  END IF;
  IF NOT EXISTS (SELECT 1 FROM deposits d WHERE d.id = bad.deposit_id) THEN
    RAISE EXCEPTION 'deposit history row % names deposit %, which does not exist', bad.id,
      bad.deposit_id USING ERRCODE = 'foreign_key_violation';
  END IF;
  RAISE EXCEPTION 'deposit history row % names ledger transaction %, which does not exist',
    bad.id, bad.ledger_transaction_id USING ERRCODE = 'foreign_key_violation';
END
$$;


ALTER FUNCTION public.deposit_events_refs_check() OWNER TO CURRENT_USER;

--
-- Name: deposits_guard(); Type: FUNCTION; Schema: public; Owner: CURRENT_USER
--

CREATE FUNCTION public.deposits_guard() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
  IF (NEW.id, NEW.chain, NEW.tx_hash, NEW.position, NEW.token, NEW.from_address, NEW.to_address,
      NEW.value, NEW.tx_from, NEW.tx_nonce, NEW.user_id, NEW.asset_code, NEW.amount_minor,
      NEW.booking, NEW.booking_reason, NEW.address_kind, NEW.first_seen_at)
     IS DISTINCT FROM
     (OLD.id, OLD.chain, OLD.tx_hash, OLD.position, OLD.token, OLD.from_address, OLD.to_address,
      OLD.value, OLD.tx_from, OLD.tx_nonce, OLD.user_id, OLD.asset_code, OLD.amount_minor,
      OLD.booking, OLD.booking_reason, OLD.address_kind, OLD.first_seen_at) THEN
    RAISE EXCEPTION 'deposit % : only its current state may change', OLD.id
      USING ERRCODE = 'raise_exception';
  END IF;
  IF OLD.ledger_transaction_id IS NOT NULL
     AND NEW.ledger_transaction_id IS DISTINCT FROM OLD.ledger_transaction_id THEN
    RAISE EXCEPTION 'deposit % : its ledger transaction never changes', OLD.id
      USING ERRCODE = 'raise_exception';
  END IF;
  IF NEW.last_event_id <= OLD.last_event_id THEN
    RAISE EXCEPTION 'deposit % : a state change needs a new history row', OLD.id
      USING ERRCODE = 'raise_exception';
  END IF;
  RETURN NEW;
END
$$;


ALTER FUNCTION public.deposits_guard() OWNER TO CURRENT_USER;

--
-- Name: deposits_refs_check(); Type: FUNCTION; Schema: public; Owner: CURRENT_USER
--

CREATE FUNCTION public.deposits_refs_check() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
DECLARE
  bad record;
BEGIN
  -- A primary-key lookup per row (a scalar subquery: never a scan, whatever plan is cached).
  SELECT n.id, n.ledger_transaction_id INTO bad
    FROM new_rows n
   WHERE n.ledger_transaction_id IS NOT NULL
     AND (SELECT t.id FROM ledger_transactions t WHERE t.id = n.ledger_transaction_id) IS NULL
   LIMIT 1;
  IF FOUND THEN
    RAISE EXCEPTION 'deposit % names ledger transaction %, which does not exist', bad.id,
      bad.ledger_transaction_id USING ERRCODE = 'foreign_key_violation';
  END IF;
  RETURN NULL;
END
$$;


ALTER FUNCTION public.deposits_refs_check() OWNER TO CURRENT_USER;

--
-- Name: ledger_array_ok(anyarray); Type: FUNCTION; Schema: public; Owner: CURRENT_USER
--

CREATE FUNCTION public.ledger_array_ok(a anyarray) RETURNS boolean
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog'
    AS $$ SELECT a IS NULL OR cardinality(a) = 0 OR (array_ndims(a) = 1 AND array_lower(a, 1) = 1) $$;


ALTER FUNCTION public.ledger_array_ok(a anyarray) OWNER TO CURRENT_USER;

--
-- Name: ledger_period_approvals_check(); Type: FUNCTION; Schema: public; Owner: CURRENT_USER
--

CREATE FUNCTION public.ledger_period_approvals_check() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
DECLARE
  proposal ledger_period_proposals%ROWTYPE;
  closed_through timestamptz;
BEGIN
  SELECT * INTO proposal FROM ledger_period_proposals WHERE id = NEW.proposal_id;
  IF proposal.proposed_by = NEW.approved_by THEN
    RAISE EXCEPTION 'period close proposal %: the proposer cannot approve it', NEW.proposal_id
      USING ERRCODE = 'check_violation';
  END IF;
  SELECT ends_at INTO closed_through FROM ledger_periods WHERE id = NEW.period_id;
  IF closed_through IS DISTINCT FROM proposal.ends_at THEN
    RAISE EXCEPTION 'period close proposal %: period % does not end where proposed',
      NEW.proposal_id, NEW.period_id USING ERRCODE = 'check_violation';
  END IF;
  RETURN NEW;
END
$$;


ALTER FUNCTION public.ledger_period_approvals_check() OWNER TO CURRENT_USER;

--
-- Name: ledger_periods_before_insert(); Type: FUNCTION; Schema: public; Owner: CURRENT_USER
--

CREATE FUNCTION public.ledger_periods_before_insert() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
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


ALTER FUNCTION public.ledger_periods_before_insert() OWNER TO CURRENT_USER;

--
-- Name: ledger_post_arrays(text[], text[], text[], text[], timestamp with time zone[], text[], text[], bigint[], boolean[], jsonb[], integer[], bigint[], integer[], numeric[], bigint[], bigint[]); Type: FUNCTION; Schema: public; Owner: custody_ledger_writer
--

CREATE FUNCTION public.ledger_post_arrays(i_key text[], i_fp text[], i_kind text[], i_ref text[], i_eff timestamp with time zone[], i_reason text[], i_source text[], i_rev bigint[], i_oop boolean[], i_meta jsonb[], i_lines integer[], l_acc bigint[], l_asset integer[], l_amt numeric[], l_closes bigint[], l_revs bigint[]) RETURNS TABLE(item integer, status text, transaction_id bigint)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    SET plan_cache_mode TO 'force_generic_plan'
    AS $$
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
$$;


ALTER FUNCTION public.ledger_post_arrays(i_key text[], i_fp text[], i_kind text[], i_ref text[], i_eff timestamp with time zone[], i_reason text[], i_source text[], i_rev bigint[], i_oop boolean[], i_meta jsonb[], i_lines integer[], l_acc bigint[], l_asset integer[], l_amt numeric[], l_closes bigint[], l_revs bigint[]) OWNER TO custody_ledger_writer;

--
-- Name: ledger_post_one(text, text, text, text, timestamp with time zone, text, text, boolean, jsonb, bigint[], integer[], numeric[]); Type: FUNCTION; Schema: public; Owner: custody_ledger_writer
--

CREATE FUNCTION public.ledger_post_one(p_key text, p_fp text, p_kind text, p_ref text, p_eff timestamp with time zone, p_reason text, p_source text, p_oop boolean, p_meta jsonb, l_acc bigint[], l_asset integer[], l_amt numeric[]) RETURNS TABLE(status text, transaction_id bigint)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    SET plan_cache_mode TO 'force_generic_plan'
    AS $$
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
$$;


ALTER FUNCTION public.ledger_post_one(p_key text, p_fp text, p_kind text, p_ref text, p_eff timestamp with time zone, p_reason text, p_source text, p_oop boolean, p_meta jsonb, l_acc bigint[], l_asset integer[], l_amt numeric[]) OWNER TO custody_ledger_writer;

--
-- Name: ledger_postings_account_and_transaction(); Type: FUNCTION; Schema: public; Owner: CURRENT_USER
--

CREATE FUNCTION public.ledger_postings_account_and_transaction() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
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


ALTER FUNCTION public.ledger_postings_account_and_transaction() OWNER TO CURRENT_USER;

--
-- Name: ledger_postings_after_insert(); Type: FUNCTION; Schema: public; Owner: CURRENT_USER
--

CREATE FUNCTION public.ledger_postings_after_insert() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
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


ALTER FUNCTION public.ledger_postings_after_insert() OWNER TO CURRENT_USER;

--
-- Name: ledger_postings_balanced(); Type: FUNCTION; Schema: public; Owner: CURRENT_USER
--

CREATE FUNCTION public.ledger_postings_balanced() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
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


ALTER FUNCTION public.ledger_postings_balanced() OWNER TO CURRENT_USER;

--
-- Name: ledger_refuse_change(); Type: FUNCTION; Schema: public; Owner: CURRENT_USER
--

CREATE FUNCTION public.ledger_refuse_change() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
  RAISE EXCEPTION 'table % is append-only: % refused', TG_TABLE_NAME, TG_OP
    USING ERRCODE = 'raise_exception', HINT = 'post a correcting transaction instead';
END
$$;


ALTER FUNCTION public.ledger_refuse_change() OWNER TO CURRENT_USER;

--
-- Name: ledger_transaction_balanced(); Type: FUNCTION; Schema: public; Owner: CURRENT_USER
--

CREATE FUNCTION public.ledger_transaction_balanced() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
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


ALTER FUNCTION public.ledger_transaction_balanced() OWNER TO CURRENT_USER;

--
-- Name: ledger_transactions_after_insert(); Type: FUNCTION; Schema: public; Owner: CURRENT_USER
--

CREATE FUNCTION public.ledger_transactions_after_insert() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
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


ALTER FUNCTION public.ledger_transactions_after_insert() OWNER TO CURRENT_USER;

--
-- Name: ledger_transactions_before_insert(); Type: FUNCTION; Schema: public; Owner: CURRENT_USER
--

CREATE FUNCTION public.ledger_transactions_before_insert() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
  -- Set here, after the write gate is held (the statement trigger above fires first), so that
  -- nothing recorded after a period close can carry a recorded time before it. The period
  -- rules are checked once per statement, below.
  NEW.recorded_at := clock_timestamp();
  RETURN NEW;
END
$$;


ALTER FUNCTION public.ledger_transactions_before_insert() OWNER TO CURRENT_USER;

--
-- Name: ledger_write_gate(); Type: FUNCTION; Schema: public; Owner: CURRENT_USER
--

CREATE FUNCTION public.ledger_write_gate() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
  -- Held until commit; period close and checkpoint watermarks wait for every write in flight.
  PERFORM pg_advisory_xact_lock_shared(7301, 1);
  RETURN NULL;
END
$$;


ALTER FUNCTION public.ledger_write_gate() OWNER TO CURRENT_USER;

--
-- Name: movement_insert(text, jsonb, boolean, text, text, jsonb, timestamp with time zone); Type: FUNCTION; Schema: public; Owner: custody_state_writer
--

CREATE FUNCTION public.movement_insert(p_kind text, p_row jsonb, p_skip_taken boolean, p_actor text, p_reason text, p_evidence jsonb, p_at timestamp with time zone) RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'public', 'pg_temp'
    AS $_$
DECLARE
  v_table text;
  v_events text;
  v_ref text;
  v_start_event text := 'planned';
  v_cols text;
  v_bad text;
  v_id bigint;
BEGIN
  CASE p_kind
    WHEN 'sweep' THEN v_table := 'sweeps'; v_events := 'sweep_events'; v_ref := 'sweep_id';
    WHEN 'gas_top_up' THEN
      v_table := 'gas_top_ups'; v_events := 'gas_top_up_events'; v_ref := 'top_up_id';
    WHEN 'cold_transfer' THEN
      v_table := 'cold_transfers'; v_events := 'cold_transfer_events';
      v_ref := 'cold_transfer_id';
    WHEN 'refill_request' THEN v_table := 'refill_requests'; v_start_event := 'opened';
    ELSE RAISE EXCEPTION 'movement_insert: unknown kind %', p_kind
           USING ERRCODE = 'check_violation';
  END CASE;
  SELECT k INTO v_bad FROM jsonb_object_keys(p_row) k
   WHERE k IN ('id', 'matched_tx_hash', 'matched_position')
      OR NOT EXISTS (SELECT 1 FROM pg_attribute a
                      WHERE a.attrelid = v_table::regclass AND a.attname = k
                        AND a.attnum > 0 AND NOT a.attisdropped)
   LIMIT 1;
  IF v_bad IS NOT NULL THEN
    RAISE EXCEPTION 'movement_insert: a new % cannot set %', p_kind, v_bad
      USING ERRCODE = 'check_violation';
  END IF;
  IF NOT EXISTS (SELECT 1 FROM state_moves m
                  WHERE m.machine = p_kind AND m.from_state IS NULL
                    AND m.event = v_start_event AND m.to_state = p_row->>'state') THEN
    RAISE EXCEPTION 'movement_insert: a % cannot start in %', p_kind, p_row->>'state'
      USING ERRCODE = 'check_violation';
  END IF;
  SELECT string_agg(format('%I', k), ', ') INTO v_cols FROM jsonb_object_keys(p_row) k;
  EXECUTE format('INSERT INTO %I (%s) SELECT %s FROM jsonb_populate_record(NULL::%I, $1) %s '
                 'RETURNING id', v_table, v_cols, v_cols, v_table,
                 CASE WHEN p_skip_taken THEN 'ON CONFLICT DO NOTHING' ELSE '' END)
    INTO v_id USING p_row;
  IF v_id IS NOT NULL AND v_events IS NOT NULL THEN
    EXECUTE format('INSERT INTO %I (%I, from_state, to_state, event, reason, evidence, actor, '
                   'occurred_at) VALUES ($1, NULL, $2, ''planned'', $3, $4, $5, $6)',
                   v_events, v_ref)
      USING v_id, p_row->>'state', p_reason, coalesce(p_evidence, '{}'::jsonb), p_actor, p_at;
  END IF;
  RETURN v_id;
END
$_$;


ALTER FUNCTION public.movement_insert(p_kind text, p_row jsonb, p_skip_taken boolean, p_actor text, p_reason text, p_evidence jsonb, p_at timestamp with time zone) OWNER TO custody_state_writer;

--
-- Name: FUNCTION movement_insert(p_kind text, p_row jsonb, p_skip_taken boolean, p_actor text, p_reason text, p_evidence jsonb, p_at timestamp with time zone); Type: COMMENT; Schema: public; Owner: custody_state_writer
--

COMMENT ON FUNCTION public.movement_insert(p_kind text, p_row jsonb, p_skip_taken boolean, p_actor text, p_reason text, p_evidence jsonb, p_at timestamp with time zone) IS 'Insert a sweep, gas top-up, cold transfer or refill request (p_row) in a state its machine starts in, with its first history row; NULL when p_skip_taken and a unique key is taken. Runs as custody_state_writer.';


--
-- Name: movement_transition(text, bigint, jsonb, text, text, text, text, jsonb, text, bigint, bigint, timestamp with time zone); Type: FUNCTION; Schema: public; Owner: custody_state_writer
--

CREATE FUNCTION public.movement_transition(p_kind text, p_id bigint, p_sets jsonb, p_from text, p_to text, p_event text, p_reason text, p_evidence jsonb, p_actor text, p_ledger_transaction_id bigint, p_attempt_id bigint, p_at timestamp with time zone) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'public', 'pg_temp'
    AS $_$
DECLARE
  v_table text;
  v_events text;
  v_ref text;
  v_allowed text[] := ARRAY['state_reason', 'nonce', 'landed_attempt_id', 'gas_paid',
                            'swept_amount', 'top_up_id'];
  v_state text;
  v_bad text;
  v_sets text;
BEGIN
  CASE p_kind
    WHEN 'sweep' THEN v_table := 'sweeps'; v_events := 'sweep_events'; v_ref := 'sweep_id';
    WHEN 'gas_top_up' THEN
      v_table := 'gas_top_ups'; v_events := 'gas_top_up_events'; v_ref := 'top_up_id';
    WHEN 'cold_transfer' THEN
      v_table := 'cold_transfers'; v_events := 'cold_transfer_events';
      v_ref := 'cold_transfer_id';
    WHEN 'refill_request' THEN
      v_table := 'refill_requests'; v_allowed := ARRAY['matched_tx_hash', 'matched_position'];
    ELSE RAISE EXCEPTION 'movement_transition: unknown kind %', p_kind
           USING ERRCODE = 'check_violation';
  END CASE;
  SELECT k INTO v_bad FROM jsonb_object_keys(coalesce(p_sets, '{}'::jsonb)) k
   WHERE k <> ALL (v_allowed)
      OR NOT EXISTS (SELECT 1 FROM pg_attribute a
                      WHERE a.attrelid = v_table::regclass AND a.attname = k
                        AND a.attnum > 0 AND NOT a.attisdropped)
   LIMIT 1;
  IF v_bad IS NOT NULL THEN
    RAISE EXCEPTION 'movement_transition: a transition of a % cannot set %', p_kind, v_bad
      USING ERRCODE = 'check_violation';
  END IF;
  EXECUTE format('SELECT state FROM %I WHERE id = $1 FOR UPDATE', v_table)
    INTO v_state USING p_id;
  IF v_state IS NULL THEN
    RAISE EXCEPTION '% % does not exist', p_kind, p_id USING ERRCODE = 'no_data_found';
  END IF;
  IF v_state IS DISTINCT FROM p_from
     OR NOT EXISTS (SELECT 1 FROM state_moves m
                     WHERE m.machine = p_kind AND m.from_state = p_from
                       AND m.event = p_event AND m.to_state = p_to) THEN
    RAISE EXCEPTION '% %: % -> % on % is not a move of one that is %',
      p_kind, p_id, p_from, p_to, p_event, v_state USING ERRCODE = 'check_violation';
  END IF;
  SELECT string_agg(format(', %1$I = (jsonb_populate_record(NULL::%2$I, $3)).%1$I', k, v_table),
                    '')
    INTO v_sets FROM jsonb_object_keys(coalesce(p_sets, '{}'::jsonb)) k;
  EXECUTE format('UPDATE %I SET state = $1, updated_at = $2%s WHERE id = $4', v_table,
                 coalesce(v_sets, ''))
    USING p_to, p_at, coalesce(p_sets, '{}'::jsonb), p_id;
  IF v_events IS NOT NULL THEN
    EXECUTE format('INSERT INTO %I (%I, from_state, to_state, event, reason, evidence, actor, '
                   'ledger_transaction_id, attempt_id, occurred_at) '
                   'VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)', v_events, v_ref)
      USING p_id, p_from, p_to, p_event, p_reason, coalesce(p_evidence, '{}'::jsonb), p_actor,
            p_ledger_transaction_id, p_attempt_id, p_at;
  END IF;
END
$_$;


ALTER FUNCTION public.movement_transition(p_kind text, p_id bigint, p_sets jsonb, p_from text, p_to text, p_event text, p_reason text, p_evidence jsonb, p_actor text, p_ledger_transaction_id bigint, p_attempt_id bigint, p_at timestamp with time zone) OWNER TO custody_state_writer;

--
-- Name: FUNCTION movement_transition(p_kind text, p_id bigint, p_sets jsonb, p_from text, p_to text, p_event text, p_reason text, p_evidence jsonb, p_actor text, p_ledger_transaction_id bigint, p_attempt_id bigint, p_at timestamp with time zone); Type: COMMENT; Schema: public; Owner: custody_state_writer
--

COMMENT ON FUNCTION public.movement_transition(p_kind text, p_id bigint, p_sets jsonb, p_from text, p_to text, p_event text, p_reason text, p_evidence jsonb, p_actor text, p_ledger_transaction_id bigint, p_attempt_id bigint, p_at timestamp with time zone) IS 'Move a sweep, gas top-up, cold transfer or refill request (locked) from p_from to p_to on p_event if that is a move of its machine (state_moves), setting only its transition columns from p_sets, and append its history row. Runs as custody_state_writer.';


SET default_table_access_method = heap;

--
-- Name: withdrawal_allowlist; Type: TABLE; Schema: public; Owner: CURRENT_USER
--

CREATE TABLE public.withdrawal_allowlist (
    id bigint NOT NULL,
    client_id bigint NOT NULL,
    user_id text,
    chain text NOT NULL,
    address text NOT NULL,
    label text NOT NULL,
    request_key text NOT NULL,
    added_by text NOT NULL,
    added_at timestamp with time zone NOT NULL,
    delay_s integer NOT NULL,
    active_at timestamp with time zone NOT NULL,
    removed_at timestamp with time zone,
    removed_by text,
    CONSTRAINT withdrawal_allowlist_added_by_check CHECK (((length(added_by) >= 1) AND (length(added_by) <= 200))),
    CONSTRAINT withdrawal_allowlist_address_check CHECK ((address ~ '^0x[0-9a-f]{40}$'::text)),
    CONSTRAINT withdrawal_allowlist_chain_check CHECK ((chain ~ '^[a-z][a-z0-9_-]{0,31}$'::text)),
    CONSTRAINT withdrawal_allowlist_check CHECK (((removed_at IS NULL) = (removed_by IS NULL))),
    CONSTRAINT withdrawal_allowlist_check1 CHECK (((active_at >= added_at) AND (active_at <= (added_at + ((delay_s)::double precision * '00:00:01'::interval))))),
    CONSTRAINT withdrawal_allowlist_delay_s_check CHECK ((delay_s >= 0)),
    CONSTRAINT withdrawal_allowlist_label_check CHECK (((length(label) >= 1) AND (length(label) <= 200))),
    CONSTRAINT withdrawal_allowlist_removed_by_check CHECK (((length(removed_by) >= 1) AND (length(removed_by) <= 200))),
    CONSTRAINT withdrawal_allowlist_request_key_check CHECK (((length(request_key) >= 1) AND (length(request_key) <= 200)))
);


ALTER TABLE public.withdrawal_allowlist OWNER TO CURRENT_USER;

--
-- Name: TABLE withdrawal_allowlist; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON TABLE public.withdrawal_allowlist IS 'Withdrawal destinations a client allows, per chain (user_id NULL: for all its users). Usable from active_at; removal (removed_at) is immediate and final. Never deleted.';


--
-- Name: COLUMN withdrawal_allowlist.user_id; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON COLUMN public.withdrawal_allowlist.user_id IS 'The one user of the client the address is for; NULL: every user of the client.';


--
-- Name: COLUMN withdrawal_allowlist.address; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON COLUMN public.withdrawal_allowlist.address IS 'Destination address, lower-case.';


--
-- Name: COLUMN withdrawal_allowlist.request_key; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON COLUMN public.withdrawal_allowlist.request_key IS 'The Idempotency-Key (or CLI key) the address was added with: a retry adds nothing.';


--
-- Name: COLUMN withdrawal_allowlist.added_at; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON COLUMN public.withdrawal_allowlist.added_at IS 'When it was added (the engine''s clock).';


--
-- Name: COLUMN withdrawal_allowlist.delay_s; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON COLUMN public.withdrawal_allowlist.delay_s IS 'The activation delay configured then.';


--
-- Name: COLUMN withdrawal_allowlist.active_at; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON COLUMN public.withdrawal_allowlist.active_at IS 'From this instant withdrawals to it are accepted: added_at + delay_s, or earlier when two admins shortened it (withdrawal_allowlist_votes).';


--
-- Name: COLUMN withdrawal_allowlist.removed_at; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON COLUMN public.withdrawal_allowlist.removed_at IS 'When it was removed (final); NULL: listed.';


--
-- Name: COLUMN withdrawal_allowlist.removed_by; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON COLUMN public.withdrawal_allowlist.removed_by IS 'Who removed it.';


--
-- Name: outbox_allowlist_event_write(public.withdrawal_allowlist, text, text); Type: FUNCTION; Schema: public; Owner: CURRENT_USER
--

CREATE FUNCTION public.outbox_allowlist_event_write(a public.withdrawal_allowlist, p_type text, p_suffix text) RETURNS void
    LANGUAGE sql
    AS $$
  INSERT INTO outbox_events (event_id, type, client_id, user_id, subject, payload, version)
  SELECT 'evt_al_' || a.id || '_' || p_suffix, p_type, a.client_id, a.user_id,
         'allowlist:' || a.id,
         jsonb_build_object('entry', jsonb_build_object(
           'id', a.id::text, 'client', c.name, 'user_id', a.user_id, 'chain', a.chain,
           'address', a.address, 'label', a.label, 'added_by', a.added_by,
           'added_at', a.added_at, 'active_at', a.active_at, 'removed_at', a.removed_at,
           'removed_by', a.removed_by)),
         2
    FROM api_clients c WHERE c.id = a.client_id
  ON CONFLICT (event_id) DO NOTHING;
$$;


ALTER FUNCTION public.outbox_allowlist_event_write(a public.withdrawal_allowlist, p_type text, p_suffix text) OWNER TO CURRENT_USER;

--
-- Name: outbox_amount(numeric, integer); Type: FUNCTION; Schema: public; Owner: CURRENT_USER
--

CREATE FUNCTION public.outbox_amount(minor numeric, scale integer) RETURNS jsonb
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
  SELECT CASE
    WHEN minor IS NULL OR scale IS NULL THEN NULL
    WHEN scale = 0 THEN jsonb_build_object('minor', minor::text, 'decimal', minor::text)
    ELSE jsonb_build_object('minor', minor::text, 'decimal',
      (CASE WHEN minor < 0 THEN '-' ELSE '' END)
      || left(right(repeat('0', scale + 1) || abs(minor)::text,
                    greatest(length(abs(minor)::text), scale + 1)), -scale)
      || '.' || right(repeat('0', scale) || abs(minor)::text, scale))
  END
$$;


ALTER FUNCTION public.outbox_amount(minor numeric, scale integer) OWNER TO CURRENT_USER;

--
-- Name: outbox_decimal(numeric, integer); Type: FUNCTION; Schema: public; Owner: CURRENT_USER
--

CREATE FUNCTION public.outbox_decimal(minor numeric, scale integer) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
  SELECT CASE
    WHEN minor IS NULL OR scale IS NULL THEN NULL
    WHEN scale = 0 THEN minor::text
    ELSE (CASE WHEN minor < 0 THEN '-' ELSE '' END)
         || coalesce(nullif(left(abs(minor)::text, -scale), ''), '0')
         || coalesce('.' || nullif(rtrim(right(repeat('0', scale) || abs(minor)::text, scale),
                                         '0'), ''), '')
  END
$$;


ALTER FUNCTION public.outbox_decimal(minor numeric, scale integer) OWNER TO CURRENT_USER;

--
-- Name: outbox_deposit_case(); Type: FUNCTION; Schema: public; Owner: CURRENT_USER
--

CREATE FUNCTION public.outbox_deposit_case() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
DECLARE
  d record;
BEGIN
  SELECT dep.id, dep.user_id, dep.chain, dep.tx_hash, dep.position, dep.asset_code,
         dep.amount_minor, u.client_id, a.scale
    INTO d
    FROM deposits dep LEFT JOIN api_users u ON u.id = dep.user_id
    LEFT JOIN assets a ON a.code = dep.asset_code
   WHERE dep.id = NEW.deposit_id;
  -- Payload version 2: the amount as {"minor", "decimal"} (api/schemas_events.py).
  INSERT INTO outbox_events (event_id, type, client_id, user_id, subject, payload, created_at,
                             version)
  VALUES ('evt_case_' || NEW.id, 'alert.' || NEW.kind, d.client_id, d.user_id,
          'deposit:' || d.id,
          jsonb_build_object(
            'case_id', NEW.id::text, 'kind', NEW.kind, 'deposit_id', d.id::text,
            'user_id', d.user_id, 'chain', d.chain, 'tx_hash', d.tx_hash,
            'position', d.position, 'asset', d.asset_code,
            'amount', outbox_amount(d.amount_minor, d.scale),
            'ledger_transaction_id', NEW.ledger_transaction_id::text,
            'expected', NEW.expected, 'observed', NEW.observed, 'opened_at', NEW.opened_at,
            -- What an operator does next (every alert says it: api.outbox.raise_alert).
            'next', CASE NEW.kind
              WHEN 'unattributed_own_address' THEN
                'two admins resolve it: custody cases resolve ' || NEW.id
                || ' --as capital|return|refund --by NAME --reason TEXT, then custody cases '
                || 'approve ' || NEW.id || ' --by NAME'
              ELSE
                'deposit ' || d.id || ' was credited in a block that is no longer canonical: '
                || 'custody timeline ' || d.chain || ' ' || d.tx_hash || ', then resolve case '
                || NEW.id || ' (reverse the credit if the deposit is gone)'
            END),
          NEW.opened_at, 2);
  RETURN NULL;
END
$$;


ALTER FUNCTION public.outbox_deposit_case() OWNER TO CURRENT_USER;

--
-- Name: outbox_deposit_event(); Type: FUNCTION; Schema: public; Owner: CURRENT_USER
--

CREATE FUNCTION public.outbox_deposit_event() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
  INSERT INTO outbox_events (event_id, type, client_id, user_id, subject, deposit_event_id,
                             created_at, version)
  SELECT 'evt_dep_' || n.id, k.kind,
         (SELECT u.client_id FROM api_users u WHERE u.id = d.user_id), d.user_id,
         'deposit:' || n.deposit_id, n.id, n.recorded_at, 2
    FROM new_rows n
    CROSS JOIN LATERAL (SELECT CASE
      WHEN n.event = 'transfer_included' THEN 'deposit.seen'
      WHEN n.event = 'block_reorged_out' THEN 'deposit.reorged'
      WHEN n.event = 'transfer_reincluded' THEN 'deposit.reincluded'
      WHEN n.state = 'credited' THEN 'deposit.credited'
      WHEN n.state = 'held_for_review' THEN 'deposit.held'
      WHEN n.state = 'failed' THEN 'deposit.failed'
    END AS kind) k
    -- A primary-key lookup per row (OFFSET 0 keeps it one, whatever the plan cached while the
    -- table was small), and the client by the user's key.
    CROSS JOIN LATERAL (SELECT x.user_id FROM deposits x WHERE x.id = n.deposit_id OFFSET 0) d
   WHERE k.kind IS NOT NULL AND d.user_id IS NOT NULL
   ORDER BY n.id;
  RETURN NULL;
END
$$;


ALTER FUNCTION public.outbox_deposit_event() OWNER TO CURRENT_USER;

--
-- Name: outbox_deposit_payload(bigint); Type: FUNCTION; Schema: public; Owner: CURRENT_USER
--

CREATE FUNCTION public.outbox_deposit_payload(history_id bigint) RETURNS jsonb
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$
  SELECT jsonb_build_object(
           'deposit', jsonb_build_object(
             'id', d.id::text, 'user_id', d.user_id, 'chain', d.chain,
             'tx_hash', d.tx_hash, 'position', d.position, 'token', d.token,
             'from_address', d.from_address, 'to_address', d.to_address,
             'asset', d.asset_code,
             'amount', outbox_amount(d.amount_minor, a.scale),
             'state', n.state, 'block_number', n.block_number,
             'confirmations', n.confirmations,
             'ledger_transaction_id', n.ledger_transaction_id::text),
           'history', jsonb_build_object(
             'id', n.id::text, 'event', n.event, 'state', n.state,
             'block_number', n.block_number, 'block_hash', n.block_hash,
             'confirmations', n.confirmations, 'rule', n.rule, 'reason', n.reason,
             'ledger_transaction_id', n.ledger_transaction_id::text,
             'observed_at', n.observed_at, 'recorded_at', n.recorded_at))
    FROM deposit_events n
    JOIN deposits d ON d.id = n.deposit_id
    LEFT JOIN assets a ON a.code = d.asset_code
   WHERE n.id = history_id
$$;


ALTER FUNCTION public.outbox_deposit_payload(history_id bigint) OWNER TO CURRENT_USER;

--
-- Name: outbox_fan_out(); Type: FUNCTION; Schema: public; Owner: CURRENT_USER
--

CREATE FUNCTION public.outbox_fan_out() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
  INSERT INTO webhook_deliveries (event_id, endpoint_id, next_attempt_at)
  SELECT n.id, e.id, n.created_at
    FROM new_rows n
    JOIN webhook_endpoints e
      ON e.client_id = n.client_id OR (n.type LIKE 'alert.%' AND e.alerts)
   WHERE (n.client_id IS NOT NULL OR n.type LIKE 'alert.%')
     AND e.disabled_at IS NULL
     AND (e.event_types IS NULL OR n.type = ANY (e.event_types))
   ORDER BY n.id, e.id
  ON CONFLICT (event_id, endpoint_id) DO NOTHING;
  RETURN NULL;
END
$$;


ALTER FUNCTION public.outbox_fan_out() OWNER TO CURRENT_USER;

--
-- Name: outbox_events; Type: TABLE; Schema: public; Owner: CURRENT_USER
--

CREATE TABLE public.outbox_events (
    id bigint NOT NULL,
    event_id text NOT NULL,
    type text NOT NULL,
    client_id bigint,
    user_id text,
    subject text NOT NULL,
    payload jsonb,
    created_at timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
    version smallint DEFAULT 2 NOT NULL,
    deposit_event_id bigint,
    CONSTRAINT outbox_events_event_id_check CHECK (((event_id ~ '^evt_[a-z0-9_]+$'::text) AND (length(event_id) <= 124))),
    CONSTRAINT outbox_events_payload_check CHECK ((jsonb_typeof(payload) = 'object'::text)),
    CONSTRAINT outbox_events_payload_source_check CHECK ((((payload IS NULL) = (deposit_event_id IS NOT NULL)) AND ((deposit_event_id IS NULL) OR ((type ~~ 'deposit.%'::text) AND (version = 2) AND (event_id = ('evt_dep_'::text || deposit_event_id)))))),
    CONSTRAINT outbox_events_type_check CHECK (((type ~ '^(deposit|withdrawal|alert|allowlist)\.[a-z_]+$'::text) AND (length(split_part(type, '.'::text, 2)) <= 40))),
    CONSTRAINT outbox_events_version_check CHECK ((version = ANY (ARRAY[1, 2])))
);


ALTER TABLE public.outbox_events OWNER TO CURRENT_USER;

--
-- Name: TABLE outbox_events; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON TABLE public.outbox_events IS 'Append-only outbox: one row per event, written in the transaction of the change it describes; delivered later, at least once, by the delivery job.';


--
-- Name: COLUMN outbox_events.event_id; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON COLUMN public.outbox_events.event_id IS 'Stable id sent with every delivery (dedupe key).';


--
-- Name: COLUMN outbox_events.client_id; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON COLUMN public.outbox_events.client_id IS 'The client owning the user (api_users), NULL when no client owns it (then undelivered, except alerts, which go to alert endpoints).';


--
-- Name: COLUMN outbox_events.subject; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON COLUMN public.outbox_events.subject IS 'What it is about: deposit:<id>, withdrawal:<id>, ...';


--
-- Name: COLUMN outbox_events.payload; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON COLUMN public.outbox_events.payload IS 'The event data; amounts are strings. NULL for a deposit event that names its history row (deposit_event_id): read every payload through outbox_payload(o).';


--
-- Name: COLUMN outbox_events.version; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON COLUMN public.outbox_events.version IS 'Payload version: 1 (before 0026: flat, amount_minor/amount), 2 (the API''s shapes: docs/webhooks.md). An event is always rendered in the version it was written in.';


--
-- Name: COLUMN outbox_events.deposit_event_id; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON COLUMN public.outbox_events.deposit_event_id IS 'The deposit history row (deposit_events.id) this deposit event was written for; its payload is rendered from that row when read (outbox_payload). NULL for other events and for deposit events written before revision 0034 (they store their payload).';


--
-- Name: outbox_payload(public.outbox_events); Type: FUNCTION; Schema: public; Owner: CURRENT_USER
--

CREATE FUNCTION public.outbox_payload(o public.outbox_events) RETURNS jsonb
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$
  SELECT CASE WHEN o.deposit_event_id IS NULL THEN o.payload
              ELSE outbox_deposit_payload(o.deposit_event_id) END
$$;


ALTER FUNCTION public.outbox_payload(o public.outbox_events) OWNER TO CURRENT_USER;

--
-- Name: outbox_withdrawal_event(); Type: FUNCTION; Schema: public; Owner: CURRENT_USER
--

CREATE FUNCTION public.outbox_withdrawal_event() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
DECLARE
  w withdrawals%ROWTYPE;
  hash text;
BEGIN
  -- A payout waiting for the gas float stays reserved: the client heard withdrawal.reserved
  -- already, and the wait is the operator's matter (alert.gas_float_low), not news for it.
  IF outbox_withdrawal_type(NEW.to_state) IS NULL OR NEW.event = 'gas_float_low' THEN
    RETURN NULL;
  END IF;
  SELECT * INTO w FROM withdrawals WHERE id = NEW.withdrawal_id;
  IF NEW.attempt_id IS NOT NULL THEN
    SELECT a.tx_hash INTO hash FROM outgoing_attempts a WHERE a.id = NEW.attempt_id;
  END IF;
  PERFORM outbox_withdrawal_event_write(w, NEW, hash);
  RETURN NULL;
END
$$;


ALTER FUNCTION public.outbox_withdrawal_event() OWNER TO CURRENT_USER;

--
-- Name: withdrawal_events; Type: TABLE; Schema: public; Owner: CURRENT_USER
--

CREATE TABLE public.withdrawal_events (
    id bigint NOT NULL,
    withdrawal_id bigint NOT NULL,
    from_state text,
    to_state text NOT NULL,
    event text NOT NULL,
    reason text,
    evidence jsonb DEFAULT '{}'::jsonb NOT NULL,
    actor text NOT NULL,
    ledger_transaction_id bigint,
    attempt_id bigint,
    occurred_at timestamp with time zone NOT NULL,
    recorded_at timestamp with time zone DEFAULT clock_timestamp() NOT NULL
);


ALTER TABLE public.withdrawal_events OWNER TO CURRENT_USER;

--
-- Name: TABLE withdrawal_events; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON TABLE public.withdrawal_events IS 'Append-only history: every accepted transition with its reason and evidence.';


--
-- Name: withdrawals; Type: TABLE; Schema: public; Owner: CURRENT_USER
--

CREATE TABLE public.withdrawals (
    id bigint NOT NULL,
    user_id text NOT NULL,
    request_key text NOT NULL,
    fingerprint text NOT NULL,
    requested_by text NOT NULL,
    chain text NOT NULL,
    asset_code text NOT NULL,
    token text,
    destination text NOT NULL,
    amount_minor public.money128 NOT NULL,
    fee_max_minor public.money128 NOT NULL,
    fee_minor public.money128 NOT NULL,
    chain_amount numeric(78,0) NOT NULL,
    approvals_required smallint NOT NULL,
    state text NOT NULL,
    state_reason text,
    hot_wallet text,
    nonce bigint,
    reserve_transaction_id bigint,
    reserve_posting_id bigint,
    closing_transaction_id bigint,
    landed_attempt_id bigint,
    requested_at timestamp with time zone NOT NULL,
    state_changed_at timestamp with time zone NOT NULL,
    unknown_since timestamp with time zone,
    nonce_closed_at timestamp with time zone,
    CONSTRAINT withdrawals_amount_minor_check CHECK (((amount_minor)::numeric > (0)::numeric)),
    CONSTRAINT withdrawals_approvals_required_check CHECK (((approvals_required >= 0) AND (approvals_required <= 2))),
    CONSTRAINT withdrawals_chain_amount_check CHECK ((chain_amount > (0)::numeric)),
    CONSTRAINT withdrawals_check CHECK ((((fee_minor)::numeric >= (0)::numeric) AND ((fee_minor)::numeric <= (fee_max_minor)::numeric))),
    CONSTRAINT withdrawals_check1 CHECK (((nonce IS NULL) = (hot_wallet IS NULL))),
    CONSTRAINT withdrawals_check2 CHECK (((state = 'requested'::text) OR (reserve_posting_id IS NOT NULL))),
    CONSTRAINT withdrawals_destination_check CHECK (((destination ~ '^0x[0-9a-f]{40}$'::text) AND (destination <> '0x0000000000000000000000000000000000000000'::text))),
    CONSTRAINT withdrawals_fee_max_minor_check CHECK (((fee_max_minor)::numeric >= (0)::numeric)),
    CONSTRAINT withdrawals_fingerprint_check CHECK ((fingerprint ~ '^[0-9a-f]{64}$'::text)),
    CONSTRAINT withdrawals_hot_wallet_check CHECK ((hot_wallet ~ '^0x[0-9a-f]{40}$'::text)),
    CONSTRAINT withdrawals_nonce_check CHECK ((nonce >= 0)),
    CONSTRAINT withdrawals_request_key_check CHECK (((length(request_key) >= 1) AND (length(request_key) <= 200))),
    CONSTRAINT withdrawals_requested_by_check CHECK (((length(requested_by) >= 1) AND (length(requested_by) <= 200))),
    CONSTRAINT withdrawals_state_check CHECK ((state = ANY (ARRAY['requested'::text, 'pending_approval'::text, 'reserved'::text, 'signing'::text, 'signed'::text, 'broadcast'::text, 'included'::text, 'unknown'::text, 'awaiting_write_off'::text, 'held'::text, 'settled'::text, 'reverted'::text, 'released'::text, 'canceled'::text, 'rejected'::text, 'written_off'::text]))),
    CONSTRAINT withdrawals_token_check CHECK ((token ~ '^0x[0-9a-f]{40}$'::text)),
    CONSTRAINT withdrawals_user_id_check CHECK (((length(user_id) >= 1) AND (length(user_id) <= 100)))
);


ALTER TABLE public.withdrawals OWNER TO CURRENT_USER;

--
-- Name: TABLE withdrawals; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON TABLE public.withdrawals IS 'Current state of each withdrawal (a projection of withdrawal_events); amounts in the ledger asset''s minor units, chain_amount in the token''s on-chain units.';


--
-- Name: COLUMN withdrawals.request_key; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON COLUMN public.withdrawals.request_key IS 'The caller''s idempotency key, unique per user.';


--
-- Name: COLUMN withdrawals.fingerprint; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON COLUMN public.withdrawals.fingerprint IS 'SHA-256 of the request; same key + other request = conflict.';


--
-- Name: COLUMN withdrawals.fee_max_minor; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON COLUMN public.withdrawals.fee_max_minor IS 'Most the fee can be; reserved with the amount.';


--
-- Name: COLUMN withdrawals.fee_minor; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON COLUMN public.withdrawals.fee_minor IS 'Fee charged at settlement (from the fee schedule).';


--
-- Name: COLUMN withdrawals.reserve_posting_id; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON COLUMN public.withdrawals.reserve_posting_id IS 'The reserve posting on user:{id}:withdrawals that the settle or release posting closes.';


--
-- Name: COLUMN withdrawals.unknown_since; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON COLUMN public.withdrawals.unknown_since IS 'When the outcome first became unknown.';


--
-- Name: COLUMN withdrawals.nonce_closed_at; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON COLUMN public.withdrawals.nonce_closed_at IS 'Written-off withdrawals: when their nonce was seen consumed and final (by a cancel transaction, the payout itself, or another transaction). Until then later payouts of the hot wallet wait behind it, so the processor keeps closing it.';


--
-- Name: outbox_withdrawal_event_write(public.withdrawals, public.withdrawal_events, text); Type: FUNCTION; Schema: public; Owner: CURRENT_USER
--

CREATE FUNCTION public.outbox_withdrawal_event_write(w public.withdrawals, e public.withdrawal_events, p_tx_hash text) RETURNS void
    LANGUAGE plpgsql
    AS $$
DECLARE
  v_type text := outbox_withdrawal_type(e.to_state);
BEGIN
  IF v_type IS NULL THEN
    RETURN;
  END IF;
  -- Payload version 2 (docs/webhooks.md): the withdrawal and the history row under the names
  -- of the API's Withdrawal and WithdrawalEvent, ids as strings, amounts {"minor", "decimal"}.
  INSERT INTO outbox_events (event_id, type, client_id, user_id, subject, payload, created_at,
                             version)
  SELECT 'evt_wd_' || e.id, v_type, u.client_id, w.user_id, 'withdrawal:' || w.id,
         jsonb_build_object(
           'withdrawal', jsonb_build_object(
             'id', w.id::text, 'user_id', w.user_id, 'request_key', w.request_key,
             'state', e.to_state, 'state_reason', e.reason,
             'chain', w.chain, 'asset', w.asset_code, 'token', w.token, 'to', w.destination,
             'amount', outbox_amount(w.amount_minor, s.scale),
             'fee', outbox_amount(w.fee_minor, s.scale),
             'fee_max', outbox_amount(w.fee_max_minor, s.scale),
             'tx_hash', p_tx_hash),
           'history', jsonb_build_object(
             'id', e.id::text, 'event', e.event, 'from_state', e.from_state,
             'to_state', e.to_state, 'reason', e.reason,
             'ledger_transaction_id', e.ledger_transaction_id::text,
             'occurred_at', e.occurred_at)),
         e.recorded_at, 2
    FROM (VALUES (1)) one
    LEFT JOIN api_users u ON u.id = w.user_id
    LEFT JOIN assets s ON s.code = w.asset_code;
END
$$;


ALTER FUNCTION public.outbox_withdrawal_event_write(w public.withdrawals, e public.withdrawal_events, p_tx_hash text) OWNER TO CURRENT_USER;

--
-- Name: outbox_withdrawal_type(text); Type: FUNCTION; Schema: public; Owner: CURRENT_USER
--

CREATE FUNCTION public.outbox_withdrawal_type(p_state text) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
  SELECT CASE WHEN p_state IN ('pending_approval', 'reserved', 'broadcast', 'settled', 'released',
                               'unknown', 'reverted', 'canceled', 'rejected', 'written_off')
              THEN 'withdrawal.' || p_state END
$$;


ALTER FUNCTION public.outbox_withdrawal_type(p_state text) OWNER TO CURRENT_USER;

--
-- Name: row_refuse_id_change(); Type: FUNCTION; Schema: public; Owner: CURRENT_USER
--

CREATE FUNCTION public.row_refuse_id_change() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path TO 'public', 'pg_temp'
    AS $$
BEGIN
  RAISE EXCEPTION '% %: its id cannot change (other rows name it)', TG_TABLE_NAME, OLD.id
    USING ERRCODE = 'foreign_key_violation';
END
$$;


ALTER FUNCTION public.row_refuse_id_change() OWNER TO CURRENT_USER;

--
-- Name: FUNCTION row_refuse_id_change(); Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON FUNCTION public.row_refuse_id_change() IS 'Trigger function: refuse changing the id of a money table''s row.';


--
-- Name: treasury_funding_matches_check(); Type: FUNCTION; Schema: public; Owner: CURRENT_USER
--

CREATE FUNCTION public.treasury_funding_matches_check() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
DECLARE
  f treasury_fundings%ROWTYPE;
  d deposits%ROWTYPE;
BEGIN
  SELECT * INTO f FROM treasury_fundings WHERE id = NEW.funding_id;
  SELECT * INTO d FROM deposits WHERE id = NEW.deposit_id;
  IF f.id IS NULL OR d.id IS NULL THEN
    RAISE EXCEPTION 'treasury funding match: funding % or deposit % does not exist',
      NEW.funding_id, NEW.deposit_id USING ERRCODE = 'foreign_key_violation';
  END IF;
  IF d.address_kind NOT IN ('hot', 'cold') OR d.chain <> f.chain
     OR d.asset_code IS DISTINCT FROM f.asset_code
     OR d.amount_minor IS DISTINCT FROM f.amount_minor OR lower(d.from_address) <> f.from_address
  THEN
    RAISE EXCEPTION 'treasury funding match: deposit % is not the transfer funding % declares',
      d.id, f.id USING ERRCODE = 'check_violation';
  END IF;
  IF NOT EXISTS (
    SELECT 1 FROM ledger_transactions t
    WHERE t.id = NEW.ledger_transaction_id AND t.kind = 'treasury_funding'
      AND t.idempotency_key = 'deposit:' || d.chain || ':' || lower(d.tx_hash) || ':' || d.position
      AND t.metadata->>'funding_id' = f.id::text
  ) THEN
    RAISE EXCEPTION 'treasury funding match: ledger transaction % is not the treasury_funding '
      'posting of deposit % for funding %', NEW.ledger_transaction_id, d.id, f.id
      USING ERRCODE = 'check_violation';
  END IF;
  RETURN NEW;
END
$$;


ALTER FUNCTION public.treasury_funding_matches_check() OWNER TO CURRENT_USER;

--
-- Name: watcher_cursor_swap(text, jsonb, jsonb); Type: FUNCTION; Schema: public; Owner: CURRENT_USER
--

CREATE FUNCTION public.watcher_cursor_swap(p_chain text, p_old jsonb, p_new jsonb) RETURNS void
    LANGUAGE plpgsql
    AS $$
BEGIN
  IF p_old = '[]'::jsonb THEN
    INSERT INTO watcher_cursors (chain, recent) VALUES (p_chain, p_new)
    ON CONFLICT (chain) DO NOTHING;
  ELSE
    UPDATE watcher_cursors SET recent = p_new, updated_at = now()
     WHERE chain = p_chain AND recent = p_old;
  END IF;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'the watcher cursor of % moved since it was read', p_chain
      USING ERRCODE = 'no_data_found';
  END IF;
END
$$;


ALTER FUNCTION public.watcher_cursor_swap(p_chain text, p_old jsonb, p_new jsonb) OWNER TO CURRENT_USER;

--
-- Name: withdrawal_allowlist_events(); Type: FUNCTION; Schema: public; Owner: CURRENT_USER
--

CREATE FUNCTION public.withdrawal_allowlist_events() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    PERFORM outbox_allowlist_event_write(NEW, 'allowlist.address_added', 'added');
  ELSIF NEW.removed_at IS NOT NULL AND OLD.removed_at IS NULL THEN
    PERFORM outbox_allowlist_event_write(NEW, 'allowlist.address_removed', 'removed');
  ELSIF NEW.active_at <> OLD.active_at THEN
    PERFORM outbox_allowlist_event_write(
      NEW, 'allowlist.activation_shortened',
      'shortened_' || (extract(epoch FROM NEW.active_at) * 1000000)::bigint);
  END IF;
  RETURN NULL;
END
$$;


ALTER FUNCTION public.withdrawal_allowlist_events() OWNER TO CURRENT_USER;

--
-- Name: withdrawal_allowlist_guard(); Type: FUNCTION; Schema: public; Owner: CURRENT_USER
--

CREATE FUNCTION public.withdrawal_allowlist_guard() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    IF NEW.removed_at IS NOT NULL
       OR NEW.active_at <> NEW.added_at + NEW.delay_s * interval '1 second' THEN
      RAISE EXCEPTION 'allowlist entry: inserted listed, active after its full delay'
        USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    RETURN NEW;
  END IF;
  IF (NEW.id, NEW.client_id, NEW.user_id, NEW.chain, NEW.address, NEW.label, NEW.request_key,
      NEW.added_by, NEW.added_at, NEW.delay_s)
     IS DISTINCT FROM
     (OLD.id, OLD.client_id, OLD.user_id, OLD.chain, OLD.address, OLD.label, OLD.request_key,
      OLD.added_by, OLD.added_at, OLD.delay_s) THEN
    RAISE EXCEPTION 'allowlist entry %: its identity never changes', OLD.id
      USING ERRCODE = 'integrity_constraint_violation';
  END IF;
  IF OLD.removed_at IS NOT NULL AND (NEW.removed_at, NEW.removed_by, NEW.active_at)
       IS DISTINCT FROM (OLD.removed_at, OLD.removed_by, OLD.active_at) THEN
    RAISE EXCEPTION 'allowlist entry %: a removal is final', OLD.id
      USING ERRCODE = 'integrity_constraint_violation';
  END IF;
  IF NEW.active_at IS DISTINCT FROM OLD.active_at THEN
    IF NEW.active_at > OLD.active_at
       OR (SELECT count(DISTINCT v.admin) FROM withdrawal_allowlist_votes v
            WHERE v.entry_id = OLD.id AND v.active_at = NEW.active_at) < 2 THEN
      RAISE EXCEPTION 'allowlist entry %: its activation moves only earlier, to an instant two '
                      'admins voted for', OLD.id
        USING ERRCODE = 'integrity_constraint_violation';
    END IF;
  END IF;
  RETURN NEW;
END
$$;


ALTER FUNCTION public.withdrawal_allowlist_guard() OWNER TO CURRENT_USER;

--
-- Name: withdrawal_refs_check(); Type: FUNCTION; Schema: public; Owner: CURRENT_USER
--

CREATE FUNCTION public.withdrawal_refs_check() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
  IF TG_TABLE_NAME = 'withdrawals' THEN
    IF NEW.reserve_transaction_id IS NOT NULL AND NOT EXISTS (
         SELECT 1 FROM ledger_transactions t WHERE t.id = NEW.reserve_transaction_id) THEN
      RAISE EXCEPTION 'withdrawal %: reserve transaction % does not exist', NEW.id,
        NEW.reserve_transaction_id USING ERRCODE = 'foreign_key_violation';
    END IF;
    IF NEW.reserve_posting_id IS NOT NULL AND NOT EXISTS (
         SELECT 1 FROM ledger_postings p WHERE p.id = NEW.reserve_posting_id) THEN
      RAISE EXCEPTION 'withdrawal %: reserve posting % does not exist', NEW.id,
        NEW.reserve_posting_id USING ERRCODE = 'foreign_key_violation';
    END IF;
  ELSE
    IF NOT EXISTS (SELECT 1 FROM withdrawals w WHERE w.id = NEW.withdrawal_id) THEN
      RAISE EXCEPTION 'withdrawal history row names withdrawal %, which does not exist',
        NEW.withdrawal_id USING ERRCODE = 'foreign_key_violation';
    END IF;
    IF NEW.ledger_transaction_id IS NOT NULL AND NOT EXISTS (
         SELECT 1 FROM ledger_transactions t WHERE t.id = NEW.ledger_transaction_id) THEN
      RAISE EXCEPTION 'withdrawal history row names ledger transaction %, which does not exist',
        NEW.ledger_transaction_id USING ERRCODE = 'foreign_key_violation';
    END IF;
  END IF;
  RETURN NULL;
END
$$;


ALTER FUNCTION public.withdrawal_refs_check() OWNER TO CURRENT_USER;

--
-- Name: FUNCTION withdrawal_refs_check(); Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON FUNCTION public.withdrawal_refs_check() IS 'The foreign keys of withdrawals (reserve transaction and posting) and withdrawal_events (withdrawal, ledger transaction), for writers other than withdrawal_reserve_record.';


--
-- Name: withdrawal_refuse_id_change(); Type: FUNCTION; Schema: public; Owner: CURRENT_USER
--

CREATE FUNCTION public.withdrawal_refuse_id_change() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
  RAISE EXCEPTION 'withdrawal %: its id cannot change (history rows name it)', OLD.id
    USING ERRCODE = 'foreign_key_violation';
END
$$;


ALTER FUNCTION public.withdrawal_refuse_id_change() OWNER TO CURRENT_USER;

--
-- Name: withdrawal_reserve_limits(text, text, text, text, timestamp with time zone, text[], jsonb); Type: FUNCTION; Schema: public; Owner: CURRENT_USER
--

CREATE FUNCTION public.withdrawal_reserve_limits(p_user_id text, p_asset_code text, p_chain text, p_destination text, p_now timestamp with time zone, p_allowlist_clients text[], p_windows jsonb, OUT client_name text, OUT allow_state text, OUT allow_at timestamp with time zone, OUT windows jsonb) RETURNS record
    LANGUAGE plpgsql
    AS $$
DECLARE
  v_client_id bigint;
  v_active boolean;
  v_pending timestamptz;
  v_removed timestamptz;
BEGIN
  IF p_user_id IS NULL OR p_asset_code IS NULL OR p_now IS NULL THEN
    RAISE EXCEPTION 'withdrawal_reserve_limits: user, asset and time are required'
      USING ERRCODE = 'null_value_not_allowed';
  END IF;
  SELECT c.id, c.name INTO v_client_id, client_name
    FROM api_users u JOIN api_clients c ON c.id = u.client_id WHERE u.id = p_user_id;

  IF client_name IS NOT NULL AND client_name = ANY (coalesce(p_allowlist_clients, '{}')) THEN
    PERFORM 1 FROM withdrawal_allowlist a
      WHERE a.client_id = v_client_id AND a.chain = p_chain AND a.address = p_destination
        AND (a.user_id IS NULL OR a.user_id = p_user_id) AND a.removed_at IS NULL
      FOR SHARE;
    SELECT bool_or(a.removed_at IS NULL AND a.active_at <= p_now),
           min(a.active_at) FILTER (WHERE a.removed_at IS NULL),
           max(a.removed_at)
      INTO v_active, v_pending, v_removed
      FROM withdrawal_allowlist a
     WHERE a.client_id = v_client_id AND a.chain = p_chain AND a.address = p_destination
       AND (a.user_id IS NULL OR a.user_id = p_user_id);
    allow_state := CASE WHEN v_active THEN 'active'
                        WHEN v_pending IS NOT NULL THEN 'pending'
                        WHEN v_removed IS NOT NULL THEN 'removed'
                        ELSE 'not_listed' END;
    allow_at := CASE allow_state WHEN 'pending' THEN v_pending WHEN 'removed' THEN v_removed END;
  END IF;

  IF v_client_id IS NOT NULL AND EXISTS (
      SELECT 1 FROM jsonb_array_elements(coalesce(p_windows, '[]')) w
       WHERE w ->> 'per' = 'client') THEN
    PERFORM pg_advisory_xact_lock(7323, hashtext(v_client_id::text || '/' || p_asset_code));
  END IF;
  SELECT coalesce(jsonb_agg(jsonb_build_object(
           'per', w.spec ->> 'per', 'window_s', (w.spec ->> 'window_s')::bigint,
           'count', t.n, 'amount_minor', t.amount::text) ORDER BY w.ord), '[]')
    INTO windows
    FROM jsonb_array_elements(coalesce(p_windows, '[]')) WITH ORDINALITY AS w (spec, ord)
    CROSS JOIN LATERAL (
      SELECT count(*) AS n, coalesce(sum(x.amount_minor), 0) AS amount
        FROM withdrawals x
       WHERE x.asset_code = p_asset_code
         AND x.requested_at >= p_now - (w.spec ->> 'window_s')::bigint * interval '1 second'
         AND x.state NOT IN ('canceled', 'rejected', 'released', 'reverted', 'requested')
         AND CASE WHEN w.spec ->> 'per' = 'client'
                  THEN x.user_id IN (SELECT u.id FROM api_users u
                                      WHERE u.client_id = v_client_id)
                  ELSE x.user_id = p_user_id END) t;
END
$$;


ALTER FUNCTION public.withdrawal_reserve_limits(p_user_id text, p_asset_code text, p_chain text, p_destination text, p_now timestamp with time zone, p_allowlist_clients text[], p_windows jsonb, OUT client_name text, OUT allow_state text, OUT allow_at timestamp with time zone, OUT windows jsonb) OWNER TO CURRENT_USER;

--
-- Name: FUNCTION withdrawal_reserve_limits(p_user_id text, p_asset_code text, p_chain text, p_destination text, p_now timestamp with time zone, p_allowlist_clients text[], p_windows jsonb, OUT client_name text, OUT allow_state text, OUT allow_at timestamp with time zone, OUT windows jsonb); Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON FUNCTION public.withdrawal_reserve_limits(p_user_id text, p_asset_code text, p_chain text, p_destination text, p_now timestamp with time zone, p_allowlist_clients text[], p_windows jsonb, OUT client_name text, OUT allow_state text, OUT allow_at timestamp with time zone, OUT windows jsonb) IS 'The reserve''s destination and velocity reads, after withdrawal_reserve_open and in its transaction: the user''s client, the destination''s allowlist state (NULL: allowlisting off) with its instant, and per velocity window the count and amount already requested (client windows under the (client, asset) lock until commit). Writes nothing.';


--
-- Name: withdrawal_reserve_open(text, text, text, timestamp with time zone, text, text); Type: FUNCTION; Schema: public; Owner: CURRENT_USER
--

CREATE FUNCTION public.withdrawal_reserve_open(p_user_id text, p_asset_code text, p_request_key text, p_since timestamp with time zone, p_wallet_code text, p_withdrawals_code text, OUT existing_id bigint, OUT withdrawal_id bigint, OUT used_minor numeric, OUT ledger_asset_id integer, OUT ledger_asset_scale integer, OUT wallet_id bigint, OUT wallet_type text, OUT wallet_dnec boolean, OUT wallet_cned boolean, OUT withdrawals_id bigint, OUT withdrawals_type text, OUT withdrawals_dnec boolean, OUT withdrawals_cned boolean) RETURNS record
    LANGUAGE plpgsql
    AS $$
BEGIN
  IF p_user_id IS NULL OR p_asset_code IS NULL OR p_request_key IS NULL OR p_since IS NULL THEN
    RAISE EXCEPTION 'withdrawal_reserve_open: user, asset, key and window start are required'
      USING ERRCODE = 'null_value_not_allowed';
  END IF;
  IF current_setting('transaction_isolation') = 'repeatable read' THEN
    RAISE EXCEPTION 'withdrawal_reserve_open: the daily limit needs READ COMMITTED or SERIALIZABLE'
      USING ERRCODE = 'invalid_transaction_state';
  END IF;
  PERFORM pg_advisory_xact_lock(7321, hashtext(p_user_id || '/' || p_asset_code));

  SELECT (SELECT w.id FROM withdrawals w
           WHERE w.user_id = p_user_id AND w.request_key = p_request_key),
         -- The states in which no money left or will leave do not count ('requested' rows
         -- are never committed; counted out for rows of older versions all the same).
         (SELECT coalesce(sum(w.amount_minor), 0) FROM withdrawals w
           WHERE w.user_id = p_user_id AND w.asset_code = p_asset_code
             AND w.requested_at >= p_since
             AND w.state NOT IN ('canceled', 'rejected', 'released', 'reverted', 'requested')),
         s.id, s.scale,
         wa.id, wa.type, wa.debits_must_not_exceed_credits, wa.credits_must_not_exceed_debits,
         xa.id, xa.type, xa.debits_must_not_exceed_credits, xa.credits_must_not_exceed_debits
    INTO existing_id, used_minor, ledger_asset_id, ledger_asset_scale,
         wallet_id, wallet_type, wallet_dnec, wallet_cned,
         withdrawals_id, withdrawals_type, withdrawals_dnec, withdrawals_cned
    FROM (VALUES (1)) one
    LEFT JOIN assets s ON s.code = p_asset_code
    LEFT JOIN accounts wa ON wa.code = p_wallet_code AND wa.asset_id = s.id
    LEFT JOIN accounts xa ON xa.code = p_withdrawals_code AND xa.asset_id = s.id;

  IF existing_id IS NULL THEN
    withdrawal_id := nextval('withdrawals_id_seq');
  END IF;
END
$$;


ALTER FUNCTION public.withdrawal_reserve_open(p_user_id text, p_asset_code text, p_request_key text, p_since timestamp with time zone, p_wallet_code text, p_withdrawals_code text, OUT existing_id bigint, OUT withdrawal_id bigint, OUT used_minor numeric, OUT ledger_asset_id integer, OUT ledger_asset_scale integer, OUT wallet_id bigint, OUT wallet_type text, OUT wallet_dnec boolean, OUT wallet_cned boolean, OUT withdrawals_id bigint, OUT withdrawals_type text, OUT withdrawals_dnec boolean, OUT withdrawals_cned boolean) OWNER TO CURRENT_USER;

--
-- Name: FUNCTION withdrawal_reserve_open(p_user_id text, p_asset_code text, p_request_key text, p_since timestamp with time zone, p_wallet_code text, p_withdrawals_code text, OUT existing_id bigint, OUT withdrawal_id bigint, OUT used_minor numeric, OUT ledger_asset_id integer, OUT ledger_asset_scale integer, OUT wallet_id bigint, OUT wallet_type text, OUT wallet_dnec boolean, OUT wallet_cned boolean, OUT withdrawals_id bigint, OUT withdrawals_type text, OUT withdrawals_dnec boolean, OUT withdrawals_cned boolean); Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON FUNCTION public.withdrawal_reserve_open(p_user_id text, p_asset_code text, p_request_key text, p_since timestamp with time zone, p_wallet_code text, p_withdrawals_code text, OUT existing_id bigint, OUT withdrawal_id bigint, OUT used_minor numeric, OUT ledger_asset_id integer, OUT ledger_asset_scale integer, OUT wallet_id bigint, OUT wallet_type text, OUT wallet_dnec boolean, OUT wallet_cned boolean, OUT withdrawals_id bigint, OUT withdrawals_type text, OUT withdrawals_dnec boolean, OUT withdrawals_cned boolean) IS 'First statement of a reserve: the (user, asset) daily-limit lock until commit, then, read under it, the withdrawal already stored under the key (existing_id), the amount requested since p_since that counts toward the limit, the ledger asset, the two user accounts (NULLs when missing) and a new withdrawal id (when the key is new). Writes nothing.';


--
-- Name: withdrawal_reserve_record(bigint, text, text, text, text, text, text, text, text, numeric, numeric, numeric, numeric, integer, text, text, text, jsonb, text, timestamp with time zone, bigint, bigint); Type: FUNCTION; Schema: public; Owner: custody_withdrawal_writer
--

CREATE FUNCTION public.withdrawal_reserve_record(p_id bigint, p_user_id text, p_request_key text, p_fingerprint text, p_requested_by text, p_chain text, p_asset_code text, p_token text, p_destination text, p_amount_minor numeric, p_fee_max_minor numeric, p_fee_minor numeric, p_chain_amount numeric, p_approvals_required integer, p_state text, p_event text, p_reason text, p_evidence jsonb, p_actor text, p_at timestamp with time zone, p_reserve_transaction_id bigint, p_withdrawals_account_id bigint) RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $$
DECLARE
  v_posting bigint;
  w withdrawals%ROWTYPE;
  e withdrawal_events%ROWTYPE;
BEGIN
  IF p_state IS NULL OR p_state NOT IN ('reserved', 'pending_approval')
     OR p_approvals_required IS NULL
     OR (p_state = 'pending_approval') <> (p_approvals_required > 0) THEN
    RAISE EXCEPTION 'withdrawal %: % is not the reserved state of a withdrawal needing % approval(s)',
      p_id, p_state, p_approvals_required USING ERRCODE = 'check_violation';
  END IF;
  -- Primary-key and unique-index lookups only.
  SELECT p.id INTO v_posting
    FROM ledger_postings p
    JOIN ledger_transactions t ON t.id = p.transaction_id
    JOIN accounts a ON a.id = p.account_id
    JOIN assets s ON s.id = a.asset_id
   WHERE p.transaction_id = p_reserve_transaction_id
     AND p.account_id = p_withdrawals_account_id
     AND t.idempotency_key = 'withdrawal:' || p_id || ':reserve'
     AND a.code = 'user:' || p_user_id || ':withdrawals'
     AND s.code = p_asset_code
     AND p.amount = -(p_amount_minor + p_fee_max_minor);
  IF v_posting IS NULL THEN
    RAISE EXCEPTION 'withdrawal %: ledger transaction % is not its reserve of % + % on user:%:withdrawals',
      p_id, p_reserve_transaction_id, p_amount_minor, p_fee_max_minor, p_user_id
      USING ERRCODE = 'check_violation';
  END IF;

  INSERT INTO withdrawals (id, user_id, request_key, fingerprint, requested_by, chain,
                           asset_code, token, destination, amount_minor, fee_max_minor,
                           fee_minor, chain_amount, approvals_required, state, state_reason,
                           reserve_transaction_id, reserve_posting_id, requested_at,
                           state_changed_at)
  VALUES (p_id, p_user_id, p_request_key, p_fingerprint, p_requested_by, p_chain, p_asset_code,
          p_token, p_destination, p_amount_minor, p_fee_max_minor, p_fee_minor, p_chain_amount,
          p_approvals_required, p_state, p_reason, p_reserve_transaction_id, v_posting, p_at, p_at)
  ON CONFLICT (user_id, request_key) DO NOTHING
  RETURNING * INTO w;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'withdrawal key % of user % raced', p_request_key, p_user_id
      USING ERRCODE = 'serialization_failure';
  END IF;

  INSERT INTO withdrawal_events (withdrawal_id, from_state, to_state, event, reason, evidence,
                                 actor, ledger_transaction_id, occurred_at)
  VALUES (p_id, 'requested', p_state, p_event, p_reason, coalesce(p_evidence, '{}'::jsonb),
          p_actor, p_reserve_transaction_id, p_at)
  RETURNING * INTO e;

  PERFORM outbox_withdrawal_event_write(w, e, NULL);
  RETURN v_posting;
END
$$;


ALTER FUNCTION public.withdrawal_reserve_record(p_id bigint, p_user_id text, p_request_key text, p_fingerprint text, p_requested_by text, p_chain text, p_asset_code text, p_token text, p_destination text, p_amount_minor numeric, p_fee_max_minor numeric, p_fee_minor numeric, p_chain_amount numeric, p_approvals_required integer, p_state text, p_event text, p_reason text, p_evidence jsonb, p_actor text, p_at timestamp with time zone, p_reserve_transaction_id bigint, p_withdrawals_account_id bigint) OWNER TO custody_withdrawal_writer;

--
-- Name: FUNCTION withdrawal_reserve_record(p_id bigint, p_user_id text, p_request_key text, p_fingerprint text, p_requested_by text, p_chain text, p_asset_code text, p_token text, p_destination text, p_amount_minor numeric, p_fee_max_minor numeric, p_fee_minor numeric, p_chain_amount numeric, p_approvals_required integer, p_state text, p_event text, p_reason text, p_evidence jsonb, p_actor text, p_at timestamp with time zone, p_reserve_transaction_id bigint, p_withdrawals_account_id bigint); Type: COMMENT; Schema: public; Owner: custody_withdrawal_writer
--

COMMENT ON FUNCTION public.withdrawal_reserve_record(p_id bigint, p_user_id text, p_request_key text, p_fingerprint text, p_requested_by text, p_chain text, p_asset_code text, p_token text, p_destination text, p_amount_minor numeric, p_fee_max_minor numeric, p_fee_minor numeric, p_chain_amount numeric, p_approvals_required integer, p_state text, p_event text, p_reason text, p_evidence jsonb, p_actor text, p_at timestamp with time zone, p_reserve_transaction_id bigint, p_withdrawals_account_id bigint) IS 'Last statement of a reserve: insert the withdrawal in its reserved state, its history row (requested -> p_state) and that row''s outbox event, after checking that p_reserve_transaction_id is its reserve; returns the reserve posting id (the posting that the settle or release closes). Runs as custody_withdrawal_writer.';


--
-- Name: withdrawal_transition(bigint, jsonb, text, text, text, text, jsonb, text, bigint, bigint, timestamp with time zone); Type: FUNCTION; Schema: public; Owner: custody_state_writer
--

CREATE FUNCTION public.withdrawal_transition(p_id bigint, p_sets jsonb, p_from text, p_to text, p_event text, p_reason text, p_evidence jsonb, p_actor text, p_ledger_transaction_id bigint, p_attempt_id bigint, p_at timestamp with time zone) RETURNS SETOF public.withdrawals
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'public', 'pg_temp'
    AS $$
DECLARE
  w withdrawals%ROWTYPE;
  n withdrawals%ROWTYPE;
  bad text;
BEGIN
  SELECT k INTO bad FROM jsonb_object_keys(coalesce(p_sets, '{}'::jsonb)) k
   WHERE k NOT IN ('state', 'state_reason', 'state_changed_at', 'unknown_since', 'hot_wallet',
                   'nonce', 'landed_attempt_id', 'nonce_closed_at', 'closing_transaction_id')
   LIMIT 1;
  IF bad IS NOT NULL THEN
    RAISE EXCEPTION 'withdrawal %: a transition cannot set %', p_id, bad
      USING ERRCODE = 'check_violation';
  END IF;
  SELECT * INTO w FROM withdrawals WHERE id = p_id FOR UPDATE;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'withdrawal % does not exist', p_id USING ERRCODE = 'no_data_found';
  END IF;
  IF w.state IS DISTINCT FROM p_from
     OR coalesce(p_sets->>'state', p_to) IS DISTINCT FROM p_to
     OR NOT EXISTS (SELECT 1 FROM state_moves m
                     WHERE m.machine = 'withdrawal' AND m.from_state = p_from
                       AND m.event = p_event AND m.to_state = p_to) THEN
    RAISE EXCEPTION 'withdrawal %: % -> % on % is not a move of a withdrawal that is %',
      p_id, p_from, p_to, p_event, w.state USING ERRCODE = 'check_violation';
  END IF;
  n := jsonb_populate_record(w, coalesce(p_sets, '{}'::jsonb));
  UPDATE withdrawals SET state = p_to, state_reason = n.state_reason,
         state_changed_at = n.state_changed_at, unknown_since = n.unknown_since,
         hot_wallet = n.hot_wallet, nonce = n.nonce, landed_attempt_id = n.landed_attempt_id,
         nonce_closed_at = n.nonce_closed_at, closing_transaction_id = n.closing_transaction_id
   WHERE id = p_id
  RETURNING * INTO n;
  INSERT INTO withdrawal_events (withdrawal_id, from_state, to_state, event, reason, evidence,
                                 actor, ledger_transaction_id, attempt_id, occurred_at)
  VALUES (p_id, p_from, p_to, p_event, p_reason, coalesce(p_evidence, '{}'::jsonb), p_actor,
          p_ledger_transaction_id, p_attempt_id, p_at);
  RETURN NEXT n;
END
$$;


ALTER FUNCTION public.withdrawal_transition(p_id bigint, p_sets jsonb, p_from text, p_to text, p_event text, p_reason text, p_evidence jsonb, p_actor text, p_ledger_transaction_id bigint, p_attempt_id bigint, p_at timestamp with time zone) OWNER TO custody_state_writer;

--
-- Name: FUNCTION withdrawal_transition(p_id bigint, p_sets jsonb, p_from text, p_to text, p_event text, p_reason text, p_evidence jsonb, p_actor text, p_ledger_transaction_id bigint, p_attempt_id bigint, p_at timestamp with time zone); Type: COMMENT; Schema: public; Owner: custody_state_writer
--

COMMENT ON FUNCTION public.withdrawal_transition(p_id bigint, p_sets jsonb, p_from text, p_to text, p_event text, p_reason text, p_evidence jsonb, p_actor text, p_ledger_transaction_id bigint, p_attempt_id bigint, p_at timestamp with time zone) IS 'Move a withdrawal (locked) from p_from to p_to on p_event if that is a move of the state machine (state_moves), setting only transition columns from p_sets, and append its history row; returns the updated row. Runs as custody_state_writer.';


--
-- Name: account_balances; Type: TABLE; Schema: public; Owner: CURRENT_USER
--

CREATE TABLE public.account_balances (
    account_id bigint NOT NULL,
    asset_id integer NOT NULL,
    balance public.money128 DEFAULT 0 NOT NULL,
    version bigint DEFAULT 0 NOT NULL,
    debits_must_not_exceed_credits boolean NOT NULL,
    credits_must_not_exceed_debits boolean NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT account_balances_check CHECK (((NOT debits_must_not_exceed_credits) OR ((balance)::numeric <= (0)::numeric))),
    CONSTRAINT account_balances_check1 CHECK (((NOT credits_must_not_exceed_debits) OR ((balance)::numeric >= (0)::numeric))),
    CONSTRAINT account_balances_version_check CHECK ((version >= 0))
);


ALTER TABLE public.account_balances OWNER TO CURRENT_USER;

--
-- Name: TABLE account_balances; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON TABLE public.account_balances IS 'Projection of the postings (a cache), updated in the same transaction as the postings.';


--
-- Name: COLUMN account_balances.balance; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON COLUMN public.account_balances.balance IS 'Sum of the postings: debit positive.';


--
-- Name: COLUMN account_balances.version; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON COLUMN public.account_balances.version IS 'Number of ledger transactions that touched it.';


--
-- Name: accounts; Type: TABLE; Schema: public; Owner: CURRENT_USER
--

CREATE TABLE public.accounts (
    id bigint NOT NULL,
    code text NOT NULL,
    asset_id integer NOT NULL,
    type text NOT NULL,
    debits_must_not_exceed_credits boolean DEFAULT false NOT NULL,
    credits_must_not_exceed_debits boolean DEFAULT false NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT accounts_check CHECK ((NOT (debits_must_not_exceed_credits AND credits_must_not_exceed_debits))),
    CONSTRAINT accounts_code_check CHECK (((length(code) >= 1) AND (length(code) <= 200))),
    CONSTRAINT accounts_type_check CHECK ((type = ANY (ARRAY['asset'::text, 'liability'::text, 'equity'::text, 'revenue'::text, 'expense'::text])))
);


ALTER TABLE public.accounts OWNER TO CURRENT_USER;

--
-- Name: TABLE accounts; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON TABLE public.accounts IS 'Chart of accounts, one row per (code, asset); immutable.';


--
-- Name: accounts_id_seq; Type: SEQUENCE; Schema: public; Owner: CURRENT_USER
--

CREATE SEQUENCE public.accounts_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


ALTER SEQUENCE public.accounts_id_seq OWNER TO CURRENT_USER;

--
-- Name: accounts_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: CURRENT_USER
--

ALTER SEQUENCE public.accounts_id_seq OWNED BY public.accounts.id;


--
-- Name: alembic_version; Type: TABLE; Schema: public; Owner: CURRENT_USER
--

CREATE TABLE public.alembic_version (
    version_num character varying(32) NOT NULL
);


ALTER TABLE public.alembic_version OWNER TO CURRENT_USER;

--
-- Name: api_audit; Type: TABLE; Schema: public; Owner: CURRENT_USER
--

CREATE TABLE public.api_audit (
    id bigint NOT NULL,
    at timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
    actor text NOT NULL,
    client_id bigint,
    key_prefix text,
    scope text,
    action text NOT NULL,
    target text NOT NULL,
    request_id text NOT NULL,
    status smallint NOT NULL,
    details jsonb DEFAULT '{}'::jsonb NOT NULL,
    channel text DEFAULT 'api'::text NOT NULL,
    error_code text,
    error_detail text,
    CONSTRAINT api_audit_channel_check CHECK ((channel = ANY (ARRAY['api'::text, 'console'::text, 'cli'::text]))),
    CONSTRAINT api_audit_error_check CHECK (((error_code IS NULL) OR (status >= 400))),
    CONSTRAINT api_audit_error_code_check CHECK (((length(error_code) >= 1) AND (length(error_code) <= 100))),
    CONSTRAINT api_audit_error_detail_check CHECK ((length(error_detail) <= 2000)),
    CONSTRAINT api_audit_key_check CHECK (((channel = 'cli'::text) = ((client_id IS NULL) AND (key_prefix IS NULL) AND (scope IS NULL))))
);


ALTER TABLE public.api_audit OWNER TO CURRENT_USER;

--
-- Name: TABLE api_audit; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON TABLE public.api_audit IS 'Append-only audit trail: one row per staff action (admin, approver, support) through the API, the console or the command line, and per refusal of one: who, what, target, when, which request, the HTTP status it got and, for a refusal, why.';


--
-- Name: COLUMN api_audit.at; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON COLUMN public.api_audit.at IS 'When the row was written (the database clock).';


--
-- Name: COLUMN api_audit.actor; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON COLUMN public.api_audit.actor IS 'Who acted: the API client''s name (of its key), or cli:<OS user> on the command line.';


--
-- Name: COLUMN api_audit.client_id; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON COLUMN public.api_audit.client_id IS 'The acting key''s client; NULL on the command line.';


--
-- Name: COLUMN api_audit.key_prefix; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON COLUMN public.api_audit.key_prefix IS 'The acting key''s public prefix; NULL on the command line.';


--
-- Name: COLUMN api_audit.scope; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON COLUMN public.api_audit.scope IS 'The acting key''s scope; NULL on the command line.';


--
-- Name: COLUMN api_audit.action; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON COLUMN public.api_audit.action IS 'What was done: a stable dotted name (withdrawal.approval, api_key.revoke, user.read, ...).';


--
-- Name: COLUMN api_audit.target; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON COLUMN public.api_audit.target IS 'What it was done to: name=value pairs, comma-separated, sorted by name ('''' for none).';


--
-- Name: COLUMN api_audit.request_id; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON COLUMN public.api_audit.request_id IS 'The request''s X-Request-ID (API, console), or the id of one command line invocation.';


--
-- Name: COLUMN api_audit.status; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON COLUMN public.api_audit.status IS 'The HTTP status answered (a command line: 200, or the status the API gives its error).';


--
-- Name: COLUMN api_audit.details; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON COLUMN public.api_audit.details IS 'Facts of the action (an Idempotency-Key, a replay, ...).';


--
-- Name: COLUMN api_audit.channel; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON COLUMN public.api_audit.channel IS 'Where the action came from: api, console or cli.';


--
-- Name: COLUMN api_audit.error_code; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON COLUMN public.api_audit.error_code IS 'A refusal''s or failure''s stable code (the problem''s).';


--
-- Name: COLUMN api_audit.error_detail; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON COLUMN public.api_audit.error_detail IS 'A refusal''s or failure''s detail (the problem''s).';


--
-- Name: api_audit_id_seq; Type: SEQUENCE; Schema: public; Owner: CURRENT_USER
--

CREATE SEQUENCE public.api_audit_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


ALTER SEQUENCE public.api_audit_id_seq OWNER TO CURRENT_USER;

--
-- Name: api_audit_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: CURRENT_USER
--

ALTER SEQUENCE public.api_audit_id_seq OWNED BY public.api_audit.id;


--
-- Name: api_auth_failures; Type: TABLE; Schema: public; Owner: CURRENT_USER
--

CREATE UNLOGGED TABLE public.api_auth_failures (
    source text NOT NULL,
    window_start timestamp with time zone NOT NULL,
    failures integer NOT NULL,
    CONSTRAINT api_auth_failures_failures_check CHECK ((failures >= 1)),
    CONSTRAINT api_auth_failures_source_check CHECK (((length(source) >= 1) AND (length(source) <= 100)))
);


ALTER TABLE public.api_auth_failures OWNER TO CURRENT_USER;

--
-- Name: TABLE api_auth_failures; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON TABLE public.api_auth_failures IS 'Failed API authentications per client address and window (api.auth: over the limit, 429).';


--
-- Name: api_clients; Type: TABLE; Schema: public; Owner: CURRENT_USER
--

CREATE TABLE public.api_clients (
    id bigint NOT NULL,
    name text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT api_clients_name_check CHECK ((name ~ '^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$'::text))
);


ALTER TABLE public.api_clients OWNER TO CURRENT_USER;

--
-- Name: TABLE api_clients; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON TABLE public.api_clients IS 'Principals of the API: an exchange backend (scope client) or a person or team (support, admin, approver). The name is the actor recorded in histories and the audit trail.';


--
-- Name: api_clients_id_seq; Type: SEQUENCE; Schema: public; Owner: CURRENT_USER
--

CREATE SEQUENCE public.api_clients_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


ALTER SEQUENCE public.api_clients_id_seq OWNER TO CURRENT_USER;

--
-- Name: api_clients_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: CURRENT_USER
--

ALTER SEQUENCE public.api_clients_id_seq OWNED BY public.api_clients.id;


--
-- Name: api_idempotency; Type: TABLE; Schema: public; Owner: CURRENT_USER
--

CREATE TABLE public.api_idempotency (
    client_id bigint NOT NULL,
    operation text NOT NULL,
    key text NOT NULL,
    fingerprint text NOT NULL,
    state text NOT NULL,
    response_status smallint,
    response_body text,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    method text,
    path text,
    CONSTRAINT api_idempotency_check CHECK (((state = 'completed'::text) = ((response_status IS NOT NULL) AND (response_body IS NOT NULL)))),
    CONSTRAINT api_idempotency_fingerprint_check CHECK ((fingerprint ~ '^[0-9a-f]{64}$'::text)),
    CONSTRAINT api_idempotency_key_check CHECK (((length(key) >= 1) AND (length(key) <= 200))),
    CONSTRAINT api_idempotency_method_check CHECK ((method ~ '^[A-Z]{1,10}$'::text)),
    CONSTRAINT api_idempotency_operation_check CHECK (((length(operation) >= 1) AND (length(operation) <= 64))),
    CONSTRAINT api_idempotency_path_check CHECK (((length(path) >= 1) AND (length(path) <= 2000))),
    CONSTRAINT api_idempotency_response_status_check CHECK (((response_status >= 200) AND (response_status <= 599))),
    CONSTRAINT api_idempotency_state_check CHECK ((state = ANY (ARRAY['in_progress'::text, 'completed'::text])))
);


ALTER TABLE public.api_idempotency OWNER TO CURRENT_USER;

--
-- Name: TABLE api_idempotency; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON TABLE public.api_idempotency IS 'Idempotency-Key records of money-moving requests, per client and operation: the request fingerprint, in_progress while the first request runs, then its response. Kept at least 24 hours (the delete guard refuses younger completed rows).';


--
-- Name: COLUMN api_idempotency.fingerprint; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON COLUMN public.api_idempotency.fingerprint IS 'SHA-256 of the operation, target and body.';


--
-- Name: COLUMN api_idempotency.updated_at; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON COLUMN public.api_idempotency.updated_at IS 'Last claim: a stale in_progress row may be taken over.';


--
-- Name: COLUMN api_idempotency.method; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON COLUMN public.api_idempotency.method IS 'HTTP method of the request first sent with the key (null: stored before 0027).';


--
-- Name: COLUMN api_idempotency.path; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON COLUMN public.api_idempotency.path IS 'Path of the request first sent with the key (null: stored before 0027).';


--
-- Name: api_keys; Type: TABLE; Schema: public; Owner: CURRENT_USER
--

CREATE TABLE public.api_keys (
    id bigint NOT NULL,
    client_id bigint NOT NULL,
    prefix text NOT NULL,
    secret_sha256 text NOT NULL,
    scope text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    revoked_at timestamp with time zone,
    expires_at timestamp with time zone,
    last_used_at timestamp with time zone,
    revoked_by text,
    CONSTRAINT api_keys_prefix_check CHECK ((prefix ~ '^[0-9a-f]{12}$'::text)),
    CONSTRAINT api_keys_revoked_by_check CHECK (((length(revoked_by) >= 1) AND (length(revoked_by) <= 200))),
    CONSTRAINT api_keys_revoked_by_revoked_check CHECK (((revoked_by IS NULL) OR (revoked_at IS NOT NULL))),
    CONSTRAINT api_keys_scope_check CHECK ((scope = ANY (ARRAY['client'::text, 'support'::text, 'admin'::text, 'approver'::text]))),
    CONSTRAINT api_keys_secret_sha256_check CHECK ((secret_sha256 ~ '^[0-9a-f]{64}$'::text))
);


ALTER TABLE public.api_keys OWNER TO CURRENT_USER;

--
-- Name: TABLE api_keys; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON TABLE public.api_keys IS 'API keys: the public prefix finds the row, the SHA-256 of the secret part proves the key. The key itself is shown once and never stored.';


--
-- Name: COLUMN api_keys.prefix; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON COLUMN public.api_keys.prefix IS 'Public part of the key (also shown in the audit trail).';


--
-- Name: COLUMN api_keys.secret_sha256; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON COLUMN public.api_keys.secret_sha256 IS 'SHA-256 (hex) of the 256-bit random secret part.';


--
-- Name: COLUMN api_keys.expires_at; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON COLUMN public.api_keys.expires_at IS 'From this instant (the engine''s clock) the key is refused; NULL: it never expires.';


--
-- Name: COLUMN api_keys.last_used_at; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON COLUMN public.api_keys.last_used_at IS 'Last successful authentication, to the minute (updated at most once a minute per key).';


--
-- Name: COLUMN api_keys.revoked_by; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON COLUMN public.api_keys.revoked_by IS 'Who revoked the key (an actor name, or cli:<user>).';


--
-- Name: api_keys_id_seq; Type: SEQUENCE; Schema: public; Owner: CURRENT_USER
--

CREATE SEQUENCE public.api_keys_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


ALTER SEQUENCE public.api_keys_id_seq OWNER TO CURRENT_USER;

--
-- Name: api_keys_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: CURRENT_USER
--

ALTER SEQUENCE public.api_keys_id_seq OWNED BY public.api_keys.id;


--
-- Name: api_rate_windows; Type: TABLE; Schema: public; Owner: CURRENT_USER
--

CREATE UNLOGGED TABLE public.api_rate_windows (
    key_id bigint NOT NULL,
    window_start timestamp with time zone NOT NULL,
    requests integer NOT NULL,
    slot integer DEFAULT 0 NOT NULL,
    CONSTRAINT api_rate_windows_requests_check CHECK ((requests >= 1))
);


ALTER TABLE public.api_rate_windows OWNER TO CURRENT_USER;

--
-- Name: TABLE api_rate_windows; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON TABLE public.api_rate_windows IS 'Fixed-window request counters per API key: a row per database session, summed per request.';


--
-- Name: api_users; Type: TABLE; Schema: public; Owner: CURRENT_USER
--

CREATE TABLE public.api_users (
    id text NOT NULL,
    client_id bigint NOT NULL,
    reference text,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT api_users_id_check CHECK ((id ~ '^[A-Za-z0-9_.-]{1,100}$'::text)),
    CONSTRAINT api_users_reference_check CHECK (((length(reference) >= 1) AND (length(reference) <= 200)))
);


ALTER TABLE public.api_users OWNER TO CURRENT_USER;

--
-- Name: TABLE api_users; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON TABLE public.api_users IS 'Users created through the API; a user belongs to the client that created it and is invisible to every other client.';


--
-- Name: COLUMN api_users.reference; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON COLUMN public.api_users.reference IS 'The client''s own id for the user (optional).';


--
-- Name: assets; Type: TABLE; Schema: public; Owner: CURRENT_USER
--

CREATE TABLE public.assets (
    id integer NOT NULL,
    code text NOT NULL,
    scale smallint NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT assets_code_check CHECK ((code ~ '^[A-Z0-9][A-Z0-9._-]{0,31}$'::text)),
    CONSTRAINT assets_scale_check CHECK (((scale >= 0) AND (scale <= 38)))
);


ALTER TABLE public.assets OWNER TO CURRENT_USER;

--
-- Name: TABLE assets; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON TABLE public.assets IS 'Ledger assets; scale = number of decimals of one minor unit.';


--
-- Name: assets_id_seq; Type: SEQUENCE; Schema: public; Owner: CURRENT_USER
--

CREATE SEQUENCE public.assets_id_seq
    AS integer
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


ALTER SEQUENCE public.assets_id_seq OWNER TO CURRENT_USER;

--
-- Name: assets_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: CURRENT_USER
--

ALTER SEQUENCE public.assets_id_seq OWNED BY public.assets.id;


--
-- Name: balance_checkpoint_entries; Type: TABLE; Schema: public; Owner: CURRENT_USER
--

CREATE TABLE public.balance_checkpoint_entries (
    checkpoint_id integer NOT NULL,
    account_id bigint NOT NULL,
    balance public.money128 NOT NULL,
    version bigint NOT NULL
);


ALTER TABLE public.balance_checkpoint_entries OWNER TO CURRENT_USER;

--
-- Name: balance_checkpoints; Type: TABLE; Schema: public; Owner: CURRENT_USER
--

CREATE TABLE public.balance_checkpoints (
    id integer NOT NULL,
    through_posting_id bigint NOT NULL,
    created_at timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
    verified boolean NOT NULL,
    accounts_count integer NOT NULL,
    digest text NOT NULL,
    seal_id bigint,
    seal_hash text,
    CONSTRAINT balance_checkpoints_check CHECK (((seal_id IS NULL) = (seal_hash IS NULL))),
    CONSTRAINT balance_checkpoints_digest_check CHECK ((digest ~ '^[0-9a-f]{64}$'::text)),
    CONSTRAINT balance_checkpoints_seal_hash_check CHECK ((seal_hash ~ '^[0-9a-f]{64}$'::text))
);


ALTER TABLE public.balance_checkpoints OWNER TO CURRENT_USER;

--
-- Name: TABLE balance_checkpoints; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON TABLE public.balance_checkpoints IS 'Balances of every account covering all postings with id <= through_posting_id; verified when the replay that produced it agreed with the stored balances.';


--
-- Name: COLUMN balance_checkpoints.seal_id; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON COLUMN public.balance_checkpoints.seal_id IS 'The newest ledger seal when the checkpoint was taken (NULL: none yet); seal_hash is its hash, so that changing that seal row afterwards is detected.';


--
-- Name: balance_checkpoints_id_seq; Type: SEQUENCE; Schema: public; Owner: CURRENT_USER
--

CREATE SEQUENCE public.balance_checkpoints_id_seq
    AS integer
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


ALTER SEQUENCE public.balance_checkpoints_id_seq OWNER TO CURRENT_USER;

--
-- Name: balance_checkpoints_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: CURRENT_USER
--

ALTER SEQUENCE public.balance_checkpoints_id_seq OWNED BY public.balance_checkpoints.id;


--
-- Name: cases; Type: TABLE; Schema: public; Owner: CURRENT_USER
--

CREATE TABLE public.cases (
    id bigint NOT NULL,
    type text NOT NULL,
    subject text NOT NULL,
    refs jsonb NOT NULL,
    expected text,
    observed text,
    evidence jsonb NOT NULL,
    status text DEFAULT 'open'::text NOT NULL,
    first_seen_at timestamp with time zone NOT NULL,
    last_seen_at timestamp with time zone NOT NULL,
    seen_count integer DEFAULT 1 NOT NULL,
    opened_by text NOT NULL,
    resolution text,
    resolved_by text,
    resolved_at timestamp with time zone,
    resolution_transaction_id bigint,
    CONSTRAINT cases_check CHECK ((last_seen_at >= first_seen_at)),
    CONSTRAINT cases_evidence_check CHECK ((jsonb_typeof(evidence) = 'object'::text)),
    CONSTRAINT cases_expected_check CHECK ((length(expected) <= 1000)),
    CONSTRAINT cases_observed_check CHECK ((length(observed) <= 1000)),
    CONSTRAINT cases_opened_by_check CHECK (((length(opened_by) >= 1) AND (length(opened_by) <= 200))),
    CONSTRAINT cases_refs_check CHECK ((jsonb_typeof(refs) = 'object'::text)),
    CONSTRAINT cases_resolution_check CHECK (((length(resolution) >= 1) AND (length(resolution) <= 2000))),
    CONSTRAINT cases_resolved_by_check CHECK (((length(resolved_by) >= 1) AND (length(resolved_by) <= 200))),
    CONSTRAINT cases_resolved_check CHECK ((((status = 'open'::text) AND (resolution IS NULL) AND (resolved_by IS NULL) AND (resolved_at IS NULL) AND (resolution_transaction_id IS NULL)) OR ((status = 'resolved'::text) AND (resolution IS NOT NULL) AND (resolved_by IS NOT NULL) AND (resolved_at IS NOT NULL)))),
    CONSTRAINT cases_seen_count_check CHECK ((seen_count >= 1)),
    CONSTRAINT cases_status_check CHECK ((status = ANY (ARRAY['open'::text, 'resolved'::text]))),
    CONSTRAINT cases_subject_check CHECK (((length(subject) >= 1) AND (length(subject) <= 300))),
    CONSTRAINT cases_type_check CHECK ((type = ANY (ARRAY['balance_drift'::text, 'balance_missing'::text, 'flag_violated'::text, 'trial_balance'::text, 'custody_mismatch'::text, 'transaction_unbalanced'::text, 'transaction_empty'::text, 'posting_over_reversed'::text, 'posting_over_closed'::text, 'checkpoint_digest'::text, 'posting_asset_mismatch'::text, 'posting_orphan'::text, 'seal_range'::text, 'seal_chain_broken'::text, 'seal_hash_mismatch'::text, 'seal_root_mismatch'::text, 'seal_counts'::text, 'seal_diagnosis_unavailable'::text, 'seal_transaction_changed'::text, 'seal_transaction_missing'::text, 'seal_transaction_inserted'::text, 'seal_transactions_reordered'::text, 'checkpoint_seal_link'::text, 'ledger_finding'::text, 'deposit_transaction_missing'::text, 'deposit_transaction_extra'::text, 'deposit_history_missing'::text, 'reserve_overdue'::text, 'withdrawal_unknown_aged'::text, 'withdrawal_held_aged'::text, 'deposit_review_aged'::text, 'custody_chain_mismatch'::text, 'provider_amount_mismatch'::text, 'provider_missing_in_ledger'::text, 'provider_missing_at_provider'::text, 'deep_reorg'::text, 'unattributed_own_address'::text, 'settlement_mismatch'::text, 'ledger_refused'::text, 'invariant_broken'::text, 'reserves_negative_balance'::text, 'reserves_shortfall'::text, 'reserves_difference_unexplained'::text])))
);


ALTER TABLE public.cases OWNER TO CURRENT_USER;

--
-- Name: TABLE cases; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON TABLE public.cases IS 'Every case of the engine: a discrepancy a check found, or a deposit or withdrawal case (deposit_cases, withdrawal_cases name theirs in case_id). Changed only by a re-sighting of an open case or its one-time resolution (trigger cases_guard); never deleted.';


--
-- Name: COLUMN cases.type; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON COLUMN public.cases.type IS 'What kind of discrepancy (reconcile.model.CaseType).';


--
-- Name: COLUMN cases.subject; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON COLUMN public.cases.subject IS 'The stable key of the discrepancy (account:42, deposit:17, withdrawal:9, custody:devnet:0xabc...:ETH, provider:acme:REF123): at most one open case per type and subject, so the same discrepancy seen again updates its case.';


--
-- Name: COLUMN cases.refs; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON COLUMN public.cases.refs IS 'What the case is about, as ids in strings (account_id, deposit_id, withdrawal_id, ledger_transaction_id, deposit_case_id, withdrawal_case_id, ...).';


--
-- Name: COLUMN cases.expected; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON COLUMN public.cases.expected IS 'What our records say (a decimal string of minor units where it is an amount); NULL: none.';


--
-- Name: COLUMN cases.observed; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON COLUMN public.cases.observed IS 'What the check observed, as of the last sighting (minor units where an amount); NULL: none.';


--
-- Name: COLUMN cases.evidence; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON COLUMN public.cases.evidence IS 'What the check saw, as of the last sighting.';


--
-- Name: COLUMN cases.seen_count; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON COLUMN public.cases.seen_count IS 'How many runs of a check saw it (1 when opened).';


--
-- Name: COLUMN cases.opened_by; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON COLUMN public.cases.opened_by IS 'The check or job that opened the case.';


--
-- Name: COLUMN cases.resolution; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON COLUMN public.cases.resolution IS 'How it was resolved (the resolver''s words).';


--
-- Name: COLUMN cases.resolution_transaction_id; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON COLUMN public.cases.resolution_transaction_id IS 'The new ledger transaction that fixed it, when the fix moved money (it references the case).';


--
-- Name: cases_id_seq; Type: SEQUENCE; Schema: public; Owner: CURRENT_USER
--

CREATE SEQUENCE public.cases_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


ALTER SEQUENCE public.cases_id_seq OWNER TO CURRENT_USER;

--
-- Name: cases_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: CURRENT_USER
--

ALTER SEQUENCE public.cases_id_seq OWNED BY public.cases.id;


--
-- Name: cold_transfer_approvals; Type: TABLE; Schema: public; Owner: CURRENT_USER
--

CREATE TABLE public.cold_transfer_approvals (
    cold_transfer_id bigint NOT NULL,
    approver text NOT NULL,
    decision text NOT NULL,
    reason text,
    decided_at timestamp with time zone NOT NULL,
    CONSTRAINT cold_transfer_approvals_approver_check CHECK (((length(approver) >= 1) AND (length(approver) <= 200))),
    CONSTRAINT cold_transfer_approvals_decision_check CHECK ((decision = ANY (ARRAY['approve'::text, 'reject'::text])))
);


ALTER TABLE public.cold_transfer_approvals OWNER TO CURRENT_USER;

--
-- Name: TABLE cold_transfer_approvals; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON TABLE public.cold_transfer_approvals IS 'One decision per admin per cold transfer (a second one by the same admin is refused).';


--
-- Name: cold_transfer_events; Type: TABLE; Schema: public; Owner: CURRENT_USER
--

CREATE TABLE public.cold_transfer_events (
    id bigint NOT NULL,
    cold_transfer_id bigint NOT NULL,
    from_state text,
    to_state text NOT NULL,
    event text NOT NULL,
    reason text,
    evidence jsonb DEFAULT '{}'::jsonb NOT NULL,
    actor text NOT NULL,
    ledger_transaction_id bigint,
    attempt_id bigint,
    occurred_at timestamp with time zone NOT NULL,
    recorded_at timestamp with time zone DEFAULT clock_timestamp() NOT NULL
);


ALTER TABLE public.cold_transfer_events OWNER TO CURRENT_USER;

--
-- Name: TABLE cold_transfer_events; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON TABLE public.cold_transfer_events IS 'The append-only history of each cold transfer.';


--
-- Name: cold_transfer_events_id_seq; Type: SEQUENCE; Schema: public; Owner: CURRENT_USER
--

CREATE SEQUENCE public.cold_transfer_events_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


ALTER SEQUENCE public.cold_transfer_events_id_seq OWNER TO CURRENT_USER;

--
-- Name: cold_transfer_events_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: CURRENT_USER
--

ALTER SEQUENCE public.cold_transfer_events_id_seq OWNED BY public.cold_transfer_events.id;


--
-- Name: cold_transfers; Type: TABLE; Schema: public; Owner: CURRENT_USER
--

CREATE TABLE public.cold_transfers (
    id bigint NOT NULL,
    chain text NOT NULL,
    asset text NOT NULL,
    token text,
    sender text NOT NULL,
    destination text NOT NULL,
    amount numeric(78,0) NOT NULL,
    approvals_required integer NOT NULL,
    proposed_by text NOT NULL,
    reason text NOT NULL,
    state text NOT NULL,
    state_reason text,
    nonce bigint,
    gas_limit bigint NOT NULL,
    landed_attempt_id bigint,
    gas_paid numeric(78,0),
    created_at timestamp with time zone NOT NULL,
    updated_at timestamp with time zone NOT NULL,
    request_key text,
    CONSTRAINT cold_transfers_amount_check CHECK ((amount > (0)::numeric)),
    CONSTRAINT cold_transfers_approvals_required_check CHECK (((approvals_required >= 1) AND (approvals_required <= 2))),
    CONSTRAINT cold_transfers_destination_check CHECK ((destination ~ '^0x[0-9a-f]{40}$'::text)),
    CONSTRAINT cold_transfers_gas_limit_check CHECK ((gas_limit > 0)),
    CONSTRAINT cold_transfers_gas_paid_check CHECK ((gas_paid >= (0)::numeric)),
    CONSTRAINT cold_transfers_nonce_check CHECK ((nonce >= 0)),
    CONSTRAINT cold_transfers_proposed_by_check CHECK (((length(proposed_by) >= 1) AND (length(proposed_by) <= 200))),
    CONSTRAINT cold_transfers_reason_check CHECK (((length(reason) >= 1) AND (length(reason) <= 500))),
    CONSTRAINT cold_transfers_request_key_check CHECK (((length(request_key) >= 1) AND (length(request_key) <= 300))),
    CONSTRAINT cold_transfers_sender_check CHECK ((sender ~ '^0x[0-9a-f]{40}$'::text)),
    CONSTRAINT cold_transfers_state_check CHECK ((state = ANY (ARRAY['proposed'::text, 'approved'::text, 'signing'::text, 'signed'::text, 'broadcast'::text, 'unknown'::text, 'included'::text, 'final'::text, 'reverted'::text, 'dropped'::text, 'rejected'::text]))),
    CONSTRAINT cold_transfers_token_check CHECK ((token ~ '^0x[0-9a-f]{40}$'::text))
);


ALTER TABLE public.cold_transfers OWNER TO CURRENT_USER;

--
-- Name: TABLE cold_transfers; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON TABLE public.cold_transfers IS 'The excess of the hot wallet over its configured maximum, moved to the configured cold address (amount in the chain''s smallest unit). Signed only once approved: by one admin, or by two different admins above the configured amount; never by the one who proposed it.';


--
-- Name: COLUMN cold_transfers.request_key; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON COLUMN public.cold_transfers.request_key IS 'The proposer''s request key (api:<client>:<Idempotency-Key> or cli:<key>); NULL for a proposal of the hot-limit check. The same key again returns the first proposal.';


--
-- Name: cold_transfers_id_seq; Type: SEQUENCE; Schema: public; Owner: CURRENT_USER
--

CREATE SEQUENCE public.cold_transfers_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


ALTER SEQUENCE public.cold_transfers_id_seq OWNER TO CURRENT_USER;

--
-- Name: cold_transfers_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: CURRENT_USER
--

ALTER SEQUENCE public.cold_transfers_id_seq OWNED BY public.cold_transfers.id;


--
-- Name: console_secrets; Type: TABLE; Schema: public; Owner: CURRENT_USER
--

CREATE TABLE public.console_secrets (
    id smallint NOT NULL,
    created_at timestamp with time zone NOT NULL,
    secret_sealed text NOT NULL,
    CONSTRAINT console_secrets_id_check CHECK ((id = 1)),
    CONSTRAINT console_secrets_secret_sealed_check CHECK ((secret_sealed ~ '^cs1\.[0-9a-f]{16}\.[A-Za-z0-9_-]{80}\.[A-Za-z0-9_-]{38,}$'::text))
);


ALTER TABLE public.console_secrets OWNER TO CURRENT_USER;

--
-- Name: TABLE console_secrets; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON TABLE public.console_secrets IS 'The signing key of the console''s session cookies (one row; its value never changes, its sealing is re-wrapped when the secrets key rotates).';


--
-- Name: COLUMN console_secrets.secret_sealed; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON COLUMN public.console_secrets.secret_sealed IS 'The cookie signing key, sealed (config.encryption, bound to this row): re-wrapped under a new CUSTODY_SECRETS_KEY by custody secrets rotate-key, its value never changes.';


--
-- Name: console_sessions; Type: TABLE; Schema: public; Owner: CURRENT_USER
--

CREATE TABLE public.console_sessions (
    id bigint NOT NULL,
    token_digest text NOT NULL,
    key_id bigint NOT NULL,
    csrf_token text NOT NULL,
    created_at timestamp with time zone NOT NULL,
    expires_at timestamp with time zone NOT NULL,
    ended_at timestamp with time zone,
    CONSTRAINT console_sessions_check CHECK ((expires_at > created_at)),
    CONSTRAINT console_sessions_check1 CHECK (((ended_at IS NULL) OR (ended_at >= created_at))),
    CONSTRAINT console_sessions_csrf_token_check CHECK ((csrf_token ~ '^[A-Za-z0-9_-]{43}$'::text)),
    CONSTRAINT console_sessions_token_digest_check CHECK ((token_digest ~ '^[0-9a-f]{64}$'::text))
);


ALTER TABLE public.console_sessions OWNER TO CURRENT_USER;

--
-- Name: TABLE console_sessions; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON TABLE public.console_sessions IS 'Staff console sessions: the SHA-256 of the cookie''s token, the API key signed in with, the CSRF token of its forms, and when it expires or ended. Rows are never deleted; only ended_at changes, once (triggers/console_sessions.sql).';


--
-- Name: console_sessions_id_seq; Type: SEQUENCE; Schema: public; Owner: CURRENT_USER
--

CREATE SEQUENCE public.console_sessions_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


ALTER SEQUENCE public.console_sessions_id_seq OWNER TO CURRENT_USER;

--
-- Name: console_sessions_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: CURRENT_USER
--

ALTER SEQUENCE public.console_sessions_id_seq OWNED BY public.console_sessions.id;


--
-- Name: deposit_addresses; Type: TABLE; Schema: public; Owner: CURRENT_USER
--

CREATE TABLE public.deposit_addresses (
    family text NOT NULL,
    address text NOT NULL,
    derivation_index integer NOT NULL,
    user_id text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT deposit_addresses_address_check CHECK ((address ~ '^0x[0-9a-f]{40}$'::text)),
    CONSTRAINT deposit_addresses_derivation_index_check CHECK ((derivation_index >= 0)),
    CONSTRAINT deposit_addresses_family_check CHECK ((family ~ '^[a-z][a-z0-9_-]{0,31}$'::text)),
    CONSTRAINT deposit_addresses_user_id_check CHECK (((length(user_id) >= 1) AND (length(user_id) <= 100)))
);


ALTER TABLE public.deposit_addresses OWNER TO CURRENT_USER;

--
-- Name: TABLE deposit_addresses; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON TABLE public.deposit_addresses IS 'Deposit address of each user per chain family (every chain of the family maps (chain, address) to the user through it); derived deterministically from derivation_index.';


--
-- Name: deposit_case_refunds; Type: TABLE; Schema: public; Owner: CURRENT_USER
--

CREATE TABLE public.deposit_case_refunds (
    case_id bigint NOT NULL,
    withdrawal_id bigint NOT NULL,
    recorded_at timestamp with time zone DEFAULT clock_timestamp() NOT NULL
);


ALTER TABLE public.deposit_case_refunds OWNER TO CURRENT_USER;

--
-- Name: TABLE deposit_case_refunds; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON TABLE public.deposit_case_refunds IS 'The withdrawal that pays a refund-resolved case back to the transfer''s sender (a withdrawal of the company user company:refunds, request key case:{id}:refund).';


--
-- Name: COLUMN deposit_case_refunds.withdrawal_id; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON COLUMN public.deposit_case_refunds.withdrawal_id IS 'The withdrawal (withdrawals.id; no foreign key: deposits and withdrawals stay apart).';


--
-- Name: deposit_case_resolutions; Type: TABLE; Schema: public; Owner: CURRENT_USER
--

CREATE TABLE public.deposit_case_resolutions (
    case_id bigint NOT NULL,
    reversal_transaction_id bigint,
    resolved_by text NOT NULL,
    reason text NOT NULL,
    resolved_at timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
    outcome text,
    approved_by text,
    ledger_transaction_id bigint,
    withdrawal_id bigint,
    CONSTRAINT deposit_case_resolutions_approved_by_check CHECK (((length(approved_by) >= 1) AND (length(approved_by) <= 200))),
    CONSTRAINT deposit_case_resolutions_outcome_check CHECK ((outcome = ANY (ARRAY['capital'::text, 'return'::text, 'refund'::text]))),
    CONSTRAINT deposit_case_resolutions_reason_check CHECK ((length(reason) >= 1)),
    CONSTRAINT deposit_case_resolutions_resolved_by_check CHECK (((length(resolved_by) >= 1) AND (length(resolved_by) <= 200)))
);


ALTER TABLE public.deposit_case_resolutions OWNER TO CURRENT_USER;

--
-- Name: COLUMN deposit_case_resolutions.outcome; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON COLUMN public.deposit_case_resolutions.outcome IS 'For an unattributed own-address transfer: capital (ledger_transaction_id moved it from suspense to the treasury), return (linked to withdrawal_id) or refund (ledger_transaction_id moved it from suspense to the company refund wallet; the withdrawal to the sender is in deposit_case_refunds). NULL for older kinds.';


--
-- Name: deposit_case_votes; Type: TABLE; Schema: public; Owner: CURRENT_USER
--

CREATE TABLE public.deposit_case_votes (
    id bigint NOT NULL,
    case_id bigint NOT NULL,
    role text NOT NULL,
    outcome text NOT NULL,
    withdrawal_id bigint,
    reason text NOT NULL,
    voted_by text NOT NULL,
    voted_at timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
    CONSTRAINT deposit_case_votes_check CHECK (((outcome = 'return'::text) = (withdrawal_id IS NOT NULL))),
    CONSTRAINT deposit_case_votes_outcome_check CHECK ((outcome = ANY (ARRAY['capital'::text, 'return'::text, 'refund'::text]))),
    CONSTRAINT deposit_case_votes_reason_check CHECK (((length(reason) >= 1) AND (length(reason) <= 1000))),
    CONSTRAINT deposit_case_votes_role_check CHECK ((role = ANY (ARRAY['proposal'::text, 'approval'::text]))),
    CONSTRAINT deposit_case_votes_voted_by_check CHECK (((length(voted_by) >= 1) AND (length(voted_by) <= 200)))
);


ALTER TABLE public.deposit_case_votes OWNER TO CURRENT_USER;

--
-- Name: TABLE deposit_case_votes; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON TABLE public.deposit_case_votes IS 'Two-admin resolution of a case: one proposal (an outcome and a reason) and one approval of the same outcome by another admin (a trigger refuses the proposer).';


--
-- Name: deposit_case_votes_id_seq; Type: SEQUENCE; Schema: public; Owner: CURRENT_USER
--

CREATE SEQUENCE public.deposit_case_votes_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


ALTER SEQUENCE public.deposit_case_votes_id_seq OWNER TO CURRENT_USER;

--
-- Name: deposit_case_votes_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: CURRENT_USER
--

ALTER SEQUENCE public.deposit_case_votes_id_seq OWNED BY public.deposit_case_votes.id;


--
-- Name: deposit_cases; Type: TABLE; Schema: public; Owner: CURRENT_USER
--

CREATE TABLE public.deposit_cases (
    id bigint NOT NULL,
    kind text NOT NULL,
    deposit_id bigint NOT NULL,
    ledger_transaction_id bigint,
    expected jsonb NOT NULL,
    observed jsonb NOT NULL,
    opened_at timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
    case_id bigint NOT NULL,
    CONSTRAINT deposit_cases_kind_check CHECK ((kind = ANY (ARRAY['deep_reorg'::text, 'unattributed_own_address'::text])))
);


ALTER TABLE public.deposit_cases OWNER TO CURRENT_USER;

--
-- Name: TABLE deposit_cases; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON TABLE public.deposit_cases IS 'Durable cases the watcher opened (a credited deposit whose block stopped being canonical). Open until a row in deposit_case_resolutions references it.';


--
-- Name: COLUMN deposit_cases.case_id; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON COLUMN public.deposit_cases.case_id IS 'The case in cases (set by trigger; equal to id for every case opened since revision 0021).';


--
-- Name: deposit_cases_id_seq; Type: SEQUENCE; Schema: public; Owner: CURRENT_USER
--

CREATE SEQUENCE public.deposit_cases_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


ALTER SEQUENCE public.deposit_cases_id_seq OWNER TO CURRENT_USER;

--
-- Name: deposit_cases_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: CURRENT_USER
--

ALTER SEQUENCE public.deposit_cases_id_seq OWNED BY public.deposit_cases.id;


--
-- Name: deposit_events; Type: TABLE; Schema: public; Owner: CURRENT_USER
--

CREATE TABLE public.deposit_events (
    id bigint NOT NULL,
    deposit_id bigint NOT NULL,
    chain text NOT NULL,
    tx_hash text NOT NULL,
    "position" text NOT NULL,
    event text NOT NULL,
    state text NOT NULL,
    block_number bigint,
    block_hash text,
    confirmations integer,
    rule text,
    evidence jsonb DEFAULT '{}'::jsonb NOT NULL,
    reason text,
    ledger_transaction_id bigint,
    inbox_event_id text,
    observed_at timestamp with time zone NOT NULL,
    recorded_at timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
    CONSTRAINT deposit_events_event_check CHECK ((event = ANY (ARRAY['transfer_ignored'::text, 'transfer_included'::text, 'confirmations_observed'::text, 'block_reorged_out'::text, 'transfer_reincluded'::text, 'finality_reached'::text, 'attested_for_user'::text, 'attested_for_suspense'::text, 'custody_record_disagreed'::text, 'conversion_inexact'::text, 'provider_completed_early'::text, 'nonce_consumed'::text, 'internal_matched'::text, 'funding_matched'::text, 'own_unattributed'::text, 'capital_decided'::text]))),
    CONSTRAINT deposit_events_state_check CHECK ((state = ANY (ARRAY['included'::text, 'unconfirmed'::text, 'final'::text, 'credited'::text, 'suspense'::text, 'held_for_review'::text, 'failed'::text, 'ignored'::text, 'disputed'::text, 'internal'::text, 'capital'::text])))
);


ALTER TABLE public.deposit_events OWNER TO CURRENT_USER;

--
-- Name: TABLE deposit_events; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON TABLE public.deposit_events IS 'Append-only deposit history: one row per observation of a deposit keyed by (chain, tx_hash, position); event is the fact observed, state the deposit''s state after it.';


--
-- Name: deposit_events_id_seq; Type: SEQUENCE; Schema: public; Owner: CURRENT_USER
--

CREATE SEQUENCE public.deposit_events_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


ALTER SEQUENCE public.deposit_events_id_seq OWNER TO CURRENT_USER;

--
-- Name: deposit_events_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: CURRENT_USER
--

ALTER SEQUENCE public.deposit_events_id_seq OWNED BY public.deposit_events.id;


--
-- Name: deposits; Type: TABLE; Schema: public; Owner: CURRENT_USER
--

CREATE TABLE public.deposits (
    id bigint NOT NULL,
    chain text NOT NULL,
    tx_hash text NOT NULL,
    "position" text NOT NULL,
    token text,
    from_address text NOT NULL,
    to_address text NOT NULL,
    value numeric(78,0) NOT NULL,
    tx_from text,
    tx_nonce bigint,
    user_id text,
    asset_code text,
    amount_minor public.money128,
    booking text NOT NULL,
    booking_reason text,
    state text NOT NULL,
    block_number bigint,
    block_hash text,
    confirmations integer,
    last_event_id bigint NOT NULL,
    ledger_transaction_id bigint,
    first_seen_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    address_kind text DEFAULT 'deposit'::text NOT NULL,
    CONSTRAINT deposits_address_kind_check CHECK ((address_kind = ANY (ARRAY['deposit'::text, 'hot'::text, 'cold'::text]))),
    CONSTRAINT deposits_amount_minor_check CHECK (((amount_minor)::numeric > (0)::numeric)),
    CONSTRAINT deposits_booking_check CHECK ((booking = ANY (ARRAY['user'::text, 'suspense'::text, 'review'::text, 'ignore'::text, 'own'::text]))),
    CONSTRAINT deposits_position_check CHECK (("position" ~ '^(log:[0-9]+|call:[0-9]+(\.[0-9]+)*)$'::text)),
    CONSTRAINT deposits_state_check CHECK ((state = ANY (ARRAY['included'::text, 'unconfirmed'::text, 'final'::text, 'credited'::text, 'suspense'::text, 'held_for_review'::text, 'failed'::text, 'ignored'::text, 'disputed'::text, 'internal'::text, 'capital'::text]))),
    CONSTRAINT deposits_token_check CHECK (((token ~ '^0x[0-9a-f]+$'::text) AND (length(token) = 42))),
    CONSTRAINT deposits_tx_hash_check CHECK (((tx_hash ~ '^0x[0-9a-f]+$'::text) AND (length(tx_hash) = 66))),
    CONSTRAINT deposits_value_check CHECK ((value >= (0)::numeric))
);


ALTER TABLE public.deposits OWNER TO CURRENT_USER;

--
-- Name: TABLE deposits; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON TABLE public.deposits IS 'One row per deposit key (chain, tx_hash, position): the immutable facts of the transfer and its current state, a projection of deposit_events updated in the same transaction.';


--
-- Name: COLUMN deposits."position"; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON COLUMN public.deposits."position" IS 'log:<n>: index of the Transfer log in the receipt logs (never the block-wide logIndex); call:0: the transaction''s own top-level native value.';


--
-- Name: COLUMN deposits.value; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON COLUMN public.deposits.value IS 'Exact on-chain amount (uint256) in the token''s units.';


--
-- Name: COLUMN deposits.amount_minor; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON COLUMN public.deposits.amount_minor IS 'The value in the ledger asset''s minor units; NULL when not exactly representable.';


--
-- Name: COLUMN deposits.booking; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON COLUMN public.deposits.booking IS 'Decided once at ingestion: credit the user, book to suspense, hold for review, or ignore.';


--
-- Name: COLUMN deposits.address_kind; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON COLUMN public.deposits.address_kind IS 'The kind of our address the transfer arrived at: a user''s deposit address, a hot wallet, or a cold (watch-only) address; user_id is NULL for hot and cold.';


--
-- Name: deposits_id_seq; Type: SEQUENCE; Schema: public; Owner: CURRENT_USER
--

CREATE SEQUENCE public.deposits_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


ALTER SEQUENCE public.deposits_id_seq OWNER TO CURRENT_USER;

--
-- Name: deposits_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: CURRENT_USER
--

ALTER SEQUENCE public.deposits_id_seq OWNED BY public.deposits.id;


--
-- Name: gas_top_up_events; Type: TABLE; Schema: public; Owner: CURRENT_USER
--

CREATE TABLE public.gas_top_up_events (
    id bigint NOT NULL,
    top_up_id bigint NOT NULL,
    from_state text,
    to_state text NOT NULL,
    event text NOT NULL,
    reason text,
    evidence jsonb DEFAULT '{}'::jsonb NOT NULL,
    actor text NOT NULL,
    ledger_transaction_id bigint,
    attempt_id bigint,
    occurred_at timestamp with time zone NOT NULL,
    recorded_at timestamp with time zone DEFAULT clock_timestamp() NOT NULL
);


ALTER TABLE public.gas_top_up_events OWNER TO CURRENT_USER;

--
-- Name: TABLE gas_top_up_events; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON TABLE public.gas_top_up_events IS 'The append-only history of each gas top-up.';


--
-- Name: gas_top_up_events_id_seq; Type: SEQUENCE; Schema: public; Owner: CURRENT_USER
--

CREATE SEQUENCE public.gas_top_up_events_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


ALTER SEQUENCE public.gas_top_up_events_id_seq OWNER TO CURRENT_USER;

--
-- Name: gas_top_up_events_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: CURRENT_USER
--

ALTER SEQUENCE public.gas_top_up_events_id_seq OWNED BY public.gas_top_up_events.id;


--
-- Name: gas_top_ups; Type: TABLE; Schema: public; Owner: CURRENT_USER
--

CREATE TABLE public.gas_top_ups (
    id bigint NOT NULL,
    chain text NOT NULL,
    sender text NOT NULL,
    address text NOT NULL,
    amount numeric(78,0) NOT NULL,
    state text NOT NULL,
    state_reason text,
    nonce bigint,
    gas_limit bigint NOT NULL,
    landed_attempt_id bigint,
    gas_paid numeric(78,0),
    created_at timestamp with time zone NOT NULL,
    updated_at timestamp with time zone NOT NULL,
    CONSTRAINT gas_top_ups_address_check CHECK ((address ~ '^0x[0-9a-f]{40}$'::text)),
    CONSTRAINT gas_top_ups_amount_check CHECK ((amount > (0)::numeric)),
    CONSTRAINT gas_top_ups_gas_limit_check CHECK ((gas_limit > 0)),
    CONSTRAINT gas_top_ups_gas_paid_check CHECK ((gas_paid >= (0)::numeric)),
    CONSTRAINT gas_top_ups_nonce_check CHECK ((nonce >= 0)),
    CONSTRAINT gas_top_ups_sender_check CHECK ((sender ~ '^0x[0-9a-f]{40}$'::text)),
    CONSTRAINT gas_top_ups_state_check CHECK ((state = ANY (ARRAY['ready'::text, 'signing'::text, 'signed'::text, 'broadcast'::text, 'unknown'::text, 'included'::text, 'final'::text, 'reverted'::text, 'dropped'::text])))
);


ALTER TABLE public.gas_top_ups OWNER TO CURRENT_USER;

--
-- Name: TABLE gas_top_ups; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON TABLE public.gas_top_ups IS 'Native asset sent from the hot wallet to a deposit address so that it can pay the gas of a token sweep (amount in the chain''s smallest unit). Treasury money while it sits there.';


--
-- Name: gas_top_ups_id_seq; Type: SEQUENCE; Schema: public; Owner: CURRENT_USER
--

CREATE SEQUENCE public.gas_top_ups_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


ALTER SEQUENCE public.gas_top_ups_id_seq OWNER TO CURRENT_USER;

--
-- Name: gas_top_ups_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: CURRENT_USER
--

ALTER SEQUENCE public.gas_top_ups_id_seq OWNED BY public.gas_top_ups.id;


--
-- Name: hot_limit_episodes; Type: TABLE; Schema: public; Owner: CURRENT_USER
--

CREATE TABLE public.hot_limit_episodes (
    id bigint NOT NULL,
    chain text NOT NULL,
    asset text NOT NULL,
    side text NOT NULL,
    hot_wallet text NOT NULL,
    limit_amount numeric(78,0) NOT NULL,
    holding numeric(78,0) NOT NULL,
    finalized_block bigint NOT NULL,
    refill_request_id bigint,
    started_at timestamp with time zone NOT NULL,
    ended_at timestamp with time zone,
    ended_holding numeric(78,0),
    CONSTRAINT hot_limit_episodes_check CHECK (((ended_at IS NULL) = (ended_holding IS NULL))),
    CONSTRAINT hot_limit_episodes_check1 CHECK (((ended_at IS NULL) OR (ended_at >= started_at))),
    CONSTRAINT hot_limit_episodes_check2 CHECK (((refill_request_id IS NULL) OR (side = 'below_min'::text))),
    CONSTRAINT hot_limit_episodes_finalized_block_check CHECK ((finalized_block >= 0)),
    CONSTRAINT hot_limit_episodes_hot_wallet_check CHECK ((hot_wallet ~ '^0x[0-9a-f]{40}$'::text)),
    CONSTRAINT hot_limit_episodes_limit_amount_check CHECK ((limit_amount >= (0)::numeric)),
    CONSTRAINT hot_limit_episodes_side_check CHECK ((side = ANY (ARRAY['above_max'::text, 'below_min'::text])))
);


ALTER TABLE public.hot_limit_episodes OWNER TO CURRENT_USER;

--
-- Name: TABLE hot_limit_episodes; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON TABLE public.hot_limit_episodes IS 'A stretch of time during which the hot wallet''s holding of an asset was above its maximum or below its minimum (amounts in the chain''s smallest unit: limit_amount the limit, holding what the check that opened it computed: the smaller of the balances at the finalized and the latest block, less the outgoing movements not yet included). refill_request_id: the refill request created for a low episode.';


--
-- Name: hot_limit_episodes_id_seq; Type: SEQUENCE; Schema: public; Owner: CURRENT_USER
--

CREATE SEQUENCE public.hot_limit_episodes_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


ALTER SEQUENCE public.hot_limit_episodes_id_seq OWNER TO CURRENT_USER;

--
-- Name: hot_limit_episodes_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: CURRENT_USER
--

ALTER SEQUENCE public.hot_limit_episodes_id_seq OWNED BY public.hot_limit_episodes.id;


--
-- Name: internal_transfers; Type: TABLE; Schema: public; Owner: CURRENT_USER
--

CREATE TABLE public.internal_transfers (
    chain text NOT NULL,
    tx_hash text NOT NULL,
    "position" text NOT NULL,
    kind text NOT NULL,
    reference text NOT NULL,
    recorded_at timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
    CONSTRAINT internal_transfers_kind_check CHECK ((kind = ANY (ARRAY['sweep'::text, 'gas_top_up'::text, 'cold_transfer'::text, 'hot_transfer'::text]))),
    CONSTRAINT internal_transfers_position_check CHECK (("position" ~ '^(log:[0-9]+|call:[0-9]+(\.[0-9]+)*)$'::text)),
    CONSTRAINT internal_transfers_reference_check CHECK (((length(reference) >= 1) AND (length(reference) <= 200))),
    CONSTRAINT internal_transfers_tx_hash_check CHECK ((tx_hash ~ '^0x[0-9a-f]{64}$'::text))
);


ALTER TABLE public.internal_transfers OWNER TO CURRENT_USER;

--
-- Name: TABLE internal_transfers; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON TABLE public.internal_transfers IS 'Outgoing movements we made between our own addresses, by the deposit key of the transfer they produce: written by the outgoing-transaction mechanism before it sends (sweeps, gas top-ups, hot/cold transfers), read when that transfer is final (custody-neutral).';


--
-- Name: COLUMN internal_transfers.reference; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON COLUMN public.internal_transfers.reference IS 'The movement that made it, e.g. sweep:<id>.';


--
-- Name: job_runs; Type: TABLE; Schema: public; Owner: CURRENT_USER
--

CREATE TABLE public.job_runs (
    id bigint NOT NULL,
    job text NOT NULL,
    worker text NOT NULL,
    started_at timestamp with time zone NOT NULL,
    finished_at timestamp with time zone NOT NULL,
    outcome text NOT NULL,
    detail text,
    CONSTRAINT job_runs_check CHECK ((finished_at >= started_at)),
    CONSTRAINT job_runs_job_check CHECK (((length(job) >= 1) AND (length(job) <= 200))),
    CONSTRAINT job_runs_outcome_check CHECK ((outcome = ANY (ARRAY['ok'::text, 'error'::text]))),
    CONSTRAINT job_runs_worker_check CHECK (((length(worker) >= 1) AND (length(worker) <= 200)))
);


ALTER TABLE public.job_runs OWNER TO CURRENT_USER;

--
-- Name: TABLE job_runs; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON TABLE public.job_runs IS 'Scheduler run log: which worker (host:pid) ran which job when, and how it ended; what operations read to see that reconciliation, delivery and the watchers are alive.';


--
-- Name: job_runs_id_seq; Type: SEQUENCE; Schema: public; Owner: CURRENT_USER
--

CREATE SEQUENCE public.job_runs_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


ALTER SEQUENCE public.job_runs_id_seq OWNER TO CURRENT_USER;

--
-- Name: job_runs_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: CURRENT_USER
--

ALTER SEQUENCE public.job_runs_id_seq OWNED BY public.job_runs.id;


--
-- Name: ledger_period_approvals; Type: TABLE; Schema: public; Owner: CURRENT_USER
--

CREATE TABLE public.ledger_period_approvals (
    proposal_id integer NOT NULL,
    period_id integer NOT NULL,
    approved_by text NOT NULL,
    approved_at timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
    CONSTRAINT ledger_period_approvals_approved_by_check CHECK (((length(approved_by) >= 1) AND (length(approved_by) <= 200)))
);


ALTER TABLE public.ledger_period_approvals OWNER TO CURRENT_USER;

--
-- Name: TABLE ledger_period_approvals; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON TABLE public.ledger_period_approvals IS 'The approval that closed a proposed period: by someone else than the proposer.';


--
-- Name: ledger_period_proposals; Type: TABLE; Schema: public; Owner: CURRENT_USER
--

CREATE TABLE public.ledger_period_proposals (
    id integer NOT NULL,
    ends_at timestamp with time zone NOT NULL,
    reason text,
    proposed_by text NOT NULL,
    proposed_at timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
    CONSTRAINT ledger_period_proposals_proposed_by_check CHECK (((length(proposed_by) >= 1) AND (length(proposed_by) <= 200)))
);


ALTER TABLE public.ledger_period_proposals OWNER TO CURRENT_USER;

--
-- Name: TABLE ledger_period_proposals; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON TABLE public.ledger_period_proposals IS 'A proposed period close, waiting for a second person (ledger_period_approvals).';


--
-- Name: ledger_period_proposals_id_seq; Type: SEQUENCE; Schema: public; Owner: CURRENT_USER
--

CREATE SEQUENCE public.ledger_period_proposals_id_seq
    AS integer
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


ALTER SEQUENCE public.ledger_period_proposals_id_seq OWNER TO CURRENT_USER;

--
-- Name: ledger_period_proposals_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: CURRENT_USER
--

ALTER SEQUENCE public.ledger_period_proposals_id_seq OWNED BY public.ledger_period_proposals.id;


--
-- Name: ledger_periods; Type: TABLE; Schema: public; Owner: CURRENT_USER
--

CREATE TABLE public.ledger_periods (
    id integer NOT NULL,
    ends_at timestamp with time zone NOT NULL,
    closed_at timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
    closed_by text NOT NULL,
    reason text,
    CONSTRAINT ledger_periods_closed_by_check CHECK (((length(closed_by) >= 1) AND (length(closed_by) <= 200)))
);


ALTER TABLE public.ledger_periods OWNER TO CURRENT_USER;

--
-- Name: TABLE ledger_periods; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON TABLE public.ledger_periods IS 'Closed periods: everything effective before ends_at is closed as of closed_at.';


--
-- Name: ledger_periods_id_seq; Type: SEQUENCE; Schema: public; Owner: CURRENT_USER
--

CREATE SEQUENCE public.ledger_periods_id_seq
    AS integer
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


ALTER SEQUENCE public.ledger_periods_id_seq OWNER TO CURRENT_USER;

--
-- Name: ledger_periods_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: CURRENT_USER
--

ALTER SEQUENCE public.ledger_periods_id_seq OWNED BY public.ledger_periods.id;


--
-- Name: ledger_postings; Type: TABLE; Schema: public; Owner: CURRENT_USER
--

CREATE TABLE public.ledger_postings (
    id bigint NOT NULL,
    transaction_id bigint NOT NULL,
    line_no smallint NOT NULL,
    account_id bigint NOT NULL,
    asset_id integer NOT NULL,
    amount public.money128 NOT NULL,
    closes_posting_id bigint,
    reverses_posting_id bigint,
    CONSTRAINT ledger_postings_amount_check CHECK (((amount)::numeric <> (0)::numeric)),
    CONSTRAINT ledger_postings_line_no_check CHECK ((line_no >= 1))
);


ALTER TABLE public.ledger_postings OWNER TO CURRENT_USER;

--
-- Name: COLUMN ledger_postings.amount; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON COLUMN public.ledger_postings.amount IS 'Signed minor units: debit positive, credit negative.';


--
-- Name: ledger_postings_id_seq; Type: SEQUENCE; Schema: public; Owner: CURRENT_USER
--

CREATE SEQUENCE public.ledger_postings_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


ALTER SEQUENCE public.ledger_postings_id_seq OWNER TO CURRENT_USER;

--
-- Name: ledger_postings_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: CURRENT_USER
--

ALTER SEQUENCE public.ledger_postings_id_seq OWNED BY public.ledger_postings.id;


--
-- Name: ledger_seals; Type: TABLE; Schema: public; Owner: CURRENT_USER
--

CREATE TABLE public.ledger_seals (
    id bigint NOT NULL,
    from_transaction_id bigint NOT NULL,
    through_transaction_id bigint NOT NULL,
    transactions_count integer NOT NULL,
    postings_count integer NOT NULL,
    merkle_root text NOT NULL,
    previous_hash text NOT NULL,
    seal_hash text NOT NULL,
    sealed_at timestamp with time zone NOT NULL,
    transaction_ids bigint[] NOT NULL,
    leaf_prefixes bytea NOT NULL,
    CONSTRAINT ledger_seals_check CHECK ((through_transaction_id >= from_transaction_id)),
    CONSTRAINT ledger_seals_check1 CHECK ((cardinality(transaction_ids) = transactions_count)),
    CONSTRAINT ledger_seals_check2 CHECK ((length(leaf_prefixes) = (8 * transactions_count))),
    CONSTRAINT ledger_seals_from_transaction_id_check CHECK ((from_transaction_id >= 1)),
    CONSTRAINT ledger_seals_merkle_root_check CHECK ((merkle_root ~ '^[0-9a-f]{64}$'::text)),
    CONSTRAINT ledger_seals_postings_count_check CHECK ((postings_count >= 0)),
    CONSTRAINT ledger_seals_previous_hash_check CHECK ((previous_hash ~ '^[0-9a-f]{64}$'::text)),
    CONSTRAINT ledger_seals_seal_hash_check CHECK ((seal_hash ~ '^[0-9a-f]{64}$'::text)),
    CONSTRAINT ledger_seals_transactions_count_check CHECK ((transactions_count >= 1))
);


ALTER TABLE public.ledger_seals OWNER TO CURRENT_USER;

--
-- Name: TABLE ledger_seals; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON TABLE public.ledger_seals IS 'Tamper evidence: each seal covers every ledger transaction with id in [from_transaction_id, through_transaction_id] (the range after the previous seal), with a Merkle root over their canonical form and seal_hash = SHA-256 over the previous seal''s hash, the range, the counts, the root and sealed_at (docs/sealing.md). Append-only.';


--
-- Name: COLUMN ledger_seals.transaction_ids; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON COLUMN public.ledger_seals.transaction_ids IS 'The ids of the sealed transactions in order: lets verify name a missing or inserted transaction. Diagnostic only: not covered by seal_hash (the root already is).';


--
-- Name: COLUMN ledger_seals.leaf_prefixes; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON COLUMN public.ledger_seals.leaf_prefixes IS 'The first 8 bytes of each leaf hash, in the order of transaction_ids: lets verify name a changed or reordered transaction. Diagnostic only, like transaction_ids.';


--
-- Name: ledger_seals_id_seq; Type: SEQUENCE; Schema: public; Owner: CURRENT_USER
--

CREATE SEQUENCE public.ledger_seals_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


ALTER SEQUENCE public.ledger_seals_id_seq OWNER TO CURRENT_USER;

--
-- Name: ledger_seals_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: CURRENT_USER
--

ALTER SEQUENCE public.ledger_seals_id_seq OWNED BY public.ledger_seals.id;


--
-- Name: ledger_transactions; Type: TABLE; Schema: public; Owner: CURRENT_USER
--

CREATE TABLE public.ledger_transactions (
    id bigint NOT NULL,
    idempotency_key text NOT NULL,
    fingerprint text NOT NULL,
    kind text NOT NULL,
    reference text,
    effective_at timestamp with time zone NOT NULL,
    recorded_at timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
    reason text,
    source text NOT NULL,
    reverses_transaction_id bigint,
    out_of_period boolean DEFAULT false NOT NULL,
    metadata jsonb DEFAULT '{}'::jsonb NOT NULL,
    CONSTRAINT ledger_transactions_fingerprint_check CHECK (((fingerprint ~ '^[0-9a-f]+$'::text) AND (length(fingerprint) = 64))),
    CONSTRAINT ledger_transactions_idempotency_key_check CHECK (((length(idempotency_key) >= 1) AND (length(idempotency_key) <= 200))),
    CONSTRAINT ledger_transactions_kind_check CHECK (((length(kind) >= 1) AND (length(kind) <= 64))),
    CONSTRAINT ledger_transactions_source_check CHECK (((length(source) >= 1) AND (length(source) <= 200)))
);


ALTER TABLE public.ledger_transactions OWNER TO CURRENT_USER;

--
-- Name: COLUMN ledger_transactions.recorded_at; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON COLUMN public.ledger_transactions.recorded_at IS 'When the ledger learned it; set by the database at insert, never by the caller.';


--
-- Name: COLUMN ledger_transactions.out_of_period; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON COLUMN public.ledger_transactions.out_of_period IS 'An explicit adjustment whose effective time falls in a closed period.';


--
-- Name: ledger_transactions_id_seq; Type: SEQUENCE; Schema: public; Owner: CURRENT_USER
--

CREATE SEQUENCE public.ledger_transactions_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


ALTER SEQUENCE public.ledger_transactions_id_seq OWNER TO CURRENT_USER;

--
-- Name: ledger_transactions_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: CURRENT_USER
--

ALTER SEQUENCE public.ledger_transactions_id_seq OWNED BY public.ledger_transactions.id;


--
-- Name: outbox_events_id_seq; Type: SEQUENCE; Schema: public; Owner: CURRENT_USER
--

CREATE SEQUENCE public.outbox_events_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


ALTER SEQUENCE public.outbox_events_id_seq OWNER TO CURRENT_USER;

--
-- Name: outbox_events_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: CURRENT_USER
--

ALTER SEQUENCE public.outbox_events_id_seq OWNED BY public.outbox_events.id;


--
-- Name: outgoing_attempts; Type: TABLE; Schema: public; Owner: CURRENT_USER
--

CREATE TABLE public.outgoing_attempts (
    id bigint NOT NULL,
    withdrawal_id bigint,
    attempt_no integer NOT NULL,
    purpose text DEFAULT 'payout'::text NOT NULL,
    chain text NOT NULL,
    sender text NOT NULL,
    nonce bigint NOT NULL,
    tx_hash text NOT NULL,
    raw_tx text NOT NULL,
    max_fee_per_gas numeric(78,0) NOT NULL,
    max_priority_fee_per_gas numeric(78,0) NOT NULL,
    gas_limit bigint NOT NULL,
    created_at timestamp with time zone NOT NULL,
    movement_kind text NOT NULL,
    sweep_id bigint,
    top_up_id bigint,
    cold_transfer_id bigint,
    CONSTRAINT outgoing_attempts_attempt_no_check CHECK ((attempt_no >= 1)),
    CONSTRAINT outgoing_attempts_gas_limit_check CHECK ((gas_limit > 0)),
    CONSTRAINT outgoing_attempts_max_fee_per_gas_check CHECK ((max_fee_per_gas > (0)::numeric)),
    CONSTRAINT outgoing_attempts_max_priority_fee_per_gas_check CHECK ((max_priority_fee_per_gas >= (0)::numeric)),
    CONSTRAINT outgoing_attempts_movement_kind_check CHECK ((movement_kind = ANY (ARRAY['withdrawal'::text, 'sweep'::text, 'gas_top_up'::text, 'cold_transfer'::text]))),
    CONSTRAINT outgoing_attempts_nonce_check CHECK ((nonce >= 0)),
    CONSTRAINT outgoing_attempts_one_movement CHECK (((num_nonnulls(withdrawal_id, sweep_id, top_up_id, cold_transfer_id) = 1) AND ((withdrawal_id IS NOT NULL) = (movement_kind = 'withdrawal'::text)) AND ((sweep_id IS NOT NULL) = (movement_kind = 'sweep'::text)) AND ((top_up_id IS NOT NULL) = (movement_kind = 'gas_top_up'::text)) AND ((cold_transfer_id IS NOT NULL) = (movement_kind = 'cold_transfer'::text)))),
    CONSTRAINT outgoing_attempts_purpose_check CHECK ((purpose = ANY (ARRAY['payout'::text, 'cancel'::text]))),
    CONSTRAINT outgoing_attempts_raw_tx_check CHECK ((raw_tx ~ '^0x[0-9a-f]+$'::text)),
    CONSTRAINT outgoing_attempts_sender_check CHECK ((sender ~ '^0x[0-9a-f]{40}$'::text)),
    CONSTRAINT outgoing_attempts_tx_hash_check CHECK ((tx_hash ~ '^0x[0-9a-f]{64}$'::text))
);


ALTER TABLE public.outgoing_attempts OWNER TO CURRENT_USER;

--
-- Name: TABLE outgoing_attempts; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON TABLE public.outgoing_attempts IS 'Signed attempts of every transaction we send (withdrawals, sweeps, gas top-ups, cold transfers), recorded and committed before they are sent; each names its one movement. All attempts of a movement share its nonce. purpose = cancel: a zero-value transfer from the sender to itself that consumes the nonce of a withdrawal written off as not sent.';


--
-- Name: outgoing_attempts_id_seq; Type: SEQUENCE; Schema: public; Owner: CURRENT_USER
--

CREATE SEQUENCE public.outgoing_attempts_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


ALTER SEQUENCE public.outgoing_attempts_id_seq OWNER TO CURRENT_USER;

--
-- Name: outgoing_attempts_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: CURRENT_USER
--

ALTER SEQUENCE public.outgoing_attempts_id_seq OWNED BY public.outgoing_attempts.id;


--
-- Name: provider_inbox; Type: TABLE; Schema: public; Owner: CURRENT_USER
--

CREATE TABLE public.provider_inbox (
    event_id text NOT NULL,
    provider text NOT NULL,
    chain text NOT NULL,
    tx_hash text NOT NULL,
    "position" text NOT NULL,
    status text NOT NULL,
    to_address text NOT NULL,
    asset_code text NOT NULL,
    amount_minor numeric(78,0) NOT NULL,
    payload jsonb NOT NULL,
    received_at timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
    CONSTRAINT provider_inbox_event_id_check CHECK (((length(event_id) >= 1) AND (length(event_id) <= 200)))
);


ALTER TABLE public.provider_inbox OWNER TO CURRENT_USER;

--
-- Name: TABLE provider_inbox; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON TABLE public.provider_inbox IS 'Custody provider notifications, stored with their unique event id before processing.';


--
-- Name: provider_statement_records; Type: TABLE; Schema: public; Owner: CURRENT_USER
--

CREATE TABLE public.provider_statement_records (
    id bigint NOT NULL,
    statement_id bigint NOT NULL,
    provider text NOT NULL,
    reference text NOT NULL,
    direction text NOT NULL,
    asset text NOT NULL,
    amount_minor public.money128 NOT NULL,
    occurred_at timestamp with time zone NOT NULL,
    chain text,
    tx_hash text,
    CONSTRAINT provider_statement_records_amount_minor_check CHECK (((amount_minor)::numeric > (0)::numeric)),
    CONSTRAINT provider_statement_records_asset_check CHECK ((asset ~ '^[A-Z0-9][A-Z0-9._-]{0,31}$'::text)),
    CONSTRAINT provider_statement_records_direction_check CHECK ((direction = ANY (ARRAY['in'::text, 'out'::text]))),
    CONSTRAINT provider_statement_records_reference_check CHECK (((length(reference) >= 1) AND (length(reference) <= 200))),
    CONSTRAINT provider_statement_records_tx_hash_check CHECK ((tx_hash ~ '^0x[0-9a-f]{64}$'::text))
);


ALTER TABLE public.provider_statement_records OWNER TO CURRENT_USER;

--
-- Name: TABLE provider_statement_records; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON TABLE public.provider_statement_records IS 'One transfer as a custody provider reported it, stored by the first statement that held it (amount_minor in the ledger asset''s minor units; direction in: into our custody). Unique per (provider, reference): the reference is how the provider and we name the same transfer (for a deposit it attested: <chain>:<tx_hash>:<position>). Append-only.';


--
-- Name: provider_statement_records_id_seq; Type: SEQUENCE; Schema: public; Owner: CURRENT_USER
--

CREATE SEQUENCE public.provider_statement_records_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


ALTER SEQUENCE public.provider_statement_records_id_seq OWNER TO CURRENT_USER;

--
-- Name: provider_statement_records_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: CURRENT_USER
--

ALTER SEQUENCE public.provider_statement_records_id_seq OWNED BY public.provider_statement_records.id;


--
-- Name: provider_statements; Type: TABLE; Schema: public; Owner: CURRENT_USER
--

CREATE TABLE public.provider_statements (
    id bigint NOT NULL,
    provider text NOT NULL,
    format text NOT NULL,
    sha256 text NOT NULL,
    file_name text,
    period_start timestamp with time zone NOT NULL,
    period_end timestamp with time zone NOT NULL,
    record_count integer NOT NULL,
    imported_by text NOT NULL,
    imported_at timestamp with time zone NOT NULL,
    CONSTRAINT provider_statements_check CHECK ((period_end > period_start)),
    CONSTRAINT provider_statements_file_name_check CHECK (((length(file_name) >= 1) AND (length(file_name) <= 500))),
    CONSTRAINT provider_statements_format_check CHECK ((format = ANY (ARRAY['csv'::text, 'json'::text]))),
    CONSTRAINT provider_statements_imported_by_check CHECK (((length(imported_by) >= 1) AND (length(imported_by) <= 200))),
    CONSTRAINT provider_statements_provider_check CHECK ((provider ~ '^[a-z0-9][a-z0-9._-]{0,63}$'::text)),
    CONSTRAINT provider_statements_record_count_check CHECK ((record_count >= 1)),
    CONSTRAINT provider_statements_sha256_check CHECK ((sha256 ~ '^[0-9a-f]{64}$'::text))
);


ALTER TABLE public.provider_statements OWNER TO CURRENT_USER;

--
-- Name: TABLE provider_statements; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON TABLE public.provider_statements IS 'A custody provider statement file as imported: its provider, the period it covers [period_start, period_end), the SHA-256 of its bytes (the same file is one statement) and how many records it held. Append-only.';


--
-- Name: provider_statements_id_seq; Type: SEQUENCE; Schema: public; Owner: CURRENT_USER
--

CREATE SEQUENCE public.provider_statements_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


ALTER SEQUENCE public.provider_statements_id_seq OWNER TO CURRENT_USER;

--
-- Name: provider_statements_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: CURRENT_USER
--

ALTER SEQUENCE public.provider_statements_id_seq OWNED BY public.provider_statements.id;


--
-- Name: refill_requests; Type: TABLE; Schema: public; Owner: CURRENT_USER
--

CREATE TABLE public.refill_requests (
    id bigint NOT NULL,
    chain text NOT NULL,
    asset text NOT NULL,
    token text,
    source text NOT NULL,
    destination text NOT NULL,
    amount numeric(78,0) NOT NULL,
    requested_by text NOT NULL,
    reason text NOT NULL,
    state text NOT NULL,
    matched_tx_hash text,
    matched_position text,
    created_at timestamp with time zone NOT NULL,
    updated_at timestamp with time zone NOT NULL,
    request_key text,
    CONSTRAINT refill_requests_amount_check CHECK ((amount > (0)::numeric)),
    CONSTRAINT refill_requests_check CHECK (((state = 'matched'::text) = (matched_tx_hash IS NOT NULL))),
    CONSTRAINT refill_requests_destination_check CHECK ((destination ~ '^0x[0-9a-f]{40}$'::text)),
    CONSTRAINT refill_requests_matched_tx_hash_check CHECK ((matched_tx_hash ~ '^0x[0-9a-f]{64}$'::text)),
    CONSTRAINT refill_requests_reason_check CHECK (((length(reason) >= 1) AND (length(reason) <= 500))),
    CONSTRAINT refill_requests_request_key_check CHECK (((length(request_key) >= 1) AND (length(request_key) <= 300))),
    CONSTRAINT refill_requests_requested_by_check CHECK (((length(requested_by) >= 1) AND (length(requested_by) <= 200))),
    CONSTRAINT refill_requests_source_check CHECK ((source ~ '^0x[0-9a-f]{40}$'::text)),
    CONSTRAINT refill_requests_state_check CHECK ((state = ANY (ARRAY['open'::text, 'matched'::text, 'canceled'::text]))),
    CONSTRAINT refill_requests_token_check CHECK ((token ~ '^0x[0-9a-f]{40}$'::text))
);


ALTER TABLE public.refill_requests OWNER TO CURRENT_USER;

--
-- Name: TABLE refill_requests; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON TABLE public.refill_requests IS 'A request to refill the hot wallet from a cold address (signed outside the engine: cold addresses are watch-only). The incoming transfer from that cold address to the hot wallet is matched to the oldest open request of the same chain, asset and amount once final, and is then an internal movement (custody-neutral).';


--
-- Name: COLUMN refill_requests.request_key; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON COLUMN public.refill_requests.request_key IS 'The requester''s request key (api:<client>:<Idempotency-Key> or cli:<key>); NULL for a request of the hot-limit check. The same key again returns the first request.';


--
-- Name: refill_requests_id_seq; Type: SEQUENCE; Schema: public; Owner: CURRENT_USER
--

CREATE SEQUENCE public.refill_requests_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


ALTER SEQUENCE public.refill_requests_id_seq OWNER TO CURRENT_USER;

--
-- Name: refill_requests_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: CURRENT_USER
--

ALTER SEQUENCE public.refill_requests_id_seq OWNED BY public.refill_requests.id;


--
-- Name: reserve_leaves; Type: TABLE; Schema: public; Owner: CURRENT_USER
--

CREATE TABLE public.reserve_leaves (
    report_id bigint NOT NULL,
    "position" integer NOT NULL,
    user_id text NOT NULL,
    salt bytea NOT NULL,
    balances numeric[] NOT NULL,
    hash bytea NOT NULL,
    CONSTRAINT reserve_leaves_balances_check CHECK ((((0)::numeric <= ALL (balances)) AND ('340282366920938463463374607431768211456'::numeric > ALL (balances)))),
    CONSTRAINT reserve_leaves_hash_check CHECK ((length(hash) = 32)),
    CONSTRAINT reserve_leaves_position_check CHECK (("position" >= 0)),
    CONSTRAINT reserve_leaves_salt_check CHECK ((length(salt) = 32))
);


ALTER TABLE public.reserve_leaves OWNER TO CURRENT_USER;

--
-- Name: TABLE reserve_leaves; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON TABLE public.reserve_leaves IS 'The liabilities tree''s leaves of a report, in tree order (sorted by hash): the user, the salt (secret: given only in that user''s proof), the posted balance per asset in the report''s asset order (minor units), and the leaf hash. Append-only.';


--
-- Name: reserve_nodes; Type: TABLE; Schema: public; Owner: CURRENT_USER
--

CREATE TABLE public.reserve_nodes (
    report_id bigint NOT NULL,
    level smallint NOT NULL,
    "position" integer NOT NULL,
    hash bytea NOT NULL,
    sums numeric[] NOT NULL,
    CONSTRAINT reserve_nodes_hash_check CHECK ((length(hash) = 32)),
    CONSTRAINT reserve_nodes_level_check CHECK (((level >= 0) AND (level <= 40))),
    CONSTRAINT reserve_nodes_position_check CHECK (("position" >= 0)),
    CONSTRAINT reserve_nodes_sums_check CHECK ((((0)::numeric <= ALL (sums)) AND ('340282366920938463463374607431768211456'::numeric > ALL (sums))))
);


ALTER TABLE public.reserve_nodes OWNER TO CURRENT_USER;

--
-- Name: TABLE reserve_nodes; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON TABLE public.reserve_nodes IS 'The liabilities tree''s nodes of a report from reserves.merkle.CHUNK_LEVEL up to the root (the whole tree when it is shallower): a proof reads its chunk''s leaves and these. Append-only.';


--
-- Name: reserve_report_addresses; Type: TABLE; Schema: public; Owner: CURRENT_USER
--

CREATE TABLE public.reserve_report_addresses (
    report_id bigint NOT NULL,
    chain text NOT NULL,
    address text NOT NULL,
    kind text NOT NULL,
    holdings jsonb NOT NULL,
    signer text NOT NULL,
    CONSTRAINT reserve_report_addresses_address_check CHECK ((address ~ '^0x[0-9a-f]{40}$'::text)),
    CONSTRAINT reserve_report_addresses_holdings_check CHECK ((jsonb_typeof(holdings) = 'array'::text)),
    CONSTRAINT reserve_report_addresses_kind_check CHECK ((kind = ANY (ARRAY['hot'::text, 'cold'::text, 'deposit'::text]))),
    CONSTRAINT reserve_report_addresses_signer_check CHECK ((signer = ANY (ARRAY['engine'::text, 'external'::text])))
);


ALTER TABLE public.reserve_report_addresses OWNER TO CURRENT_USER;

--
-- Name: TABLE reserve_report_addresses; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON TABLE public.reserve_report_addresses IS 'Each of our addresses a report lists: its kind, what it held at the report''s block of its chain (holdings: asset, token, decimals, balance in the token''s units) and whether the engine signs for it (engine) or its key is elsewhere (external: its signature is imported). Append-only.';


--
-- Name: reserve_reports; Type: TABLE; Schema: public; Owner: CURRENT_USER
--

CREATE TABLE public.reserve_reports (
    id bigint NOT NULL,
    taken_at timestamp with time zone NOT NULL,
    through_posting_id bigint NOT NULL,
    known_at timestamp with time zone NOT NULL,
    root_hash text NOT NULL,
    depth smallint NOT NULL,
    users_count bigint NOT NULL,
    taken_by text NOT NULL,
    document jsonb NOT NULL,
    CONSTRAINT reserve_reports_depth_check CHECK (((depth >= 0) AND (depth <= 40))),
    CONSTRAINT reserve_reports_document_check CHECK ((jsonb_typeof(document) = 'object'::text)),
    CONSTRAINT reserve_reports_root_hash_check CHECK ((root_hash ~ '^[0-9a-f]{64}$'::text)),
    CONSTRAINT reserve_reports_taken_by_check CHECK (((length(taken_by) >= 1) AND (length(taken_by) <= 200))),
    CONSTRAINT reserve_reports_users_count_check CHECK ((users_count >= 0))
);


ALTER TABLE public.reserve_reports OWNER TO CURRENT_USER;

--
-- Name: TABLE reserve_reports; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON TABLE public.reserve_reports IS 'A proof-of-reserves report: the ledger point (every posting with id <= through_posting_id, which is every transaction committed before known_at), the liabilities tree''s root and shape, and the published document (format custody-por-report/1: chains and their blocks, liabilities, the figures per asset; the addresses are in reserve_report_addresses). Append-only.';


--
-- Name: reserve_reports_id_seq; Type: SEQUENCE; Schema: public; Owner: CURRENT_USER
--

CREATE SEQUENCE public.reserve_reports_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


ALTER SEQUENCE public.reserve_reports_id_seq OWNER TO CURRENT_USER;

--
-- Name: reserve_reports_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: CURRENT_USER
--

ALTER SEQUENCE public.reserve_reports_id_seq OWNED BY public.reserve_reports.id;


--
-- Name: reserve_signatures; Type: TABLE; Schema: public; Owner: CURRENT_USER
--

CREATE TABLE public.reserve_signatures (
    report_id bigint NOT NULL,
    chain text NOT NULL,
    address text NOT NULL,
    signature text NOT NULL,
    source text NOT NULL,
    recorded_by text NOT NULL,
    recorded_at timestamp with time zone NOT NULL,
    CONSTRAINT reserve_signatures_recorded_by_check CHECK (((length(recorded_by) >= 1) AND (length(recorded_by) <= 200))),
    CONSTRAINT reserve_signatures_signature_check CHECK ((signature ~ '^0x[0-9a-f]{130}$'::text)),
    CONSTRAINT reserve_signatures_source_check CHECK ((source = ANY (ARRAY['engine'::text, 'imported'::text])))
);


ALTER TABLE public.reserve_signatures OWNER TO CURRENT_USER;

--
-- Name: TABLE reserve_signatures; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON TABLE public.reserve_signatures IS 'The EIP-191 signature of an address over its ownership message for a report (reserves.ownership.ownership_message), checked to recover to the address before it is stored: signed by the engine when the report was taken, or imported for an external signer. One per address and report. Append-only.';


--
-- Name: schema_definitions; Type: TABLE; Schema: public; Owner: CURRENT_USER
--

CREATE TABLE public.schema_definitions (
    path text NOT NULL,
    sha256 text NOT NULL,
    applied_at timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
    CONSTRAINT schema_definitions_path_check CHECK ((path ~ '^(functions|triggers|views)/[a-z0-9_]+\.sql$'::text)),
    CONSTRAINT schema_definitions_sha256_check CHECK ((sha256 ~ '^[0-9a-f]{64}$'::text))
);


ALTER TABLE public.schema_definitions OWNER TO CURRENT_USER;

--
-- Name: TABLE schema_definitions; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON TABLE public.schema_definitions IS 'The definition files (sql/functions, sql/triggers, sql/views) as last applied: a file whose hash differs from its row is applied again by the next upgrade.';


--
-- Name: sender_nonces; Type: TABLE; Schema: public; Owner: CURRENT_USER
--

CREATE TABLE public.sender_nonces (
    chain text NOT NULL,
    address text NOT NULL,
    next_nonce bigint NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT sender_nonces_address_check CHECK ((address ~ '^0x[0-9a-f]{40}$'::text)),
    CONSTRAINT sender_nonces_next_nonce_check CHECK ((next_nonce >= 0))
);


ALTER TABLE public.sender_nonces OWNER TO CURRENT_USER;

--
-- Name: TABLE sender_nonces; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON TABLE public.sender_nonces IS 'Next nonce of each address we send from (hot wallets, deposit addresses being swept); allocated under a row lock, never handed out twice.';


--
-- Name: state_moves; Type: TABLE; Schema: public; Owner: CURRENT_USER
--

CREATE TABLE public.state_moves (
    machine text NOT NULL,
    from_state text,
    event text NOT NULL,
    to_state text NOT NULL,
    CONSTRAINT state_moves_machine_check CHECK ((machine = ANY (ARRAY['withdrawal'::text, 'sweep'::text, 'gas_top_up'::text, 'cold_transfer'::text, 'refill_request'::text])))
);


ALTER TABLE public.state_moves OWNER TO CURRENT_USER;

--
-- Name: sweep_events; Type: TABLE; Schema: public; Owner: CURRENT_USER
--

CREATE TABLE public.sweep_events (
    id bigint NOT NULL,
    sweep_id bigint NOT NULL,
    from_state text,
    to_state text NOT NULL,
    event text NOT NULL,
    reason text,
    evidence jsonb DEFAULT '{}'::jsonb NOT NULL,
    actor text NOT NULL,
    ledger_transaction_id bigint,
    attempt_id bigint,
    occurred_at timestamp with time zone NOT NULL,
    recorded_at timestamp with time zone DEFAULT clock_timestamp() NOT NULL
);


ALTER TABLE public.sweep_events OWNER TO CURRENT_USER;

--
-- Name: TABLE sweep_events; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON TABLE public.sweep_events IS 'The append-only history of each sweep.';


--
-- Name: sweep_events_id_seq; Type: SEQUENCE; Schema: public; Owner: CURRENT_USER
--

CREATE SEQUENCE public.sweep_events_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


ALTER SEQUENCE public.sweep_events_id_seq OWNER TO CURRENT_USER;

--
-- Name: sweep_events_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: CURRENT_USER
--

ALTER SEQUENCE public.sweep_events_id_seq OWNED BY public.sweep_events.id;


--
-- Name: sweeps; Type: TABLE; Schema: public; Owner: CURRENT_USER
--

CREATE TABLE public.sweeps (
    id bigint NOT NULL,
    chain text NOT NULL,
    address text NOT NULL,
    derivation_index integer NOT NULL,
    destination text NOT NULL,
    asset text NOT NULL,
    token text,
    available numeric(78,0) NOT NULL,
    customer_amount numeric(78,0) NOT NULL,
    state text NOT NULL,
    state_reason text,
    top_up_id bigint,
    nonce bigint,
    gas_limit bigint NOT NULL,
    landed_attempt_id bigint,
    swept_amount numeric(78,0),
    gas_paid numeric(78,0),
    created_at timestamp with time zone NOT NULL,
    updated_at timestamp with time zone NOT NULL,
    CONSTRAINT sweeps_address_check CHECK ((address ~ '^0x[0-9a-f]{40}$'::text)),
    CONSTRAINT sweeps_available_check CHECK ((available > (0)::numeric)),
    CONSTRAINT sweeps_check CHECK ((customer_amount <= available)),
    CONSTRAINT sweeps_customer_amount_check CHECK ((customer_amount >= (0)::numeric)),
    CONSTRAINT sweeps_derivation_index_check CHECK ((derivation_index >= 0)),
    CONSTRAINT sweeps_destination_check CHECK ((destination ~ '^0x[0-9a-f]{40}$'::text)),
    CONSTRAINT sweeps_gas_limit_check CHECK ((gas_limit > 0)),
    CONSTRAINT sweeps_gas_paid_check CHECK ((gas_paid >= (0)::numeric)),
    CONSTRAINT sweeps_nonce_check CHECK ((nonce >= 0)),
    CONSTRAINT sweeps_state_check CHECK ((state = ANY (ARRAY['proposed'::text, 'waiting_gas'::text, 'ready'::text, 'signing'::text, 'signed'::text, 'broadcast'::text, 'unknown'::text, 'included'::text, 'final'::text, 'reverted'::text, 'dropped'::text]))),
    CONSTRAINT sweeps_swept_amount_check CHECK ((swept_amount >= (0)::numeric)),
    CONSTRAINT sweeps_token_check CHECK ((token ~ '^0x[0-9a-f]{40}$'::text))
);


ALTER TABLE public.sweeps OWNER TO CURRENT_USER;

--
-- Name: TABLE sweeps; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON TABLE public.sweeps IS 'A move of credited, final funds from a deposit address to the chain''s hot wallet (amounts in the chain''s smallest unit). available: what the address holds of the asset by the engine''s records when the sweep was planned (customer_amount of it customer money, the rest treasury money: native dust of earlier top-ups). A native sweep sends available minus gas_limit * max_fee_per_gas of its attempt; a token sweep sends available. swept_amount and gas_paid: from the final receipt. At most one open sweep per address.';


--
-- Name: sweeps_id_seq; Type: SEQUENCE; Schema: public; Owner: CURRENT_USER
--

CREATE SEQUENCE public.sweeps_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


ALTER SEQUENCE public.sweeps_id_seq OWNER TO CURRENT_USER;

--
-- Name: sweeps_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: CURRENT_USER
--

ALTER SEQUENCE public.sweeps_id_seq OWNED BY public.sweeps.id;


--
-- Name: treasury_funding_matches; Type: TABLE; Schema: public; Owner: CURRENT_USER
--

CREATE TABLE public.treasury_funding_matches (
    funding_id bigint NOT NULL,
    deposit_id bigint NOT NULL,
    ledger_transaction_id bigint NOT NULL,
    matched_at timestamp with time zone DEFAULT clock_timestamp() NOT NULL
);


ALTER TABLE public.treasury_funding_matches OWNER TO CURRENT_USER;

--
-- Name: TABLE treasury_funding_matches; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON TABLE public.treasury_funding_matches IS 'The final transfer that brought a declared funding, and its ledger transaction (DR treasury / CR equity:owner): at most one per funding and one per deposit.';


--
-- Name: treasury_fundings; Type: TABLE; Schema: public; Owner: CURRENT_USER
--

CREATE TABLE public.treasury_fundings (
    id bigint NOT NULL,
    chain text NOT NULL,
    asset_code text NOT NULL,
    amount_minor public.money128 NOT NULL,
    from_address text NOT NULL,
    reason text NOT NULL,
    declared_by text NOT NULL,
    idempotency_key text NOT NULL,
    fingerprint text NOT NULL,
    declared_at timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
    CONSTRAINT treasury_fundings_amount_minor_check CHECK (((amount_minor)::numeric > (0)::numeric)),
    CONSTRAINT treasury_fundings_declared_by_check CHECK (((length(declared_by) >= 1) AND (length(declared_by) <= 200))),
    CONSTRAINT treasury_fundings_fingerprint_check CHECK ((fingerprint ~ '^[0-9a-f]{64}$'::text)),
    CONSTRAINT treasury_fundings_from_address_check CHECK ((from_address ~ '^0x[0-9a-f]{40}$'::text)),
    CONSTRAINT treasury_fundings_idempotency_key_check CHECK (((length(idempotency_key) >= 1) AND (length(idempotency_key) <= 300))),
    CONSTRAINT treasury_fundings_reason_check CHECK (((length(reason) >= 1) AND (length(reason) <= 1000)))
);


ALTER TABLE public.treasury_fundings OWNER TO CURRENT_USER;

--
-- Name: TABLE treasury_fundings; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON TABLE public.treasury_fundings IS 'Company capital an operator expects on chain: matched once, at finality, to a transfer to a hot or cold address by (chain, asset, from address, exact amount), oldest first.';


--
-- Name: COLUMN treasury_fundings.amount_minor; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON COLUMN public.treasury_fundings.amount_minor IS 'In the ledger asset''s minor units.';


--
-- Name: COLUMN treasury_fundings.fingerprint; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON COLUMN public.treasury_fundings.fingerprint IS 'SHA-256 of the declared fields: the same idempotency key with other fields is refused.';


--
-- Name: treasury_fundings_id_seq; Type: SEQUENCE; Schema: public; Owner: CURRENT_USER
--

CREATE SEQUENCE public.treasury_fundings_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


ALTER SEQUENCE public.treasury_fundings_id_seq OWNER TO CURRENT_USER;

--
-- Name: treasury_fundings_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: CURRENT_USER
--

ALTER SEQUENCE public.treasury_fundings_id_seq OWNED BY public.treasury_fundings.id;


--
-- Name: watcher_cursors; Type: TABLE; Schema: public; Owner: CURRENT_USER
--

CREATE TABLE public.watcher_cursors (
    chain text NOT NULL,
    recent jsonb NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT watcher_cursors_recent_check CHECK ((jsonb_typeof(recent) = 'array'::text))
);


ALTER TABLE public.watcher_cursors OWNER TO CURRENT_USER;

--
-- Name: TABLE watcher_cursors; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON TABLE public.watcher_cursors IS 'Recent [height, hash] pairs the watcher accepted per chain, ascending; the last is the tip.';


--
-- Name: webhook_attempts; Type: TABLE; Schema: public; Owner: CURRENT_USER
--

CREATE TABLE public.webhook_attempts (
    id bigint NOT NULL,
    delivery_id bigint NOT NULL,
    attempt_no integer NOT NULL,
    outcome text NOT NULL,
    status_code smallint,
    error text,
    duration_ms integer,
    next_attempt_at timestamp with time zone,
    actor text DEFAULT 'worker'::text NOT NULL,
    at timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
    CONSTRAINT webhook_attempts_attempt_no_check CHECK ((attempt_no >= 0)),
    CONSTRAINT webhook_attempts_outcome_check CHECK ((outcome = ANY (ARRAY['delivered'::text, 'retry'::text, 'failed'::text, 'replayed'::text])))
);


ALTER TABLE public.webhook_attempts OWNER TO CURRENT_USER;

--
-- Name: TABLE webhook_attempts; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON TABLE public.webhook_attempts IS 'Append-only delivery log: every attempt (HTTP status or error, duration, when the next one is due) and every replay (who asked).';


--
-- Name: webhook_attempts_id_seq; Type: SEQUENCE; Schema: public; Owner: CURRENT_USER
--

CREATE SEQUENCE public.webhook_attempts_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


ALTER SEQUENCE public.webhook_attempts_id_seq OWNER TO CURRENT_USER;

--
-- Name: webhook_attempts_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: CURRENT_USER
--

ALTER SEQUENCE public.webhook_attempts_id_seq OWNED BY public.webhook_attempts.id;


--
-- Name: webhook_deliveries; Type: TABLE; Schema: public; Owner: CURRENT_USER
--

CREATE TABLE public.webhook_deliveries (
    id bigint NOT NULL,
    event_id bigint NOT NULL,
    endpoint_id bigint NOT NULL,
    state text DEFAULT 'pending'::text NOT NULL,
    attempts integer DEFAULT 0 NOT NULL,
    next_attempt_at timestamp with time zone NOT NULL,
    first_attempt_at timestamp with time zone,
    last_status smallint,
    last_error text,
    delivered_at timestamp with time zone,
    created_at timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
    CONSTRAINT webhook_deliveries_attempts_check CHECK ((attempts >= 0)),
    CONSTRAINT webhook_deliveries_check CHECK (((state = 'delivered'::text) = (delivered_at IS NOT NULL))),
    CONSTRAINT webhook_deliveries_state_check CHECK ((state = ANY (ARRAY['pending'::text, 'delivered'::text, 'failed'::text])))
);


ALTER TABLE public.webhook_deliveries OWNER TO CURRENT_USER;

--
-- Name: TABLE webhook_deliveries; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON TABLE public.webhook_deliveries IS 'One delivery of an event to an endpoint: pending (due at next_attempt_at; a claim moves it a lease ahead), delivered (a 2xx answer) or failed (retries exhausted; replay revives it).';


--
-- Name: COLUMN webhook_deliveries.attempts; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON COLUMN public.webhook_deliveries.attempts IS 'Attempts since creation or the last replay.';


--
-- Name: webhook_deliveries_id_seq; Type: SEQUENCE; Schema: public; Owner: CURRENT_USER
--

CREATE SEQUENCE public.webhook_deliveries_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


ALTER SEQUENCE public.webhook_deliveries_id_seq OWNER TO CURRENT_USER;

--
-- Name: webhook_deliveries_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: CURRENT_USER
--

ALTER SEQUENCE public.webhook_deliveries_id_seq OWNED BY public.webhook_deliveries.id;


--
-- Name: webhook_endpoints; Type: TABLE; Schema: public; Owner: CURRENT_USER
--

CREATE TABLE public.webhook_endpoints (
    id bigint NOT NULL,
    client_id bigint NOT NULL,
    url text NOT NULL,
    alerts boolean DEFAULT false NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    disabled_at timestamp with time zone,
    event_types text[],
    previous_secret_expires_at timestamp with time zone,
    rotated_at timestamp with time zone,
    secret_sealed text NOT NULL,
    previous_secret_sealed text,
    CONSTRAINT webhook_endpoints_event_types_check CHECK (((event_types IS NULL) OR ((cardinality(event_types) >= 1) AND (cardinality(event_types) <= 100)))),
    CONSTRAINT webhook_endpoints_previous_secret_pair CHECK (((previous_secret_sealed IS NULL) = (previous_secret_expires_at IS NULL))),
    CONSTRAINT webhook_endpoints_previous_secret_sealed_check CHECK ((previous_secret_sealed ~ '^cs1\.[0-9a-f]{16}\.[A-Za-z0-9_-]{80}\.[A-Za-z0-9_-]{38,}$'::text)),
    CONSTRAINT webhook_endpoints_secret_sealed_check CHECK ((secret_sealed ~ '^cs1\.[0-9a-f]{16}\.[A-Za-z0-9_-]{80}\.[A-Za-z0-9_-]{38,}$'::text)),
    CONSTRAINT webhook_endpoints_url_check CHECK (((url ~ '^https?://[^[:space:]]+$'::text) AND (length(url) <= 2000)))
);


ALTER TABLE public.webhook_endpoints OWNER TO CURRENT_USER;

--
-- Name: TABLE webhook_endpoints; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON TABLE public.webhook_endpoints IS 'Where each API client receives its events (one URL per client) and the secret its deliveries are signed with (HMAC-SHA256 over timestamp and body).';


--
-- Name: COLUMN webhook_endpoints.alerts; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON COLUMN public.webhook_endpoints.alerts IS 'Also receive alert.* events (operators): alerts that concern no client go only here.';


--
-- Name: COLUMN webhook_endpoints.event_types; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON COLUMN public.webhook_endpoints.event_types IS 'The event types this endpoint receives (NULL: all of them; alerts still need alerts).';


--
-- Name: COLUMN webhook_endpoints.secret_sealed; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON COLUMN public.webhook_endpoints.secret_sealed IS 'The signing secret shared with the client, sealed (config.encryption: AES-256-GCM under a data key wrapped by CUSTODY_SECRETS_KEY, bound to this endpoint''s id): a dump cannot sign.';


--
-- Name: COLUMN webhook_endpoints.previous_secret_sealed; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON COLUMN public.webhook_endpoints.previous_secret_sealed IS 'The secret before the last rotation, sealed as secret_sealed: deliveries are signed with both until previous_secret_expires_at (24 hours after the rotation).';


--
-- Name: webhook_endpoints_id_seq; Type: SEQUENCE; Schema: public; Owner: CURRENT_USER
--

CREATE SEQUENCE public.webhook_endpoints_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


ALTER SEQUENCE public.webhook_endpoints_id_seq OWNER TO CURRENT_USER;

--
-- Name: webhook_endpoints_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: CURRENT_USER
--

ALTER SEQUENCE public.webhook_endpoints_id_seq OWNED BY public.webhook_endpoints.id;


--
-- Name: withdrawal_allowlist_id_seq; Type: SEQUENCE; Schema: public; Owner: CURRENT_USER
--

CREATE SEQUENCE public.withdrawal_allowlist_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


ALTER SEQUENCE public.withdrawal_allowlist_id_seq OWNER TO CURRENT_USER;

--
-- Name: withdrawal_allowlist_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: CURRENT_USER
--

ALTER SEQUENCE public.withdrawal_allowlist_id_seq OWNED BY public.withdrawal_allowlist.id;


--
-- Name: withdrawal_allowlist_votes; Type: TABLE; Schema: public; Owner: CURRENT_USER
--

CREATE TABLE public.withdrawal_allowlist_votes (
    id bigint NOT NULL,
    entry_id bigint NOT NULL,
    admin text NOT NULL,
    active_at timestamp with time zone NOT NULL,
    reason text NOT NULL,
    voted_at timestamp with time zone NOT NULL,
    CONSTRAINT withdrawal_allowlist_votes_admin_check CHECK (((length(admin) >= 1) AND (length(admin) <= 200))),
    CONSTRAINT withdrawal_allowlist_votes_reason_check CHECK (((length(reason) >= 1) AND (length(reason) <= 1000)))
);


ALTER TABLE public.withdrawal_allowlist_votes OWNER TO CURRENT_USER;

--
-- Name: TABLE withdrawal_allowlist_votes; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON TABLE public.withdrawal_allowlist_votes IS 'Admins'' votes to make one allowlisted address active earlier, at active_at: applied when two different admins voted for the same instant. Append-only.';


--
-- Name: COLUMN withdrawal_allowlist_votes.admin; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON COLUMN public.withdrawal_allowlist_votes.admin IS 'The admin''s actor name.';


--
-- Name: COLUMN withdrawal_allowlist_votes.active_at; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON COLUMN public.withdrawal_allowlist_votes.active_at IS 'The activation instant voted for.';


--
-- Name: COLUMN withdrawal_allowlist_votes.voted_at; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON COLUMN public.withdrawal_allowlist_votes.voted_at IS 'When (the engine''s clock).';


--
-- Name: withdrawal_allowlist_votes_id_seq; Type: SEQUENCE; Schema: public; Owner: CURRENT_USER
--

CREATE SEQUENCE public.withdrawal_allowlist_votes_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


ALTER SEQUENCE public.withdrawal_allowlist_votes_id_seq OWNER TO CURRENT_USER;

--
-- Name: withdrawal_allowlist_votes_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: CURRENT_USER
--

ALTER SEQUENCE public.withdrawal_allowlist_votes_id_seq OWNED BY public.withdrawal_allowlist_votes.id;


--
-- Name: withdrawal_case_resolutions; Type: TABLE; Schema: public; Owner: CURRENT_USER
--

CREATE TABLE public.withdrawal_case_resolutions (
    case_id bigint NOT NULL,
    resolved_by text NOT NULL,
    reason text NOT NULL,
    resolved_at timestamp with time zone NOT NULL,
    CONSTRAINT withdrawal_case_resolutions_reason_check CHECK ((length(reason) >= 1)),
    CONSTRAINT withdrawal_case_resolutions_resolved_by_check CHECK (((length(resolved_by) >= 1) AND (length(resolved_by) <= 200)))
);


ALTER TABLE public.withdrawal_case_resolutions OWNER TO CURRENT_USER;

--
-- Name: TABLE withdrawal_case_resolutions; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON TABLE public.withdrawal_case_resolutions IS 'How and by whom a withdrawal case was resolved (an admin lifted the hold after fixing its cause).';


--
-- Name: withdrawal_cases; Type: TABLE; Schema: public; Owner: CURRENT_USER
--

CREATE TABLE public.withdrawal_cases (
    id bigint NOT NULL,
    withdrawal_id bigint NOT NULL,
    kind text NOT NULL,
    reason text NOT NULL,
    evidence jsonb NOT NULL,
    opened_by text NOT NULL,
    opened_at timestamp with time zone NOT NULL,
    case_id bigint NOT NULL,
    CONSTRAINT withdrawal_cases_kind_check CHECK ((kind = ANY (ARRAY['settlement_mismatch'::text, 'ledger_refused'::text, 'invariant_broken'::text]))),
    CONSTRAINT withdrawal_cases_opened_by_check CHECK (((length(opened_by) >= 1) AND (length(opened_by) <= 200))),
    CONSTRAINT withdrawal_cases_reason_check CHECK ((length(reason) >= 1))
);


ALTER TABLE public.withdrawal_cases OWNER TO CURRENT_USER;

--
-- Name: TABLE withdrawal_cases; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON TABLE public.withdrawal_cases IS 'Durable cases the processor opened when it held a withdrawal (its final receipt could not be settled). Open until a row in withdrawal_case_resolutions references it.';


--
-- Name: COLUMN withdrawal_cases.kind; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON COLUMN public.withdrawal_cases.kind IS 'settlement_mismatch: the receipt does not pay what was asked; ledger_refused: the ledger refused the settlement (an account past its limit, an idempotency conflict...); invariant_broken: anything else.';


--
-- Name: COLUMN withdrawal_cases.evidence; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON COLUMN public.withdrawal_cases.evidence IS 'The error, the landed transaction (hash, nonce, block, gas) and what was being booked.';


--
-- Name: COLUMN withdrawal_cases.case_id; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON COLUMN public.withdrawal_cases.case_id IS 'The case in cases (set by trigger; equal to id for every case opened since revision 0021, unless an open case of the same kind and withdrawal existed: then that one).';


--
-- Name: withdrawal_cases_id_seq; Type: SEQUENCE; Schema: public; Owner: CURRENT_USER
--

CREATE SEQUENCE public.withdrawal_cases_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


ALTER SEQUENCE public.withdrawal_cases_id_seq OWNER TO CURRENT_USER;

--
-- Name: withdrawal_cases_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: CURRENT_USER
--

ALTER SEQUENCE public.withdrawal_cases_id_seq OWNED BY public.withdrawal_cases.id;


--
-- Name: withdrawal_decisions; Type: TABLE; Schema: public; Owner: CURRENT_USER
--

CREATE TABLE public.withdrawal_decisions (
    id bigint NOT NULL,
    withdrawal_id bigint NOT NULL,
    kind text NOT NULL,
    decision text NOT NULL,
    actor text NOT NULL,
    reason text,
    decided_at timestamp with time zone NOT NULL,
    CONSTRAINT withdrawal_decisions_actor_check CHECK (((length(actor) >= 1) AND (length(actor) <= 200))),
    CONSTRAINT withdrawal_decisions_check CHECK (((kind <> 'write_off'::text) OR ((decision = ANY (ARRAY['sent'::text, 'not_sent'::text])) AND (length(reason) > 0)))),
    CONSTRAINT withdrawal_decisions_decision_check CHECK ((decision = ANY (ARRAY['approve'::text, 'reject'::text, 'sent'::text, 'not_sent'::text]))),
    CONSTRAINT withdrawal_decisions_kind_check CHECK ((kind = ANY (ARRAY['approval'::text, 'write_off'::text])))
);


ALTER TABLE public.withdrawal_decisions OWNER TO CURRENT_USER;

--
-- Name: TABLE withdrawal_decisions; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON TABLE public.withdrawal_decisions IS 'Approvals and write-off votes; one per person and kind (a second vote is refused).';


--
-- Name: withdrawal_decisions_id_seq; Type: SEQUENCE; Schema: public; Owner: CURRENT_USER
--

CREATE SEQUENCE public.withdrawal_decisions_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


ALTER SEQUENCE public.withdrawal_decisions_id_seq OWNER TO CURRENT_USER;

--
-- Name: withdrawal_decisions_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: CURRENT_USER
--

ALTER SEQUENCE public.withdrawal_decisions_id_seq OWNED BY public.withdrawal_decisions.id;


--
-- Name: withdrawal_events_id_seq; Type: SEQUENCE; Schema: public; Owner: CURRENT_USER
--

CREATE SEQUENCE public.withdrawal_events_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


ALTER SEQUENCE public.withdrawal_events_id_seq OWNER TO CURRENT_USER;

--
-- Name: withdrawal_events_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: CURRENT_USER
--

ALTER SEQUENCE public.withdrawal_events_id_seq OWNED BY public.withdrawal_events.id;


--
-- Name: withdrawal_returns; Type: TABLE; Schema: public; Owner: CURRENT_USER
--

CREATE TABLE public.withdrawal_returns (
    id bigint NOT NULL,
    withdrawal_id bigint NOT NULL,
    chain text NOT NULL,
    tx_hash text NOT NULL,
    "position" text NOT NULL,
    amount_minor public.money128 NOT NULL,
    arrived_at timestamp with time zone NOT NULL,
    booked_to text NOT NULL,
    ledger_transaction_id bigint,
    linked_by text NOT NULL,
    reason text NOT NULL,
    recorded_at timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
    CONSTRAINT withdrawal_returns_amount_minor_check CHECK (((amount_minor)::numeric > (0)::numeric)),
    CONSTRAINT withdrawal_returns_booked_to_check CHECK ((booked_to = ANY (ARRAY['suspense'::text, 'user'::text]))),
    CONSTRAINT withdrawal_returns_position_check CHECK (("position" ~ '^(log:[0-9]+|call:[0-9]+(\.[0-9]+)*)$'::text)),
    CONSTRAINT withdrawal_returns_tx_hash_check CHECK ((tx_hash ~ '^0x[0-9a-f]{64}$'::text))
);


ALTER TABLE public.withdrawal_returns OWNER TO CURRENT_USER;

--
-- Name: TABLE withdrawal_returns; Type: COMMENT; Schema: public; Owner: CURRENT_USER
--

COMMENT ON TABLE public.withdrawal_returns IS 'Returned payouts: an incoming transfer (deposit key) linked to the payout it returns.';


--
-- Name: withdrawal_returns_id_seq; Type: SEQUENCE; Schema: public; Owner: CURRENT_USER
--

CREATE SEQUENCE public.withdrawal_returns_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


ALTER SEQUENCE public.withdrawal_returns_id_seq OWNER TO CURRENT_USER;

--
-- Name: withdrawal_returns_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: CURRENT_USER
--

ALTER SEQUENCE public.withdrawal_returns_id_seq OWNED BY public.withdrawal_returns.id;


--
-- Name: withdrawals_id_seq; Type: SEQUENCE; Schema: public; Owner: CURRENT_USER
--

CREATE SEQUENCE public.withdrawals_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


ALTER SEQUENCE public.withdrawals_id_seq OWNER TO CURRENT_USER;

--
-- Name: withdrawals_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: CURRENT_USER
--

ALTER SEQUENCE public.withdrawals_id_seq OWNED BY public.withdrawals.id;


--
-- Name: accounts id; Type: DEFAULT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.accounts ALTER COLUMN id SET DEFAULT nextval('public.accounts_id_seq'::regclass);


--
-- Name: api_audit id; Type: DEFAULT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.api_audit ALTER COLUMN id SET DEFAULT nextval('public.api_audit_id_seq'::regclass);


--
-- Name: api_clients id; Type: DEFAULT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.api_clients ALTER COLUMN id SET DEFAULT nextval('public.api_clients_id_seq'::regclass);


--
-- Name: api_keys id; Type: DEFAULT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.api_keys ALTER COLUMN id SET DEFAULT nextval('public.api_keys_id_seq'::regclass);


--
-- Name: assets id; Type: DEFAULT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.assets ALTER COLUMN id SET DEFAULT nextval('public.assets_id_seq'::regclass);


--
-- Name: balance_checkpoints id; Type: DEFAULT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.balance_checkpoints ALTER COLUMN id SET DEFAULT nextval('public.balance_checkpoints_id_seq'::regclass);


--
-- Name: cases id; Type: DEFAULT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.cases ALTER COLUMN id SET DEFAULT nextval('public.cases_id_seq'::regclass);


--
-- Name: cold_transfer_events id; Type: DEFAULT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.cold_transfer_events ALTER COLUMN id SET DEFAULT nextval('public.cold_transfer_events_id_seq'::regclass);


--
-- Name: cold_transfers id; Type: DEFAULT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.cold_transfers ALTER COLUMN id SET DEFAULT nextval('public.cold_transfers_id_seq'::regclass);


--
-- Name: console_sessions id; Type: DEFAULT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.console_sessions ALTER COLUMN id SET DEFAULT nextval('public.console_sessions_id_seq'::regclass);


--
-- Name: deposit_case_votes id; Type: DEFAULT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.deposit_case_votes ALTER COLUMN id SET DEFAULT nextval('public.deposit_case_votes_id_seq'::regclass);


--
-- Name: deposit_cases id; Type: DEFAULT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.deposit_cases ALTER COLUMN id SET DEFAULT nextval('public.deposit_cases_id_seq'::regclass);


--
-- Name: deposit_events id; Type: DEFAULT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.deposit_events ALTER COLUMN id SET DEFAULT nextval('public.deposit_events_id_seq'::regclass);


--
-- Name: deposits id; Type: DEFAULT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.deposits ALTER COLUMN id SET DEFAULT nextval('public.deposits_id_seq'::regclass);


--
-- Name: gas_top_up_events id; Type: DEFAULT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.gas_top_up_events ALTER COLUMN id SET DEFAULT nextval('public.gas_top_up_events_id_seq'::regclass);


--
-- Name: gas_top_ups id; Type: DEFAULT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.gas_top_ups ALTER COLUMN id SET DEFAULT nextval('public.gas_top_ups_id_seq'::regclass);


--
-- Name: hot_limit_episodes id; Type: DEFAULT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.hot_limit_episodes ALTER COLUMN id SET DEFAULT nextval('public.hot_limit_episodes_id_seq'::regclass);


--
-- Name: job_runs id; Type: DEFAULT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.job_runs ALTER COLUMN id SET DEFAULT nextval('public.job_runs_id_seq'::regclass);


--
-- Name: ledger_period_proposals id; Type: DEFAULT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.ledger_period_proposals ALTER COLUMN id SET DEFAULT nextval('public.ledger_period_proposals_id_seq'::regclass);


--
-- Name: ledger_periods id; Type: DEFAULT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.ledger_periods ALTER COLUMN id SET DEFAULT nextval('public.ledger_periods_id_seq'::regclass);


--
-- Name: ledger_postings id; Type: DEFAULT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.ledger_postings ALTER COLUMN id SET DEFAULT nextval('public.ledger_postings_id_seq'::regclass);


--
-- Name: ledger_seals id; Type: DEFAULT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.ledger_seals ALTER COLUMN id SET DEFAULT nextval('public.ledger_seals_id_seq'::regclass);


--
-- Name: ledger_transactions id; Type: DEFAULT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.ledger_transactions ALTER COLUMN id SET DEFAULT nextval('public.ledger_transactions_id_seq'::regclass);


--
-- Name: outbox_events id; Type: DEFAULT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.outbox_events ALTER COLUMN id SET DEFAULT nextval('public.outbox_events_id_seq'::regclass);


--
-- Name: outgoing_attempts id; Type: DEFAULT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.outgoing_attempts ALTER COLUMN id SET DEFAULT nextval('public.outgoing_attempts_id_seq'::regclass);


--
-- Name: provider_statement_records id; Type: DEFAULT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.provider_statement_records ALTER COLUMN id SET DEFAULT nextval('public.provider_statement_records_id_seq'::regclass);


--
-- Name: provider_statements id; Type: DEFAULT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.provider_statements ALTER COLUMN id SET DEFAULT nextval('public.provider_statements_id_seq'::regclass);


--
-- Name: refill_requests id; Type: DEFAULT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.refill_requests ALTER COLUMN id SET DEFAULT nextval('public.refill_requests_id_seq'::regclass);


--
-- Name: reserve_reports id; Type: DEFAULT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.reserve_reports ALTER COLUMN id SET DEFAULT nextval('public.reserve_reports_id_seq'::regclass);


--
-- Name: sweep_events id; Type: DEFAULT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.sweep_events ALTER COLUMN id SET DEFAULT nextval('public.sweep_events_id_seq'::regclass);


--
-- Name: sweeps id; Type: DEFAULT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.sweeps ALTER COLUMN id SET DEFAULT nextval('public.sweeps_id_seq'::regclass);


--
-- Name: treasury_fundings id; Type: DEFAULT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.treasury_fundings ALTER COLUMN id SET DEFAULT nextval('public.treasury_fundings_id_seq'::regclass);


--
-- Name: webhook_attempts id; Type: DEFAULT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.webhook_attempts ALTER COLUMN id SET DEFAULT nextval('public.webhook_attempts_id_seq'::regclass);


--
-- Name: webhook_deliveries id; Type: DEFAULT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.webhook_deliveries ALTER COLUMN id SET DEFAULT nextval('public.webhook_deliveries_id_seq'::regclass);


--
-- Name: webhook_endpoints id; Type: DEFAULT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.webhook_endpoints ALTER COLUMN id SET DEFAULT nextval('public.webhook_endpoints_id_seq'::regclass);


--
-- Name: withdrawal_allowlist id; Type: DEFAULT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.withdrawal_allowlist ALTER COLUMN id SET DEFAULT nextval('public.withdrawal_allowlist_id_seq'::regclass);


--
-- Name: withdrawal_allowlist_votes id; Type: DEFAULT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.withdrawal_allowlist_votes ALTER COLUMN id SET DEFAULT nextval('public.withdrawal_allowlist_votes_id_seq'::regclass);


--
-- Name: withdrawal_cases id; Type: DEFAULT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.withdrawal_cases ALTER COLUMN id SET DEFAULT nextval('public.withdrawal_cases_id_seq'::regclass);


--
-- Name: withdrawal_decisions id; Type: DEFAULT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.withdrawal_decisions ALTER COLUMN id SET DEFAULT nextval('public.withdrawal_decisions_id_seq'::regclass);


--
-- Name: withdrawal_events id; Type: DEFAULT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.withdrawal_events ALTER COLUMN id SET DEFAULT nextval('public.withdrawal_events_id_seq'::regclass);


--
-- Name: withdrawal_returns id; Type: DEFAULT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.withdrawal_returns ALTER COLUMN id SET DEFAULT nextval('public.withdrawal_returns_id_seq'::regclass);


--
-- Name: withdrawals id; Type: DEFAULT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.withdrawals ALTER COLUMN id SET DEFAULT nextval('public.withdrawals_id_seq'::regclass);


--
-- Name: account_balances account_balances_pkey; Type: CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.account_balances
    ADD CONSTRAINT account_balances_pkey PRIMARY KEY (account_id);


--
-- Name: accounts accounts_code_asset_id_key; Type: CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.accounts
    ADD CONSTRAINT accounts_code_asset_id_key UNIQUE (code, asset_id);


--
-- Name: accounts accounts_id_asset_id_key; Type: CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.accounts
    ADD CONSTRAINT accounts_id_asset_id_key UNIQUE (id, asset_id);


--
-- Name: accounts accounts_pkey; Type: CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.accounts
    ADD CONSTRAINT accounts_pkey PRIMARY KEY (id);


--
-- Name: alembic_version alembic_version_pkc; Type: CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.alembic_version
    ADD CONSTRAINT alembic_version_pkc PRIMARY KEY (version_num);


--
-- Name: api_audit api_audit_pkey; Type: CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.api_audit
    ADD CONSTRAINT api_audit_pkey PRIMARY KEY (id);


--
-- Name: api_auth_failures api_auth_failures_pkey; Type: CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.api_auth_failures
    ADD CONSTRAINT api_auth_failures_pkey PRIMARY KEY (source, window_start);


--
-- Name: api_clients api_clients_name_key; Type: CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.api_clients
    ADD CONSTRAINT api_clients_name_key UNIQUE (name);


--
-- Name: api_clients api_clients_pkey; Type: CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.api_clients
    ADD CONSTRAINT api_clients_pkey PRIMARY KEY (id);


--
-- Name: api_idempotency api_idempotency_pkey; Type: CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.api_idempotency
    ADD CONSTRAINT api_idempotency_pkey PRIMARY KEY (client_id, operation, key);


--
-- Name: api_keys api_keys_pkey; Type: CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.api_keys
    ADD CONSTRAINT api_keys_pkey PRIMARY KEY (id);


--
-- Name: api_keys api_keys_prefix_key; Type: CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.api_keys
    ADD CONSTRAINT api_keys_prefix_key UNIQUE (prefix);


--
-- Name: api_rate_windows api_rate_windows_pkey; Type: CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.api_rate_windows
    ADD CONSTRAINT api_rate_windows_pkey PRIMARY KEY (key_id, window_start, slot);


--
-- Name: api_users api_users_client_id_reference_key; Type: CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.api_users
    ADD CONSTRAINT api_users_client_id_reference_key UNIQUE (client_id, reference);


--
-- Name: api_users api_users_pkey; Type: CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.api_users
    ADD CONSTRAINT api_users_pkey PRIMARY KEY (id);


--
-- Name: assets assets_code_key; Type: CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.assets
    ADD CONSTRAINT assets_code_key UNIQUE (code);


--
-- Name: assets assets_pkey; Type: CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.assets
    ADD CONSTRAINT assets_pkey PRIMARY KEY (id);


--
-- Name: balance_checkpoint_entries balance_checkpoint_entries_pkey; Type: CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.balance_checkpoint_entries
    ADD CONSTRAINT balance_checkpoint_entries_pkey PRIMARY KEY (checkpoint_id, account_id);


--
-- Name: balance_checkpoints balance_checkpoints_pkey; Type: CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.balance_checkpoints
    ADD CONSTRAINT balance_checkpoints_pkey PRIMARY KEY (id);


--
-- Name: cases cases_pkey; Type: CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.cases
    ADD CONSTRAINT cases_pkey PRIMARY KEY (id);


--
-- Name: cold_transfer_approvals cold_transfer_approvals_pkey; Type: CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.cold_transfer_approvals
    ADD CONSTRAINT cold_transfer_approvals_pkey PRIMARY KEY (cold_transfer_id, approver);


--
-- Name: cold_transfer_events cold_transfer_events_pkey; Type: CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.cold_transfer_events
    ADD CONSTRAINT cold_transfer_events_pkey PRIMARY KEY (id);


--
-- Name: cold_transfers cold_transfers_pkey; Type: CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.cold_transfers
    ADD CONSTRAINT cold_transfers_pkey PRIMARY KEY (id);


--
-- Name: cold_transfers cold_transfers_request_key_key; Type: CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.cold_transfers
    ADD CONSTRAINT cold_transfers_request_key_key UNIQUE (request_key);


--
-- Name: console_secrets console_secrets_pkey; Type: CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.console_secrets
    ADD CONSTRAINT console_secrets_pkey PRIMARY KEY (id);


--
-- Name: console_sessions console_sessions_pkey; Type: CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.console_sessions
    ADD CONSTRAINT console_sessions_pkey PRIMARY KEY (id);


--
-- Name: console_sessions console_sessions_token_digest_key; Type: CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.console_sessions
    ADD CONSTRAINT console_sessions_token_digest_key UNIQUE (token_digest);


--
-- Name: deposit_addresses deposit_addresses_family_derivation_index_key; Type: CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.deposit_addresses
    ADD CONSTRAINT deposit_addresses_family_derivation_index_key UNIQUE (family, derivation_index);


--
-- Name: deposit_addresses deposit_addresses_family_user_id_key; Type: CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.deposit_addresses
    ADD CONSTRAINT deposit_addresses_family_user_id_key UNIQUE (family, user_id);


--
-- Name: deposit_addresses deposit_addresses_pkey; Type: CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.deposit_addresses
    ADD CONSTRAINT deposit_addresses_pkey PRIMARY KEY (family, address);


--
-- Name: deposit_case_refunds deposit_case_refunds_pkey; Type: CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.deposit_case_refunds
    ADD CONSTRAINT deposit_case_refunds_pkey PRIMARY KEY (case_id);


--
-- Name: deposit_case_refunds deposit_case_refunds_withdrawal_id_key; Type: CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.deposit_case_refunds
    ADD CONSTRAINT deposit_case_refunds_withdrawal_id_key UNIQUE (withdrawal_id);


--
-- Name: deposit_case_resolutions deposit_case_resolutions_pkey; Type: CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.deposit_case_resolutions
    ADD CONSTRAINT deposit_case_resolutions_pkey PRIMARY KEY (case_id);


--
-- Name: deposit_case_votes deposit_case_votes_case_id_role_key; Type: CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.deposit_case_votes
    ADD CONSTRAINT deposit_case_votes_case_id_role_key UNIQUE (case_id, role);


--
-- Name: deposit_case_votes deposit_case_votes_pkey; Type: CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.deposit_case_votes
    ADD CONSTRAINT deposit_case_votes_pkey PRIMARY KEY (id);


--
-- Name: deposit_cases deposit_cases_case_id_key; Type: CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.deposit_cases
    ADD CONSTRAINT deposit_cases_case_id_key UNIQUE (case_id);


--
-- Name: deposit_cases deposit_cases_kind_deposit_id_key; Type: CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.deposit_cases
    ADD CONSTRAINT deposit_cases_kind_deposit_id_key UNIQUE (kind, deposit_id);


--
-- Name: deposit_cases deposit_cases_pkey; Type: CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.deposit_cases
    ADD CONSTRAINT deposit_cases_pkey PRIMARY KEY (id);


--
-- Name: deposit_events deposit_events_pkey; Type: CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.deposit_events
    ADD CONSTRAINT deposit_events_pkey PRIMARY KEY (id);


--
-- Name: deposits deposits_chain_tx_hash_position_key; Type: CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.deposits
    ADD CONSTRAINT deposits_chain_tx_hash_position_key UNIQUE (chain, tx_hash, "position");


--
-- Name: deposits deposits_pkey; Type: CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.deposits
    ADD CONSTRAINT deposits_pkey PRIMARY KEY (id);


--
-- Name: deposits deposits_posted_check; Type: CHECK CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE public.deposits
    ADD CONSTRAINT deposits_posted_check CHECK (((state <> ALL (ARRAY['credited'::text, 'suspense'::text, 'capital'::text])) OR (ledger_transaction_id IS NOT NULL))) NOT VALID;


--
-- Name: gas_top_up_events gas_top_up_events_pkey; Type: CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.gas_top_up_events
    ADD CONSTRAINT gas_top_up_events_pkey PRIMARY KEY (id);


--
-- Name: gas_top_ups gas_top_ups_pkey; Type: CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.gas_top_ups
    ADD CONSTRAINT gas_top_ups_pkey PRIMARY KEY (id);


--
-- Name: hot_limit_episodes hot_limit_episodes_pkey; Type: CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.hot_limit_episodes
    ADD CONSTRAINT hot_limit_episodes_pkey PRIMARY KEY (id);


--
-- Name: internal_transfers internal_transfers_pkey; Type: CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.internal_transfers
    ADD CONSTRAINT internal_transfers_pkey PRIMARY KEY (chain, tx_hash, "position");


--
-- Name: job_runs job_runs_pkey; Type: CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.job_runs
    ADD CONSTRAINT job_runs_pkey PRIMARY KEY (id);


--
-- Name: ledger_period_approvals ledger_period_approvals_period_id_key; Type: CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.ledger_period_approvals
    ADD CONSTRAINT ledger_period_approvals_period_id_key UNIQUE (period_id);


--
-- Name: ledger_period_approvals ledger_period_approvals_pkey; Type: CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.ledger_period_approvals
    ADD CONSTRAINT ledger_period_approvals_pkey PRIMARY KEY (proposal_id);


--
-- Name: ledger_period_proposals ledger_period_proposals_pkey; Type: CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.ledger_period_proposals
    ADD CONSTRAINT ledger_period_proposals_pkey PRIMARY KEY (id);


--
-- Name: ledger_periods ledger_periods_ends_at_key; Type: CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.ledger_periods
    ADD CONSTRAINT ledger_periods_ends_at_key UNIQUE (ends_at);


--
-- Name: ledger_periods ledger_periods_pkey; Type: CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.ledger_periods
    ADD CONSTRAINT ledger_periods_pkey PRIMARY KEY (id);


--
-- Name: ledger_postings ledger_postings_pkey; Type: CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.ledger_postings
    ADD CONSTRAINT ledger_postings_pkey PRIMARY KEY (id);


--
-- Name: ledger_postings ledger_postings_transaction_id_line_no_key; Type: CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.ledger_postings
    ADD CONSTRAINT ledger_postings_transaction_id_line_no_key UNIQUE (transaction_id, line_no);


--
-- Name: ledger_seals ledger_seals_from_transaction_id_key; Type: CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.ledger_seals
    ADD CONSTRAINT ledger_seals_from_transaction_id_key UNIQUE (from_transaction_id);


--
-- Name: ledger_seals ledger_seals_pkey; Type: CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.ledger_seals
    ADD CONSTRAINT ledger_seals_pkey PRIMARY KEY (id);


--
-- Name: ledger_seals ledger_seals_previous_hash_key; Type: CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.ledger_seals
    ADD CONSTRAINT ledger_seals_previous_hash_key UNIQUE (previous_hash);


--
-- Name: ledger_seals ledger_seals_seal_hash_key; Type: CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.ledger_seals
    ADD CONSTRAINT ledger_seals_seal_hash_key UNIQUE (seal_hash);


--
-- Name: ledger_transactions ledger_transactions_idempotency_key_key; Type: CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.ledger_transactions
    ADD CONSTRAINT ledger_transactions_idempotency_key_key UNIQUE (idempotency_key);


--
-- Name: ledger_transactions ledger_transactions_pkey; Type: CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.ledger_transactions
    ADD CONSTRAINT ledger_transactions_pkey PRIMARY KEY (id);


--
-- Name: outbox_events outbox_events_event_id_key; Type: CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.outbox_events
    ADD CONSTRAINT outbox_events_event_id_key UNIQUE (event_id);


--
-- Name: outbox_events outbox_events_pkey; Type: CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.outbox_events
    ADD CONSTRAINT outbox_events_pkey PRIMARY KEY (id);


--
-- Name: outgoing_attempts outgoing_attempts_pkey; Type: CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.outgoing_attempts
    ADD CONSTRAINT outgoing_attempts_pkey PRIMARY KEY (id);


--
-- Name: outgoing_attempts outgoing_attempts_tx_hash_key; Type: CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.outgoing_attempts
    ADD CONSTRAINT outgoing_attempts_tx_hash_key UNIQUE (tx_hash);


--
-- Name: outgoing_attempts outgoing_attempts_withdrawal_id_attempt_no_key; Type: CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.outgoing_attempts
    ADD CONSTRAINT outgoing_attempts_withdrawal_id_attempt_no_key UNIQUE (withdrawal_id, attempt_no);


--
-- Name: provider_inbox provider_inbox_pkey; Type: CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.provider_inbox
    ADD CONSTRAINT provider_inbox_pkey PRIMARY KEY (event_id);


--
-- Name: provider_statement_records provider_statement_records_pkey; Type: CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.provider_statement_records
    ADD CONSTRAINT provider_statement_records_pkey PRIMARY KEY (id);


--
-- Name: provider_statement_records provider_statement_records_provider_reference_key; Type: CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.provider_statement_records
    ADD CONSTRAINT provider_statement_records_provider_reference_key UNIQUE (provider, reference);


--
-- Name: provider_statements provider_statements_id_provider_key; Type: CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.provider_statements
    ADD CONSTRAINT provider_statements_id_provider_key UNIQUE (id, provider);


--
-- Name: provider_statements provider_statements_pkey; Type: CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.provider_statements
    ADD CONSTRAINT provider_statements_pkey PRIMARY KEY (id);


--
-- Name: provider_statements provider_statements_provider_sha256_key; Type: CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.provider_statements
    ADD CONSTRAINT provider_statements_provider_sha256_key UNIQUE (provider, sha256);


--
-- Name: refill_requests refill_requests_pkey; Type: CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.refill_requests
    ADD CONSTRAINT refill_requests_pkey PRIMARY KEY (id);


--
-- Name: refill_requests refill_requests_request_key_key; Type: CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.refill_requests
    ADD CONSTRAINT refill_requests_request_key_key UNIQUE (request_key);


--
-- Name: reserve_leaves reserve_leaves_pkey; Type: CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.reserve_leaves
    ADD CONSTRAINT reserve_leaves_pkey PRIMARY KEY (report_id, "position");


--
-- Name: reserve_leaves reserve_leaves_report_id_user_id_key; Type: CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.reserve_leaves
    ADD CONSTRAINT reserve_leaves_report_id_user_id_key UNIQUE (report_id, user_id);


--
-- Name: reserve_nodes reserve_nodes_pkey; Type: CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.reserve_nodes
    ADD CONSTRAINT reserve_nodes_pkey PRIMARY KEY (report_id, level, "position");


--
-- Name: reserve_report_addresses reserve_report_addresses_pkey; Type: CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.reserve_report_addresses
    ADD CONSTRAINT reserve_report_addresses_pkey PRIMARY KEY (report_id, chain, address);


--
-- Name: reserve_reports reserve_reports_pkey; Type: CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.reserve_reports
    ADD CONSTRAINT reserve_reports_pkey PRIMARY KEY (id);


--
-- Name: reserve_signatures reserve_signatures_pkey; Type: CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.reserve_signatures
    ADD CONSTRAINT reserve_signatures_pkey PRIMARY KEY (report_id, chain, address);


--
-- Name: schema_definitions schema_definitions_pkey; Type: CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.schema_definitions
    ADD CONSTRAINT schema_definitions_pkey PRIMARY KEY (path);


--
-- Name: sender_nonces sender_nonces_pkey; Type: CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.sender_nonces
    ADD CONSTRAINT sender_nonces_pkey PRIMARY KEY (chain, address);


--
-- Name: sweep_events sweep_events_pkey; Type: CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.sweep_events
    ADD CONSTRAINT sweep_events_pkey PRIMARY KEY (id);


--
-- Name: sweeps sweeps_pkey; Type: CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.sweeps
    ADD CONSTRAINT sweeps_pkey PRIMARY KEY (id);


--
-- Name: treasury_funding_matches treasury_funding_matches_deposit_id_key; Type: CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.treasury_funding_matches
    ADD CONSTRAINT treasury_funding_matches_deposit_id_key UNIQUE (deposit_id);


--
-- Name: treasury_funding_matches treasury_funding_matches_pkey; Type: CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.treasury_funding_matches
    ADD CONSTRAINT treasury_funding_matches_pkey PRIMARY KEY (funding_id);


--
-- Name: treasury_fundings treasury_fundings_idempotency_key_key; Type: CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.treasury_fundings
    ADD CONSTRAINT treasury_fundings_idempotency_key_key UNIQUE (idempotency_key);


--
-- Name: treasury_fundings treasury_fundings_pkey; Type: CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.treasury_fundings
    ADD CONSTRAINT treasury_fundings_pkey PRIMARY KEY (id);


--
-- Name: watcher_cursors watcher_cursors_pkey; Type: CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.watcher_cursors
    ADD CONSTRAINT watcher_cursors_pkey PRIMARY KEY (chain);


--
-- Name: webhook_attempts webhook_attempts_pkey; Type: CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.webhook_attempts
    ADD CONSTRAINT webhook_attempts_pkey PRIMARY KEY (id);


--
-- Name: webhook_deliveries webhook_deliveries_event_id_endpoint_id_key; Type: CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.webhook_deliveries
    ADD CONSTRAINT webhook_deliveries_event_id_endpoint_id_key UNIQUE (event_id, endpoint_id);


--
-- Name: webhook_deliveries webhook_deliveries_pkey; Type: CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.webhook_deliveries
    ADD CONSTRAINT webhook_deliveries_pkey PRIMARY KEY (id);


--
-- Name: webhook_endpoints webhook_endpoints_pkey; Type: CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.webhook_endpoints
    ADD CONSTRAINT webhook_endpoints_pkey PRIMARY KEY (id);


--
-- Name: withdrawal_allowlist withdrawal_allowlist_client_id_request_key_key; Type: CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.withdrawal_allowlist
    ADD CONSTRAINT withdrawal_allowlist_client_id_request_key_key UNIQUE (client_id, request_key);


--
-- Name: withdrawal_allowlist withdrawal_allowlist_pkey; Type: CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.withdrawal_allowlist
    ADD CONSTRAINT withdrawal_allowlist_pkey PRIMARY KEY (id);


--
-- Name: withdrawal_allowlist_votes withdrawal_allowlist_votes_entry_id_admin_active_at_key; Type: CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.withdrawal_allowlist_votes
    ADD CONSTRAINT withdrawal_allowlist_votes_entry_id_admin_active_at_key UNIQUE (entry_id, admin, active_at);


--
-- Name: withdrawal_allowlist_votes withdrawal_allowlist_votes_pkey; Type: CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.withdrawal_allowlist_votes
    ADD CONSTRAINT withdrawal_allowlist_votes_pkey PRIMARY KEY (id);


--
-- Name: withdrawal_case_resolutions withdrawal_case_resolutions_pkey; Type: CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.withdrawal_case_resolutions
    ADD CONSTRAINT withdrawal_case_resolutions_pkey PRIMARY KEY (case_id);


--
-- Name: withdrawal_cases withdrawal_cases_pkey; Type: CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.withdrawal_cases
    ADD CONSTRAINT withdrawal_cases_pkey PRIMARY KEY (id);


--
-- Name: withdrawal_decisions withdrawal_decisions_pkey; Type: CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.withdrawal_decisions
    ADD CONSTRAINT withdrawal_decisions_pkey PRIMARY KEY (id);


--
-- Name: withdrawal_decisions withdrawal_decisions_withdrawal_id_kind_actor_key; Type: CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.withdrawal_decisions
    ADD CONSTRAINT withdrawal_decisions_withdrawal_id_kind_actor_key UNIQUE (withdrawal_id, kind, actor);


--
-- Name: withdrawal_events withdrawal_events_pkey; Type: CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.withdrawal_events
    ADD CONSTRAINT withdrawal_events_pkey PRIMARY KEY (id);


--
-- Name: withdrawal_returns withdrawal_returns_chain_tx_hash_position_key; Type: CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.withdrawal_returns
    ADD CONSTRAINT withdrawal_returns_chain_tx_hash_position_key UNIQUE (chain, tx_hash, "position");


--
-- Name: withdrawal_returns withdrawal_returns_pkey; Type: CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.withdrawal_returns
    ADD CONSTRAINT withdrawal_returns_pkey PRIMARY KEY (id);


--
-- Name: withdrawals withdrawals_chain_hot_wallet_nonce_key; Type: CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.withdrawals
    ADD CONSTRAINT withdrawals_chain_hot_wallet_nonce_key UNIQUE (chain, hot_wallet, nonce);


--
-- Name: withdrawals withdrawals_pkey; Type: CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.withdrawals
    ADD CONSTRAINT withdrawals_pkey PRIMARY KEY (id);


--
-- Name: withdrawals withdrawals_user_id_request_key_key; Type: CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.withdrawals
    ADD CONSTRAINT withdrawals_user_id_request_key_key UNIQUE (user_id, request_key);


--
-- Name: api_audit_actor_idx; Type: INDEX; Schema: public; Owner: CURRENT_USER
--

CREATE INDEX api_audit_actor_idx ON public.api_audit USING btree (actor, id);


--
-- Name: api_audit_at_idx; Type: INDEX; Schema: public; Owner: CURRENT_USER
--

CREATE INDEX api_audit_at_idx ON public.api_audit USING btree (at);


--
-- Name: api_idempotency_created_idx; Type: INDEX; Schema: public; Owner: CURRENT_USER
--

CREATE INDEX api_idempotency_created_idx ON public.api_idempotency USING btree (created_at);


--
-- Name: api_keys_client_idx; Type: INDEX; Schema: public; Owner: CURRENT_USER
--

CREATE INDEX api_keys_client_idx ON public.api_keys USING btree (client_id, id);


--
-- Name: api_users_client_idx; Type: INDEX; Schema: public; Owner: CURRENT_USER
--

CREATE INDEX api_users_client_idx ON public.api_users USING btree (client_id, id);


--
-- Name: api_users_reference; Type: INDEX; Schema: public; Owner: CURRENT_USER
--

CREATE INDEX api_users_reference ON public.api_users USING btree (reference) WHERE (reference IS NOT NULL);


--
-- Name: cases_open_key; Type: INDEX; Schema: public; Owner: CURRENT_USER
--

CREATE UNIQUE INDEX cases_open_key ON public.cases USING btree (type, subject) WHERE (status = 'open'::text);


--
-- Name: cases_status_type_idx; Type: INDEX; Schema: public; Owner: CURRENT_USER
--

CREATE INDEX cases_status_type_idx ON public.cases USING btree (status, type, id);


--
-- Name: cold_transfer_events_cold_idx; Type: INDEX; Schema: public; Owner: CURRENT_USER
--

CREATE INDEX cold_transfer_events_cold_idx ON public.cold_transfer_events USING btree (cold_transfer_id, id);


--
-- Name: cold_transfers_one_open; Type: INDEX; Schema: public; Owner: CURRENT_USER
--

CREATE UNIQUE INDEX cold_transfers_one_open ON public.cold_transfers USING btree (chain, asset) WHERE (state <> ALL (ARRAY['final'::text, 'reverted'::text, 'dropped'::text, 'rejected'::text]));


--
-- Name: cold_transfers_state_idx; Type: INDEX; Schema: public; Owner: CURRENT_USER
--

CREATE INDEX cold_transfers_state_idx ON public.cold_transfers USING btree (chain, state, id);


--
-- Name: console_sessions_key; Type: INDEX; Schema: public; Owner: CURRENT_USER
--

CREATE INDEX console_sessions_key ON public.console_sessions USING btree (key_id);


--
-- Name: deposit_events_deposit_idx; Type: INDEX; Schema: public; Owner: CURRENT_USER
--

CREATE INDEX deposit_events_deposit_idx ON public.deposit_events USING btree (deposit_id, id);


--
-- Name: deposits_block_idx; Type: INDEX; Schema: public; Owner: CURRENT_USER
--

CREATE INDEX deposits_block_idx ON public.deposits USING btree (chain, block_number);


--
-- Name: deposits_open_idx; Type: INDEX; Schema: public; Owner: CURRENT_USER
--

CREATE INDEX deposits_open_idx ON public.deposits USING btree (chain, state) WHERE (state = ANY (ARRAY['included'::text, 'unconfirmed'::text, 'final'::text]));


--
-- Name: deposits_user_idx; Type: INDEX; Schema: public; Owner: CURRENT_USER
--

CREATE INDEX deposits_user_idx ON public.deposits USING btree (user_id, id);


--
-- Name: gas_top_up_events_top_up_idx; Type: INDEX; Schema: public; Owner: CURRENT_USER
--

CREATE INDEX gas_top_up_events_top_up_idx ON public.gas_top_up_events USING btree (top_up_id, id);


--
-- Name: gas_top_ups_state_idx; Type: INDEX; Schema: public; Owner: CURRENT_USER
--

CREATE INDEX gas_top_ups_state_idx ON public.gas_top_ups USING btree (chain, state, id);


--
-- Name: hot_limit_episodes_one_open; Type: INDEX; Schema: public; Owner: CURRENT_USER
--

CREATE UNIQUE INDEX hot_limit_episodes_one_open ON public.hot_limit_episodes USING btree (chain, asset, side) WHERE (ended_at IS NULL);


--
-- Name: job_runs_job_idx; Type: INDEX; Schema: public; Owner: CURRENT_USER
--

CREATE INDEX job_runs_job_idx ON public.job_runs USING btree (job, started_at);


--
-- Name: ledger_postings_account_idx; Type: INDEX; Schema: public; Owner: CURRENT_USER
--

CREATE INDEX ledger_postings_account_idx ON public.ledger_postings USING btree (account_id, id);


--
-- Name: ledger_postings_closes_idx; Type: INDEX; Schema: public; Owner: CURRENT_USER
--

CREATE INDEX ledger_postings_closes_idx ON public.ledger_postings USING btree (closes_posting_id) WHERE (closes_posting_id IS NOT NULL);


--
-- Name: ledger_postings_reverses_idx; Type: INDEX; Schema: public; Owner: CURRENT_USER
--

CREATE INDEX ledger_postings_reverses_idx ON public.ledger_postings USING btree (reverses_posting_id) WHERE (reverses_posting_id IS NOT NULL);


--
-- Name: ledger_transactions_provider_idx; Type: INDEX; Schema: public; Owner: CURRENT_USER
--

CREATE INDEX ledger_transactions_provider_idx ON public.ledger_transactions USING btree (COALESCE((metadata ->> 'provider'::text), (((metadata -> 'evidence'::text) -> 'attestation'::text) ->> 'provider'::text))) WHERE ((metadata ? 'provider'::text) OR (((metadata -> 'evidence'::text) -> 'attestation'::text) ? 'provider'::text));


--
-- Name: ledger_transactions_reference_idx; Type: INDEX; Schema: public; Owner: CURRENT_USER
--

CREATE INDEX ledger_transactions_reference_idx ON public.ledger_transactions USING btree (reference) WHERE (reference IS NOT NULL);


--
-- Name: ledger_transactions_reverses_idx; Type: INDEX; Schema: public; Owner: CURRENT_USER
--

CREATE INDEX ledger_transactions_reverses_idx ON public.ledger_transactions USING btree (reverses_transaction_id) WHERE (reverses_transaction_id IS NOT NULL);


--
-- Name: outbox_events_client_idx; Type: INDEX; Schema: public; Owner: CURRENT_USER
--

CREATE INDEX outbox_events_client_idx ON public.outbox_events USING btree (client_id, id);


--
-- Name: outbox_events_created_idx; Type: INDEX; Schema: public; Owner: CURRENT_USER
--

CREATE INDEX outbox_events_created_idx ON public.outbox_events USING btree (created_at, id);


--
-- Name: outgoing_attempts_cold_attempt_no; Type: INDEX; Schema: public; Owner: CURRENT_USER
--

CREATE UNIQUE INDEX outgoing_attempts_cold_attempt_no ON public.outgoing_attempts USING btree (cold_transfer_id, attempt_no) WHERE (cold_transfer_id IS NOT NULL);


--
-- Name: outgoing_attempts_sender_nonce_idx; Type: INDEX; Schema: public; Owner: CURRENT_USER
--

CREATE INDEX outgoing_attempts_sender_nonce_idx ON public.outgoing_attempts USING btree (chain, sender, nonce);


--
-- Name: outgoing_attempts_sweep_attempt_no; Type: INDEX; Schema: public; Owner: CURRENT_USER
--

CREATE UNIQUE INDEX outgoing_attempts_sweep_attempt_no ON public.outgoing_attempts USING btree (sweep_id, attempt_no) WHERE (sweep_id IS NOT NULL);


--
-- Name: outgoing_attempts_top_up_attempt_no; Type: INDEX; Schema: public; Owner: CURRENT_USER
--

CREATE UNIQUE INDEX outgoing_attempts_top_up_attempt_no ON public.outgoing_attempts USING btree (top_up_id, attempt_no) WHERE (top_up_id IS NOT NULL);


--
-- Name: provider_inbox_key_idx; Type: INDEX; Schema: public; Owner: CURRENT_USER
--

CREATE INDEX provider_inbox_key_idx ON public.provider_inbox USING btree (chain, tx_hash, "position", received_at);


--
-- Name: provider_statement_records_period_idx; Type: INDEX; Schema: public; Owner: CURRENT_USER
--

CREATE INDEX provider_statement_records_period_idx ON public.provider_statement_records USING btree (provider, occurred_at);


--
-- Name: refill_requests_match_key; Type: INDEX; Schema: public; Owner: CURRENT_USER
--

CREATE UNIQUE INDEX refill_requests_match_key ON public.refill_requests USING btree (chain, matched_tx_hash, matched_position) WHERE (matched_tx_hash IS NOT NULL);


--
-- Name: state_moves_key; Type: INDEX; Schema: public; Owner: CURRENT_USER
--

CREATE UNIQUE INDEX state_moves_key ON public.state_moves USING btree (machine, COALESCE(from_state, ''::text), event, to_state);


--
-- Name: sweep_events_sweep_idx; Type: INDEX; Schema: public; Owner: CURRENT_USER
--

CREATE INDEX sweep_events_sweep_idx ON public.sweep_events USING btree (sweep_id, id);


--
-- Name: sweeps_one_open_per_address; Type: INDEX; Schema: public; Owner: CURRENT_USER
--

CREATE UNIQUE INDEX sweeps_one_open_per_address ON public.sweeps USING btree (chain, address) WHERE (state <> ALL (ARRAY['final'::text, 'reverted'::text, 'dropped'::text]));


--
-- Name: sweeps_state_idx; Type: INDEX; Schema: public; Owner: CURRENT_USER
--

CREATE INDEX sweeps_state_idx ON public.sweeps USING btree (chain, state, id);


--
-- Name: treasury_fundings_match_idx; Type: INDEX; Schema: public; Owner: CURRENT_USER
--

CREATE INDEX treasury_fundings_match_idx ON public.treasury_fundings USING btree (chain, asset_code, from_address, amount_minor, id);


--
-- Name: webhook_attempts_delivery_idx; Type: INDEX; Schema: public; Owner: CURRENT_USER
--

CREATE INDEX webhook_attempts_delivery_idx ON public.webhook_attempts USING btree (delivery_id, id);


--
-- Name: webhook_deliveries_due_idx; Type: INDEX; Schema: public; Owner: CURRENT_USER
--

CREATE INDEX webhook_deliveries_due_idx ON public.webhook_deliveries USING btree (next_attempt_at) WHERE (state = 'pending'::text);


--
-- Name: webhook_endpoints_client_idx; Type: INDEX; Schema: public; Owner: CURRENT_USER
--

CREATE INDEX webhook_endpoints_client_idx ON public.webhook_endpoints USING btree (client_id, id);


--
-- Name: withdrawal_allowlist_active_idx; Type: INDEX; Schema: public; Owner: CURRENT_USER
--

CREATE INDEX withdrawal_allowlist_active_idx ON public.withdrawal_allowlist USING btree (active_at) WHERE (removed_at IS NULL);


--
-- Name: withdrawal_allowlist_live_key; Type: INDEX; Schema: public; Owner: CURRENT_USER
--

CREATE UNIQUE INDEX withdrawal_allowlist_live_key ON public.withdrawal_allowlist USING btree (client_id, COALESCE(user_id, ''::text), chain, address) WHERE (removed_at IS NULL);


--
-- Name: withdrawal_allowlist_lookup_idx; Type: INDEX; Schema: public; Owner: CURRENT_USER
--

CREATE INDEX withdrawal_allowlist_lookup_idx ON public.withdrawal_allowlist USING btree (client_id, chain, address);


--
-- Name: withdrawal_cases_case_idx; Type: INDEX; Schema: public; Owner: CURRENT_USER
--

CREATE INDEX withdrawal_cases_case_idx ON public.withdrawal_cases USING btree (case_id);


--
-- Name: withdrawal_cases_withdrawal_idx; Type: INDEX; Schema: public; Owner: CURRENT_USER
--

CREATE INDEX withdrawal_cases_withdrawal_idx ON public.withdrawal_cases USING btree (withdrawal_id, id);


--
-- Name: withdrawal_events_withdrawal_idx; Type: INDEX; Schema: public; Owner: CURRENT_USER
--

CREATE INDEX withdrawal_events_withdrawal_idx ON public.withdrawal_events USING btree (withdrawal_id, id);


--
-- Name: withdrawals_nonce_open_idx; Type: INDEX; Schema: public; Owner: CURRENT_USER
--

CREATE INDEX withdrawals_nonce_open_idx ON public.withdrawals USING btree (chain, id) WHERE ((state = 'written_off'::text) AND (nonce IS NOT NULL) AND (nonce_closed_at IS NULL));


--
-- Name: withdrawals_state_idx; Type: INDEX; Schema: public; Owner: CURRENT_USER
--

CREATE INDEX withdrawals_state_idx ON public.withdrawals USING btree (state, id) WHERE (state <> ALL (ARRAY['settled'::text, 'reverted'::text, 'released'::text, 'canceled'::text, 'rejected'::text, 'written_off'::text]));


--
-- Name: withdrawals_user_asset_idx; Type: INDEX; Schema: public; Owner: CURRENT_USER
--

CREATE INDEX withdrawals_user_asset_idx ON public.withdrawals USING btree (user_id, asset_code, requested_at);


--
-- Name: withdrawals_user_id_idx; Type: INDEX; Schema: public; Owner: CURRENT_USER
--

CREATE INDEX withdrawals_user_id_idx ON public.withdrawals USING btree (user_id, id);


--
-- Name: account_balances account_balances_guard; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER account_balances_guard BEFORE INSERT ON public.account_balances FOR EACH ROW EXECUTE FUNCTION public.account_balances_guard();


--
-- Name: account_balances account_balances_immutable; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER account_balances_immutable BEFORE UPDATE OF account_id, asset_id, debits_must_not_exceed_credits, credits_must_not_exceed_debits ON public.account_balances FOR EACH ROW WHEN (((new.account_id IS DISTINCT FROM old.account_id) OR (new.asset_id IS DISTINCT FROM old.asset_id) OR (new.debits_must_not_exceed_credits IS DISTINCT FROM old.debits_must_not_exceed_credits) OR (new.credits_must_not_exceed_debits IS DISTINCT FROM old.credits_must_not_exceed_debits))) EXECUTE FUNCTION public.account_balances_guard();


--
-- Name: accounts accounts_append_only; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER accounts_append_only BEFORE DELETE OR UPDATE ON public.accounts FOR EACH ROW EXECUTE FUNCTION public.ledger_refuse_change();


--
-- Name: accounts accounts_no_truncate; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER accounts_no_truncate BEFORE TRUNCATE ON public.accounts FOR EACH STATEMENT EXECUTE FUNCTION public.ledger_refuse_change();


--
-- Name: accounts accounts_open_balance; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER accounts_open_balance AFTER INSERT ON public.accounts FOR EACH ROW EXECUTE FUNCTION public.accounts_open_balance();


--
-- Name: api_audit api_audit_append_only; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER api_audit_append_only BEFORE DELETE OR UPDATE ON public.api_audit FOR EACH ROW EXECUTE FUNCTION public.ledger_refuse_change();


--
-- Name: api_audit api_audit_no_truncate; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER api_audit_no_truncate BEFORE TRUNCATE ON public.api_audit FOR EACH STATEMENT EXECUTE FUNCTION public.ledger_refuse_change();


--
-- Name: api_idempotency api_idempotency_keep_24h; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER api_idempotency_keep_24h BEFORE DELETE ON public.api_idempotency FOR EACH ROW EXECUTE FUNCTION public.api_idempotency_guard();


--
-- Name: api_keys api_keys_guard; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER api_keys_guard BEFORE UPDATE OF id, client_id, prefix, secret_sha256, scope, created_at, revoked_at, revoked_by ON public.api_keys FOR EACH ROW WHEN ((((((((new.id IS DISTINCT FROM old.id) OR (new.client_id IS DISTINCT FROM old.client_id)) OR (new.prefix IS DISTINCT FROM old.prefix)) OR (new.secret_sha256 IS DISTINCT FROM old.secret_sha256)) OR (new.scope IS DISTINCT FROM old.scope)) OR (new.created_at IS DISTINCT FROM old.created_at)) OR ((old.revoked_at IS NOT NULL) AND ((new.revoked_at IS DISTINCT FROM old.revoked_at) OR (new.revoked_by IS DISTINCT FROM old.revoked_by))))) EXECUTE FUNCTION public.api_keys_guard();


--
-- Name: api_keys api_keys_no_delete; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER api_keys_no_delete BEFORE DELETE ON public.api_keys FOR EACH ROW EXECUTE FUNCTION public.ledger_refuse_change();


--
-- Name: assets assets_append_only; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER assets_append_only BEFORE DELETE OR UPDATE ON public.assets FOR EACH ROW EXECUTE FUNCTION public.ledger_refuse_change();


--
-- Name: assets assets_no_truncate; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER assets_no_truncate BEFORE TRUNCATE ON public.assets FOR EACH STATEMENT EXECUTE FUNCTION public.ledger_refuse_change();


--
-- Name: balance_checkpoint_entries balance_checkpoint_entries_append_only; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER balance_checkpoint_entries_append_only BEFORE DELETE OR UPDATE ON public.balance_checkpoint_entries FOR EACH ROW EXECUTE FUNCTION public.ledger_refuse_change();


--
-- Name: balance_checkpoint_entries balance_checkpoint_entries_no_truncate; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER balance_checkpoint_entries_no_truncate BEFORE TRUNCATE ON public.balance_checkpoint_entries FOR EACH STATEMENT EXECUTE FUNCTION public.ledger_refuse_change();


--
-- Name: balance_checkpoints balance_checkpoints_append_only; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER balance_checkpoints_append_only BEFORE DELETE OR UPDATE ON public.balance_checkpoints FOR EACH ROW EXECUTE FUNCTION public.ledger_refuse_change();


--
-- Name: balance_checkpoints balance_checkpoints_no_truncate; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER balance_checkpoints_no_truncate BEFORE TRUNCATE ON public.balance_checkpoints FOR EACH STATEMENT EXECUTE FUNCTION public.ledger_refuse_change();


--
-- Name: cases cases_guard; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER cases_guard BEFORE INSERT OR DELETE OR UPDATE ON public.cases FOR EACH ROW EXECUTE FUNCTION public.cases_guard();


--
-- Name: cases cases_no_truncate; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER cases_no_truncate BEFORE TRUNCATE ON public.cases FOR EACH STATEMENT EXECUTE FUNCTION public.ledger_refuse_change();


--
-- Name: cold_transfer_approvals cold_transfer_approvals_append_only; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER cold_transfer_approvals_append_only BEFORE DELETE OR UPDATE ON public.cold_transfer_approvals FOR EACH ROW EXECUTE FUNCTION public.ledger_refuse_change();


--
-- Name: cold_transfer_approvals cold_transfer_approvals_no_truncate; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER cold_transfer_approvals_no_truncate BEFORE TRUNCATE ON public.cold_transfer_approvals FOR EACH STATEMENT EXECUTE FUNCTION public.ledger_refuse_change();


--
-- Name: cold_transfer_events cold_transfer_events_append_only; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER cold_transfer_events_append_only BEFORE DELETE OR UPDATE ON public.cold_transfer_events FOR EACH ROW EXECUTE FUNCTION public.ledger_refuse_change();


--
-- Name: cold_transfer_events cold_transfer_events_no_truncate; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER cold_transfer_events_no_truncate BEFORE TRUNCATE ON public.cold_transfer_events FOR EACH STATEMENT EXECUTE FUNCTION public.ledger_refuse_change();


--
-- Name: cold_transfers cold_transfers_id_fixed; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER cold_transfers_id_fixed BEFORE UPDATE OF id ON public.cold_transfers FOR EACH ROW WHEN ((old.id IS DISTINCT FROM new.id)) EXECUTE FUNCTION public.row_refuse_id_change();


--
-- Name: console_secrets console_secrets_append_only; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER console_secrets_append_only BEFORE DELETE ON public.console_secrets FOR EACH ROW EXECUTE FUNCTION public.ledger_refuse_change();


--
-- Name: console_secrets console_secrets_identity; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER console_secrets_identity BEFORE UPDATE ON public.console_secrets FOR EACH ROW WHEN (((new.id IS DISTINCT FROM old.id) OR (new.created_at IS DISTINCT FROM old.created_at))) EXECUTE FUNCTION public.ledger_refuse_change();


--
-- Name: console_secrets console_secrets_no_truncate; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER console_secrets_no_truncate BEFORE TRUNCATE ON public.console_secrets FOR EACH STATEMENT EXECUTE FUNCTION public.ledger_refuse_change();


--
-- Name: console_sessions console_sessions_end_only; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER console_sessions_end_only BEFORE UPDATE ON public.console_sessions FOR EACH ROW EXECUTE FUNCTION public.console_session_end_only();


--
-- Name: console_sessions console_sessions_no_delete; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER console_sessions_no_delete BEFORE DELETE ON public.console_sessions FOR EACH ROW EXECUTE FUNCTION public.ledger_refuse_change();


--
-- Name: console_sessions console_sessions_no_truncate; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER console_sessions_no_truncate BEFORE TRUNCATE ON public.console_sessions FOR EACH STATEMENT EXECUTE FUNCTION public.ledger_refuse_change();


--
-- Name: deposit_case_refunds deposit_case_refunds_append_only; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER deposit_case_refunds_append_only BEFORE DELETE OR UPDATE ON public.deposit_case_refunds FOR EACH ROW EXECUTE FUNCTION public.ledger_refuse_change();


--
-- Name: deposit_case_refunds deposit_case_refunds_no_truncate; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER deposit_case_refunds_no_truncate BEFORE TRUNCATE ON public.deposit_case_refunds FOR EACH STATEMENT EXECUTE FUNCTION public.ledger_refuse_change();


--
-- Name: deposit_case_resolutions deposit_case_resolutions_append_only; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER deposit_case_resolutions_append_only BEFORE DELETE OR UPDATE ON public.deposit_case_resolutions FOR EACH ROW EXECUTE FUNCTION public.ledger_refuse_change();


--
-- Name: deposit_case_resolutions deposit_case_resolutions_no_truncate; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER deposit_case_resolutions_no_truncate BEFORE TRUNCATE ON public.deposit_case_resolutions FOR EACH STATEMENT EXECUTE FUNCTION public.ledger_refuse_change();


--
-- Name: deposit_case_resolutions deposit_case_resolutions_resolve_case; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER deposit_case_resolutions_resolve_case AFTER INSERT ON public.deposit_case_resolutions FOR EACH ROW EXECUTE FUNCTION public.cases_resolve_deposit_case();


--
-- Name: deposit_case_votes deposit_case_votes_append_only; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER deposit_case_votes_append_only BEFORE DELETE OR UPDATE ON public.deposit_case_votes FOR EACH ROW EXECUTE FUNCTION public.ledger_refuse_change();


--
-- Name: deposit_case_votes deposit_case_votes_check; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER deposit_case_votes_check BEFORE INSERT ON public.deposit_case_votes FOR EACH ROW EXECUTE FUNCTION public.deposit_case_votes_check();


--
-- Name: deposit_case_votes deposit_case_votes_no_truncate; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER deposit_case_votes_no_truncate BEFORE TRUNCATE ON public.deposit_case_votes FOR EACH STATEMENT EXECUTE FUNCTION public.ledger_refuse_change();


--
-- Name: deposit_cases deposit_cases_append_only; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER deposit_cases_append_only BEFORE DELETE OR UPDATE ON public.deposit_cases FOR EACH ROW EXECUTE FUNCTION public.ledger_refuse_change();


--
-- Name: deposit_cases deposit_cases_no_truncate; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER deposit_cases_no_truncate BEFORE TRUNCATE ON public.deposit_cases FOR EACH STATEMENT EXECUTE FUNCTION public.ledger_refuse_change();


--
-- Name: deposit_cases deposit_cases_open_case; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER deposit_cases_open_case BEFORE INSERT ON public.deposit_cases FOR EACH ROW EXECUTE FUNCTION public.cases_open_deposit_case();


--
-- Name: deposit_cases deposit_cases_outbox; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER deposit_cases_outbox AFTER INSERT ON public.deposit_cases FOR EACH ROW EXECUTE FUNCTION public.outbox_deposit_case();


--
-- Name: deposit_events deposit_events_append_only; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER deposit_events_append_only BEFORE DELETE OR UPDATE ON public.deposit_events FOR EACH ROW EXECUTE FUNCTION public.ledger_refuse_change();


--
-- Name: deposit_events deposit_events_no_truncate; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER deposit_events_no_truncate BEFORE TRUNCATE ON public.deposit_events FOR EACH STATEMENT EXECUTE FUNCTION public.ledger_refuse_change();


--
-- Name: deposit_events deposit_events_outbox; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER deposit_events_outbox AFTER INSERT ON public.deposit_events REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION public.outbox_deposit_event();


--
-- Name: deposit_events deposit_events_refs; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER deposit_events_refs AFTER INSERT ON public.deposit_events REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION public.deposit_events_refs_check();


--
-- Name: deposits deposits_guard; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER deposits_guard BEFORE UPDATE ON public.deposits FOR EACH ROW EXECUTE FUNCTION public.deposits_guard();


--
-- Name: deposits deposits_no_delete; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER deposits_no_delete BEFORE DELETE ON public.deposits FOR EACH ROW EXECUTE FUNCTION public.ledger_refuse_change();


--
-- Name: deposits deposits_no_truncate; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER deposits_no_truncate BEFORE TRUNCATE ON public.deposits FOR EACH STATEMENT EXECUTE FUNCTION public.ledger_refuse_change();


--
-- Name: deposits deposits_refs_insert; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER deposits_refs_insert AFTER INSERT ON public.deposits REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION public.deposits_refs_check();


--
-- Name: deposits deposits_refs_update; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER deposits_refs_update AFTER UPDATE ON public.deposits REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION public.deposits_refs_check();


--
-- Name: gas_top_up_events gas_top_up_events_append_only; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER gas_top_up_events_append_only BEFORE DELETE OR UPDATE ON public.gas_top_up_events FOR EACH ROW EXECUTE FUNCTION public.ledger_refuse_change();


--
-- Name: gas_top_up_events gas_top_up_events_no_truncate; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER gas_top_up_events_no_truncate BEFORE TRUNCATE ON public.gas_top_up_events FOR EACH STATEMENT EXECUTE FUNCTION public.ledger_refuse_change();


--
-- Name: gas_top_ups gas_top_ups_id_fixed; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER gas_top_ups_id_fixed BEFORE UPDATE OF id ON public.gas_top_ups FOR EACH ROW WHEN ((old.id IS DISTINCT FROM new.id)) EXECUTE FUNCTION public.row_refuse_id_change();


--
-- Name: internal_transfers internal_transfers_append_only; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER internal_transfers_append_only BEFORE DELETE OR UPDATE ON public.internal_transfers FOR EACH ROW EXECUTE FUNCTION public.ledger_refuse_change();


--
-- Name: internal_transfers internal_transfers_no_truncate; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER internal_transfers_no_truncate BEFORE TRUNCATE ON public.internal_transfers FOR EACH STATEMENT EXECUTE FUNCTION public.ledger_refuse_change();


--
-- Name: ledger_period_approvals ledger_period_approvals_append_only; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER ledger_period_approvals_append_only BEFORE DELETE OR UPDATE ON public.ledger_period_approvals FOR EACH ROW EXECUTE FUNCTION public.ledger_refuse_change();


--
-- Name: ledger_period_approvals ledger_period_approvals_check; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER ledger_period_approvals_check BEFORE INSERT ON public.ledger_period_approvals FOR EACH ROW EXECUTE FUNCTION public.ledger_period_approvals_check();


--
-- Name: ledger_period_approvals ledger_period_approvals_no_truncate; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER ledger_period_approvals_no_truncate BEFORE TRUNCATE ON public.ledger_period_approvals FOR EACH STATEMENT EXECUTE FUNCTION public.ledger_refuse_change();


--
-- Name: ledger_period_proposals ledger_period_proposals_append_only; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER ledger_period_proposals_append_only BEFORE DELETE OR UPDATE ON public.ledger_period_proposals FOR EACH ROW EXECUTE FUNCTION public.ledger_refuse_change();


--
-- Name: ledger_period_proposals ledger_period_proposals_no_truncate; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER ledger_period_proposals_no_truncate BEFORE TRUNCATE ON public.ledger_period_proposals FOR EACH STATEMENT EXECUTE FUNCTION public.ledger_refuse_change();


--
-- Name: ledger_periods ledger_periods_append_only; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER ledger_periods_append_only BEFORE DELETE OR UPDATE ON public.ledger_periods FOR EACH ROW EXECUTE FUNCTION public.ledger_refuse_change();


--
-- Name: ledger_periods ledger_periods_before_insert; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER ledger_periods_before_insert BEFORE INSERT ON public.ledger_periods FOR EACH ROW EXECUTE FUNCTION public.ledger_periods_before_insert();


--
-- Name: ledger_periods ledger_periods_no_truncate; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER ledger_periods_no_truncate BEFORE TRUNCATE ON public.ledger_periods FOR EACH STATEMENT EXECUTE FUNCTION public.ledger_refuse_change();


--
-- Name: ledger_postings ledger_postings_account_and_transaction; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER ledger_postings_account_and_transaction AFTER INSERT ON public.ledger_postings REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION public.ledger_postings_account_and_transaction();


--
-- Name: ledger_postings ledger_postings_after_insert; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER ledger_postings_after_insert AFTER INSERT ON public.ledger_postings REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT WHEN ((CURRENT_USER <> 'custody_ledger_writer'::name)) EXECUTE FUNCTION public.ledger_postings_after_insert();


--
-- Name: ledger_postings ledger_postings_append_only; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER ledger_postings_append_only BEFORE DELETE OR UPDATE ON public.ledger_postings FOR EACH ROW EXECUTE FUNCTION public.ledger_refuse_change();


--
-- Name: ledger_postings ledger_postings_balanced; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE CONSTRAINT TRIGGER ledger_postings_balanced AFTER INSERT ON public.ledger_postings DEFERRABLE INITIALLY DEFERRED FOR EACH ROW WHEN ((CURRENT_USER <> 'custody_ledger_writer'::name)) EXECUTE FUNCTION public.ledger_postings_balanced();


--
-- Name: ledger_postings ledger_postings_no_truncate; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER ledger_postings_no_truncate BEFORE TRUNCATE ON public.ledger_postings FOR EACH STATEMENT EXECUTE FUNCTION public.ledger_refuse_change();


--
-- Name: ledger_seals ledger_seals_append_only; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER ledger_seals_append_only BEFORE DELETE OR UPDATE ON public.ledger_seals FOR EACH ROW EXECUTE FUNCTION public.ledger_refuse_change();


--
-- Name: ledger_seals ledger_seals_no_truncate; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER ledger_seals_no_truncate BEFORE TRUNCATE ON public.ledger_seals FOR EACH STATEMENT EXECUTE FUNCTION public.ledger_refuse_change();


--
-- Name: ledger_transactions ledger_transaction_balanced; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE CONSTRAINT TRIGGER ledger_transaction_balanced AFTER INSERT ON public.ledger_transactions DEFERRABLE INITIALLY DEFERRED FOR EACH ROW WHEN ((CURRENT_USER <> 'custody_ledger_writer'::name)) EXECUTE FUNCTION public.ledger_transaction_balanced();


--
-- Name: ledger_transactions ledger_transactions_after_insert; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER ledger_transactions_after_insert AFTER INSERT ON public.ledger_transactions REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT WHEN ((CURRENT_USER <> 'custody_ledger_writer'::name)) EXECUTE FUNCTION public.ledger_transactions_after_insert();


--
-- Name: ledger_transactions ledger_transactions_append_only; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER ledger_transactions_append_only BEFORE DELETE OR UPDATE ON public.ledger_transactions FOR EACH ROW EXECUTE FUNCTION public.ledger_refuse_change();


--
-- Name: ledger_transactions ledger_transactions_before_insert; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER ledger_transactions_before_insert BEFORE INSERT ON public.ledger_transactions FOR EACH ROW WHEN ((CURRENT_USER <> 'custody_ledger_writer'::name)) EXECUTE FUNCTION public.ledger_transactions_before_insert();


--
-- Name: ledger_transactions ledger_transactions_gate; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER ledger_transactions_gate BEFORE INSERT ON public.ledger_transactions FOR EACH STATEMENT WHEN ((CURRENT_USER <> 'custody_ledger_writer'::name)) EXECUTE FUNCTION public.ledger_write_gate();


--
-- Name: ledger_transactions ledger_transactions_no_truncate; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER ledger_transactions_no_truncate BEFORE TRUNCATE ON public.ledger_transactions FOR EACH STATEMENT EXECUTE FUNCTION public.ledger_refuse_change();


--
-- Name: outbox_events outbox_events_append_only; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER outbox_events_append_only BEFORE DELETE OR UPDATE ON public.outbox_events FOR EACH ROW EXECUTE FUNCTION public.ledger_refuse_change();


--
-- Name: outbox_events outbox_events_fan_out; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER outbox_events_fan_out AFTER INSERT ON public.outbox_events REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION public.outbox_fan_out();


--
-- Name: outbox_events outbox_events_no_truncate; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER outbox_events_no_truncate BEFORE TRUNCATE ON public.outbox_events FOR EACH STATEMENT EXECUTE FUNCTION public.ledger_refuse_change();


--
-- Name: outgoing_attempts outgoing_attempts_append_only; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER outgoing_attempts_append_only BEFORE DELETE OR UPDATE ON public.outgoing_attempts FOR EACH ROW EXECUTE FUNCTION public.ledger_refuse_change();


--
-- Name: outgoing_attempts outgoing_attempts_no_truncate; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER outgoing_attempts_no_truncate BEFORE TRUNCATE ON public.outgoing_attempts FOR EACH STATEMENT EXECUTE FUNCTION public.ledger_refuse_change();


--
-- Name: provider_inbox provider_inbox_append_only; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER provider_inbox_append_only BEFORE DELETE OR UPDATE ON public.provider_inbox FOR EACH ROW EXECUTE FUNCTION public.ledger_refuse_change();


--
-- Name: provider_statement_records provider_statement_records_append_only; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER provider_statement_records_append_only BEFORE DELETE OR UPDATE ON public.provider_statement_records FOR EACH ROW EXECUTE FUNCTION public.ledger_refuse_change();


--
-- Name: provider_statement_records provider_statement_records_no_truncate; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER provider_statement_records_no_truncate BEFORE TRUNCATE ON public.provider_statement_records FOR EACH STATEMENT EXECUTE FUNCTION public.ledger_refuse_change();


--
-- Name: provider_statements provider_statements_append_only; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER provider_statements_append_only BEFORE DELETE OR UPDATE ON public.provider_statements FOR EACH ROW EXECUTE FUNCTION public.ledger_refuse_change();


--
-- Name: provider_statements provider_statements_no_truncate; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER provider_statements_no_truncate BEFORE TRUNCATE ON public.provider_statements FOR EACH STATEMENT EXECUTE FUNCTION public.ledger_refuse_change();


--
-- Name: refill_requests refill_requests_id_fixed; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER refill_requests_id_fixed BEFORE UPDATE OF id ON public.refill_requests FOR EACH ROW WHEN ((old.id IS DISTINCT FROM new.id)) EXECUTE FUNCTION public.row_refuse_id_change();


--
-- Name: reserve_leaves reserve_leaves_append_only; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER reserve_leaves_append_only BEFORE DELETE OR UPDATE ON public.reserve_leaves FOR EACH ROW EXECUTE FUNCTION public.ledger_refuse_change();


--
-- Name: reserve_leaves reserve_leaves_no_truncate; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER reserve_leaves_no_truncate BEFORE TRUNCATE ON public.reserve_leaves FOR EACH STATEMENT EXECUTE FUNCTION public.ledger_refuse_change();


--
-- Name: reserve_nodes reserve_nodes_append_only; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER reserve_nodes_append_only BEFORE DELETE OR UPDATE ON public.reserve_nodes FOR EACH ROW EXECUTE FUNCTION public.ledger_refuse_change();


--
-- Name: reserve_nodes reserve_nodes_no_truncate; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER reserve_nodes_no_truncate BEFORE TRUNCATE ON public.reserve_nodes FOR EACH STATEMENT EXECUTE FUNCTION public.ledger_refuse_change();


--
-- Name: reserve_report_addresses reserve_report_addresses_append_only; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER reserve_report_addresses_append_only BEFORE DELETE OR UPDATE ON public.reserve_report_addresses FOR EACH ROW EXECUTE FUNCTION public.ledger_refuse_change();


--
-- Name: reserve_report_addresses reserve_report_addresses_no_truncate; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER reserve_report_addresses_no_truncate BEFORE TRUNCATE ON public.reserve_report_addresses FOR EACH STATEMENT EXECUTE FUNCTION public.ledger_refuse_change();


--
-- Name: reserve_reports reserve_reports_append_only; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER reserve_reports_append_only BEFORE DELETE OR UPDATE ON public.reserve_reports FOR EACH ROW EXECUTE FUNCTION public.ledger_refuse_change();


--
-- Name: reserve_reports reserve_reports_no_truncate; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER reserve_reports_no_truncate BEFORE TRUNCATE ON public.reserve_reports FOR EACH STATEMENT EXECUTE FUNCTION public.ledger_refuse_change();


--
-- Name: reserve_signatures reserve_signatures_append_only; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER reserve_signatures_append_only BEFORE DELETE OR UPDATE ON public.reserve_signatures FOR EACH ROW EXECUTE FUNCTION public.ledger_refuse_change();


--
-- Name: reserve_signatures reserve_signatures_no_truncate; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER reserve_signatures_no_truncate BEFORE TRUNCATE ON public.reserve_signatures FOR EACH STATEMENT EXECUTE FUNCTION public.ledger_refuse_change();


--
-- Name: sweep_events sweep_events_append_only; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER sweep_events_append_only BEFORE DELETE OR UPDATE ON public.sweep_events FOR EACH ROW EXECUTE FUNCTION public.ledger_refuse_change();


--
-- Name: sweep_events sweep_events_no_truncate; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER sweep_events_no_truncate BEFORE TRUNCATE ON public.sweep_events FOR EACH STATEMENT EXECUTE FUNCTION public.ledger_refuse_change();


--
-- Name: sweeps sweeps_id_fixed; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER sweeps_id_fixed BEFORE UPDATE OF id ON public.sweeps FOR EACH ROW WHEN ((old.id IS DISTINCT FROM new.id)) EXECUTE FUNCTION public.row_refuse_id_change();


--
-- Name: treasury_funding_matches treasury_funding_matches_append_only; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER treasury_funding_matches_append_only BEFORE DELETE OR UPDATE ON public.treasury_funding_matches FOR EACH ROW EXECUTE FUNCTION public.ledger_refuse_change();


--
-- Name: treasury_funding_matches treasury_funding_matches_check; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER treasury_funding_matches_check BEFORE INSERT ON public.treasury_funding_matches FOR EACH ROW EXECUTE FUNCTION public.treasury_funding_matches_check();


--
-- Name: treasury_funding_matches treasury_funding_matches_no_truncate; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER treasury_funding_matches_no_truncate BEFORE TRUNCATE ON public.treasury_funding_matches FOR EACH STATEMENT EXECUTE FUNCTION public.ledger_refuse_change();


--
-- Name: treasury_fundings treasury_fundings_append_only; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER treasury_fundings_append_only BEFORE DELETE OR UPDATE ON public.treasury_fundings FOR EACH ROW EXECUTE FUNCTION public.ledger_refuse_change();


--
-- Name: treasury_fundings treasury_fundings_no_truncate; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER treasury_fundings_no_truncate BEFORE TRUNCATE ON public.treasury_fundings FOR EACH STATEMENT EXECUTE FUNCTION public.ledger_refuse_change();


--
-- Name: webhook_attempts webhook_attempts_append_only; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER webhook_attempts_append_only BEFORE DELETE OR UPDATE ON public.webhook_attempts FOR EACH ROW EXECUTE FUNCTION public.ledger_refuse_change();


--
-- Name: webhook_attempts webhook_attempts_no_truncate; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER webhook_attempts_no_truncate BEFORE TRUNCATE ON public.webhook_attempts FOR EACH STATEMENT EXECUTE FUNCTION public.ledger_refuse_change();


--
-- Name: withdrawal_allowlist withdrawal_allowlist_events; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER withdrawal_allowlist_events AFTER INSERT OR UPDATE ON public.withdrawal_allowlist FOR EACH ROW EXECUTE FUNCTION public.withdrawal_allowlist_events();


--
-- Name: withdrawal_allowlist withdrawal_allowlist_guard; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER withdrawal_allowlist_guard BEFORE INSERT OR UPDATE ON public.withdrawal_allowlist FOR EACH ROW EXECUTE FUNCTION public.withdrawal_allowlist_guard();


--
-- Name: withdrawal_allowlist withdrawal_allowlist_no_delete; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER withdrawal_allowlist_no_delete BEFORE DELETE ON public.withdrawal_allowlist FOR EACH ROW EXECUTE FUNCTION public.ledger_refuse_change();


--
-- Name: withdrawal_allowlist withdrawal_allowlist_no_truncate; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER withdrawal_allowlist_no_truncate BEFORE TRUNCATE ON public.withdrawal_allowlist FOR EACH STATEMENT EXECUTE FUNCTION public.ledger_refuse_change();


--
-- Name: withdrawal_allowlist_votes withdrawal_allowlist_votes_append_only; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER withdrawal_allowlist_votes_append_only BEFORE DELETE OR UPDATE ON public.withdrawal_allowlist_votes FOR EACH ROW EXECUTE FUNCTION public.ledger_refuse_change();


--
-- Name: withdrawal_allowlist_votes withdrawal_allowlist_votes_no_truncate; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER withdrawal_allowlist_votes_no_truncate BEFORE TRUNCATE ON public.withdrawal_allowlist_votes FOR EACH STATEMENT EXECUTE FUNCTION public.ledger_refuse_change();


--
-- Name: withdrawal_case_resolutions withdrawal_case_resolutions_append_only; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER withdrawal_case_resolutions_append_only BEFORE DELETE OR UPDATE ON public.withdrawal_case_resolutions FOR EACH ROW EXECUTE FUNCTION public.ledger_refuse_change();


--
-- Name: withdrawal_case_resolutions withdrawal_case_resolutions_no_truncate; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER withdrawal_case_resolutions_no_truncate BEFORE TRUNCATE ON public.withdrawal_case_resolutions FOR EACH STATEMENT EXECUTE FUNCTION public.ledger_refuse_change();


--
-- Name: withdrawal_case_resolutions withdrawal_case_resolutions_resolve_case; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER withdrawal_case_resolutions_resolve_case AFTER INSERT ON public.withdrawal_case_resolutions FOR EACH ROW EXECUTE FUNCTION public.cases_resolve_withdrawal_case();


--
-- Name: withdrawal_cases withdrawal_cases_append_only; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER withdrawal_cases_append_only BEFORE DELETE OR UPDATE ON public.withdrawal_cases FOR EACH ROW EXECUTE FUNCTION public.ledger_refuse_change();


--
-- Name: withdrawal_cases withdrawal_cases_no_truncate; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER withdrawal_cases_no_truncate BEFORE TRUNCATE ON public.withdrawal_cases FOR EACH STATEMENT EXECUTE FUNCTION public.ledger_refuse_change();


--
-- Name: withdrawal_cases withdrawal_cases_open_case; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER withdrawal_cases_open_case BEFORE INSERT ON public.withdrawal_cases FOR EACH ROW EXECUTE FUNCTION public.cases_open_withdrawal_case();


--
-- Name: withdrawal_decisions withdrawal_decisions_append_only; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER withdrawal_decisions_append_only BEFORE DELETE OR UPDATE ON public.withdrawal_decisions FOR EACH ROW EXECUTE FUNCTION public.ledger_refuse_change();


--
-- Name: withdrawal_decisions withdrawal_decisions_no_truncate; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER withdrawal_decisions_no_truncate BEFORE TRUNCATE ON public.withdrawal_decisions FOR EACH STATEMENT EXECUTE FUNCTION public.ledger_refuse_change();


--
-- Name: withdrawal_events withdrawal_events_append_only; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER withdrawal_events_append_only BEFORE DELETE OR UPDATE ON public.withdrawal_events FOR EACH ROW EXECUTE FUNCTION public.ledger_refuse_change();


--
-- Name: withdrawal_events withdrawal_events_check_refs; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER withdrawal_events_check_refs AFTER INSERT ON public.withdrawal_events FOR EACH ROW WHEN ((CURRENT_USER <> 'custody_withdrawal_writer'::name)) EXECUTE FUNCTION public.withdrawal_refs_check();


--
-- Name: withdrawal_events withdrawal_events_no_truncate; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER withdrawal_events_no_truncate BEFORE TRUNCATE ON public.withdrawal_events FOR EACH STATEMENT EXECUTE FUNCTION public.ledger_refuse_change();


--
-- Name: withdrawal_events withdrawal_events_outbox; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER withdrawal_events_outbox AFTER INSERT ON public.withdrawal_events FOR EACH ROW WHEN ((CURRENT_USER <> 'custody_withdrawal_writer'::name)) EXECUTE FUNCTION public.outbox_withdrawal_event();


--
-- Name: withdrawal_returns withdrawal_returns_append_only; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER withdrawal_returns_append_only BEFORE DELETE OR UPDATE ON public.withdrawal_returns FOR EACH ROW EXECUTE FUNCTION public.ledger_refuse_change();


--
-- Name: withdrawal_returns withdrawal_returns_no_truncate; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER withdrawal_returns_no_truncate BEFORE TRUNCATE ON public.withdrawal_returns FOR EACH STATEMENT EXECUTE FUNCTION public.ledger_refuse_change();


--
-- Name: withdrawals withdrawals_check_refs; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER withdrawals_check_refs AFTER INSERT OR UPDATE OF reserve_transaction_id, reserve_posting_id ON public.withdrawals FOR EACH ROW WHEN ((CURRENT_USER <> 'custody_withdrawal_writer'::name)) EXECUTE FUNCTION public.withdrawal_refs_check();


--
-- Name: withdrawals withdrawals_id_fixed; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER withdrawals_id_fixed BEFORE UPDATE OF id ON public.withdrawals FOR EACH ROW WHEN ((old.id IS DISTINCT FROM new.id)) EXECUTE FUNCTION public.withdrawal_refuse_id_change();


--
-- Name: withdrawals withdrawals_no_delete; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER withdrawals_no_delete BEFORE DELETE ON public.withdrawals FOR EACH ROW EXECUTE FUNCTION public.ledger_refuse_change();


--
-- Name: withdrawals withdrawals_no_truncate; Type: TRIGGER; Schema: public; Owner: CURRENT_USER
--

CREATE TRIGGER withdrawals_no_truncate BEFORE TRUNCATE ON public.withdrawals FOR EACH STATEMENT EXECUTE FUNCTION public.ledger_refuse_change();


--
-- Name: account_balances account_balances_account_id_asset_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.account_balances
    ADD CONSTRAINT account_balances_account_id_asset_id_fkey FOREIGN KEY (account_id, asset_id) REFERENCES public.accounts(id, asset_id);


--
-- Name: accounts accounts_asset_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.accounts
    ADD CONSTRAINT accounts_asset_id_fkey FOREIGN KEY (asset_id) REFERENCES public.assets(id);


--
-- Name: api_audit api_audit_client_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.api_audit
    ADD CONSTRAINT api_audit_client_id_fkey FOREIGN KEY (client_id) REFERENCES public.api_clients(id);


--
-- Name: api_idempotency api_idempotency_client_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.api_idempotency
    ADD CONSTRAINT api_idempotency_client_id_fkey FOREIGN KEY (client_id) REFERENCES public.api_clients(id);


--
-- Name: api_keys api_keys_client_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.api_keys
    ADD CONSTRAINT api_keys_client_id_fkey FOREIGN KEY (client_id) REFERENCES public.api_clients(id);


--
-- Name: api_rate_windows api_rate_windows_key_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.api_rate_windows
    ADD CONSTRAINT api_rate_windows_key_id_fkey FOREIGN KEY (key_id) REFERENCES public.api_keys(id);


--
-- Name: api_users api_users_client_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.api_users
    ADD CONSTRAINT api_users_client_id_fkey FOREIGN KEY (client_id) REFERENCES public.api_clients(id);


--
-- Name: balance_checkpoint_entries balance_checkpoint_entries_account_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.balance_checkpoint_entries
    ADD CONSTRAINT balance_checkpoint_entries_account_id_fkey FOREIGN KEY (account_id) REFERENCES public.accounts(id);


--
-- Name: balance_checkpoint_entries balance_checkpoint_entries_checkpoint_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.balance_checkpoint_entries
    ADD CONSTRAINT balance_checkpoint_entries_checkpoint_id_fkey FOREIGN KEY (checkpoint_id) REFERENCES public.balance_checkpoints(id);


--
-- Name: balance_checkpoints balance_checkpoints_seal_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.balance_checkpoints
    ADD CONSTRAINT balance_checkpoints_seal_id_fkey FOREIGN KEY (seal_id) REFERENCES public.ledger_seals(id);


--
-- Name: cases cases_resolution_transaction_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.cases
    ADD CONSTRAINT cases_resolution_transaction_id_fkey FOREIGN KEY (resolution_transaction_id) REFERENCES public.ledger_transactions(id);


--
-- Name: cold_transfer_approvals cold_transfer_approvals_cold_transfer_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.cold_transfer_approvals
    ADD CONSTRAINT cold_transfer_approvals_cold_transfer_id_fkey FOREIGN KEY (cold_transfer_id) REFERENCES public.cold_transfers(id);


--
-- Name: cold_transfer_events cold_transfer_events_attempt_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.cold_transfer_events
    ADD CONSTRAINT cold_transfer_events_attempt_id_fkey FOREIGN KEY (attempt_id) REFERENCES public.outgoing_attempts(id);


--
-- Name: cold_transfer_events cold_transfer_events_cold_transfer_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.cold_transfer_events
    ADD CONSTRAINT cold_transfer_events_cold_transfer_id_fkey FOREIGN KEY (cold_transfer_id) REFERENCES public.cold_transfers(id);


--
-- Name: cold_transfer_events cold_transfer_events_ledger_transaction_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.cold_transfer_events
    ADD CONSTRAINT cold_transfer_events_ledger_transaction_id_fkey FOREIGN KEY (ledger_transaction_id) REFERENCES public.ledger_transactions(id);


--
-- Name: console_sessions console_sessions_key_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.console_sessions
    ADD CONSTRAINT console_sessions_key_id_fkey FOREIGN KEY (key_id) REFERENCES public.api_keys(id);


--
-- Name: deposit_case_refunds deposit_case_refunds_case_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.deposit_case_refunds
    ADD CONSTRAINT deposit_case_refunds_case_id_fkey FOREIGN KEY (case_id) REFERENCES public.deposit_cases(id);


--
-- Name: deposit_case_resolutions deposit_case_resolutions_case_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.deposit_case_resolutions
    ADD CONSTRAINT deposit_case_resolutions_case_id_fkey FOREIGN KEY (case_id) REFERENCES public.deposit_cases(id);


--
-- Name: deposit_case_resolutions deposit_case_resolutions_ledger_transaction_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.deposit_case_resolutions
    ADD CONSTRAINT deposit_case_resolutions_ledger_transaction_id_fkey FOREIGN KEY (ledger_transaction_id) REFERENCES public.ledger_transactions(id);


--
-- Name: deposit_case_resolutions deposit_case_resolutions_reversal_transaction_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.deposit_case_resolutions
    ADD CONSTRAINT deposit_case_resolutions_reversal_transaction_id_fkey FOREIGN KEY (reversal_transaction_id) REFERENCES public.ledger_transactions(id);


--
-- Name: deposit_case_votes deposit_case_votes_case_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.deposit_case_votes
    ADD CONSTRAINT deposit_case_votes_case_id_fkey FOREIGN KEY (case_id) REFERENCES public.deposit_cases(id);


--
-- Name: deposit_cases deposit_cases_case_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.deposit_cases
    ADD CONSTRAINT deposit_cases_case_id_fkey FOREIGN KEY (case_id) REFERENCES public.cases(id);


--
-- Name: deposit_cases deposit_cases_deposit_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.deposit_cases
    ADD CONSTRAINT deposit_cases_deposit_id_fkey FOREIGN KEY (deposit_id) REFERENCES public.deposits(id);


--
-- Name: deposit_cases deposit_cases_ledger_transaction_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.deposit_cases
    ADD CONSTRAINT deposit_cases_ledger_transaction_id_fkey FOREIGN KEY (ledger_transaction_id) REFERENCES public.ledger_transactions(id);


--
-- Name: gas_top_up_events gas_top_up_events_attempt_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.gas_top_up_events
    ADD CONSTRAINT gas_top_up_events_attempt_id_fkey FOREIGN KEY (attempt_id) REFERENCES public.outgoing_attempts(id);


--
-- Name: gas_top_up_events gas_top_up_events_ledger_transaction_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.gas_top_up_events
    ADD CONSTRAINT gas_top_up_events_ledger_transaction_id_fkey FOREIGN KEY (ledger_transaction_id) REFERENCES public.ledger_transactions(id);


--
-- Name: gas_top_up_events gas_top_up_events_top_up_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.gas_top_up_events
    ADD CONSTRAINT gas_top_up_events_top_up_id_fkey FOREIGN KEY (top_up_id) REFERENCES public.gas_top_ups(id);


--
-- Name: hot_limit_episodes hot_limit_episodes_refill_request_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.hot_limit_episodes
    ADD CONSTRAINT hot_limit_episodes_refill_request_id_fkey FOREIGN KEY (refill_request_id) REFERENCES public.refill_requests(id);


--
-- Name: ledger_period_approvals ledger_period_approvals_period_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.ledger_period_approvals
    ADD CONSTRAINT ledger_period_approvals_period_id_fkey FOREIGN KEY (period_id) REFERENCES public.ledger_periods(id);


--
-- Name: ledger_period_approvals ledger_period_approvals_proposal_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.ledger_period_approvals
    ADD CONSTRAINT ledger_period_approvals_proposal_id_fkey FOREIGN KEY (proposal_id) REFERENCES public.ledger_period_proposals(id);


--
-- Name: ledger_transactions ledger_transactions_reverses_transaction_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.ledger_transactions
    ADD CONSTRAINT ledger_transactions_reverses_transaction_id_fkey FOREIGN KEY (reverses_transaction_id) REFERENCES public.ledger_transactions(id);


--
-- Name: outbox_events outbox_events_client_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.outbox_events
    ADD CONSTRAINT outbox_events_client_id_fkey FOREIGN KEY (client_id) REFERENCES public.api_clients(id);


--
-- Name: outgoing_attempts outgoing_attempts_cold_transfer_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.outgoing_attempts
    ADD CONSTRAINT outgoing_attempts_cold_transfer_id_fkey FOREIGN KEY (cold_transfer_id) REFERENCES public.cold_transfers(id);


--
-- Name: outgoing_attempts outgoing_attempts_sweep_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.outgoing_attempts
    ADD CONSTRAINT outgoing_attempts_sweep_id_fkey FOREIGN KEY (sweep_id) REFERENCES public.sweeps(id);


--
-- Name: outgoing_attempts outgoing_attempts_top_up_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.outgoing_attempts
    ADD CONSTRAINT outgoing_attempts_top_up_id_fkey FOREIGN KEY (top_up_id) REFERENCES public.gas_top_ups(id);


--
-- Name: outgoing_attempts outgoing_attempts_withdrawal_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.outgoing_attempts
    ADD CONSTRAINT outgoing_attempts_withdrawal_id_fkey FOREIGN KEY (withdrawal_id) REFERENCES public.withdrawals(id);


--
-- Name: provider_statement_records provider_statement_records_statement_id_provider_fkey; Type: FK CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.provider_statement_records
    ADD CONSTRAINT provider_statement_records_statement_id_provider_fkey FOREIGN KEY (statement_id, provider) REFERENCES public.provider_statements(id, provider);


--
-- Name: reserve_leaves reserve_leaves_report_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.reserve_leaves
    ADD CONSTRAINT reserve_leaves_report_id_fkey FOREIGN KEY (report_id) REFERENCES public.reserve_reports(id);


--
-- Name: reserve_nodes reserve_nodes_report_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.reserve_nodes
    ADD CONSTRAINT reserve_nodes_report_id_fkey FOREIGN KEY (report_id) REFERENCES public.reserve_reports(id);


--
-- Name: reserve_report_addresses reserve_report_addresses_report_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.reserve_report_addresses
    ADD CONSTRAINT reserve_report_addresses_report_id_fkey FOREIGN KEY (report_id) REFERENCES public.reserve_reports(id);


--
-- Name: reserve_signatures reserve_signatures_report_id_chain_address_fkey; Type: FK CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.reserve_signatures
    ADD CONSTRAINT reserve_signatures_report_id_chain_address_fkey FOREIGN KEY (report_id, chain, address) REFERENCES public.reserve_report_addresses(report_id, chain, address);


--
-- Name: sweep_events sweep_events_attempt_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.sweep_events
    ADD CONSTRAINT sweep_events_attempt_id_fkey FOREIGN KEY (attempt_id) REFERENCES public.outgoing_attempts(id);


--
-- Name: sweep_events sweep_events_ledger_transaction_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.sweep_events
    ADD CONSTRAINT sweep_events_ledger_transaction_id_fkey FOREIGN KEY (ledger_transaction_id) REFERENCES public.ledger_transactions(id);


--
-- Name: sweep_events sweep_events_sweep_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.sweep_events
    ADD CONSTRAINT sweep_events_sweep_id_fkey FOREIGN KEY (sweep_id) REFERENCES public.sweeps(id);


--
-- Name: sweeps sweeps_top_up_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.sweeps
    ADD CONSTRAINT sweeps_top_up_id_fkey FOREIGN KEY (top_up_id) REFERENCES public.gas_top_ups(id);


--
-- Name: treasury_funding_matches treasury_funding_matches_deposit_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.treasury_funding_matches
    ADD CONSTRAINT treasury_funding_matches_deposit_id_fkey FOREIGN KEY (deposit_id) REFERENCES public.deposits(id);


--
-- Name: treasury_funding_matches treasury_funding_matches_funding_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.treasury_funding_matches
    ADD CONSTRAINT treasury_funding_matches_funding_id_fkey FOREIGN KEY (funding_id) REFERENCES public.treasury_fundings(id);


--
-- Name: treasury_funding_matches treasury_funding_matches_ledger_transaction_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.treasury_funding_matches
    ADD CONSTRAINT treasury_funding_matches_ledger_transaction_id_fkey FOREIGN KEY (ledger_transaction_id) REFERENCES public.ledger_transactions(id);


--
-- Name: webhook_attempts webhook_attempts_delivery_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.webhook_attempts
    ADD CONSTRAINT webhook_attempts_delivery_id_fkey FOREIGN KEY (delivery_id) REFERENCES public.webhook_deliveries(id);


--
-- Name: webhook_deliveries webhook_deliveries_endpoint_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.webhook_deliveries
    ADD CONSTRAINT webhook_deliveries_endpoint_id_fkey FOREIGN KEY (endpoint_id) REFERENCES public.webhook_endpoints(id);


--
-- Name: webhook_deliveries webhook_deliveries_event_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.webhook_deliveries
    ADD CONSTRAINT webhook_deliveries_event_id_fkey FOREIGN KEY (event_id) REFERENCES public.outbox_events(id);


--
-- Name: webhook_endpoints webhook_endpoints_client_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.webhook_endpoints
    ADD CONSTRAINT webhook_endpoints_client_id_fkey FOREIGN KEY (client_id) REFERENCES public.api_clients(id);


--
-- Name: withdrawal_allowlist withdrawal_allowlist_client_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.withdrawal_allowlist
    ADD CONSTRAINT withdrawal_allowlist_client_id_fkey FOREIGN KEY (client_id) REFERENCES public.api_clients(id);


--
-- Name: withdrawal_allowlist withdrawal_allowlist_user_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.withdrawal_allowlist
    ADD CONSTRAINT withdrawal_allowlist_user_id_fkey FOREIGN KEY (user_id) REFERENCES public.api_users(id);


--
-- Name: withdrawal_allowlist_votes withdrawal_allowlist_votes_entry_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.withdrawal_allowlist_votes
    ADD CONSTRAINT withdrawal_allowlist_votes_entry_id_fkey FOREIGN KEY (entry_id) REFERENCES public.withdrawal_allowlist(id);


--
-- Name: withdrawal_case_resolutions withdrawal_case_resolutions_case_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.withdrawal_case_resolutions
    ADD CONSTRAINT withdrawal_case_resolutions_case_id_fkey FOREIGN KEY (case_id) REFERENCES public.withdrawal_cases(id);


--
-- Name: withdrawal_cases withdrawal_cases_case_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.withdrawal_cases
    ADD CONSTRAINT withdrawal_cases_case_id_fkey FOREIGN KEY (case_id) REFERENCES public.cases(id);


--
-- Name: withdrawal_cases withdrawal_cases_withdrawal_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.withdrawal_cases
    ADD CONSTRAINT withdrawal_cases_withdrawal_id_fkey FOREIGN KEY (withdrawal_id) REFERENCES public.withdrawals(id);


--
-- Name: withdrawal_decisions withdrawal_decisions_withdrawal_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.withdrawal_decisions
    ADD CONSTRAINT withdrawal_decisions_withdrawal_id_fkey FOREIGN KEY (withdrawal_id) REFERENCES public.withdrawals(id);


--
-- Name: withdrawal_returns withdrawal_returns_ledger_transaction_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.withdrawal_returns
    ADD CONSTRAINT withdrawal_returns_ledger_transaction_id_fkey FOREIGN KEY (ledger_transaction_id) REFERENCES public.ledger_transactions(id);


--
-- Name: withdrawal_returns withdrawal_returns_withdrawal_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.withdrawal_returns
    ADD CONSTRAINT withdrawal_returns_withdrawal_id_fkey FOREIGN KEY (withdrawal_id) REFERENCES public.withdrawals(id);


--
-- Name: withdrawals withdrawals_closing_transaction_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: CURRENT_USER
--

ALTER TABLE ONLY public.withdrawals
    ADD CONSTRAINT withdrawals_closing_transaction_id_fkey FOREIGN KEY (closing_transaction_id) REFERENCES public.ledger_transactions(id);


--
-- Name: SCHEMA public; Type: ACL; Schema: -; Owner: pg_database_owner
--

GRANT USAGE ON SCHEMA public TO custody_app;
GRANT USAGE ON SCHEMA public TO custody_ledger_writer;
GRANT USAGE ON SCHEMA public TO custody_withdrawal_writer;


--
-- Name: FUNCTION ledger_post_arrays(i_key text[], i_fp text[], i_kind text[], i_ref text[], i_eff timestamp with time zone[], i_reason text[], i_source text[], i_rev bigint[], i_oop boolean[], i_meta jsonb[], i_lines integer[], l_acc bigint[], l_asset integer[], l_amt numeric[], l_closes bigint[], l_revs bigint[]); Type: ACL; Schema: public; Owner: custody_ledger_writer
--

REVOKE ALL ON FUNCTION public.ledger_post_arrays(i_key text[], i_fp text[], i_kind text[], i_ref text[], i_eff timestamp with time zone[], i_reason text[], i_source text[], i_rev bigint[], i_oop boolean[], i_meta jsonb[], i_lines integer[], l_acc bigint[], l_asset integer[], l_amt numeric[], l_closes bigint[], l_revs bigint[]) FROM PUBLIC;
GRANT ALL ON FUNCTION public.ledger_post_arrays(i_key text[], i_fp text[], i_kind text[], i_ref text[], i_eff timestamp with time zone[], i_reason text[], i_source text[], i_rev bigint[], i_oop boolean[], i_meta jsonb[], i_lines integer[], l_acc bigint[], l_asset integer[], l_amt numeric[], l_closes bigint[], l_revs bigint[]) TO custody_app;


--
-- Name: FUNCTION ledger_post_one(p_key text, p_fp text, p_kind text, p_ref text, p_eff timestamp with time zone, p_reason text, p_source text, p_oop boolean, p_meta jsonb, l_acc bigint[], l_asset integer[], l_amt numeric[]); Type: ACL; Schema: public; Owner: custody_ledger_writer
--

REVOKE ALL ON FUNCTION public.ledger_post_one(p_key text, p_fp text, p_kind text, p_ref text, p_eff timestamp with time zone, p_reason text, p_source text, p_oop boolean, p_meta jsonb, l_acc bigint[], l_asset integer[], l_amt numeric[]) FROM PUBLIC;
GRANT ALL ON FUNCTION public.ledger_post_one(p_key text, p_fp text, p_kind text, p_ref text, p_eff timestamp with time zone, p_reason text, p_source text, p_oop boolean, p_meta jsonb, l_acc bigint[], l_asset integer[], l_amt numeric[]) TO custody_app;


--
-- Name: FUNCTION movement_insert(p_kind text, p_row jsonb, p_skip_taken boolean, p_actor text, p_reason text, p_evidence jsonb, p_at timestamp with time zone); Type: ACL; Schema: public; Owner: custody_state_writer
--

REVOKE ALL ON FUNCTION public.movement_insert(p_kind text, p_row jsonb, p_skip_taken boolean, p_actor text, p_reason text, p_evidence jsonb, p_at timestamp with time zone) FROM PUBLIC;
GRANT ALL ON FUNCTION public.movement_insert(p_kind text, p_row jsonb, p_skip_taken boolean, p_actor text, p_reason text, p_evidence jsonb, p_at timestamp with time zone) TO custody_app;


--
-- Name: FUNCTION movement_transition(p_kind text, p_id bigint, p_sets jsonb, p_from text, p_to text, p_event text, p_reason text, p_evidence jsonb, p_actor text, p_ledger_transaction_id bigint, p_attempt_id bigint, p_at timestamp with time zone); Type: ACL; Schema: public; Owner: custody_state_writer
--

REVOKE ALL ON FUNCTION public.movement_transition(p_kind text, p_id bigint, p_sets jsonb, p_from text, p_to text, p_event text, p_reason text, p_evidence jsonb, p_actor text, p_ledger_transaction_id bigint, p_attempt_id bigint, p_at timestamp with time zone) FROM PUBLIC;
GRANT ALL ON FUNCTION public.movement_transition(p_kind text, p_id bigint, p_sets jsonb, p_from text, p_to text, p_event text, p_reason text, p_evidence jsonb, p_actor text, p_ledger_transaction_id bigint, p_attempt_id bigint, p_at timestamp with time zone) TO custody_app;


--
-- Name: TABLE withdrawal_allowlist; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT SELECT,INSERT ON TABLE public.withdrawal_allowlist TO custody_app;


--
-- Name: COLUMN withdrawal_allowlist.active_at; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT UPDATE(active_at) ON TABLE public.withdrawal_allowlist TO custody_app;


--
-- Name: COLUMN withdrawal_allowlist.removed_at; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT UPDATE(removed_at) ON TABLE public.withdrawal_allowlist TO custody_app;


--
-- Name: COLUMN withdrawal_allowlist.removed_by; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT UPDATE(removed_by) ON TABLE public.withdrawal_allowlist TO custody_app;


--
-- Name: TABLE outbox_events; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT SELECT,INSERT ON TABLE public.outbox_events TO custody_app;
GRANT SELECT,INSERT ON TABLE public.outbox_events TO custody_withdrawal_writer;


--
-- Name: TABLE withdrawal_events; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT SELECT,INSERT ON TABLE public.withdrawal_events TO custody_app;
GRANT SELECT,INSERT ON TABLE public.withdrawal_events TO custody_withdrawal_writer;


--
-- Name: TABLE withdrawals; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT SELECT ON TABLE public.withdrawals TO custody_app;
GRANT SELECT,INSERT ON TABLE public.withdrawals TO custody_withdrawal_writer;
GRANT SELECT,INSERT,UPDATE ON TABLE public.withdrawals TO custody_state_writer;


--
-- Name: COLUMN withdrawals.id; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT UPDATE(id) ON TABLE public.withdrawals TO custody_app;


--
-- Name: FUNCTION withdrawal_reserve_limits(p_user_id text, p_asset_code text, p_chain text, p_destination text, p_now timestamp with time zone, p_allowlist_clients text[], p_windows jsonb, OUT client_name text, OUT allow_state text, OUT allow_at timestamp with time zone, OUT windows jsonb); Type: ACL; Schema: public; Owner: CURRENT_USER
--

REVOKE ALL ON FUNCTION public.withdrawal_reserve_limits(p_user_id text, p_asset_code text, p_chain text, p_destination text, p_now timestamp with time zone, p_allowlist_clients text[], p_windows jsonb, OUT client_name text, OUT allow_state text, OUT allow_at timestamp with time zone, OUT windows jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION public.withdrawal_reserve_limits(p_user_id text, p_asset_code text, p_chain text, p_destination text, p_now timestamp with time zone, p_allowlist_clients text[], p_windows jsonb, OUT client_name text, OUT allow_state text, OUT allow_at timestamp with time zone, OUT windows jsonb) TO custody_app;


--
-- Name: FUNCTION withdrawal_reserve_open(p_user_id text, p_asset_code text, p_request_key text, p_since timestamp with time zone, p_wallet_code text, p_withdrawals_code text, OUT existing_id bigint, OUT withdrawal_id bigint, OUT used_minor numeric, OUT ledger_asset_id integer, OUT ledger_asset_scale integer, OUT wallet_id bigint, OUT wallet_type text, OUT wallet_dnec boolean, OUT wallet_cned boolean, OUT withdrawals_id bigint, OUT withdrawals_type text, OUT withdrawals_dnec boolean, OUT withdrawals_cned boolean); Type: ACL; Schema: public; Owner: CURRENT_USER
--

REVOKE ALL ON FUNCTION public.withdrawal_reserve_open(p_user_id text, p_asset_code text, p_request_key text, p_since timestamp with time zone, p_wallet_code text, p_withdrawals_code text, OUT existing_id bigint, OUT withdrawal_id bigint, OUT used_minor numeric, OUT ledger_asset_id integer, OUT ledger_asset_scale integer, OUT wallet_id bigint, OUT wallet_type text, OUT wallet_dnec boolean, OUT wallet_cned boolean, OUT withdrawals_id bigint, OUT withdrawals_type text, OUT withdrawals_dnec boolean, OUT withdrawals_cned boolean) FROM PUBLIC;
GRANT ALL ON FUNCTION public.withdrawal_reserve_open(p_user_id text, p_asset_code text, p_request_key text, p_since timestamp with time zone, p_wallet_code text, p_withdrawals_code text, OUT existing_id bigint, OUT withdrawal_id bigint, OUT used_minor numeric, OUT ledger_asset_id integer, OUT ledger_asset_scale integer, OUT wallet_id bigint, OUT wallet_type text, OUT wallet_dnec boolean, OUT wallet_cned boolean, OUT withdrawals_id bigint, OUT withdrawals_type text, OUT withdrawals_dnec boolean, OUT withdrawals_cned boolean) TO custody_app;


--
-- Name: FUNCTION withdrawal_reserve_record(p_id bigint, p_user_id text, p_request_key text, p_fingerprint text, p_requested_by text, p_chain text, p_asset_code text, p_token text, p_destination text, p_amount_minor numeric, p_fee_max_minor numeric, p_fee_minor numeric, p_chain_amount numeric, p_approvals_required integer, p_state text, p_event text, p_reason text, p_evidence jsonb, p_actor text, p_at timestamp with time zone, p_reserve_transaction_id bigint, p_withdrawals_account_id bigint); Type: ACL; Schema: public; Owner: custody_withdrawal_writer
--

REVOKE ALL ON FUNCTION public.withdrawal_reserve_record(p_id bigint, p_user_id text, p_request_key text, p_fingerprint text, p_requested_by text, p_chain text, p_asset_code text, p_token text, p_destination text, p_amount_minor numeric, p_fee_max_minor numeric, p_fee_minor numeric, p_chain_amount numeric, p_approvals_required integer, p_state text, p_event text, p_reason text, p_evidence jsonb, p_actor text, p_at timestamp with time zone, p_reserve_transaction_id bigint, p_withdrawals_account_id bigint) FROM PUBLIC;
GRANT ALL ON FUNCTION public.withdrawal_reserve_record(p_id bigint, p_user_id text, p_request_key text, p_fingerprint text, p_requested_by text, p_chain text, p_asset_code text, p_token text, p_destination text, p_amount_minor numeric, p_fee_max_minor numeric, p_fee_minor numeric, p_chain_amount numeric, p_approvals_required integer, p_state text, p_event text, p_reason text, p_evidence jsonb, p_actor text, p_at timestamp with time zone, p_reserve_transaction_id bigint, p_withdrawals_account_id bigint) TO custody_app;


--
-- Name: FUNCTION withdrawal_transition(p_id bigint, p_sets jsonb, p_from text, p_to text, p_event text, p_reason text, p_evidence jsonb, p_actor text, p_ledger_transaction_id bigint, p_attempt_id bigint, p_at timestamp with time zone); Type: ACL; Schema: public; Owner: custody_state_writer
--

REVOKE ALL ON FUNCTION public.withdrawal_transition(p_id bigint, p_sets jsonb, p_from text, p_to text, p_event text, p_reason text, p_evidence jsonb, p_actor text, p_ledger_transaction_id bigint, p_attempt_id bigint, p_at timestamp with time zone) FROM PUBLIC;
GRANT ALL ON FUNCTION public.withdrawal_transition(p_id bigint, p_sets jsonb, p_from text, p_to text, p_event text, p_reason text, p_evidence jsonb, p_actor text, p_ledger_transaction_id bigint, p_attempt_id bigint, p_at timestamp with time zone) TO custody_app;


--
-- Name: TABLE account_balances; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT SELECT,INSERT,UPDATE ON TABLE public.account_balances TO custody_app;
GRANT SELECT,UPDATE ON TABLE public.account_balances TO custody_ledger_writer;


--
-- Name: TABLE accounts; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT SELECT,INSERT ON TABLE public.accounts TO custody_app;
GRANT SELECT ON TABLE public.accounts TO custody_withdrawal_writer;
GRANT SELECT ON TABLE public.accounts TO custody_ledger_writer;


--
-- Name: SEQUENCE accounts_id_seq; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT SELECT,USAGE ON SEQUENCE public.accounts_id_seq TO custody_app;


--
-- Name: TABLE api_audit; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT SELECT,INSERT ON TABLE public.api_audit TO custody_app;


--
-- Name: SEQUENCE api_audit_id_seq; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT SELECT,USAGE ON SEQUENCE public.api_audit_id_seq TO custody_app;


--
-- Name: TABLE api_auth_failures; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE public.api_auth_failures TO custody_app;


--
-- Name: TABLE api_clients; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT SELECT,INSERT ON TABLE public.api_clients TO custody_app;


--
-- Name: SEQUENCE api_clients_id_seq; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT SELECT,USAGE ON SEQUENCE public.api_clients_id_seq TO custody_app;


--
-- Name: TABLE api_idempotency; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE public.api_idempotency TO custody_app;


--
-- Name: TABLE api_keys; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT SELECT,INSERT,UPDATE ON TABLE public.api_keys TO custody_app;


--
-- Name: SEQUENCE api_keys_id_seq; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT SELECT,USAGE ON SEQUENCE public.api_keys_id_seq TO custody_app;


--
-- Name: TABLE api_rate_windows; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE public.api_rate_windows TO custody_app;


--
-- Name: TABLE api_users; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT SELECT,INSERT ON TABLE public.api_users TO custody_app;
GRANT SELECT ON TABLE public.api_users TO custody_withdrawal_writer;


--
-- Name: TABLE assets; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT SELECT,INSERT ON TABLE public.assets TO custody_app;
GRANT SELECT ON TABLE public.assets TO custody_withdrawal_writer;


--
-- Name: SEQUENCE assets_id_seq; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT SELECT,USAGE ON SEQUENCE public.assets_id_seq TO custody_app;


--
-- Name: TABLE balance_checkpoint_entries; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT SELECT,INSERT ON TABLE public.balance_checkpoint_entries TO custody_app;


--
-- Name: TABLE balance_checkpoints; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT SELECT,INSERT ON TABLE public.balance_checkpoints TO custody_app;


--
-- Name: SEQUENCE balance_checkpoints_id_seq; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT SELECT,USAGE ON SEQUENCE public.balance_checkpoints_id_seq TO custody_app;


--
-- Name: TABLE cases; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT SELECT,INSERT ON TABLE public.cases TO custody_app;


--
-- Name: COLUMN cases.observed; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT UPDATE(observed) ON TABLE public.cases TO custody_app;


--
-- Name: COLUMN cases.evidence; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT UPDATE(evidence) ON TABLE public.cases TO custody_app;


--
-- Name: COLUMN cases.status; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT UPDATE(status) ON TABLE public.cases TO custody_app;


--
-- Name: COLUMN cases.last_seen_at; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT UPDATE(last_seen_at) ON TABLE public.cases TO custody_app;


--
-- Name: COLUMN cases.seen_count; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT UPDATE(seen_count) ON TABLE public.cases TO custody_app;


--
-- Name: COLUMN cases.resolution; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT UPDATE(resolution) ON TABLE public.cases TO custody_app;


--
-- Name: COLUMN cases.resolved_by; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT UPDATE(resolved_by) ON TABLE public.cases TO custody_app;


--
-- Name: COLUMN cases.resolved_at; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT UPDATE(resolved_at) ON TABLE public.cases TO custody_app;


--
-- Name: COLUMN cases.resolution_transaction_id; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT UPDATE(resolution_transaction_id) ON TABLE public.cases TO custody_app;


--
-- Name: SEQUENCE cases_id_seq; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT SELECT,USAGE ON SEQUENCE public.cases_id_seq TO custody_app;


--
-- Name: TABLE cold_transfer_approvals; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT SELECT,INSERT ON TABLE public.cold_transfer_approvals TO custody_app;


--
-- Name: TABLE cold_transfer_events; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT SELECT,INSERT ON TABLE public.cold_transfer_events TO custody_app;


--
-- Name: SEQUENCE cold_transfer_events_id_seq; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT USAGE ON SEQUENCE public.cold_transfer_events_id_seq TO custody_app;


--
-- Name: TABLE cold_transfers; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT SELECT ON TABLE public.cold_transfers TO custody_app;
GRANT SELECT,INSERT,UPDATE ON TABLE public.cold_transfers TO custody_state_writer;


--
-- Name: COLUMN cold_transfers.id; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT UPDATE(id) ON TABLE public.cold_transfers TO custody_app;


--
-- Name: SEQUENCE cold_transfers_id_seq; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT USAGE ON SEQUENCE public.cold_transfers_id_seq TO custody_app;


--
-- Name: TABLE console_secrets; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT SELECT,INSERT ON TABLE public.console_secrets TO custody_app;


--
-- Name: COLUMN console_secrets.secret_sealed; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT UPDATE(secret_sealed) ON TABLE public.console_secrets TO custody_app;


--
-- Name: TABLE console_sessions; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT SELECT,INSERT ON TABLE public.console_sessions TO custody_app;


--
-- Name: COLUMN console_sessions.ended_at; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT UPDATE(ended_at) ON TABLE public.console_sessions TO custody_app;


--
-- Name: SEQUENCE console_sessions_id_seq; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT USAGE ON SEQUENCE public.console_sessions_id_seq TO custody_app;


--
-- Name: TABLE deposit_addresses; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT SELECT,INSERT ON TABLE public.deposit_addresses TO custody_app;


--
-- Name: TABLE deposit_case_refunds; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT SELECT,INSERT ON TABLE public.deposit_case_refunds TO custody_app;


--
-- Name: TABLE deposit_case_resolutions; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT SELECT,INSERT ON TABLE public.deposit_case_resolutions TO custody_app;


--
-- Name: TABLE deposit_case_votes; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT SELECT,INSERT ON TABLE public.deposit_case_votes TO custody_app;


--
-- Name: SEQUENCE deposit_case_votes_id_seq; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT SELECT,USAGE ON SEQUENCE public.deposit_case_votes_id_seq TO custody_app;


--
-- Name: TABLE deposit_cases; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT SELECT,INSERT ON TABLE public.deposit_cases TO custody_app;


--
-- Name: SEQUENCE deposit_cases_id_seq; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT SELECT,USAGE ON SEQUENCE public.deposit_cases_id_seq TO custody_app;


--
-- Name: TABLE deposit_events; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT SELECT,INSERT ON TABLE public.deposit_events TO custody_app;


--
-- Name: SEQUENCE deposit_events_id_seq; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT SELECT,USAGE ON SEQUENCE public.deposit_events_id_seq TO custody_app;


--
-- Name: TABLE deposits; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT SELECT,INSERT,UPDATE ON TABLE public.deposits TO custody_app;


--
-- Name: SEQUENCE deposits_id_seq; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT SELECT,USAGE ON SEQUENCE public.deposits_id_seq TO custody_app;


--
-- Name: TABLE gas_top_up_events; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT SELECT,INSERT ON TABLE public.gas_top_up_events TO custody_app;


--
-- Name: SEQUENCE gas_top_up_events_id_seq; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT USAGE ON SEQUENCE public.gas_top_up_events_id_seq TO custody_app;


--
-- Name: TABLE gas_top_ups; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT SELECT ON TABLE public.gas_top_ups TO custody_app;
GRANT SELECT,INSERT,UPDATE ON TABLE public.gas_top_ups TO custody_state_writer;


--
-- Name: COLUMN gas_top_ups.id; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT UPDATE(id) ON TABLE public.gas_top_ups TO custody_app;


--
-- Name: SEQUENCE gas_top_ups_id_seq; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT USAGE ON SEQUENCE public.gas_top_ups_id_seq TO custody_app;


--
-- Name: TABLE hot_limit_episodes; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT SELECT,INSERT,UPDATE ON TABLE public.hot_limit_episodes TO custody_app;


--
-- Name: SEQUENCE hot_limit_episodes_id_seq; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT USAGE ON SEQUENCE public.hot_limit_episodes_id_seq TO custody_app;


--
-- Name: TABLE internal_transfers; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT SELECT,INSERT ON TABLE public.internal_transfers TO custody_app;


--
-- Name: TABLE job_runs; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT SELECT,INSERT,DELETE ON TABLE public.job_runs TO custody_app;


--
-- Name: SEQUENCE job_runs_id_seq; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT SELECT,USAGE ON SEQUENCE public.job_runs_id_seq TO custody_app;


--
-- Name: TABLE ledger_period_approvals; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT SELECT,INSERT ON TABLE public.ledger_period_approvals TO custody_app;


--
-- Name: TABLE ledger_period_proposals; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT SELECT,INSERT ON TABLE public.ledger_period_proposals TO custody_app;


--
-- Name: SEQUENCE ledger_period_proposals_id_seq; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT SELECT,USAGE ON SEQUENCE public.ledger_period_proposals_id_seq TO custody_app;


--
-- Name: TABLE ledger_periods; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT SELECT,INSERT ON TABLE public.ledger_periods TO custody_app;
GRANT SELECT ON TABLE public.ledger_periods TO custody_ledger_writer;


--
-- Name: SEQUENCE ledger_periods_id_seq; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT SELECT,USAGE ON SEQUENCE public.ledger_periods_id_seq TO custody_app;


--
-- Name: TABLE ledger_postings; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT SELECT,INSERT ON TABLE public.ledger_postings TO custody_app;
GRANT SELECT,INSERT ON TABLE public.ledger_postings TO custody_ledger_writer;
GRANT SELECT ON TABLE public.ledger_postings TO custody_withdrawal_writer;


--
-- Name: SEQUENCE ledger_postings_id_seq; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT SELECT,USAGE ON SEQUENCE public.ledger_postings_id_seq TO custody_app;
GRANT USAGE ON SEQUENCE public.ledger_postings_id_seq TO custody_ledger_writer;


--
-- Name: TABLE ledger_seals; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT SELECT,INSERT ON TABLE public.ledger_seals TO custody_app;


--
-- Name: SEQUENCE ledger_seals_id_seq; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT SELECT,USAGE ON SEQUENCE public.ledger_seals_id_seq TO custody_app;


--
-- Name: TABLE ledger_transactions; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT SELECT,INSERT ON TABLE public.ledger_transactions TO custody_app;
GRANT SELECT,INSERT ON TABLE public.ledger_transactions TO custody_ledger_writer;
GRANT SELECT ON TABLE public.ledger_transactions TO custody_withdrawal_writer;


--
-- Name: SEQUENCE ledger_transactions_id_seq; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT SELECT,USAGE ON SEQUENCE public.ledger_transactions_id_seq TO custody_app;
GRANT USAGE ON SEQUENCE public.ledger_transactions_id_seq TO custody_ledger_writer;


--
-- Name: SEQUENCE outbox_events_id_seq; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT SELECT,USAGE ON SEQUENCE public.outbox_events_id_seq TO custody_app;
GRANT USAGE ON SEQUENCE public.outbox_events_id_seq TO custody_withdrawal_writer;


--
-- Name: TABLE outgoing_attempts; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT SELECT,INSERT ON TABLE public.outgoing_attempts TO custody_app;


--
-- Name: SEQUENCE outgoing_attempts_id_seq; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT SELECT,USAGE ON SEQUENCE public.outgoing_attempts_id_seq TO custody_app;


--
-- Name: TABLE provider_inbox; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT SELECT,INSERT ON TABLE public.provider_inbox TO custody_app;


--
-- Name: TABLE provider_statement_records; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT SELECT,INSERT ON TABLE public.provider_statement_records TO custody_app;


--
-- Name: SEQUENCE provider_statement_records_id_seq; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT USAGE ON SEQUENCE public.provider_statement_records_id_seq TO custody_app;


--
-- Name: TABLE provider_statements; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT SELECT,INSERT ON TABLE public.provider_statements TO custody_app;


--
-- Name: SEQUENCE provider_statements_id_seq; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT USAGE ON SEQUENCE public.provider_statements_id_seq TO custody_app;


--
-- Name: TABLE refill_requests; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT SELECT ON TABLE public.refill_requests TO custody_app;
GRANT SELECT,INSERT,UPDATE ON TABLE public.refill_requests TO custody_state_writer;


--
-- Name: COLUMN refill_requests.id; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT UPDATE(id) ON TABLE public.refill_requests TO custody_app;


--
-- Name: SEQUENCE refill_requests_id_seq; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT USAGE ON SEQUENCE public.refill_requests_id_seq TO custody_app;


--
-- Name: TABLE reserve_leaves; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT SELECT,INSERT ON TABLE public.reserve_leaves TO custody_app;


--
-- Name: TABLE reserve_nodes; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT SELECT,INSERT ON TABLE public.reserve_nodes TO custody_app;


--
-- Name: TABLE reserve_report_addresses; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT SELECT,INSERT ON TABLE public.reserve_report_addresses TO custody_app;


--
-- Name: TABLE reserve_reports; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT SELECT,INSERT ON TABLE public.reserve_reports TO custody_app;


--
-- Name: SEQUENCE reserve_reports_id_seq; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT USAGE ON SEQUENCE public.reserve_reports_id_seq TO custody_app;


--
-- Name: TABLE reserve_signatures; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT SELECT,INSERT ON TABLE public.reserve_signatures TO custody_app;


--
-- Name: TABLE sender_nonces; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT SELECT,INSERT,UPDATE ON TABLE public.sender_nonces TO custody_app;


--
-- Name: TABLE state_moves; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT SELECT ON TABLE public.state_moves TO custody_app;


--
-- Name: TABLE sweep_events; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT SELECT,INSERT ON TABLE public.sweep_events TO custody_app;


--
-- Name: SEQUENCE sweep_events_id_seq; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT USAGE ON SEQUENCE public.sweep_events_id_seq TO custody_app;


--
-- Name: TABLE sweeps; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT SELECT ON TABLE public.sweeps TO custody_app;
GRANT SELECT,INSERT,UPDATE ON TABLE public.sweeps TO custody_state_writer;


--
-- Name: COLUMN sweeps.id; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT UPDATE(id) ON TABLE public.sweeps TO custody_app;


--
-- Name: SEQUENCE sweeps_id_seq; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT USAGE ON SEQUENCE public.sweeps_id_seq TO custody_app;


--
-- Name: TABLE treasury_funding_matches; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT SELECT,INSERT ON TABLE public.treasury_funding_matches TO custody_app;


--
-- Name: TABLE treasury_fundings; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT SELECT,INSERT ON TABLE public.treasury_fundings TO custody_app;


--
-- Name: COLUMN treasury_fundings.id; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT UPDATE(id) ON TABLE public.treasury_fundings TO custody_app;


--
-- Name: SEQUENCE treasury_fundings_id_seq; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT SELECT,USAGE ON SEQUENCE public.treasury_fundings_id_seq TO custody_app;


--
-- Name: TABLE watcher_cursors; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT SELECT,INSERT,UPDATE ON TABLE public.watcher_cursors TO custody_app;


--
-- Name: TABLE webhook_attempts; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT SELECT,INSERT ON TABLE public.webhook_attempts TO custody_app;


--
-- Name: SEQUENCE webhook_attempts_id_seq; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT SELECT,USAGE ON SEQUENCE public.webhook_attempts_id_seq TO custody_app;


--
-- Name: TABLE webhook_deliveries; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT SELECT,INSERT,UPDATE ON TABLE public.webhook_deliveries TO custody_app;
GRANT SELECT,INSERT ON TABLE public.webhook_deliveries TO custody_withdrawal_writer;


--
-- Name: SEQUENCE webhook_deliveries_id_seq; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT SELECT,USAGE ON SEQUENCE public.webhook_deliveries_id_seq TO custody_app;
GRANT USAGE ON SEQUENCE public.webhook_deliveries_id_seq TO custody_withdrawal_writer;


--
-- Name: TABLE webhook_endpoints; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT SELECT,INSERT,UPDATE ON TABLE public.webhook_endpoints TO custody_app;
GRANT SELECT ON TABLE public.webhook_endpoints TO custody_withdrawal_writer;


--
-- Name: SEQUENCE webhook_endpoints_id_seq; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT SELECT,USAGE ON SEQUENCE public.webhook_endpoints_id_seq TO custody_app;


--
-- Name: SEQUENCE withdrawal_allowlist_id_seq; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT SELECT,USAGE ON SEQUENCE public.withdrawal_allowlist_id_seq TO custody_app;


--
-- Name: TABLE withdrawal_allowlist_votes; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT SELECT,INSERT ON TABLE public.withdrawal_allowlist_votes TO custody_app;


--
-- Name: SEQUENCE withdrawal_allowlist_votes_id_seq; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT SELECT,USAGE ON SEQUENCE public.withdrawal_allowlist_votes_id_seq TO custody_app;


--
-- Name: TABLE withdrawal_case_resolutions; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT SELECT,INSERT ON TABLE public.withdrawal_case_resolutions TO custody_app;


--
-- Name: TABLE withdrawal_cases; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT SELECT,INSERT ON TABLE public.withdrawal_cases TO custody_app;


--
-- Name: SEQUENCE withdrawal_cases_id_seq; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT SELECT,USAGE ON SEQUENCE public.withdrawal_cases_id_seq TO custody_app;


--
-- Name: TABLE withdrawal_decisions; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT SELECT,INSERT ON TABLE public.withdrawal_decisions TO custody_app;


--
-- Name: SEQUENCE withdrawal_decisions_id_seq; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT SELECT,USAGE ON SEQUENCE public.withdrawal_decisions_id_seq TO custody_app;


--
-- Name: SEQUENCE withdrawal_events_id_seq; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT SELECT,USAGE ON SEQUENCE public.withdrawal_events_id_seq TO custody_app;
GRANT USAGE ON SEQUENCE public.withdrawal_events_id_seq TO custody_withdrawal_writer;


--
-- Name: TABLE withdrawal_returns; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT SELECT,INSERT ON TABLE public.withdrawal_returns TO custody_app;


--
-- Name: SEQUENCE withdrawal_returns_id_seq; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT SELECT,USAGE ON SEQUENCE public.withdrawal_returns_id_seq TO custody_app;


--
-- Name: SEQUENCE withdrawals_id_seq; Type: ACL; Schema: public; Owner: CURRENT_USER
--

GRANT SELECT,USAGE ON SEQUENCE public.withdrawals_id_seq TO custody_app;


--
-- PostgreSQL database dump complete
--
