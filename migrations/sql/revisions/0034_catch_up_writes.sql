-- What a credited deposit costs the database, cut without changing what is stored or delivered
-- (issue 18, catch-up at indexer speed; bench/RESULTS.md, "Deposit catch-up").
--
-- * A deposit event (deposit.seen, deposit.credited, ...) names its history row
--   (outbox_events.deposit_event_id) and stores no payload: its payload (version 2) is rendered
--   from that row whenever the event is read (functions/outbox_payload.sql). Everything the
--   payload holds is fixed once the history row is written (a deposit's facts never change,
--   history rows are append-only, an asset's scale never changes), so every read renders the
--   same bytes a stored payload would hold. Building two payloads per credited deposit inside
--   the writing transaction was the largest part of a catch-up's database time. Events written
--   before this revision keep their stored payload; every other event stores one as before.
-- * The foreign keys deposit_events.deposit_id, deposit_events.ledger_transaction_id and
--   deposits.ledger_transaction_id become lookups, once per statement, at insert (and at update
--   of deposits): triggers/deposit_events.sql, triggers/deposits.sql. The parents never change
--   or go (deposits are never deleted, ledger rows are append-only), so a lookup is as strong;
--   it takes no share lock on the parent rows, which for a row inserted in the same transaction
--   meant writing a lock record per history row. Refusals stay SQLSTATE 23503.
-- * deposit_events_key_idx goes: no query reads the history by deposit key (every read goes by
--   deposit id, through deposit_events_deposit_idx), and it cost a wide entry per history row.

ALTER TABLE outbox_events ADD COLUMN deposit_event_id bigint;
ALTER TABLE outbox_events ALTER COLUMN payload DROP NOT NULL;
ALTER TABLE outbox_events ADD CONSTRAINT outbox_events_payload_source_check CHECK (
  (payload IS NULL) = (deposit_event_id IS NOT NULL)
  AND (deposit_event_id IS NULL OR (type LIKE 'deposit.%' AND version = 2
                                    AND event_id = 'evt_dep_' || deposit_event_id)));
COMMENT ON COLUMN outbox_events.payload IS
  'The event data; amounts are strings. NULL for a deposit event that names its history row '
  '(deposit_event_id): read every payload through outbox_payload(o).';
COMMENT ON COLUMN outbox_events.deposit_event_id IS
  'The deposit history row (deposit_events.id) this deposit event was written for; its payload '
  'is rendered from that row when read (outbox_payload). NULL for other events and for deposit '
  'events written before revision 0034 (they store their payload).';

ALTER TABLE deposit_events DROP CONSTRAINT deposit_events_deposit_id_fkey;
ALTER TABLE deposit_events DROP CONSTRAINT deposit_events_ledger_transaction_id_fkey;
ALTER TABLE deposits DROP CONSTRAINT deposits_ledger_transaction_id_fkey;

DROP INDEX deposit_events_key_idx;
