-- sweeps: custody_app may write it only through movement_insert / movement_transition
-- (revision 0030_money_table_grants); its one column grant, UPDATE (id), exists so that it can
-- lock rows FOR UPDATE, and this trigger makes that grant change nothing.

DROP TRIGGER IF EXISTS sweeps_id_fixed ON sweeps;
CREATE TRIGGER sweeps_id_fixed BEFORE UPDATE OF id ON sweeps
  FOR EACH ROW WHEN (OLD.id IS DISTINCT FROM NEW.id)
  EXECUTE FUNCTION row_refuse_id_change();
