-- cold_transfers: custody_app may write it only through movement_insert / movement_transition
-- (revision 0030_money_table_grants); its one column grant, UPDATE (id), exists so that it can
-- lock rows FOR UPDATE, and this trigger makes that grant change nothing.

DROP TRIGGER IF EXISTS cold_transfers_id_fixed ON cold_transfers;
CREATE TRIGGER cold_transfers_id_fixed BEFORE UPDATE OF id ON cold_transfers
  FOR EACH ROW WHEN (OLD.id IS DISTINCT FROM NEW.id)
  EXECUTE FUNCTION row_refuse_id_change();
