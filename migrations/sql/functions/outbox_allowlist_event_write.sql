-- outbox_allowlist_event_write: the webhook event of a change to an allowlisted destination
-- (triggers/withdrawal_allowlist.sql; allowlist.address_active: withdrawals.repository.allowlist
-- announce_active): event id evt_al_<entry id>_<suffix> (stable: a receiver
-- dedupes on it), type p_type, the entry's client, subject allowlist:<id>, and the payload,
-- version 2 (api/schemas_events.py: AllowlistEventData): the entry under the names of the
-- API's AllowlistEntry, ids as strings. It runs with its caller's rights.

CREATE OR REPLACE FUNCTION outbox_allowlist_event_write(
  a withdrawal_allowlist, p_type text, p_suffix text)
RETURNS void
LANGUAGE sql VOLATILE
AS $fn$
  INSERT INTO outbox_events (event_id, type, client_id, user_id, subject, payload, version)
  SELECT 'evt_al_' || a.id || '_' || p_suffix, p_type, a.client_id, a.user_id,
         'allowlist:' || a.id,
         jsonb_build_object('entry', jsonb_build_object(
           'id', a.id::text, 'client', c.name, 'user_id', a.user_id, 'chain', a.chain,
           'address', a.address, 'label', a.label, 'added_by', a.added_by,
           'added_at', a.added_at, 'active_at', a.active_at, 'removed_at', a.removed_at,
           'removed_by', a.removed_by)),
         2
    FROM api_clients c WHERE c.id = a.client_id
  ON CONFLICT (event_id) DO NOTHING;
$fn$;
