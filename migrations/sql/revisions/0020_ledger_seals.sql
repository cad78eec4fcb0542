-- Ledger seals (issue 14, DESIGN.md section 4 "Tamper evidence"). A seal covers a contiguous
-- range of ledger transaction ids, every transaction committed in it, with a Merkle root over
-- their canonical form (docs/sealing.md) and the previous seal's hash; seal_hash chains them.
-- The sealer (ledger.seals.seal_once) reads its upper bound under the ledger write gate, so no
-- transaction with a lower id can commit after its range was sealed.
CREATE TABLE ledger_seals (
  id                       bigserial PRIMARY KEY,
  from_transaction_id      bigint NOT NULL CHECK (from_transaction_id >= 1),
  through_transaction_id   bigint NOT NULL,
  transactions_count       int NOT NULL CHECK (transactions_count >= 1),
  postings_count           int NOT NULL CHECK (postings_count >= 0),
  merkle_root              text NOT NULL CHECK (merkle_root ~ '^[0-9a-f]{64}$'),
  previous_hash            text NOT NULL CHECK (previous_hash ~ '^[0-9a-f]{64}$'),
  seal_hash                text NOT NULL UNIQUE CHECK (seal_hash ~ '^[0-9a-f]{64}$'),
  sealed_at                timestamptz NOT NULL,
  transaction_ids          bigint[] NOT NULL,
  leaf_prefixes            bytea NOT NULL,
  CHECK (through_transaction_id >= from_transaction_id),
  CHECK (cardinality(transaction_ids) = transactions_count),
  CHECK (length(leaf_prefixes) = 8 * transactions_count),
  -- Two sealers can never cover the same start twice, nor chain two seals to one predecessor.
  UNIQUE (from_transaction_id),
  UNIQUE (previous_hash)
);
COMMENT ON TABLE ledger_seals IS
  'Tamper evidence: each seal covers every ledger transaction with id in '
  '[from_transaction_id, through_transaction_id] (the range after the previous seal), with a '
  'Merkle root over their canonical form and seal_hash = SHA-256 over the previous seal''s '
  'hash, the range, the counts, the root and sealed_at (docs/sealing.md). Append-only.';
COMMENT ON COLUMN ledger_seals.transaction_ids IS
  'The ids of the sealed transactions in order: lets verify name a missing or inserted '
  'transaction. Diagnostic only: not covered by seal_hash (the root already is).';
COMMENT ON COLUMN ledger_seals.leaf_prefixes IS
  'The first 8 bytes of each leaf hash, in the order of transaction_ids: lets verify name a '
  'changed or reordered transaction. Diagnostic only, like transaction_ids.';

-- The link from a balance checkpoint to the newest seal when it was taken: a non-full verify
-- recomputes only the seals after it, starting from the seal hash stored here (checked
-- against the seal row).
ALTER TABLE balance_checkpoints ADD COLUMN seal_id bigint REFERENCES ledger_seals (id);
ALTER TABLE balance_checkpoints ADD COLUMN seal_hash text
  CHECK (seal_hash ~ '^[0-9a-f]{64}$');
ALTER TABLE balance_checkpoints ADD CHECK ((seal_id IS NULL) = (seal_hash IS NULL));
COMMENT ON COLUMN balance_checkpoints.seal_id IS
  'The newest ledger seal when the checkpoint was taken (NULL: none yet); seal_hash is its '
  'hash, so that changing that seal row afterwards is detected.';

REVOKE ALL ON ledger_seals FROM PUBLIC;
GRANT SELECT, INSERT ON ledger_seals TO custody_app;
GRANT USAGE, SELECT ON SEQUENCE ledger_seals_id_seq TO custody_app;
