-- ledger_seals: append-only (a seal is a fact about the ledger at one point).
-- UPDATE, DELETE and TRUNCATE raise for every role, the owner included.

DROP TRIGGER IF EXISTS ledger_seals_append_only ON ledger_seals;
CREATE TRIGGER ledger_seals_append_only BEFORE UPDATE OR DELETE ON ledger_seals
  FOR EACH ROW EXECUTE FUNCTION ledger_refuse_change();
DROP TRIGGER IF EXISTS ledger_seals_no_truncate ON ledger_seals;
CREATE TRIGGER ledger_seals_no_truncate BEFORE TRUNCATE ON ledger_seals
  FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_change();
