-- refill_requests: custody_app may write it only through movement_insert / movement_transition
-- (revision 0030_money_table_grants); its one column grant, UPDATE (id), exists so that it can
-- lock rows FOR UPDATE, and this trigger makes that grant change nothing.

DROP TRIGGER IF EXISTS refill_requests_id_fixed ON refill_requests;
CREATE TRIGGER refill_requests_id_fixed BEFORE UPDATE OF id ON refill_requests
  FOR EACH ROW WHEN (OLD.id IS DISTINCT FROM NEW.id)
  EXECUTE FUNCTION row_refuse_id_change();
