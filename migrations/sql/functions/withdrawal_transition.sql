-- withdrawal_transition: the one way a withdrawal's row changes after its reserve (revision
-- 0030_money_table_grants: custody_app may not UPDATE withdrawals). Under the row lock it
-- checks that the withdrawal is in p_from (the state the caller read) and that
-- (p_from, p_event, p_to) is a move of the service's machine (state_moves 'withdrawal' =
-- withdrawals.model.TRANSITIONS), sets the state and only the transition columns named in
-- p_sets (withdrawals.repository.TRANSITION_COLUMNS: never the user, amounts, destination or
-- reserve), appends the history row (whose triggers check its references and write the outbox
-- event, as for any history row) and returns the updated row. Refused with check_violation
-- (nothing written) otherwise; no_data_found for an unknown id.
--
-- SECURITY DEFINER, owned by custody_state_writer (custody_app's rights plus INSERT/UPDATE on
-- the money tables), search_path fixed: what it writes is only what the checks above let
-- through, so calling it gives custody_app no write the service would not make.

CREATE OR REPLACE FUNCTION withdrawal_transition(
  p_id bigint, p_sets jsonb, p_from text, p_to text, p_event text, p_reason text,
  p_evidence jsonb, p_actor text, p_ledger_transaction_id bigint, p_attempt_id bigint,
  p_at timestamptz)
RETURNS SETOF withdrawals
LANGUAGE plpgsql VOLATILE
SECURITY DEFINER
SET search_path = public, pg_temp
AS $fn$
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
$fn$;
COMMENT ON FUNCTION withdrawal_transition(bigint, jsonb, text, text, text, text, jsonb, text,
  bigint, bigint, timestamptz) IS
  'Move a withdrawal (locked) from p_from to p_to on p_event if that is a move of the state '
  'machine (state_moves), setting only transition columns from p_sets, and append its history '
  'row; returns the updated row. Runs as custody_state_writer.';

ALTER FUNCTION withdrawal_transition(bigint, jsonb, text, text, text, text, jsonb, text,
  bigint, bigint, timestamptz) OWNER TO custody_state_writer;
REVOKE ALL ON FUNCTION withdrawal_transition(bigint, jsonb, text, text, text, text, jsonb, text,
  bigint, bigint, timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION withdrawal_transition(bigint, jsonb, text, text, text, text, jsonb,
  text, bigint, bigint, timestamptz) TO custody_app;
