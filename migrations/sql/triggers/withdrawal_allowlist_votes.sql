-- withdrawal_allowlist_votes: admins' votes to shorten one address's activation delay.
-- Append-only: UPDATE, DELETE and TRUNCATE raise for every role, the owner included.

DROP TRIGGER IF EXISTS withdrawal_allowlist_votes_append_only ON withdrawal_allowlist_votes;
CREATE TRIGGER withdrawal_allowlist_votes_append_only BEFORE UPDATE OR DELETE
  ON withdrawal_allowlist_votes
  FOR EACH ROW EXECUTE FUNCTION ledger_refuse_change();
DROP TRIGGER IF EXISTS withdrawal_allowlist_votes_no_truncate ON withdrawal_allowlist_votes;
CREATE TRIGGER withdrawal_allowlist_votes_no_truncate BEFORE TRUNCATE ON withdrawal_allowlist_votes
  FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_change();
