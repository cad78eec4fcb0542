-- outbox_withdrawal_event_write: the one place that builds a withdrawal's webhook event. Given
-- the withdrawal row, the history row that moved it and the hash of the attempt that history row
-- names (or NULL), it writes the outbox row: event id evt_wd_<history id> (stable, a receiver
-- dedupes on it), type from outbox_withdrawal_type (nothing for internal states), the user's
-- client, subject withdrawal:<id>, and the payload, version 2 (api/schemas_events.py:
-- WithdrawalEventData). Callers: the withdrawal_events trigger (triggers/withdrawal_events.sql) for
-- every writer of the history, and withdrawal_reserve_record for the reserve's history row. It
-- runs with its caller's rights.

CREATE OR REPLACE FUNCTION outbox_withdrawal_event_write(
  w withdrawals, e withdrawal_events, p_tx_hash text)
RETURNS void
LANGUAGE plpgsql VOLATILE
AS $fn$
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
$fn$;
