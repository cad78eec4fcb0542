-- gas_top_up_events: append-only. UPDATE, DELETE and TRUNCATE raise for every role, the owner included.

DROP TRIGGER IF EXISTS gas_top_up_events_append_only ON gas_top_up_events;
CREATE TRIGGER gas_top_up_events_append_only BEFORE UPDATE OR DELETE ON gas_top_up_events
  FOR EACH ROW EXECUTE FUNCTION ledger_refuse_change();
DROP TRIGGER IF EXISTS gas_top_up_events_no_truncate ON gas_top_up_events;
CREATE TRIGGER gas_top_up_events_no_truncate BEFORE TRUNCATE ON gas_top_up_events
  FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_change();
