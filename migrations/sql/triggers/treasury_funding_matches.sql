-- treasury_funding_matches: append-only. UPDATE, DELETE and TRUNCATE raise for every role, the owner included.

DROP TRIGGER IF EXISTS treasury_funding_matches_append_only ON treasury_funding_matches;
CREATE TRIGGER treasury_funding_matches_append_only BEFORE UPDATE OR DELETE ON treasury_funding_matches
  FOR EACH ROW EXECUTE FUNCTION ledger_refuse_change();
DROP TRIGGER IF EXISTS treasury_funding_matches_no_truncate ON treasury_funding_matches;
CREATE TRIGGER treasury_funding_matches_no_truncate BEFORE TRUNCATE ON treasury_funding_matches
  FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_change();
