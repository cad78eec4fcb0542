-- console_sessions: only ended_at changes, once (a sign-out); rows are never deleted.

CREATE OR REPLACE FUNCTION console_session_end_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF OLD.ended_at IS NOT NULL OR NEW.ended_at IS NULL
     OR (NEW.id, NEW.token_digest, NEW.key_id, NEW.csrf_token, NEW.created_at, NEW.expires_at)
        IS DISTINCT FROM
        (OLD.id, OLD.token_digest, OLD.key_id, OLD.csrf_token, OLD.created_at, OLD.expires_at)
  THEN
    RAISE EXCEPTION 'console session %: only ended_at may be set, once', OLD.id
      USING ERRCODE = 'integrity_constraint_violation';
  END IF;
  RETURN NEW;
END
$$;

DROP TRIGGER IF EXISTS console_sessions_end_only ON console_sessions;
CREATE TRIGGER console_sessions_end_only BEFORE UPDATE ON console_sessions
  FOR EACH ROW EXECUTE FUNCTION console_session_end_only();
DROP TRIGGER IF EXISTS console_sessions_no_delete ON console_sessions;
CREATE TRIGGER console_sessions_no_delete BEFORE DELETE ON console_sessions
  FOR EACH ROW EXECUTE FUNCTION ledger_refuse_change();
DROP TRIGGER IF EXISTS console_sessions_no_truncate ON console_sessions;
CREATE TRIGGER console_sessions_no_truncate BEFORE TRUNCATE ON console_sessions
  FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_change();
