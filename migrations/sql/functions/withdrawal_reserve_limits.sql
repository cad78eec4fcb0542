-- withdrawal_reserve_limits: the reserve's destination and velocity checks (withdrawals.service),
-- run after withdrawal_reserve_open (which holds the (user, asset) lock) and before the post, in
-- the reserve's transaction. It reads; the service decides and refuses.
--
-- * The user's client: api_users (NULL for a user no client created: nothing of a client
--   applies then).
-- * The allowlist, when the client is one of p_allowlist_clients: the state of the destination
--   among the client's entries for that chain, for all its users or for this user: 'active'
--   (one live entry is active at p_now), 'pending' (listed, active from allow_at), 'removed'
--   (only removed entries: the last removal at allow_at) or 'not_listed'. NULL when allowlisting
--   is off for the client. The live entries read are locked FOR SHARE until commit. Race
--   prevented: a removal committing between this read and the reserve's commit (the removal
--   waits for the reserve, or the reserve reads the removal): "removal takes effect at once".
-- * Velocity: for each window of p_windows ([{"per": "user"|"client", "window_s": n}, ...]), the
--   count and the amount of the user's (or the client's) withdrawals of the asset requested at
--   or after p_now - window_s that count toward a limit (the states of the daily limit), as
--   [{"per", "window_s", "count", "amount_minor"}] in the same order. A client window first
--   takes the (client, asset) lock until commit: (7323, hashtext(client_id || '/' || asset)).
--   Race prevented: two users of one client each missing the other's request and together
--   passing a client limit. Lock order: (user, asset) in withdrawal_reserve_open, then (client,
--   asset) here, then the ledger's rows: the same for every reserve, so none deadlock. The
--   windows are read after the locks, with a fresh snapshot (READ COMMITTED, as
--   withdrawal_reserve_open requires).
-- It runs with the caller's rights.

CREATE OR REPLACE FUNCTION withdrawal_reserve_limits(
  p_user_id text, p_asset_code text, p_chain text, p_destination text, p_now timestamptz,
  p_allowlist_clients text[], p_windows jsonb,
  OUT client_name text, OUT allow_state text, OUT allow_at timestamptz, OUT windows jsonb)
LANGUAGE plpgsql VOLATILE
AS $fn$
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
$fn$;
COMMENT ON FUNCTION withdrawal_reserve_limits(text, text, text, text, timestamptz, text[], jsonb)
  IS 'The reserve''s destination and velocity reads, after withdrawal_reserve_open and in its '
     'transaction: the user''s client, the destination''s allowlist state (NULL: allowlisting '
     'off) with its instant, and per velocity window the count and amount already requested '
     '(client windows under the (client, asset) lock until commit). Writes nothing.';

REVOKE ALL ON FUNCTION withdrawal_reserve_limits(text, text, text, text, timestamptz, text[],
  jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION withdrawal_reserve_limits(text, text, text, text, timestamptz, text[],
  jsonb) TO custody_app;
