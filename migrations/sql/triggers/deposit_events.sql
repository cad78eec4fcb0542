-- deposit_events: the append-only deposit history. Every history row that concerns a client
-- (a deposit of a known user) writes its webhook event into outbox_events in the same database
-- transaction, whatever code path wrote the row: deposit.seen, deposit.reorged,
-- deposit.reincluded, deposit.credited, deposit.held, deposit.failed. The event id is derived from
-- the history row (evt_dep_<id>), so a receiver dedupes on it. Payload version 2
-- (api/schemas_events.py: DepositEventData), rendered from the history row when read.

-- Deposit history -> deposit.seen / reorged / reincluded / credited / held / failed.
-- Deposits of no user (unattributed, unknown address) concern no client: no event.
-- One statement per INSERT (a transition table), not a row trigger: a catch-up appends thousands
-- of history rows in one statement, and a PL/pgSQL call with its own join per row was most of
-- the cost of writing them (bench/RESULTS.md, "Deposit catch-up"). The events are inserted in
-- history order, so that outbox ids follow the history rows' ids. An event names its history row
-- and stores no payload: outbox_payload renders it from that row when the event is read
-- (functions/outbox_deposit_payload.sql; revision 0034 says why).
CREATE OR REPLACE FUNCTION outbox_deposit_event() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO outbox_events (event_id, type, client_id, user_id, subject, deposit_event_id,
                             created_at, version)
  SELECT 'evt_dep_' || n.id, k.kind,
         (SELECT u.client_id FROM api_users u WHERE u.id = d.user_id), d.user_id,
         'deposit:' || n.deposit_id, n.id, n.recorded_at, 2
    FROM new_rows n
    CROSS JOIN LATERAL (SELECT CASE
      WHEN n.event = 'transfer_included' THEN 'deposit.seen'
      WHEN n.event = 'block_reorged_out' THEN 'deposit.reorged'
      WHEN n.event = 'transfer_reincluded' THEN 'deposit.reincluded'
      WHEN n.state = 'credited' THEN 'deposit.credited'
      WHEN n.state = 'held_for_review' THEN 'deposit.held'
      WHEN n.state = 'failed' THEN 'deposit.failed'
    END AS kind) k
    -- A primary-key lookup per row (OFFSET 0 keeps it one, whatever the plan cached while the
    -- table was small), and the client by the user's key.
    CROSS JOIN LATERAL (SELECT x.user_id FROM deposits x WHERE x.id = n.deposit_id OFFSET 0) d
   WHERE k.kind IS NOT NULL AND d.user_id IS NOT NULL
   ORDER BY n.id;
  RETURN NULL;
END
$$;

-- The references of history rows (their deposit, their ledger transaction), checked once per
-- statement. These were foreign keys (until revision 0034); the parents never change or go
-- (deposits are never deleted, ledger rows are append-only), so a lookup at insert is as strong,
-- and it takes no share lock on the parent rows. Refusals are SQLSTATE 23503, as the keys' were.
CREATE OR REPLACE FUNCTION deposit_events_refs_check() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  bad record;
BEGIN
  -- One primary-key lookup per row in each parent (scalar subqueries, so that a plan cached
  -- while the tables were small never becomes a scan of them: measured here, a hashed subplan
  -- over deposits cost five times these lookups), only in WHERE; which parent is missing is
  -- looked up again for the one row refused.
  SELECT n.id, n.deposit_id, n.ledger_transaction_id INTO bad
    FROM new_rows n
   WHERE (SELECT d.id FROM deposits d WHERE d.id = n.deposit_id) IS NULL
      OR (n.ledger_transaction_id IS NOT NULL
          AND (SELECT t.id FROM ledger_transactions t WHERE t.id = n.ledger_transaction_id) IS NULL)
   LIMIT 1;
  IF NOT FOUND THEN
    RETURN NULL;
  END IF;
  IF NOT EXISTS (SELECT 1 FROM deposits d WHERE d.id = bad.deposit_id) THEN
    RAISE EXCEPTION 'deposit history row % names deposit %, which does not exist', bad.id,
      bad.deposit_id USING ERRCODE = 'foreign_key_violation';
  END IF;
  RAISE EXCEPTION 'deposit history row % names ledger transaction %, which does not exist',
    bad.id, bad.ledger_transaction_id USING ERRCODE = 'foreign_key_violation';
END
$$;

DROP TRIGGER IF EXISTS deposit_events_refs ON deposit_events;
CREATE TRIGGER deposit_events_refs AFTER INSERT ON deposit_events
  REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION deposit_events_refs_check();

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
