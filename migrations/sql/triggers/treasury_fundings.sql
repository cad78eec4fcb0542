-- treasury_fundings: append-only. UPDATE, DELETE and TRUNCATE raise for every role, the owner included.

DROP TRIGGER IF EXISTS treasury_fundings_append_only ON treasury_fundings;
CREATE TRIGGER treasury_fundings_append_only BEFORE UPDATE OR DELETE ON treasury_fundings
  FOR EACH ROW EXECUTE FUNCTION ledger_refuse_change();
DROP TRIGGER IF EXISTS treasury_fundings_no_truncate ON treasury_fundings;
CREATE TRIGGER treasury_fundings_no_truncate BEFORE TRUNCATE ON treasury_fundings
  FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_change();
