-- withdrawal_events: the append-only withdrawal history. Its references are checked
-- (functions/withdrawal_refs_check.sql), and every row that moves a withdrawal into a state a
-- client acts on writes its withdrawal.<state> webhook event into outbox_events in the same
-- transaction, through functions/outbox_withdrawal_event_write.sql: the one place that builds
-- that event (a gas_float_low wait writes none). withdrawal_reserve_record calls the same function for the reserve's history row
-- and is skipped here (WHEN current_user <> 'custody_withdrawal_writer').

DROP TRIGGER IF EXISTS withdrawal_events_check_refs ON withdrawal_events;
CREATE TRIGGER withdrawal_events_check_refs AFTER INSERT ON withdrawal_events
  FOR EACH ROW WHEN (current_user <> 'custody_withdrawal_writer')
  EXECUTE FUNCTION withdrawal_refs_check();

CREATE OR REPLACE FUNCTION outbox_withdrawal_event() RETURNS trigger LANGUAGE plpgsql AS $$
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

DROP TRIGGER IF EXISTS withdrawal_events_outbox ON withdrawal_events;
CREATE TRIGGER withdrawal_events_outbox AFTER INSERT ON withdrawal_events
  FOR EACH ROW WHEN (current_user <> 'custody_withdrawal_writer')
  EXECUTE FUNCTION outbox_withdrawal_event();

DROP TRIGGER IF EXISTS withdrawal_events_append_only ON withdrawal_events;
CREATE TRIGGER withdrawal_events_append_only BEFORE UPDATE OR DELETE ON withdrawal_events
  FOR EACH ROW EXECUTE FUNCTION ledger_refuse_change();
DROP TRIGGER IF EXISTS withdrawal_events_no_truncate ON withdrawal_events;
CREATE TRIGGER withdrawal_events_no_truncate BEFORE TRUNCATE ON withdrawal_events
  FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_change();
