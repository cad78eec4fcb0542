-- outbox_payload: an outbox event's payload, whoever wrote it. Deposit events written since
-- revision 0034 name their history row (deposit_event_id) and store no payload: it is rendered
-- from that row (outbox_deposit_payload); every other event stores its payload. Every read of a
-- payload goes through this function (api/repository/outbox.py).

CREATE OR REPLACE FUNCTION outbox_payload(o outbox_events) RETURNS jsonb
  LANGUAGE sql STABLE PARALLEL SAFE AS $$
  SELECT CASE WHEN o.deposit_event_id IS NULL THEN o.payload
              ELSE outbox_deposit_payload(o.deposit_event_id) END
$$;
