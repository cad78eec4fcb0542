-- console_secrets: the signing key of the console's cookies, written once, never deleted; an
-- update may re-wrap its sealing under a new secrets key (custody secrets rotate-key) but not
-- change the row's id or creation time (a new key would sign every session out; no role may
-- do it by accident: the application role may update secret_sealed alone).

DROP TRIGGER IF EXISTS console_secrets_append_only ON console_secrets;
CREATE TRIGGER console_secrets_append_only BEFORE DELETE ON console_secrets
  FOR EACH ROW EXECUTE FUNCTION ledger_refuse_change();
DROP TRIGGER IF EXISTS console_secrets_identity ON console_secrets;
CREATE TRIGGER console_secrets_identity BEFORE UPDATE ON console_secrets
  FOR EACH ROW WHEN (NEW.id IS DISTINCT FROM OLD.id OR NEW.created_at IS DISTINCT FROM
                     OLD.created_at)
  EXECUTE FUNCTION ledger_refuse_change();
DROP TRIGGER IF EXISTS console_secrets_no_truncate ON console_secrets;
CREATE TRIGGER console_secrets_no_truncate BEFORE TRUNCATE ON console_secrets
  FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_change();
