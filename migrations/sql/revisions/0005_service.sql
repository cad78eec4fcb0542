-- Running the engine as a service (issue 5, part B): the outbox of webhook events, each
-- client's webhook endpoint, one delivery per (event, endpoint), the log of every attempt, and
-- the scheduler's run log. Events are written by triggers on the histories
-- (sql/triggers/deposit_events.sql, deposit_cases.sql, withdrawal_events.sql), in the same
-- database transaction as the change they describe; deliveries by the fan-out trigger of
-- outbox_events.
--
-- Advisory lock namespace 7351 (two-int form):
--   (7351, hashtext(job name))  one run of a scheduler job at a time, across processes.

CREATE TABLE webhook_endpoints (
  id           bigserial PRIMARY KEY,
  client_id    bigint NOT NULL UNIQUE REFERENCES api_clients (id),
  url          text NOT NULL CHECK (url ~ '^https?://[^[:space:]]+$' AND length(url) <= 2000),
  secret       text NOT NULL CHECK (length(secret) BETWEEN 32 AND 200),
  alerts       boolean NOT NULL DEFAULT false,
  created_at   timestamptz NOT NULL DEFAULT now(),
  updated_at   timestamptz NOT NULL DEFAULT now(),
  disabled_at  timestamptz
);
COMMENT ON TABLE webhook_endpoints IS
  'Where each API client receives its events (one URL per client) and the secret its '
  'deliveries are signed with (HMAC-SHA256 over timestamp and body).';
COMMENT ON COLUMN webhook_endpoints.secret IS
  'Signing secret shared with the client; needed in clear to sign, so only the application '
  'role may read it.';
COMMENT ON COLUMN webhook_endpoints.alerts IS
  'Also receive alert.* events (operators): alerts that concern no client go only here.';

CREATE TABLE outbox_events (
  id           bigserial PRIMARY KEY,
  event_id     text NOT NULL UNIQUE CHECK (event_id ~ '^evt_[a-z0-9_]{1,120}$'),
  type         text NOT NULL CHECK (type ~ '^(deposit|withdrawal|alert)\.[a-z_]{1,40}$'),
  client_id    bigint REFERENCES api_clients (id),
  user_id      text,
  subject      text NOT NULL,
  payload      jsonb NOT NULL CHECK (jsonb_typeof(payload) = 'object'),
  created_at   timestamptz NOT NULL DEFAULT clock_timestamp()
);
COMMENT ON TABLE outbox_events IS
  'Append-only outbox: one row per event, written in the transaction of the change it '
  'describes; delivered later, at least once, by the delivery job.';
COMMENT ON COLUMN outbox_events.event_id IS 'Stable id sent with every delivery (dedupe key).';
COMMENT ON COLUMN outbox_events.client_id IS
  'The client owning the user (api_users), NULL when no client owns it (then undelivered, '
  'except alerts, which go to alert endpoints).';
COMMENT ON COLUMN outbox_events.subject IS 'What it is about: deposit:<id>, withdrawal:<id>, ...';
COMMENT ON COLUMN outbox_events.payload IS 'The event data; amounts are strings.';
CREATE INDEX outbox_events_client_idx ON outbox_events (client_id, id);

CREATE TABLE webhook_deliveries (
  id               bigserial PRIMARY KEY,
  event_id         bigint NOT NULL REFERENCES outbox_events (id),
  endpoint_id      bigint NOT NULL REFERENCES webhook_endpoints (id),
  state            text NOT NULL DEFAULT 'pending'
                     CHECK (state IN ('pending', 'delivered', 'failed')),
  attempts         integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
  next_attempt_at  timestamptz NOT NULL,
  first_attempt_at timestamptz,
  last_status      smallint,
  last_error       text,
  delivered_at     timestamptz,
  created_at       timestamptz NOT NULL DEFAULT clock_timestamp(),
  UNIQUE (event_id, endpoint_id),
  CHECK ((state = 'delivered') = (delivered_at IS NOT NULL))
);
COMMENT ON TABLE webhook_deliveries IS
  'One delivery of an event to an endpoint: pending (due at next_attempt_at; a claim moves it '
  'a lease ahead), delivered (a 2xx answer) or failed (retries exhausted; replay revives it).';
COMMENT ON COLUMN webhook_deliveries.attempts IS 'Attempts since creation or the last replay.';
CREATE INDEX webhook_deliveries_due_idx ON webhook_deliveries (next_attempt_at)
  WHERE state = 'pending';

CREATE TABLE webhook_attempts (
  id               bigserial PRIMARY KEY,
  delivery_id      bigint NOT NULL REFERENCES webhook_deliveries (id),
  attempt_no       integer NOT NULL CHECK (attempt_no >= 0),
  outcome          text NOT NULL CHECK (outcome IN ('delivered', 'retry', 'failed', 'replayed')),
  status_code      smallint,
  error            text,
  duration_ms      integer,
  next_attempt_at  timestamptz,
  actor            text NOT NULL DEFAULT 'worker',
  at               timestamptz NOT NULL DEFAULT clock_timestamp()
);
COMMENT ON TABLE webhook_attempts IS
  'Append-only delivery log: every attempt (HTTP status or error, duration, when the next one '
  'is due) and every replay (who asked).';
CREATE INDEX webhook_attempts_delivery_idx ON webhook_attempts (delivery_id, id);
-- The scheduler's run log: one row per job run that took the job's advisory lock, written
-- before the lock is released (so the runs of one job never overlap in it). Kept a day.
CREATE TABLE job_runs (
  id           bigserial PRIMARY KEY,
  job          text NOT NULL CHECK (length(job) BETWEEN 1 AND 200),
  worker       text NOT NULL CHECK (length(worker) BETWEEN 1 AND 200),
  started_at   timestamptz NOT NULL,
  finished_at  timestamptz NOT NULL CHECK (finished_at >= started_at),
  outcome      text NOT NULL CHECK (outcome IN ('ok', 'error')),
  detail       text
);
COMMENT ON TABLE job_runs IS
  'Scheduler run log: which worker (host:pid) ran which job when, and how it ended; what '
  'operations read to see that reconciliation, delivery and the watchers are alive.';
CREATE INDEX job_runs_job_idx ON job_runs (job, started_at);
