-- Destination allowlists (issue 19): per API client, optionally per user, the withdrawal
-- destinations of each chain. With allowlisting on for a client (configuration:
-- [withdrawals.allowlist]), a withdrawal to an address that is not listed, not active yet or
-- removed is refused by the reserve (withdrawal_reserve_limits, in the reserve's transaction).
--
-- Append-only in spirit: a row is never deleted; a removal sets removed_at and removed_by and
-- is final; the only other change is an earlier active_at, which the guard trigger
-- (triggers/withdrawal_allowlist.sql) accepts only when two different admins voted for exactly
-- that instant (withdrawal_allowlist_votes, append-only). custody_app may INSERT rows and
-- UPDATE only those three columns (no DELETE, no TRUNCATE).

CREATE TABLE withdrawal_allowlist (
  id           bigserial PRIMARY KEY,
  client_id    bigint NOT NULL REFERENCES api_clients (id),
  user_id      text REFERENCES api_users (id),
  chain        text NOT NULL CHECK (chain ~ '^[a-z][a-z0-9_-]{0,31}$'),
  address      text NOT NULL CHECK (address ~ '^0x[0-9a-f]{40}$'),
  label        text NOT NULL CHECK (length(label) BETWEEN 1 AND 200),
  request_key  text NOT NULL CHECK (length(request_key) BETWEEN 1 AND 200),
  added_by     text NOT NULL CHECK (length(added_by) BETWEEN 1 AND 200),
  added_at     timestamptz NOT NULL,
  delay_s      integer NOT NULL CHECK (delay_s >= 0),
  active_at    timestamptz NOT NULL,
  removed_at   timestamptz,
  removed_by   text CHECK (length(removed_by) BETWEEN 1 AND 200),
  UNIQUE (client_id, request_key),
  CHECK ((removed_at IS NULL) = (removed_by IS NULL)),
  CHECK (active_at >= added_at AND active_at <= added_at + delay_s * interval '1 second')
);
COMMENT ON TABLE withdrawal_allowlist IS
  'Withdrawal destinations a client allows, per chain (user_id NULL: for all its users). '
  'Usable from active_at; removal (removed_at) is immediate and final. Never deleted.';
COMMENT ON COLUMN withdrawal_allowlist.user_id IS
  'The one user of the client the address is for; NULL: every user of the client.';
COMMENT ON COLUMN withdrawal_allowlist.address IS 'Destination address, lower-case.';
COMMENT ON COLUMN withdrawal_allowlist.request_key IS
  'The Idempotency-Key (or CLI key) the address was added with: a retry adds nothing.';
COMMENT ON COLUMN withdrawal_allowlist.added_at IS 'When it was added (the engine''s clock).';
COMMENT ON COLUMN withdrawal_allowlist.delay_s IS 'The activation delay configured then.';
COMMENT ON COLUMN withdrawal_allowlist.active_at IS
  'From this instant withdrawals to it are accepted: added_at + delay_s, or earlier when two '
  'admins shortened it (withdrawal_allowlist_votes).';
COMMENT ON COLUMN withdrawal_allowlist.removed_at IS 'When it was removed (final); NULL: listed.';
COMMENT ON COLUMN withdrawal_allowlist.removed_by IS 'Who removed it.';
-- One live entry per (client, user or all users, chain, address).
CREATE UNIQUE INDEX withdrawal_allowlist_live_key ON withdrawal_allowlist
  (client_id, coalesce(user_id, ''), chain, address) WHERE removed_at IS NULL;
CREATE INDEX withdrawal_allowlist_lookup_idx ON withdrawal_allowlist (client_id, chain, address);
-- The activations job (allowlist.address_active): live entries by activation.
CREATE INDEX withdrawal_allowlist_active_idx ON withdrawal_allowlist (active_at)
  WHERE removed_at IS NULL;

CREATE TABLE withdrawal_allowlist_votes (
  id          bigserial PRIMARY KEY,
  entry_id    bigint NOT NULL REFERENCES withdrawal_allowlist (id),
  admin       text NOT NULL CHECK (length(admin) BETWEEN 1 AND 200),
  active_at   timestamptz NOT NULL,
  reason      text NOT NULL CHECK (length(reason) BETWEEN 1 AND 1000),
  voted_at    timestamptz NOT NULL,
  UNIQUE (entry_id, admin, active_at)
);
COMMENT ON TABLE withdrawal_allowlist_votes IS
  'Admins'' votes to make one allowlisted address active earlier, at active_at: applied when '
  'two different admins voted for the same instant. Append-only.';
COMMENT ON COLUMN withdrawal_allowlist_votes.admin IS 'The admin''s actor name.';
COMMENT ON COLUMN withdrawal_allowlist_votes.active_at IS 'The activation instant voted for.';
COMMENT ON COLUMN withdrawal_allowlist_votes.voted_at IS 'When (the engine''s clock).';

REVOKE ALL ON withdrawal_allowlist, withdrawal_allowlist_votes FROM PUBLIC;
GRANT SELECT, INSERT ON withdrawal_allowlist, withdrawal_allowlist_votes TO custody_app;
GRANT UPDATE (removed_at, removed_by, active_at) ON withdrawal_allowlist TO custody_app;
GRANT USAGE, SELECT ON SEQUENCE withdrawal_allowlist_id_seq, withdrawal_allowlist_votes_id_seq
  TO custody_app;

-- Webhook events of the allowlist (allowlist.address_added, .address_removed,
-- .activation_shortened: triggers/withdrawal_allowlist.sql; .address_active: the activations
-- job, withdrawals.service.announce_activations).
ALTER TABLE outbox_events DROP CONSTRAINT outbox_events_type_check;
ALTER TABLE outbox_events ADD CONSTRAINT outbox_events_type_check
  CHECK (type ~ '^(deposit|withdrawal|alert|allowlist)\.[a-z_]{1,40}$');
