-- provider_inbox: append-only (custody provider notifications, stored before processing).
-- UPDATE and DELETE raise for every role, the owner included.

DROP TRIGGER IF EXISTS provider_inbox_append_only ON provider_inbox;
CREATE TRIGGER provider_inbox_append_only BEFORE UPDATE OR DELETE ON provider_inbox
  FOR EACH ROW EXECUTE FUNCTION ledger_refuse_change();
