-- gas_top_ups: custody_app may write it only through movement_insert / movement_transition
-- (revision 0030_money_table_grants); its one column grant, UPDATE (id), exists so that it can
-- lock rows FOR UPDATE, and this trigger makes that grant change nothing.

DROP TRIGGER IF EXISTS gas_top_ups_id_fixed ON gas_top_ups;
CREATE TRIGGER gas_top_ups_id_fixed BEFORE UPDATE OF id ON gas_top_ups
  FOR EACH ROW WHEN (OLD.id IS DISTINCT FROM NEW.id)
  EXECUTE FUNCTION row_refuse_id_change();
