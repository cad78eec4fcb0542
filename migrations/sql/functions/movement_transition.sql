-- movement_transition: the one way a sweep's, gas top-up's, cold transfer's or refill request's
-- row changes (revision 0030_money_table_grants: custody_app may not UPDATE those tables).
-- Under the row lock it checks that the row is in p_from (the state the caller read) and that
-- (p_from, p_event, p_to) is a move of its machine (state_moves = sweeps.model.TRANSITIONS; a
-- refill request: open -> matched), sets the state, updated_at and only the columns a
-- transition of that kind may set (p_sets: sweeps.repository.TRANSITION_COLUMNS; a refill
-- request's match: matched_tx_hash, matched_position), and appends the movement's history row.
-- check_violation (nothing written) otherwise; no_data_found for an unknown id.
--
-- SECURITY DEFINER, owned by custody_state_writer, search_path fixed: it makes only the moves
-- the service's machines allow.

CREATE OR REPLACE FUNCTION movement_transition(
  p_kind text, p_id bigint, p_sets jsonb, p_from text, p_to text, p_event text,
  p_reason text, p_evidence jsonb, p_actor text, p_ledger_transaction_id bigint,
  p_attempt_id bigint, p_at timestamptz)
RETURNS void
LANGUAGE plpgsql VOLATILE
SECURITY DEFINER
SET search_path = public, pg_temp
AS $fn$
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
$fn$;
COMMENT ON FUNCTION movement_transition(text, bigint, jsonb, text, text, text, text, jsonb,
  text, bigint, bigint, timestamptz) IS
  'Move a sweep, gas top-up, cold transfer or refill request (locked) from p_from to p_to on '
  'p_event if that is a move of its machine (state_moves), setting only its transition '
  'columns from p_sets, and append its history row. Runs as custody_state_writer.';

ALTER FUNCTION movement_transition(text, bigint, jsonb, text, text, text, text, jsonb, text,
  bigint, bigint, timestamptz) OWNER TO custody_state_writer;
REVOKE ALL ON FUNCTION movement_transition(text, bigint, jsonb, text, text, text, text, jsonb,
  text, bigint, bigint, timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION movement_transition(text, bigint, jsonb, text, text, text, text,
  jsonb, text, bigint, bigint, timestamptz) TO custody_app;
