-- Secrets at rest (issue 19), first half: the sealed columns beside the clear ones. The
-- webhook signing secrets and the console's cookie key were stored in clear, so that a dump
-- of the database could sign webhooks and forge console sessions. They are now sealed
-- (config.encryption: a data key per value, wrapped under CUSTODY_SECRETS_KEY, which is never
-- in the database). The revision's Python step seals the existing values, then
-- 0032_sealed_secrets_finish.sql drops the clear columns: no code reads a clear secret after
-- this revision, and none can be written.

ALTER TABLE webhook_endpoints ADD COLUMN secret_sealed text,
  ADD COLUMN previous_secret_sealed text;

ALTER TABLE console_secrets ADD COLUMN secret_sealed text;
-- Re-created by triggers/console_secrets.sql after the revisions (a re-wrap under a new key
-- updates the row; its secret, id and creation time still never change).
DROP TRIGGER IF EXISTS console_secrets_append_only ON console_secrets;
