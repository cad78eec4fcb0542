-- Secrets at rest (issue 19), second half: every value is sealed now; the clear columns go.

ALTER TABLE webhook_endpoints DROP COLUMN secret, DROP COLUMN previous_secret;
ALTER TABLE webhook_endpoints ALTER COLUMN secret_sealed SET NOT NULL,
  ADD CONSTRAINT webhook_endpoints_secret_sealed_check
    CHECK (secret_sealed ~ '^cs1\.[0-9a-f]{16}\.[A-Za-z0-9_-]{80}\.[A-Za-z0-9_-]{38,}$'),
  ADD CONSTRAINT webhook_endpoints_previous_secret_sealed_check
    CHECK (previous_secret_sealed ~ '^cs1\.[0-9a-f]{16}\.[A-Za-z0-9_-]{80}\.[A-Za-z0-9_-]{38,}$'),
  ADD CONSTRAINT webhook_endpoints_previous_secret_pair
    CHECK ((previous_secret_sealed IS NULL) = (previous_secret_expires_at IS NULL));
COMMENT ON COLUMN webhook_endpoints.secret_sealed IS
  'The signing secret shared with the client, sealed (config.encryption: AES-256-GCM under a '
  'data key wrapped by CUSTODY_SECRETS_KEY, bound to this endpoint''s id): a dump cannot sign.';
COMMENT ON COLUMN webhook_endpoints.previous_secret_sealed IS
  'The secret before the last rotation, sealed as secret_sealed: deliveries are signed with '
  'both until previous_secret_expires_at (24 hours after the rotation).';

ALTER TABLE console_secrets DROP COLUMN secret;
ALTER TABLE console_secrets ALTER COLUMN secret_sealed SET NOT NULL,
  ADD CONSTRAINT console_secrets_secret_sealed_check
    CHECK (secret_sealed ~ '^cs1\.[0-9a-f]{16}\.[A-Za-z0-9_-]{80}\.[A-Za-z0-9_-]{38,}$');
COMMENT ON COLUMN console_secrets.secret_sealed IS
  'The cookie signing key, sealed (config.encryption, bound to this row): re-wrapped under a '
  'new CUSTODY_SECRETS_KEY by custody secrets rotate-key, its value never changes.';
COMMENT ON TABLE console_secrets IS
  'The signing key of the console''s session cookies (one row; its value never changes, its '
  'sealing is re-wrapped when the secrets key rotates).';
-- The re-wrap of custody secrets rotate-key (the application role) updates this column only.
GRANT UPDATE (secret_sealed) ON console_secrets TO custody_app;
