-- deposit_events: the append-only deposit history. Every history row that concerns a client
-- (a deposit of a known user) writes its webhook event into outbox_events in the same database
-- transaction, whatever code path wrote the row: deposit.seen, deposit.reorged,
-- deposit.reincluded, deposit.credited, deposit.held, deposit.failed. The event id is derived from
-- the history row (evt_dep_<id>), so a receiver dedupes on it. Payload version 2
-- (api/schemas_events.py: DepositEventData).

-- Deposit history -> deposit.seen / reorged / reincluded / credited / held / failed.
-- Deposits of no user (unattributed, unknown address) concern no client: no event.
-- One statement per INSERT (a transition table), not a row trigger: a catch-up appends thousands
-- of history rows in one statement, and a PL/pgSQL call with its own join per row was most of
-- the cost of writing them (bench/RESULTS.md, "Deposit catch-up"). The events are inserted in
-- history order, so that outbox ids follow the history rows' ids.
CREATE OR REPLACE FUNCTION outbox_deposit_event() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  -- Payload version 2 (docs/webhooks.md): the deposit and the history row under the names of
  -- the API's Deposit and DepositEvent, ids as strings, the amount as {"minor", "decimal"}.
  INSERT INTO outbox_events (event_id, type, client_id, user_id, subject, payload, created_at,
                             version)
  SELECT 'evt_dep_' || n.id, k.kind, u.client_id, d.user_id, 'deposit:' || d.id,
         jsonb_build_object(
           'deposit', jsonb_build_object(
             'id', d.id::text, 'user_id', d.user_id, 'chain', d.chain,
             'tx_hash', d.tx_hash, 'position', d.position, 'token', d.token,
             'from_address', d.from_address, 'to_address', d.to_address,
             'asset', d.asset_code,
             'amount', outbox_amount(d.amount_minor, a.scale),
             'state', n.state, 'block_number', n.block_number,
             'confirmations', n.confirmations,
             'ledger_transaction_id', n.ledger_transaction_id::text),
           'history', jsonb_build_object(
             'id', n.id::text, 'event', n.event, 'state', n.state,
             'block_number', n.block_number, 'block_hash', n.block_hash,
             'confirmations', n.confirmations, 'rule', n.rule, 'reason', n.reason,
             'ledger_transaction_id', n.ledger_transaction_id::text,
             'observed_at', n.observed_at, 'recorded_at', n.recorded_at)),
         n.recorded_at, 2
    FROM new_rows n
    CROSS JOIN LATERAL (SELECT CASE
      WHEN n.event = 'transfer_included' THEN 'deposit.seen'
      WHEN n.event = 'block_reorged_out' THEN 'deposit.reorged'
      WHEN n.event = 'transfer_reincluded' THEN 'deposit.reincluded'
      WHEN n.state = 'credited' THEN 'deposit.credited'
      WHEN n.state = 'held_for_review' THEN 'deposit.held'
      WHEN n.state = 'failed' THEN 'deposit.failed'
    END AS kind) k
    JOIN deposits d ON d.id = n.deposit_id
    LEFT JOIN api_users u ON u.id = d.user_id
    LEFT JOIN assets a ON a.code = d.asset_code
   WHERE k.kind IS NOT NULL AND d.user_id IS NOT NULL
   ORDER BY n.id;
  RETURN NULL;
END
$$;

DROP TRIGGER IF EXISTS deposit_events_outbox ON deposit_events;
CREATE TRIGGER deposit_events_outbox AFTER INSERT ON deposit_events
  REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION outbox_deposit_event();

DROP TRIGGER IF EXISTS deposit_events_append_only ON deposit_events;
CREATE TRIGGER deposit_events_append_only BEFORE UPDATE OR DELETE ON deposit_events
  FOR EACH ROW EXECUTE FUNCTION ledger_refuse_change();
DROP TRIGGER IF EXISTS deposit_events_no_truncate ON deposit_events;
CREATE TRIGGER deposit_events_no_truncate BEFORE TRUNCATE ON deposit_events
  FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_change();
