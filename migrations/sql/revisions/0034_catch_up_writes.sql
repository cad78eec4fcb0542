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
-- * A deposit settled with money (credited, suspense, capital) names its ledger transaction
--   (deposits_posted_check): what every writer did, now a rule the database holds. The watcher
--   relies on it when it writes a planned scan in one round trip (deposits/scans.py): a credit
--   the ledger refused leaves its deposit without a transaction, which this check refuses, so
--   the whole transaction fails before its COMMIT. NOT VALID: rows written before are not
--   read again (they were written so).
-- * The pattern checks of the rows every credited deposit writes say the same with a length
--   check instead of a counted repetition: '^0x[0-9a-f]{64}$' is '^0x[0-9a-f]+$' of length 66.
--   PostgreSQL's regular expressions run a counted repetition about ten times slower (5.4 us
--   against 0.56 us per transaction hash here), and a credited deposit checked five of them
--   (its hash and token, two outbox events' id and type, its ledger transaction's
--   fingerprint). The other tables keep theirs: they are not written per deposit.

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

ALTER TABLE deposits DROP CONSTRAINT deposits_tx_hash_check;
ALTER TABLE deposits ADD CONSTRAINT deposits_tx_hash_check
  CHECK (tx_hash ~ '^0x[0-9a-f]+$' AND length(tx_hash) = 66);
ALTER TABLE deposits DROP CONSTRAINT deposits_token_check;
ALTER TABLE deposits ADD CONSTRAINT deposits_token_check
  CHECK (token ~ '^0x[0-9a-f]+$' AND length(token) = 42);
ALTER TABLE outbox_events DROP CONSTRAINT outbox_events_event_id_check;
ALTER TABLE outbox_events ADD CONSTRAINT outbox_events_event_id_check
  CHECK (event_id ~ '^evt_[a-z0-9_]+$' AND length(event_id) <= 124);
ALTER TABLE outbox_events DROP CONSTRAINT outbox_events_type_check;
ALTER TABLE outbox_events ADD CONSTRAINT outbox_events_type_check
  CHECK (type ~ '^(deposit|withdrawal|alert|allowlist)\.[a-z_]+$'
         AND length(split_part(type, '.', 2)) <= 40);
ALTER TABLE ledger_transactions DROP CONSTRAINT ledger_transactions_fingerprint_check;
ALTER TABLE ledger_transactions ADD CONSTRAINT ledger_transactions_fingerprint_check
  CHECK (fingerprint ~ '^[0-9a-f]+$' AND length(fingerprint) = 64);

ALTER TABLE deposits ADD CONSTRAINT deposits_posted_check
  CHECK (state NOT IN ('credited', 'suspense', 'capital') OR ledger_transaction_id IS NOT NULL)
  NOT VALID;
