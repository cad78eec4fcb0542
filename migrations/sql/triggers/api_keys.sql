-- api_keys: a key's identity (client, prefix, digest, scope, creation) never changes, and a
-- revocation is final (revoked_at and revoked_by, once set, stay). expires_at and last_used_at
-- may change (last use is written at most once a minute by the authentication statement,
-- api.repository.clients; it names no guarded column, so the trigger is skipped for it).

CREATE OR REPLACE FUNCTION api_keys_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'api key %: its identity never changes and a revocation is final', OLD.id
    USING ERRCODE = 'integrity_constraint_violation';
END
$$;

DROP TRIGGER IF EXISTS api_keys_guard ON api_keys;
CREATE TRIGGER api_keys_guard
  BEFORE UPDATE OF id, client_id, prefix, secret_sha256, scope, created_at, revoked_at,
                   revoked_by
  ON api_keys
  FOR EACH ROW
  WHEN ((NEW.id, NEW.client_id, NEW.prefix, NEW.secret_sha256, NEW.scope, NEW.created_at)
          IS DISTINCT FROM
        (OLD.id, OLD.client_id, OLD.prefix, OLD.secret_sha256, OLD.scope, OLD.created_at)
        OR (OLD.revoked_at IS NOT NULL
            AND (NEW.revoked_at, NEW.revoked_by) IS DISTINCT FROM (OLD.revoked_at, OLD.revoked_by)))
  EXECUTE FUNCTION api_keys_guard();
DROP TRIGGER IF EXISTS api_keys_no_delete ON api_keys;
CREATE TRIGGER api_keys_no_delete BEFORE DELETE ON api_keys
  FOR EACH ROW EXECUTE FUNCTION ledger_refuse_change();
