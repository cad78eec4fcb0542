-- withdrawal_reserve_record: the last of a reserve's three statements (see
-- functions/withdrawal_reserve_open.sql). It inserts a withdrawal in its reserved state
-- ('reserved', or 'pending_approval' when approvals are required) with its history row
-- (requested -> that state) and the history row's outbox event (outbox_withdrawal_event_write),
-- after its reserve was posted in this transaction, and returns the reserve posting's id (the
-- posting that the settle or release closes). Refused (check_violation, nothing written) unless
-- the reserve it names is the one this withdrawal needs: ledger transaction
-- withdrawal:{id}:reserve, whose posting on the user's withdrawals account (ledger.chart:
-- user:{id}:withdrawals, in the withdrawal's asset) credits amount + max fee. If another
-- transaction committed the same (user, key) meanwhile (possible only for another asset: the
-- same asset waits on the lock of statement 1), 40001: the caller retries the whole unit of
-- work, which then finds that withdrawal (replay or conflict).
--
-- It runs as custody_withdrawal_writer (SECURITY DEFINER). The triggers of withdrawals and
-- withdrawal_events skip that role for the reference checks (it has checked the references
-- itself) and for the outbox event (it writes the event itself, from the rows it has just
-- inserted, through the same function the trigger uses).

CREATE OR REPLACE FUNCTION withdrawal_reserve_record(
  p_id bigint, p_user_id text, p_request_key text, p_fingerprint text, p_requested_by text,
  p_chain text, p_asset_code text, p_token text, p_destination text, p_amount_minor numeric,
  p_fee_max_minor numeric, p_fee_minor numeric, p_chain_amount numeric,
  p_approvals_required int, p_state text, p_event text, p_reason text, p_evidence jsonb,
  p_actor text, p_at timestamptz, p_reserve_transaction_id bigint,
  p_withdrawals_account_id bigint)
RETURNS bigint
LANGUAGE plpgsql VOLATILE
-- Runs as custody_withdrawal_writer, the role that the outbox trigger of withdrawal_events and
-- the reference checks skip (see above). It adds no rights the caller lacks for what it does:
-- custody_app may insert withdrawals, their history and outbox rows.
SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp
AS $fn$
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
REVOKE ALL ON FUNCTION withdrawal_reserve_record(bigint, text, text, text, text, text, text, text,
  text, numeric, numeric, numeric, numeric, int, text, text, text, jsonb, text, timestamptz,
  bigint, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION withdrawal_reserve_record(bigint, text, text, text, text, text, text, text,
  text, numeric, numeric, numeric, numeric, int, text, text, text, jsonb, text, timestamptz,
  bigint, bigint) TO custody_app;
