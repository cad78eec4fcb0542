-- Proof of reserves (issue 15, docs/proof-of-reserves.md): each report taken, the addresses it
-- lists with what they held, the signatures proving we control them, and the liabilities tree
-- (every leaf, and the nodes from reserves.merkle.CHUNK_LEVEL up: a proof recomputes the rest
-- from its chunk's leaves). All append-only: a report is published once and never changes; a
-- signature imported later for an external signer is a row of its own.

CREATE TABLE reserve_reports (
  id                  bigserial PRIMARY KEY,
  taken_at            timestamptz NOT NULL,
  through_posting_id  bigint NOT NULL,
  known_at            timestamptz NOT NULL,
  root_hash           text NOT NULL CHECK (root_hash ~ '^[0-9a-f]{64}$'),
  depth               smallint NOT NULL CHECK (depth BETWEEN 0 AND 40),
  users_count         bigint NOT NULL CHECK (users_count >= 0),
  taken_by            text NOT NULL CHECK (length(taken_by) BETWEEN 1 AND 200),
  document            jsonb NOT NULL CHECK (jsonb_typeof(document) = 'object')
);
COMMENT ON TABLE reserve_reports IS
  'A proof-of-reserves report: the ledger point (every posting with id <= through_posting_id, '
  'which is every transaction committed before known_at), the liabilities tree''s root and '
  'shape, and the published document (format custody-por-report/1: chains and their blocks, '
  'liabilities, the figures per asset; the addresses are in reserve_report_addresses). '
  'Append-only.';

CREATE TABLE reserve_report_addresses (
  report_id  bigint NOT NULL REFERENCES reserve_reports (id),
  chain      text NOT NULL,
  address    text NOT NULL CHECK (address ~ '^0x[0-9a-f]{40}$'),
  kind       text NOT NULL CHECK (kind IN ('hot', 'cold', 'deposit')),
  holdings   jsonb NOT NULL CHECK (jsonb_typeof(holdings) = 'array'),
  signer     text NOT NULL CHECK (signer IN ('engine', 'external')),
  PRIMARY KEY (report_id, chain, address)
);
COMMENT ON TABLE reserve_report_addresses IS
  'Each of our addresses a report lists: its kind, what it held at the report''s block of its '
  'chain (holdings: asset, token, decimals, balance in the token''s units) and whether the '
  'engine signs for it (engine) or its key is elsewhere (external: its signature is imported). '
  'Append-only.';

CREATE TABLE reserve_signatures (
  report_id    bigint NOT NULL,
  chain        text NOT NULL,
  address      text NOT NULL,
  signature    text NOT NULL CHECK (signature ~ '^0x[0-9a-f]{130}$'),
  source       text NOT NULL CHECK (source IN ('engine', 'imported')),
  recorded_by  text NOT NULL CHECK (length(recorded_by) BETWEEN 1 AND 200),
  recorded_at  timestamptz NOT NULL,
  PRIMARY KEY (report_id, chain, address),
  FOREIGN KEY (report_id, chain, address)
    REFERENCES reserve_report_addresses (report_id, chain, address)
);
COMMENT ON TABLE reserve_signatures IS
  'The EIP-191 signature of an address over its ownership message for a report '
  '(reserves.ownership.ownership_message), checked to recover to the address before it is '
  'stored: signed by the engine when the report was taken, or imported for an external signer. '
  'One per address and report. Append-only.';

CREATE TABLE reserve_leaves (
  report_id  bigint NOT NULL REFERENCES reserve_reports (id),
  position   integer NOT NULL CHECK (position >= 0),
  user_id    text NOT NULL,
  salt       bytea NOT NULL CHECK (length(salt) = 32),
  -- The tree's range, enforced twice: a negative or overflowing value would hide liabilities.
  balances   numeric[] NOT NULL
             CHECK (0 <= ALL (balances) AND 340282366920938463463374607431768211456 > ALL (balances)),
  hash       bytea NOT NULL CHECK (length(hash) = 32),
  PRIMARY KEY (report_id, position),
  UNIQUE (report_id, user_id)
);
COMMENT ON TABLE reserve_leaves IS
  'The liabilities tree''s leaves of a report, in tree order (sorted by hash): the user, the '
  'salt (secret: given only in that user''s proof), the posted balance per asset in the '
  'report''s asset order (minor units), and the leaf hash. Append-only.';

CREATE TABLE reserve_nodes (
  report_id  bigint NOT NULL REFERENCES reserve_reports (id),
  level      smallint NOT NULL CHECK (level BETWEEN 0 AND 40),
  position   integer NOT NULL CHECK (position >= 0),
  hash       bytea NOT NULL CHECK (length(hash) = 32),
  sums       numeric[] NOT NULL
             CHECK (0 <= ALL (sums) AND 340282366920938463463374607431768211456 > ALL (sums)),
  PRIMARY KEY (report_id, level, position)
);
COMMENT ON TABLE reserve_nodes IS
  'The liabilities tree''s nodes of a report from reserves.merkle.CHUNK_LEVEL up to the root '
  '(the whole tree when it is shallower): a proof reads its chunk''s leaves and these. '
  'Append-only.';

REVOKE ALL ON reserve_reports, reserve_report_addresses, reserve_signatures, reserve_leaves,
  reserve_nodes FROM PUBLIC;
GRANT SELECT, INSERT ON reserve_reports, reserve_report_addresses, reserve_signatures,
  reserve_leaves, reserve_nodes TO custody_app;
GRANT USAGE ON SEQUENCE reserve_reports_id_seq TO custody_app;

-- Case types of the reserves checks: a user's negative balance refused by the tree's builder,
-- holdings below liabilities, and a difference between chain and ledger no movement explains.
ALTER TABLE cases DROP CONSTRAINT cases_type_check;
ALTER TABLE cases ADD CONSTRAINT cases_type_check CHECK (type IN (
    -- ledger.integrity.verify, one type per kind of finding (ledger_finding: a kind this
    -- list does not know yet, its kind in the evidence)
    'balance_drift', 'balance_missing', 'flag_violated', 'trial_balance', 'custody_mismatch',
    'transaction_unbalanced', 'transaction_empty', 'posting_over_reversed',
    'posting_over_closed', 'checkpoint_digest', 'posting_asset_mismatch', 'posting_orphan',
    -- the seal chain (ledger.seals)
    'seal_range', 'seal_chain_broken', 'seal_hash_mismatch', 'seal_root_mismatch', 'seal_counts',
    'seal_diagnosis_unavailable', 'seal_transaction_changed', 'seal_transaction_missing',
    'seal_transaction_inserted', 'seal_transactions_reordered', 'checkpoint_seal_link',
    'ledger_finding',
    -- deposit histories against the ledger
    'deposit_transaction_missing', 'deposit_transaction_extra', 'deposit_history_missing',
    -- items waiting too long
    'reserve_overdue', 'withdrawal_unknown_aged', 'withdrawal_held_aged',
    'deposit_review_aged',
    -- custody against the chain, custody provider statements
    'custody_chain_mismatch', 'provider_amount_mismatch', 'provider_missing_in_ledger',
    'provider_missing_at_provider',
    -- the cases that the deposit watcher and the withdrawal processor open
    'deep_reorg', 'unattributed_own_address', 'settlement_mismatch', 'ledger_refused',
    'invariant_broken',
    -- proof of reserves (reserves.service)
    'reserves_negative_balance', 'reserves_shortfall', 'reserves_difference_unexplained'));
