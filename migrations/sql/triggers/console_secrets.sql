-- console_secrets: the signing key of the console's cookies, written once, never changed or
-- deleted (a new key would sign every session out; no role may do it by accident).

DROP TRIGGER IF EXISTS console_secrets_append_only ON console_secrets;
CREATE TRIGGER console_secrets_append_only BEFORE UPDATE OR DELETE ON console_secrets
  FOR EACH ROW EXECUTE FUNCTION ledger_refuse_change();
DROP TRIGGER IF EXISTS console_secrets_no_truncate ON console_secrets;
CREATE TRIGGER console_secrets_no_truncate BEFORE TRUNCATE ON console_secrets
  FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_change();
