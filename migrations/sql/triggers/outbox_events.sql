-- outbox_events: webhook events, written in the same transaction as the change they describe
-- (triggers/deposit_events.sql, triggers/deposit_cases.sql, triggers/withdrawal_events.sql,
-- withdrawal_reserve_record, and api.outbox for alerts). Append-only. Fan-out: a new event gets a
-- delivery for its client's endpoint and, for alerts, for every alert endpoint; endpoints
-- configured later get older events only through a replay. An endpoint subscribed to chosen
-- event types (event_types) gets only those. One statement per INSERT (a transition table): a
-- catch-up writes thousands of events in one statement (triggers/deposit_events.sql).

CREATE OR REPLACE FUNCTION outbox_fan_out() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO webhook_deliveries (event_id, endpoint_id, next_attempt_at)
  SELECT n.id, e.id, n.created_at
    FROM new_rows n
    JOIN webhook_endpoints e
      ON e.client_id = n.client_id OR (n.type LIKE 'alert.%' AND e.alerts)
   WHERE (n.client_id IS NOT NULL OR n.type LIKE 'alert.%')
     AND e.disabled_at IS NULL
     AND (e.event_types IS NULL OR n.type = ANY (e.event_types))
   ORDER BY n.id, e.id
  ON CONFLICT (event_id, endpoint_id) DO NOTHING;
  RETURN NULL;
END
$$;

DROP TRIGGER IF EXISTS outbox_events_fan_out ON outbox_events;
CREATE TRIGGER outbox_events_fan_out AFTER INSERT ON outbox_events
  REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION outbox_fan_out();

DROP TRIGGER IF EXISTS outbox_events_append_only ON outbox_events;
CREATE TRIGGER outbox_events_append_only BEFORE UPDATE OR DELETE ON outbox_events
  FOR EACH ROW EXECUTE FUNCTION ledger_refuse_change();
DROP TRIGGER IF EXISTS outbox_events_no_truncate ON outbox_events;
CREATE TRIGGER outbox_events_no_truncate BEFORE TRUNCATE ON outbox_events
  FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_change();
