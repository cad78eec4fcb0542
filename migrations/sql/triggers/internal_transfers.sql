-- internal_transfers: append-only. UPDATE, DELETE and TRUNCATE raise for every role, the owner included.

DROP TRIGGER IF EXISTS internal_transfers_append_only ON internal_transfers;
CREATE TRIGGER internal_transfers_append_only BEFORE UPDATE OR DELETE ON internal_transfers
  FOR EACH ROW EXECUTE FUNCTION ledger_refuse_change();
DROP TRIGGER IF EXISTS internal_transfers_no_truncate ON internal_transfers;
CREATE TRIGGER internal_transfers_no_truncate BEFORE TRUNCATE ON internal_transfers
  FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_change();
