-- Custody provider statements (issue 14): each imported statement file and its per-transfer
-- records, append-only. A record is unique per (provider, reference): importing the same file
-- again, or another statement that repeats a record unchanged, adds nothing; a repeated
-- reference with other content is refused by the importer (reconcile.provider). Matching and
-- its outcomes are cases (table cases), not stored here. Formats: docs/provider-statements.md.

CREATE TABLE provider_statements (
  id            bigserial PRIMARY KEY,
  provider      text NOT NULL CHECK (provider ~ '^[a-z0-9][a-z0-9._-]{0,63}$'),
  format        text NOT NULL CHECK (format IN ('csv', 'json')),
  sha256        text NOT NULL CHECK (sha256 ~ '^[0-9a-f]{64}$'),
  file_name     text CHECK (length(file_name) BETWEEN 1 AND 500),
  period_start  timestamptz NOT NULL,
  period_end    timestamptz NOT NULL,
  record_count  integer NOT NULL CHECK (record_count >= 1),
  imported_by   text NOT NULL CHECK (length(imported_by) BETWEEN 1 AND 200),
  imported_at   timestamptz NOT NULL,
  CHECK (period_end > period_start),
  UNIQUE (provider, sha256),
  UNIQUE (id, provider)
);
COMMENT ON TABLE provider_statements IS
  'A custody provider statement file as imported: its provider, the period it covers '
  '[period_start, period_end), the SHA-256 of its bytes (the same file is one statement) and '
  'how many records it held. Append-only.';

CREATE TABLE provider_statement_records (
  id            bigserial PRIMARY KEY,
  statement_id  bigint NOT NULL,
  provider      text NOT NULL,
  reference     text NOT NULL CHECK (length(reference) BETWEEN 1 AND 200),
  direction     text NOT NULL CHECK (direction IN ('in', 'out')),
  asset         text NOT NULL CHECK (asset ~ '^[A-Z0-9][A-Z0-9._-]{0,31}$'),
  amount_minor  money128 NOT NULL CHECK (amount_minor > 0),
  occurred_at   timestamptz NOT NULL,
  chain         text,
  tx_hash       text CHECK (tx_hash ~ '^0x[0-9a-f]{64}$'),
  UNIQUE (provider, reference),
  -- A record belongs to a statement of its own provider.
  FOREIGN KEY (statement_id, provider) REFERENCES provider_statements (id, provider)
);
COMMENT ON TABLE provider_statement_records IS
  'One transfer as a custody provider reported it, stored by the first statement that held it '
  '(amount_minor in the ledger asset''s minor units; direction in: into our custody). Unique '
  'per (provider, reference): the reference is how the provider and we name the same transfer '
  '(for a deposit it attested: <chain>:<tx_hash>:<position>). Append-only.';
CREATE INDEX provider_statement_records_period_idx
  ON provider_statement_records (provider, occurred_at);

-- Our ledger transactions that reference a provider: deposit credits it attested (the
-- attestation in the metadata) and the fixes of provider cases (metadata provider and
-- provider_reference), looked up by provider without scanning the ledger.
CREATE INDEX ledger_transactions_provider_idx ON ledger_transactions ((coalesce(
    metadata ->> 'provider', metadata -> 'evidence' -> 'attestation' ->> 'provider')))
  WHERE metadata ? 'provider' OR metadata -> 'evidence' -> 'attestation' ? 'provider';

REVOKE ALL ON provider_statements, provider_statement_records FROM PUBLIC;
GRANT SELECT, INSERT ON provider_statements, provider_statement_records TO custody_app;
GRANT USAGE ON SEQUENCE provider_statements_id_seq, provider_statement_records_id_seq
  TO custody_app;
