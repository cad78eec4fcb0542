-- The HTTP API (DESIGN.md section 7): API clients, the users each client created, API keys
-- (stored hashed), idempotency records of money-moving requests, the admin audit trail and
-- the fixed-window rate-limit counters.

CREATE TABLE api_clients (
  id          bigserial PRIMARY KEY,
  name        text NOT NULL UNIQUE CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$'),
  created_at  timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE api_clients IS
  'Principals of the API: an exchange backend (scope client) or a person or team (support, '
  'admin, approver). The name is the actor recorded in histories and the audit trail.';

CREATE TABLE api_keys (
  id             bigserial PRIMARY KEY,
  client_id      bigint NOT NULL REFERENCES api_clients (id),
  prefix         text NOT NULL UNIQUE CHECK (prefix ~ '^[0-9a-f]{12}$'),
  secret_sha256  text NOT NULL CHECK (secret_sha256 ~ '^[0-9a-f]{64}$'),
  scope          text NOT NULL CHECK (scope IN ('client', 'support', 'admin', 'approver')),
  created_at     timestamptz NOT NULL DEFAULT now(),
  revoked_at     timestamptz
);
COMMENT ON TABLE api_keys IS
  'API keys: the public prefix finds the row, the SHA-256 of the secret part proves the key. '
  'The key itself is shown once and never stored.';
COMMENT ON COLUMN api_keys.prefix IS 'Public part of the key (also shown in the audit trail).';
COMMENT ON COLUMN api_keys.secret_sha256 IS 'SHA-256 (hex) of the 256-bit random secret part.';

CREATE TABLE api_users (
  id          text PRIMARY KEY CHECK (id ~ '^[A-Za-z0-9_.-]{1,100}$'),
  client_id   bigint NOT NULL REFERENCES api_clients (id),
  reference   text CHECK (length(reference) BETWEEN 1 AND 200),
  created_at  timestamptz NOT NULL DEFAULT now(),
  UNIQUE (client_id, reference)
);
COMMENT ON TABLE api_users IS
  'Users created through the API; a user belongs to the client that created it and is '
  'invisible to every other client.';
COMMENT ON COLUMN api_users.reference IS 'The client''s own id for the user (optional).';
CREATE INDEX api_users_client_idx ON api_users (client_id, id);

CREATE TABLE api_idempotency (
  client_id        bigint NOT NULL REFERENCES api_clients (id),
  operation        text NOT NULL CHECK (length(operation) BETWEEN 1 AND 64),
  key              text NOT NULL CHECK (length(key) BETWEEN 1 AND 200),
  fingerprint      text NOT NULL CHECK (fingerprint ~ '^[0-9a-f]{64}$'),
  state            text NOT NULL CHECK (state IN ('in_progress', 'completed')),
  response_status  smallint CHECK (response_status BETWEEN 200 AND 599),
  -- The exact bytes of the first response (text, not jsonb: a replay must be byte-identical,
  -- and jsonb reorders keys).
  response_body    text,
  created_at       timestamptz NOT NULL DEFAULT now(),
  updated_at       timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (client_id, operation, key),
  CHECK ((state = 'completed') = (response_status IS NOT NULL AND response_body IS NOT NULL))
);
COMMENT ON TABLE api_idempotency IS
  'Idempotency-Key records of money-moving requests, per client and operation: the request '
  'fingerprint, in_progress while the first request runs, then its response. Kept at least 24 '
  'hours (the delete guard refuses younger completed rows).';
COMMENT ON COLUMN api_idempotency.fingerprint IS 'SHA-256 of the operation, target and body.';
COMMENT ON COLUMN api_idempotency.updated_at IS 'Last claim: a stale in_progress row may be taken over.';
CREATE INDEX api_idempotency_created_idx ON api_idempotency (created_at);

CREATE TABLE api_audit (
  id          bigserial PRIMARY KEY,
  at          timestamptz NOT NULL DEFAULT clock_timestamp(),
  actor       text NOT NULL,
  client_id   bigint NOT NULL REFERENCES api_clients (id),
  key_prefix  text NOT NULL,
  scope       text NOT NULL,
  action      text NOT NULL,
  target      text NOT NULL,
  request_id  text NOT NULL,
  status      smallint NOT NULL,
  details     jsonb NOT NULL DEFAULT '{}'::jsonb
);
COMMENT ON TABLE api_audit IS
  'Append-only audit trail: one row per admin or approver action (who, what, when, which '
  'request, the HTTP status it got).';

-- Counters are cheap to lose (a crash at worst forgives a window): UNLOGGED.
CREATE UNLOGGED TABLE api_rate_windows (
  key_id        bigint NOT NULL REFERENCES api_keys (id),
  window_start  timestamptz NOT NULL,
  requests      integer NOT NULL CHECK (requests >= 1),
  PRIMARY KEY (key_id, window_start)
);
COMMENT ON TABLE api_rate_windows IS
  'Fixed-window request counters per API key (one upsert per request; shared by every process).';
