-- withdrawal_allowlist: an allowlisted destination (revisions/0031_destination_allowlists.sql).
-- Never deleted. An entry's identity (client, user, chain, address, label, key, who added it
-- and when, the delay) never changes; it is inserted listed, with active_at = added_at + the
-- delay; a removal is final; active_at only moves earlier, and only to an instant that two
-- different admins voted for (withdrawal_allowlist_votes). Each insert, removal and shortening
-- writes its webhook event (outbox_allowlist_event_write) in the same transaction.

CREATE OR REPLACE FUNCTION withdrawal_allowlist_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    IF NEW.removed_at IS NOT NULL
       OR NEW.active_at <> NEW.added_at + NEW.delay_s * interval '1 second' THEN
      RAISE EXCEPTION 'allowlist entry: inserted listed, active after its full delay'
        USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    RETURN NEW;
  END IF;
  IF (NEW.id, NEW.client_id, NEW.user_id, NEW.chain, NEW.address, NEW.label, NEW.request_key,
      NEW.added_by, NEW.added_at, NEW.delay_s)
     IS DISTINCT FROM
     (OLD.id, OLD.client_id, OLD.user_id, OLD.chain, OLD.address, OLD.label, OLD.request_key,
      OLD.added_by, OLD.added_at, OLD.delay_s) THEN
    RAISE EXCEPTION 'allowlist entry %: its identity never changes', OLD.id
      USING ERRCODE = 'integrity_constraint_violation';
  END IF;
  IF OLD.removed_at IS NOT NULL AND (NEW.removed_at, NEW.removed_by, NEW.active_at)
       IS DISTINCT FROM (OLD.removed_at, OLD.removed_by, OLD.active_at) THEN
    RAISE EXCEPTION 'allowlist entry %: a removal is final', OLD.id
      USING ERRCODE = 'integrity_constraint_violation';
  END IF;
  IF NEW.active_at IS DISTINCT FROM OLD.active_at THEN
    IF NEW.active_at > OLD.active_at
       OR (SELECT count(DISTINCT v.admin) FROM withdrawal_allowlist_votes v
            WHERE v.entry_id = OLD.id AND v.active_at = NEW.active_at) < 2 THEN
      RAISE EXCEPTION 'allowlist entry %: its activation moves only earlier, to an instant two '
                      'admins voted for', OLD.id
        USING ERRCODE = 'integrity_constraint_violation';
    END IF;
  END IF;
  RETURN NEW;
END
$$;

DROP TRIGGER IF EXISTS withdrawal_allowlist_guard ON withdrawal_allowlist;
CREATE TRIGGER withdrawal_allowlist_guard BEFORE INSERT OR UPDATE ON withdrawal_allowlist
  FOR EACH ROW EXECUTE FUNCTION withdrawal_allowlist_guard();
DROP TRIGGER IF EXISTS withdrawal_allowlist_no_delete ON withdrawal_allowlist;
CREATE TRIGGER withdrawal_allowlist_no_delete BEFORE DELETE ON withdrawal_allowlist
  FOR EACH ROW EXECUTE FUNCTION ledger_refuse_change();
DROP TRIGGER IF EXISTS withdrawal_allowlist_no_truncate ON withdrawal_allowlist;
CREATE TRIGGER withdrawal_allowlist_no_truncate BEFORE TRUNCATE ON withdrawal_allowlist
  FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_change();

CREATE OR REPLACE FUNCTION withdrawal_allowlist_events() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    PERFORM outbox_allowlist_event_write(NEW, 'allowlist.address_added', 'added');
  ELSIF NEW.removed_at IS NOT NULL AND OLD.removed_at IS NULL THEN
    PERFORM outbox_allowlist_event_write(NEW, 'allowlist.address_removed', 'removed');
  ELSIF NEW.active_at <> OLD.active_at THEN
    PERFORM outbox_allowlist_event_write(
      NEW, 'allowlist.activation_shortened',
      'shortened_' || (extract(epoch FROM NEW.active_at) * 1000000)::bigint);
  END IF;
  RETURN NULL;
END
$$;

DROP TRIGGER IF EXISTS withdrawal_allowlist_events ON withdrawal_allowlist;
CREATE TRIGGER withdrawal_allowlist_events AFTER INSERT OR UPDATE ON withdrawal_allowlist
  FOR EACH ROW EXECUTE FUNCTION withdrawal_allowlist_events();
