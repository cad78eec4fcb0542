-- sweep_events: append-only. UPDATE, DELETE and TRUNCATE raise for every role, the owner included.

DROP TRIGGER IF EXISTS sweep_events_append_only ON sweep_events;
CREATE TRIGGER sweep_events_append_only BEFORE UPDATE OR DELETE ON sweep_events
  FOR EACH ROW EXECUTE FUNCTION ledger_refuse_change();
DROP TRIGGER IF EXISTS sweep_events_no_truncate ON sweep_events;
CREATE TRIGGER sweep_events_no_truncate BEFORE TRUNCATE ON sweep_events
  FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_change();
