-- withdrawal_reserve_open: the first of a reserve's three statements (withdrawals.service):
--   1. this function: the daily-limit lock, then (read after the lock) the request key, the
--      day's total, the ledger asset and the user's two accounts, and the new withdrawal's id;
--   2. the ledger's post of the reserve (ledger_post_one);
--   3. withdrawal_reserve_record: checks the reserve posting, inserts the withdrawal directly in
--      its reserved state and its history row, and writes the outbox event.
-- Nothing is written before the post, so a refusal (limit, funds) writes nothing at all.
--
-- The lock: (7321, hashtext(user_id || '/' || asset)), held until commit (advisory lock
-- namespace 7321, see revisions/0003_withdrawals.sql). Race prevented: two concurrent requests
-- of one user and asset each missing the other's amount from the day's total and together passing
-- the daily limit; and two requests with one key in one asset both creating a withdrawal (the
-- second one, waiting here, finds the first's row; another asset is caught by the unique key in
-- step 3). Every query after the PERFORM runs with a snapshot taken after the lock was granted
-- (a VOLATILE PL/pgSQL function takes a new snapshot per statement under READ COMMITTED), so it
-- sees every withdrawal of that user and asset committed before. Under REPEATABLE READ the
-- transaction's snapshot could predate the lock: refused. It runs with the caller's rights.

CREATE OR REPLACE FUNCTION withdrawal_reserve_open(
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

REVOKE ALL ON FUNCTION withdrawal_reserve_open(text, text, text, timestamptz, text, text)
  FROM PUBLIC;
GRANT EXECUTE ON FUNCTION withdrawal_reserve_open(text, text, text, timestamptz, text, text)
  TO custody_app;
