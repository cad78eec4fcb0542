-- api_idempotency: completed idempotency records are kept at least 24 hours; an in_progress
-- record may be deleted at any time (the request failed and its key is released so that the
-- client can retry).

CREATE OR REPLACE FUNCTION api_idempotency_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF OLD.state = 'completed' AND OLD.created_at > now() - interval '24 hours' THEN
    RAISE EXCEPTION 'idempotency record % is younger than 24 hours', OLD.key
      USING ERRCODE = 'check_violation';
  END IF;
  RETURN OLD;
END
$$;

DROP TRIGGER IF EXISTS api_idempotency_keep_24h ON api_idempotency;
CREATE TRIGGER api_idempotency_keep_24h BEFORE DELETE ON api_idempotency
  FOR EACH ROW EXECUTE FUNCTION api_idempotency_guard();
