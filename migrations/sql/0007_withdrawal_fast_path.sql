-- Withdrawals: the reserve in three statements (bench/RESULTS.md, "Withdrawal reserve").
--
-- A reserve used to be: insert the withdrawal in state 'requested' (with the daily-limit lock),
-- read the day's total, post the reserve (ledger.service.post), then UPDATE the row to its
-- reserved state with its history row. Now:
--
--   1. withdrawal_reserve_open: the daily-limit lock, then (read after the lock) the request
--      key, the day's total, the ledger asset and the user's two accounts, and the new id;
--   2. the ledger's post of the reserve (unchanged: ledger.service.post);
--   3. withdrawal_reserve_record: checks the reserve posting it names, inserts the withdrawal
--      directly in its reserved state (one row version, no UPDATE) and its history row.
--
-- Nothing is written before the post, so a refusal (limit, funds) writes nothing at all.
--
-- The withdrawal outbox trigger of 0005 is replaced by one that renders decimals with an
-- inlinable expression (withdrawal_decimal) instead of calling outbox_decimal, a SQL function
-- with a CTE that PostgreSQL plans again on every call (two calls per event: about half of the
-- trigger's time). Same payload, same event ids.
--
-- Second pass (bench/RESULTS.md): withdrawal_reserve_record runs as custody_withdrawal_writer
-- (SECURITY DEFINER) and writes the reserve's outbox row itself, from the values it has just
-- inserted, instead of the outbox trigger re-reading the withdrawal (a PL/pgSQL trigger call, a
-- three-table read of the row just written). The trigger skips that role only
-- (WHEN current_user <> ...): every other writer of withdrawal_events still gets its outbox row
-- from the trigger, in its own transaction. The four foreign keys of the reserve's rows become
-- checks that skip that role too (it has checked those references itself); every other writer
-- is still refused with 23503. The fan-out trigger of 0005 gets a WHEN clause that skips events
-- no endpoint can receive (no client, not an alert): same deliveries.

DO $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'custody_withdrawal_writer') THEN
    CREATE ROLE custody_withdrawal_writer NOLOGIN;
  END IF;
  -- A non-superuser owner must be a member to hand the function over (ALTER ... OWNER TO).
  IF NOT (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) THEN
    EXECUTE format('GRANT custody_withdrawal_writer TO %I', current_user);
  END IF;
END
$$;

-- What withdrawal_reserve_record reads and writes, and what the triggers its inserts fire need
-- (they run as the current user: the outbox fan-out inserts deliveries).
GRANT USAGE ON SCHEMA public TO custody_withdrawal_writer;
GRANT SELECT, INSERT ON withdrawals, withdrawal_events, outbox_events, webhook_deliveries
  TO custody_withdrawal_writer;
GRANT SELECT ON ledger_transactions, ledger_postings, accounts, assets, api_users,
  webhook_endpoints TO custody_withdrawal_writer;
GRANT USAGE ON SEQUENCE withdrawal_events_id_seq, outbox_events_id_seq,
  webhook_deliveries_id_seq TO custody_withdrawal_writer;

-- 1. -------------------------------------------------------------------------------------------
-- The lock first: (7321, hashtext(user_id || '/' || asset)), as in 0003's header, held until
-- commit. Race prevented: two concurrent requests of one user and asset each missing the
-- other's amount from the day's total and together passing the daily limit; and two requests
-- with one key in one asset both creating a withdrawal (the second one, waiting here, finds the
-- first's row; another asset is caught by the unique key in step 3).
-- Every query after the PERFORM runs with a snapshot taken after the lock was granted (a
-- VOLATILE PL/pgSQL function takes a new snapshot per statement under READ COMMITTED), so it
-- sees every withdrawal of that user and asset committed before. Under REPEATABLE READ the
-- transaction's snapshot could predate the lock: refused.
CREATE FUNCTION withdrawal_reserve_open(
  p_user_id text, p_asset_code text, p_request_key text, p_since timestamptz,
  p_wallet_code text, p_withdrawals_code text,
  OUT existing_id bigint, OUT withdrawal_id bigint, OUT used_minor numeric,
  OUT ledger_asset_id int, OUT ledger_asset_scale int,
  OUT wallet_id bigint, OUT wallet_type text, OUT wallet_dnec boolean, OUT wallet_cned boolean,
  OUT withdrawals_id bigint, OUT withdrawals_type text, OUT withdrawals_dnec boolean,
  OUT withdrawals_cned boolean)
LANGUAGE plpgsql VOLATILE
AS $fn$
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
$fn$;
COMMENT ON FUNCTION withdrawal_reserve_open(text, text, text, timestamptz, text, text) IS
  'First statement of a reserve: the (user, asset) daily-limit lock until commit, then, read '
  'under it, the withdrawal already stored under the key (existing_id), the amount requested '
  'since p_since that counts toward the limit, the ledger asset, the two user accounts (NULLs '
  'when missing) and a new withdrawal id (when the key is new). Writes nothing.';

-- 3. -------------------------------------------------------------------------------------------
-- Insert a withdrawal in its reserved state ('reserved', or 'pending_approval' when approvals
-- are required) with its history row, after its reserve was posted in this transaction.
-- Refused (check_violation, nothing written) unless the reserve it names is the one this
-- withdrawal needs: ledger transaction withdrawal:{id}:reserve, whose posting on the user's
-- withdrawals account (ledger.chart: user:{id}:withdrawals, in the withdrawal's asset) credits
-- amount + max fee. If another transaction committed the same (user, key) meanwhile (possible
-- only for another asset: the same asset waits on the lock of statement 1), 40001: the caller
-- retries the whole unit of work, which then finds that withdrawal (replay or conflict).
CREATE FUNCTION withdrawal_reserve_record(
  p_id bigint, p_user_id text, p_request_key text, p_fingerprint text, p_requested_by text,
  p_chain text, p_asset_code text, p_token text, p_destination text, p_amount_minor numeric,
  p_fee_max_minor numeric, p_fee_minor numeric, p_chain_amount numeric,
  p_approvals_required int, p_state text, p_event text, p_reason text, p_evidence jsonb,
  p_actor text, p_at timestamptz, p_reserve_transaction_id bigint,
  p_withdrawals_account_id bigint)
RETURNS bigint
LANGUAGE plpgsql VOLATILE
-- Runs as custody_withdrawal_writer, the role the outbox trigger skips: it writes the outbox
-- row itself (see the header). It adds no rights the caller lacks for what it does: custody_app
-- may insert withdrawals, their history and outbox rows.
SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp
AS $fn$
DECLARE
  v_posting bigint;
  v_scale int;
  w record;
  e record;
BEGIN
  IF p_state IS NULL OR p_state NOT IN ('reserved', 'pending_approval')
     OR p_approvals_required IS NULL
     OR (p_state = 'pending_approval') <> (p_approvals_required > 0) THEN
    RAISE EXCEPTION 'withdrawal %: % is not the reserved state of a withdrawal needing % approval(s)',
      p_id, p_state, p_approvals_required USING ERRCODE = 'check_violation';
  END IF;
  -- Primary-key and unique-index lookups only.
  SELECT p.id, s.scale INTO v_posting, v_scale
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
  RETURNING id, user_id, request_key, chain, asset_code, token, destination, amount_minor,
            fee_minor, fee_max_minor INTO w;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'withdrawal key % of user % raced', p_request_key, p_user_id
      USING ERRCODE = 'serialization_failure';
  END IF;

  INSERT INTO withdrawal_events (withdrawal_id, from_state, to_state, event, reason, evidence,
                                 actor, ledger_transaction_id, occurred_at)
  VALUES (p_id, 'requested', p_state, p_event, p_reason, coalesce(p_evidence, '{}'::jsonb),
          p_actor, p_reserve_transaction_id, p_at)
  RETURNING id, from_state, to_state, event, reason, ledger_transaction_id, occurred_at,
            recorded_at INTO e;

  -- The outbox row outbox_withdrawal_event (below) writes for every other writer: the same
  -- columns and payload, from the stored values (tests/withdrawals compare the two).
  INSERT INTO outbox_events (event_id, type, client_id, user_id, subject, payload, created_at)
  VALUES ('evt_wd_' || e.id, 'withdrawal.' || e.to_state,
          (SELECT u.client_id FROM api_users u WHERE u.id = w.user_id), w.user_id,
          'withdrawal:' || w.id,
          jsonb_build_object(
            'withdrawal_id', w.id::text, 'user_id', w.user_id, 'request_key', w.request_key,
            'chain', w.chain, 'asset', w.asset_code, 'token', w.token,
            'destination', w.destination,
            'amount_minor', w.amount_minor::text,
            'amount', withdrawal_decimal(w.amount_minor, v_scale),
            'fee_minor', w.fee_minor::text, 'fee', withdrawal_decimal(w.fee_minor, v_scale),
            'fee_max_minor', w.fee_max_minor::text,
            'state', e.to_state, 'from_state', e.from_state, 'event', e.event,
            'reason', e.reason, 'tx_hash', NULL,
            'ledger_transaction_id', e.ledger_transaction_id::text,
            'occurred_at', e.occurred_at),
          e.recorded_at);
  RETURN v_posting;
END
$fn$;
COMMENT ON FUNCTION withdrawal_reserve_record(bigint, text, text, text, text, text, text, text,
  text, numeric, numeric, numeric, numeric, int, text, text, text, jsonb, text, timestamptz,
  bigint, bigint) IS
  'Last statement of a reserve: insert the withdrawal in its reserved state, its history '
  'row (requested -> p_state) and that row''s outbox event, after checking that '
  'p_reserve_transaction_id is its reserve; returns the reserve posting id (the posting that '
  'the settle or release closes). Runs as custody_withdrawal_writer.';
ALTER FUNCTION withdrawal_reserve_record(bigint, text, text, text, text, text, text, text,
  text, numeric, numeric, numeric, numeric, int, text, text, text, jsonb, text, timestamptz,
  bigint, bigint) OWNER TO custody_withdrawal_writer;

-- The outbox ------------------------------------------------------------------------------------
-- outbox_decimal (0005) as one expression: PostgreSQL inlines it into the calling query instead
-- of planning a SQL function with a CTE on every call. Exact (string arithmetic, no division);
-- tests/withdrawals check that it agrees with outbox_decimal.
CREATE FUNCTION withdrawal_decimal(minor numeric, scale integer) RETURNS text
  LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE
    WHEN minor IS NULL OR scale IS NULL THEN NULL
    WHEN scale = 0 THEN minor::text
    ELSE (CASE WHEN minor < 0 THEN '-' ELSE '' END)
         || coalesce(nullif(left(abs(minor)::text, -scale), ''), '0')
         || coalesce('.' || nullif(rtrim(right(repeat('0', scale) || abs(minor)::text, scale),
                                         '0'), ''), '')
  END
$$;

-- Withdrawal history -> withdrawal.<state>: as in 0005, with withdrawal_decimal.
CREATE OR REPLACE FUNCTION outbox_withdrawal_event() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  w record;
  hash text;
BEGIN
  IF NEW.to_state NOT IN ('pending_approval', 'reserved', 'broadcast', 'settled', 'released',
                          'unknown', 'reverted', 'canceled', 'rejected', 'written_off') THEN
    RETURN NULL;
  END IF;
  SELECT wd.*, u.client_id, a.scale INTO w
    FROM withdrawals wd
    LEFT JOIN api_users u ON u.id = wd.user_id
    LEFT JOIN assets a ON a.code = wd.asset_code
   WHERE wd.id = NEW.withdrawal_id;
  IF NEW.attempt_id IS NOT NULL THEN
    SELECT tx_hash INTO hash FROM withdrawal_attempts WHERE id = NEW.attempt_id;
  END IF;
  INSERT INTO outbox_events (event_id, type, client_id, user_id, subject, payload, created_at)
  VALUES ('evt_wd_' || NEW.id, 'withdrawal.' || NEW.to_state, w.client_id, w.user_id,
          'withdrawal:' || w.id,
          jsonb_build_object(
            'withdrawal_id', w.id::text, 'user_id', w.user_id, 'request_key', w.request_key,
            'chain', w.chain, 'asset', w.asset_code, 'token', w.token,
            'destination', w.destination,
            'amount_minor', w.amount_minor::text,
            'amount', withdrawal_decimal(w.amount_minor, w.scale),
            'fee_minor', w.fee_minor::text, 'fee', withdrawal_decimal(w.fee_minor, w.scale),
            'fee_max_minor', w.fee_max_minor::text,
            'state', NEW.to_state, 'from_state', NEW.from_state, 'event', NEW.event,
            'reason', NEW.reason, 'tx_hash', hash,
            'ledger_transaction_id', NEW.ledger_transaction_id::text,
            'occurred_at', NEW.occurred_at),
          NEW.recorded_at);
  RETURN NULL;
END
$$;
-- withdrawal_reserve_record writes its outbox row itself; every other writer gets it here.
DROP TRIGGER withdrawal_events_outbox ON withdrawal_events;
CREATE TRIGGER withdrawal_events_outbox AFTER INSERT ON withdrawal_events
  FOR EACH ROW WHEN (current_user <> 'custody_withdrawal_writer')
  EXECUTE FUNCTION outbox_withdrawal_event();

-- Foreign keys of the reserve's rows -> checks. withdrawal_reserve_record has checked them
-- already (the reserve transaction and posting it names are found by primary key, the history
-- row names the withdrawal it has just inserted), so for it the four foreign keys were only cost:
-- a trigger event and an SPI query each, and a share lock (a WAL record) on every parent row,
-- all written by this transaction. The parents never change or go: ledger rows are append-only,
-- withdrawals are never deleted, and their id is fixed below. Every other writer is checked by
-- the triggers below (WHEN current_user <> ...), as the foreign keys did (SQLSTATE 23503).
ALTER TABLE withdrawals DROP CONSTRAINT withdrawals_reserve_transaction_id_fkey;
ALTER TABLE withdrawals DROP CONSTRAINT withdrawals_reserve_posting_id_fkey;
ALTER TABLE withdrawal_events DROP CONSTRAINT withdrawal_events_withdrawal_id_fkey;
ALTER TABLE withdrawal_events DROP CONSTRAINT withdrawal_events_ledger_transaction_id_fkey;

CREATE FUNCTION withdrawal_refs_check() RETURNS trigger LANGUAGE plpgsql AS $$
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
COMMENT ON FUNCTION withdrawal_refs_check() IS
  'The foreign keys of withdrawals (reserve transaction and posting) and withdrawal_events '
  '(withdrawal, ledger transaction), for writers other than withdrawal_reserve_record.';
-- Named to fire before the outbox trigger (same event: alphabetical order), as the foreign keys'
-- triggers did: a history row of a missing withdrawal fails as 23503, not in the outbox insert.
CREATE TRIGGER withdrawals_check_refs AFTER INSERT OR UPDATE OF reserve_transaction_id,
  reserve_posting_id ON withdrawals
  FOR EACH ROW WHEN (current_user <> 'custody_withdrawal_writer')
  EXECUTE FUNCTION withdrawal_refs_check();
CREATE TRIGGER withdrawal_events_check_refs AFTER INSERT ON withdrawal_events
  FOR EACH ROW WHEN (current_user <> 'custody_withdrawal_writer')
  EXECUTE FUNCTION withdrawal_refs_check();
-- History rows name their withdrawal by id (the foreign key refused changing a referenced id).
CREATE FUNCTION withdrawal_refuse_id_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'withdrawal %: its id cannot change (history rows name it)', OLD.id
    USING ERRCODE = 'foreign_key_violation';
END
$$;
CREATE TRIGGER withdrawals_id_fixed BEFORE UPDATE OF id ON withdrawals
  FOR EACH ROW WHEN (OLD.id IS DISTINCT FROM NEW.id)
  EXECUTE FUNCTION withdrawal_refuse_id_change();

-- Fan-out (0005's outbox_fan_out, unchanged) only for events an endpoint can receive: a client's
-- event or an alert. Its query matches no endpoint for any other row (client_id = NULL is never
-- true), so the deliveries are the same; the WHEN clause is checked without calling PL/pgSQL.
DROP TRIGGER outbox_events_fan_out ON outbox_events;
CREATE TRIGGER outbox_events_fan_out AFTER INSERT ON outbox_events
  FOR EACH ROW WHEN (NEW.client_id IS NOT NULL OR NEW.type LIKE 'alert.%')
  EXECUTE FUNCTION outbox_fan_out();

-- Grants: the application role runs the reserve functions (as itself: they add no rights).
REVOKE ALL ON FUNCTION withdrawal_reserve_open(text, text, text, timestamptz, text, text),
  withdrawal_reserve_record(bigint, text, text, text, text, text, text, text, text, numeric,
                            numeric, numeric, numeric, int, text, text, text, jsonb, text,
                            timestamptz, bigint, bigint)
  FROM PUBLIC;
GRANT EXECUTE ON FUNCTION withdrawal_reserve_open(text, text, text, timestamptz, text, text),
  withdrawal_reserve_record(bigint, text, text, text, text, text, text, text, text, numeric,
                            numeric, numeric, numeric, int, text, text, text, jsonb, text,
                            timestamptz, bigint, bigint),
  withdrawal_decimal(numeric, integer)
  TO custody_app;
