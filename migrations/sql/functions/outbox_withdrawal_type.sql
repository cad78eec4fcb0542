-- outbox_withdrawal_type: the webhook event type of a withdrawal entering a state,
-- 'withdrawal.<state>' for the states a client acts on, NULL for the internal ones (signing,
-- signed, included, awaiting_write_off, held, requested), which send nothing (held is an
-- operator's matter: the payout is final on chain, its settlement waits for an admin; the
-- client hears withdrawal.settled or withdrawal.reverted when it is booked). The state names
-- are those of withdrawals.model.State (tests/migrations/test_rules.py checks them against it).

CREATE OR REPLACE FUNCTION outbox_withdrawal_type(p_state text) RETURNS text
  LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE WHEN p_state IN ('pending_approval', 'reserved', 'broadcast', 'settled', 'released',
                               'unknown', 'reverted', 'canceled', 'rejected', 'written_off')
              THEN 'withdrawal.' || p_state END
$$;
