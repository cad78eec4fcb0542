-- movement_insert: the one way a sweep, gas top-up, cold transfer or refill request row is
-- created (revision 0030_money_table_grants: custody_app may not INSERT into those tables).
-- p_row names the columns to insert (the id, the timestamps of the history and any column the
-- table lacks are refused); its state must be one the machine starts in (state_moves, from_state
-- NULL: sweeps.model.TRANSITIONS / SWEEP_START, 'open' for a refill request). With p_skip_taken
-- a unique conflict (one open sweep per address, a used request key, one cold transfer in
-- flight) inserts nothing and returns NULL, as ON CONFLICT DO NOTHING; otherwise it fails as
-- usual. A movement gets its first history row ('planned', NULL -> its state) in the same call.
--
-- SECURITY DEFINER, owned by custody_state_writer, search_path fixed: it inserts only rows in a
-- starting state, with their history, which is what the service's planners insert.

CREATE OR REPLACE FUNCTION movement_insert(
  p_kind text, p_row jsonb, p_skip_taken boolean, p_actor text, p_reason text,
  p_evidence jsonb, p_at timestamptz)
RETURNS bigint
LANGUAGE plpgsql VOLATILE
SECURITY DEFINER
SET search_path = public, pg_temp
AS $fn$
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
$fn$;
COMMENT ON FUNCTION movement_insert(text, jsonb, boolean, text, text, jsonb, timestamptz) IS
  'Insert a sweep, gas top-up, cold transfer or refill request (p_row) in a state its machine '
  'starts in, with its first history row; NULL when p_skip_taken and a unique key is taken. '
  'Runs as custody_state_writer.';

ALTER FUNCTION movement_insert(text, jsonb, boolean, text, text, jsonb, timestamptz)
  OWNER TO custody_state_writer;
REVOKE ALL ON FUNCTION movement_insert(text, jsonb, boolean, text, text, jsonb, timestamptz)
  FROM PUBLIC;
GRANT EXECUTE ON FUNCTION movement_insert(text, jsonb, boolean, text, text, jsonb, timestamptz)
  TO custody_app;
