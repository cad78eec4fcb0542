-- Running the engine as a service (issue 5, part B): the outbox of webhook events, each
-- client's webhook endpoint, one delivery per (event, endpoint) and the log of every attempt.
--
-- Events are written by AFTER INSERT triggers on the append-only histories (deposit_events,
-- withdrawal_events, deposit_cases): the outbox row is therefore committed in the same database
-- transaction as the change it describes, whatever code path wrote it, and rolled back with it.
-- Event ids are derived from the history row (evt_dep_<id>, evt_wd_<id>, evt_case_<id>), so
-- they are stable: a receiver dedupes on them.
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
CREATE TRIGGER outbox_events_append_only BEFORE UPDATE OR DELETE ON outbox_events
  FOR EACH ROW EXECUTE FUNCTION ledger_refuse_change();
CREATE TRIGGER outbox_events_no_truncate BEFORE TRUNCATE ON outbox_events
  FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_change();

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
CREATE TRIGGER webhook_attempts_append_only BEFORE UPDATE OR DELETE ON webhook_attempts
  FOR EACH ROW EXECUTE FUNCTION ledger_refuse_change();
CREATE TRIGGER webhook_attempts_no_truncate BEFORE TRUNCATE ON webhook_attempts
  FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_change();

-- A decimal rendering of minor units (exact: string arithmetic, no numeric division).
CREATE FUNCTION outbox_decimal(minor numeric, scale integer) RETURNS text
  LANGUAGE sql IMMUTABLE AS $$
  -- lpad truncates longer strings: pad only up to scale + 1 digits, never below the length.
  WITH p AS (SELECT lpad(abs(minor)::text, greatest(scale + 1, length(abs(minor)::text)), '0')
                    AS digits)
  SELECT CASE
    WHEN minor IS NULL OR scale IS NULL THEN NULL
    WHEN scale = 0 THEN minor::text
    ELSE (CASE WHEN minor < 0 THEN '-' ELSE '' END)
         || left(p.digits, length(p.digits) - scale)
         || coalesce('.' || nullif(rtrim(right(p.digits, scale), '0'), ''), '')
  END FROM p
$$;

-- Fan-out: a new event gets a delivery for its client's endpoint and, for alerts, for every
-- alert endpoint. Endpoints configured later get older events only through a replay.
CREATE FUNCTION outbox_fan_out() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO webhook_deliveries (event_id, endpoint_id, next_attempt_at)
  SELECT NEW.id, e.id, NEW.created_at
    FROM webhook_endpoints e
   WHERE e.disabled_at IS NULL
     AND (e.client_id = NEW.client_id OR (NEW.type LIKE 'alert.%' AND e.alerts))
  ON CONFLICT (event_id, endpoint_id) DO NOTHING;
  RETURN NULL;
END
$$;
CREATE TRIGGER outbox_events_fan_out AFTER INSERT ON outbox_events
  FOR EACH ROW EXECUTE FUNCTION outbox_fan_out();

-- Deposit history -> deposit.seen / reorged / reincluded / credited / held / failed.
-- Deposits of no user (unattributed, unknown address) concern no client: no event.
CREATE FUNCTION outbox_deposit_event() RETURNS trigger LANGUAGE plpgsql AS $$
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
  INSERT INTO outbox_events (event_id, type, client_id, user_id, subject, payload, created_at)
  VALUES ('evt_dep_' || NEW.id, kind, d.client_id, d.user_id, 'deposit:' || d.id,
          jsonb_build_object(
            'deposit_id', d.id::text, 'user_id', d.user_id, 'chain', d.chain,
            'tx_hash', d.tx_hash, 'position', d.position, 'token', d.token,
            'from', d.from_address, 'to', d.to_address, 'asset', d.asset_code,
            'amount_minor', d.amount_minor::text,
            'amount', outbox_decimal(d.amount_minor, d.scale),
            'state', NEW.state, 'event', NEW.event, 'reason', NEW.reason,
            'block_number', NEW.block_number::text, 'block_hash', NEW.block_hash,
            'confirmations', NEW.confirmations, 'rule', NEW.rule,
            'ledger_transaction_id', NEW.ledger_transaction_id::text,
            'observed_at', NEW.observed_at),
          NEW.recorded_at);
  RETURN NULL;
END
$$;
CREATE TRIGGER deposit_events_outbox AFTER INSERT ON deposit_events
  FOR EACH ROW EXECUTE FUNCTION outbox_deposit_event();

-- Withdrawal history -> withdrawal.<state> for the states a client acts on.
CREATE FUNCTION outbox_withdrawal_event() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  w record;
  hash text;
BEGIN
  IF NEW.to_state NOT IN ('pending_approval', 'reserved', 'broadcast', 'settled', 'released',
                          'unknown', 'reverted', 'canceled', 'rejected', 'written_off') THEN
    RETURN NULL;
  END IF;
  SELECT wd.*, u.client_id, a.scale INTO w
    FROM withdrawals wd
    LEFT JOIN api_users u ON u.id = wd.user_id
    LEFT JOIN assets a ON a.code = wd.asset_code
   WHERE wd.id = NEW.withdrawal_id;
  IF NEW.attempt_id IS NOT NULL THEN
    SELECT tx_hash INTO hash FROM withdrawal_attempts WHERE id = NEW.attempt_id;
  END IF;
  INSERT INTO outbox_events (event_id, type, client_id, user_id, subject, payload, created_at)
  VALUES ('evt_wd_' || NEW.id, 'withdrawal.' || NEW.to_state, w.client_id, w.user_id,
          'withdrawal:' || w.id,
          jsonb_build_object(
            'withdrawal_id', w.id::text, 'user_id', w.user_id, 'request_key', w.request_key,
            'chain', w.chain, 'asset', w.asset_code, 'token', w.token,
            'destination', w.destination,
            'amount_minor', w.amount_minor::text, 'amount', outbox_decimal(w.amount_minor, w.scale),
            'fee_minor', w.fee_minor::text, 'fee', outbox_decimal(w.fee_minor, w.scale),
            'fee_max_minor', w.fee_max_minor::text,
            'state', NEW.to_state, 'from_state', NEW.from_state, 'event', NEW.event,
            'reason', NEW.reason, 'tx_hash', hash,
            'ledger_transaction_id', NEW.ledger_transaction_id::text,
            'occurred_at', NEW.occurred_at),
          NEW.recorded_at);
  RETURN NULL;
END
$$;
CREATE TRIGGER withdrawal_events_outbox AFTER INSERT ON withdrawal_events
  FOR EACH ROW EXECUTE FUNCTION outbox_withdrawal_event();

-- Deposit cases (a credited deposit whose block stopped being canonical) -> alert.<kind>.
CREATE FUNCTION outbox_deposit_case() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  d record;
BEGIN
  SELECT dep.id, dep.user_id, dep.chain, dep.tx_hash, dep.position, dep.asset_code,
         dep.amount_minor, u.client_id
    INTO d
    FROM deposits dep LEFT JOIN api_users u ON u.id = dep.user_id
   WHERE dep.id = NEW.deposit_id;
  INSERT INTO outbox_events (event_id, type, client_id, user_id, subject, payload, created_at)
  VALUES ('evt_case_' || NEW.id, 'alert.' || NEW.kind, d.client_id, d.user_id,
          'deposit:' || d.id,
          jsonb_build_object(
            'case_id', NEW.id::text, 'kind', NEW.kind, 'deposit_id', d.id::text,
            'user_id', d.user_id, 'chain', d.chain, 'tx_hash', d.tx_hash,
            'position', d.position, 'asset', d.asset_code,
            'amount_minor', d.amount_minor::text,
            'ledger_transaction_id', NEW.ledger_transaction_id::text,
            'expected', NEW.expected, 'observed', NEW.observed, 'opened_at', NEW.opened_at),
          NEW.opened_at);
  RETURN NULL;
END
$$;
CREATE TRIGGER deposit_cases_outbox AFTER INSERT ON deposit_cases
  FOR EACH ROW EXECUTE FUNCTION outbox_deposit_case();

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
