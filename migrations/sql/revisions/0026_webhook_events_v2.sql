-- Webhooks that follow the API (issue 17): versioned event payloads, endpoints per event type,
-- signing-secret rotation with an overlap, several endpoints per client.
--
-- outbox_events.version: the payload's shape. 1: the first shape (flat, amounts as
-- amount_minor/amount strings), kept for the rows written before this revision so that they
-- still render byte for byte as they were delivered; 2: the API's shapes (docs/webhooks.md),
-- written by the triggers from now on. The delivered body carries "version" from 2 on.
ALTER TABLE outbox_events ADD COLUMN version smallint NOT NULL DEFAULT 1
  CHECK (version IN (1, 2));
ALTER TABLE outbox_events ALTER COLUMN version SET DEFAULT 2;
COMMENT ON COLUMN outbox_events.version IS
  'Payload version: 1 (before 0026: flat, amount_minor/amount), 2 (the API''s shapes: '
  'docs/webhooks.md). An event is always rendered in the version it was written in.';
CREATE INDEX outbox_events_created_idx ON outbox_events (created_at, id);

-- Several endpoints per client (each with its own event types); the CLI's `webhooks endpoint`
-- still sets the client's newest one.
ALTER TABLE webhook_endpoints DROP CONSTRAINT webhook_endpoints_client_id_key;
CREATE INDEX webhook_endpoints_client_idx ON webhook_endpoints (client_id, id);
ALTER TABLE webhook_endpoints
  ADD COLUMN event_types text[] CHECK (event_types IS NULL OR (cardinality(event_types)
    BETWEEN 1 AND 100)),
  ADD COLUMN previous_secret text CHECK (length(previous_secret) BETWEEN 32 AND 200),
  ADD COLUMN previous_secret_expires_at timestamptz,
  ADD COLUMN rotated_at timestamptz,
  ADD CONSTRAINT webhook_endpoints_previous_secret_pair
    CHECK ((previous_secret IS NULL) = (previous_secret_expires_at IS NULL));
COMMENT ON COLUMN webhook_endpoints.event_types IS
  'The event types this endpoint receives (NULL: all of them; alerts still need alerts).';
COMMENT ON COLUMN webhook_endpoints.previous_secret IS
  'The secret before the last rotation: deliveries are signed with both until '
  'previous_secret_expires_at (24 hours after the rotation).';
