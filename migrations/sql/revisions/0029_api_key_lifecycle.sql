-- API key lifecycle (issue 19): a key may expire, records when it was last used (at most once
-- a minute, in the authentication statement: api.repository.clients) and who revoked it; a
-- revoked or expired key is refused by every process at its next request (no cache).
ALTER TABLE api_keys ADD COLUMN expires_at timestamptz;
ALTER TABLE api_keys ADD COLUMN last_used_at timestamptz;
ALTER TABLE api_keys ADD COLUMN revoked_by text CHECK (length(revoked_by) BETWEEN 1 AND 200);
ALTER TABLE api_keys ADD CONSTRAINT api_keys_revoked_by_revoked_check
  CHECK (revoked_by IS NULL OR revoked_at IS NOT NULL);
COMMENT ON COLUMN api_keys.expires_at IS
  'From this instant (the engine''s clock) the key is refused; NULL: it never expires.';
COMMENT ON COLUMN api_keys.last_used_at IS
  'Last successful authentication, to the minute (updated at most once a minute per key).';
COMMENT ON COLUMN api_keys.revoked_by IS 'Who revoked the key (an actor name, or cli:<user>).';
CREATE INDEX api_keys_client_idx ON api_keys (client_id, id);

-- Failed authentications per source address and fixed window (the database clock, as
-- api_rate_windows), shared by every API process: one row per address and window, written
-- only when an authentication fails.
CREATE UNLOGGED TABLE api_auth_failures (
  source        text NOT NULL CHECK (length(source) BETWEEN 1 AND 100),
  window_start  timestamptz NOT NULL,
  failures      integer NOT NULL CHECK (failures >= 1),
  PRIMARY KEY (source, window_start)
);
COMMENT ON TABLE api_auth_failures IS
  'Failed API authentications per client address and window (api.auth: over the limit, 429).';
REVOKE ALL ON api_auth_failures FROM PUBLIC;
GRANT SELECT, INSERT, UPDATE, DELETE ON api_auth_failures TO custody_app;
