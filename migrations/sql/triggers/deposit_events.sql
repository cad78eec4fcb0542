-- deposit_events: the append-only deposit history. Every history row that concerns a client
-- (a deposit of a known user) writes its webhook event into outbox_events in the same database
-- transaction, whatever code path wrote the row: deposit.seen, deposit.reorged,
-- deposit.reincluded, deposit.credited, deposit.held, deposit.failed. The event id is derived from
-- the history row (evt_dep_<id>), so a receiver dedupes on it. Payload version 2
-- (api/schemas_events.py: DepositEventData).

-- Deposit history -> deposit.seen / reorged / reincluded / credited / held / failed.
-- Deposits of no user (unattributed, unknown address) concern no client: no event.
CREATE OR REPLACE FUNCTION outbox_deposit_event() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  kind text;
  d record;
BEGIN
  kind := CASE
    WHEN NEW.event = 'transfer_included' THEN 'deposit.seen'
    WHEN NEW.event = 'block_reorged_out' THEN 'deposit.reorged'
    WHEN NEW.event = 'transfer_reincluded' THEN 'deposit.reincluded'
    WHEN NEW.state = 'credited' THEN 'deposit.credited'
    WHEN NEW.state = 'held_for_review' THEN 'deposit.held'
    WHEN NEW.state = 'failed' THEN 'deposit.failed'
  END;
  IF kind IS NULL THEN
    RETURN NULL;
  END IF;
  SELECT dep.*, u.client_id, a.scale INTO d
    FROM deposits dep
    LEFT JOIN api_users u ON u.id = dep.user_id
    LEFT JOIN assets a ON a.code = dep.asset_code
   WHERE dep.id = NEW.deposit_id;
  IF d.user_id IS NULL THEN
    RETURN NULL;
  END IF;
  -- Payload version 2 (docs/webhooks.md): the deposit and the history row under the names of
  -- the API's Deposit and DepositEvent, ids as strings, the amount as {"minor", "decimal"}.
  INSERT INTO outbox_events (event_id, type, client_id, user_id, subject, payload, created_at,
                             version)
  VALUES ('evt_dep_' || NEW.id, kind, d.client_id, d.user_id, 'deposit:' || d.id,
          jsonb_build_object(
            'deposit', jsonb_build_object(
              'id', d.id::text, 'user_id', d.user_id, 'chain', d.chain,
              'tx_hash', d.tx_hash, 'position', d.position, 'token', d.token,
              'from_address', d.from_address, 'to_address', d.to_address,
              'asset', d.asset_code,
              'amount', outbox_amount(d.amount_minor, d.scale),
              'state', NEW.state, 'block_number', NEW.block_number,
              'confirmations', NEW.confirmations,
              'ledger_transaction_id', NEW.ledger_transaction_id::text),
            'history', jsonb_build_object(
              'id', NEW.id::text, 'event', NEW.event, 'state', NEW.state,
              'block_number', NEW.block_number, 'block_hash', NEW.block_hash,
              'confirmations', NEW.confirmations, 'rule', NEW.rule, 'reason', NEW.reason,
              'ledger_transaction_id', NEW.ledger_transaction_id::text,
              'observed_at', NEW.observed_at, 'recorded_at', NEW.recorded_at)),
          NEW.recorded_at, 2);
  RETURN NULL;
END
$$;

DROP TRIGGER IF EXISTS deposit_events_outbox ON deposit_events;
CREATE TRIGGER deposit_events_outbox AFTER INSERT ON deposit_events
  FOR EACH ROW EXECUTE FUNCTION outbox_deposit_event();

DROP TRIGGER IF EXISTS deposit_events_append_only ON deposit_events;
CREATE TRIGGER deposit_events_append_only BEFORE UPDATE OR DELETE ON deposit_events
  FOR EACH ROW EXECUTE FUNCTION ledger_refuse_change();
DROP TRIGGER IF EXISTS deposit_events_no_truncate ON deposit_events;
CREATE TRIGGER deposit_events_no_truncate BEFORE TRUNCATE ON deposit_events
  FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_change();
