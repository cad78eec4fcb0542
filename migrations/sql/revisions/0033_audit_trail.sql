-- The audit trail of every staff action (issue 19): the channel it came through (api, console,
-- cli), a refusal's reason (the problem's code and detail), and rows without an API key (the
-- command line: its actor is cli:<OS user>). The table stays append-only (its triggers, in
-- sql/triggers/api_audit.sql, and the application role's SELECT and INSERT only); the rows
-- written before this revision keep their meaning (channel api; a failure's code, if any, in
-- details.error).
ALTER TABLE api_audit ADD COLUMN channel text NOT NULL DEFAULT 'api'
  CHECK (channel IN ('api', 'console', 'cli'));
ALTER TABLE api_audit ADD COLUMN error_code text CHECK (length(error_code) BETWEEN 1 AND 100);
ALTER TABLE api_audit ADD COLUMN error_detail text CHECK (length(error_detail) <= 2000);
ALTER TABLE api_audit ALTER COLUMN client_id DROP NOT NULL;
ALTER TABLE api_audit ALTER COLUMN key_prefix DROP NOT NULL;
ALTER TABLE api_audit ALTER COLUMN scope DROP NOT NULL;
-- An API or console row names the key that acted; a command line row has none.
ALTER TABLE api_audit ADD CONSTRAINT api_audit_key_check CHECK (
  (channel = 'cli') = (client_id IS NULL AND key_prefix IS NULL AND scope IS NULL));
ALTER TABLE api_audit ADD CONSTRAINT api_audit_error_check CHECK (
  error_code IS NULL OR status >= 400);
COMMENT ON TABLE api_audit IS
  'Append-only audit trail: one row per staff action (admin, approver, support) through the '
  'API, the console or the command line, and per refusal of one: who, what, target, when, '
  'which request, the HTTP status it got and, for a refusal, why.';
COMMENT ON COLUMN api_audit.at IS 'When the row was written (the database clock).';
COMMENT ON COLUMN api_audit.actor IS
  'Who acted: the API client''s name (of its key), or cli:<OS user> on the command line.';
COMMENT ON COLUMN api_audit.client_id IS 'The acting key''s client; NULL on the command line.';
COMMENT ON COLUMN api_audit.key_prefix IS 'The acting key''s public prefix; NULL on the command line.';
COMMENT ON COLUMN api_audit.scope IS 'The acting key''s scope; NULL on the command line.';
COMMENT ON COLUMN api_audit.action IS
  'What was done: a stable dotted name (withdrawal.approval, api_key.revoke, user.read, ...).';
COMMENT ON COLUMN api_audit.target IS
  'What it was done to: name=value pairs, comma-separated, sorted by name ('''' for none).';
COMMENT ON COLUMN api_audit.request_id IS
  'The request''s X-Request-ID (API, console), or the id of one command line invocation.';
COMMENT ON COLUMN api_audit.status IS
  'The HTTP status answered (a command line: 200, or the status the API gives its error).';
COMMENT ON COLUMN api_audit.details IS 'Facts of the action (an Idempotency-Key, a replay, ...).';
COMMENT ON COLUMN api_audit.channel IS 'Where the action came from: api, console or cli.';
COMMENT ON COLUMN api_audit.error_code IS 'A refusal''s or failure''s stable code (the problem''s).';
COMMENT ON COLUMN api_audit.error_detail IS 'A refusal''s or failure''s detail (the problem''s).';
-- The trail is read newest first (id order, the primary key), by actor and from a time.
CREATE INDEX api_audit_actor_idx ON api_audit (actor, id);
CREATE INDEX api_audit_at_idx ON api_audit (at);
