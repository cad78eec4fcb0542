-- The staff console (api.web): a session per sign-in with a staff API key. The browser holds a
-- signed cookie naming the session's random token; the database holds only the token's SHA-256,
-- so a copy of this table signs nobody in. A session ends when it expires, when its person
-- signs out (ended_at, set once), or when its key is revoked.

CREATE TABLE console_sessions (
    id bigserial PRIMARY KEY,
    token_digest text NOT NULL UNIQUE CHECK (token_digest ~ '^[0-9a-f]{64}$'),
    key_id bigint NOT NULL REFERENCES api_keys (id),
    csrf_token text NOT NULL CHECK (csrf_token ~ '^[A-Za-z0-9_-]{43}$'),
    created_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL,
    ended_at timestamptz,
    CHECK (expires_at > created_at),
    CHECK (ended_at IS NULL OR ended_at >= created_at)
);
CREATE INDEX console_sessions_key ON console_sessions (key_id);
COMMENT ON TABLE console_sessions IS
  'Staff console sessions: the SHA-256 of the cookie''s token, the API key signed in with, the '
  'CSRF token of its forms, and when it expires or ended. Rows are never deleted; only '
  'ended_at changes, once (triggers/console_sessions.sql).';

-- The key the session cookies are signed with (itsdangerous): one row, made by the first API
-- process that needs it, shared by every process of every host on this database.
CREATE TABLE console_secrets (
    id smallint PRIMARY KEY CHECK (id = 1),
    secret text NOT NULL CHECK (length(secret) >= 43),
    created_at timestamptz NOT NULL
);
COMMENT ON TABLE console_secrets IS
  'The signing key of the console''s session cookies (one row, never changed).';

REVOKE ALL ON console_sessions, console_secrets FROM PUBLIC;
GRANT SELECT, INSERT, UPDATE (ended_at) ON console_sessions TO custody_app;
GRANT SELECT, INSERT ON console_secrets TO custody_app;
GRANT USAGE ON SEQUENCE console_sessions_id_seq TO custody_app;

-- The console's search finds a user by a client's reference across clients.
CREATE INDEX api_users_reference ON api_users (reference) WHERE reference IS NOT NULL;
-- A user's withdrawals, newest first, a page at a time.
CREATE INDEX withdrawals_user_id_idx ON withdrawals (user_id, id);
