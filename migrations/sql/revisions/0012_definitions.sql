-- The SQL functions and triggers now live in one file each (sql/functions/, sql/triggers/),
-- applied after the revisions by the migration runner (migrations/definitions.py), which records
-- the hash of every file it applied here. This revision drops what no definition file defines
-- any more: the JSON front ledger_post_batch (no caller), the old body behind the
-- ledger_post_arrays front (the body is ledger_post_arrays itself again), and withdrawal_decimal
-- (outbox_decimal is that expression now). Nothing depends on them in the catalog (PL/pgSQL
-- bodies name functions only by text), and the definitions that called them are replaced in the
-- same transaction.

CREATE TABLE schema_definitions (
  path        text PRIMARY KEY CHECK (path ~ '^(functions|triggers|views)/[a-z0-9_]+\.sql$'),
  sha256      text NOT NULL CHECK (sha256 ~ '^[0-9a-f]{64}$'),
  applied_at  timestamptz NOT NULL DEFAULT clock_timestamp()
);
COMMENT ON TABLE schema_definitions IS
  'The definition files (sql/functions, sql/triggers, sql/views) as last applied: a file whose '
  'hash differs from its row is applied again by the next upgrade.';
REVOKE ALL ON schema_definitions FROM PUBLIC;

DROP FUNCTION IF EXISTS ledger_post_batch(jsonb);
DROP FUNCTION IF EXISTS ledger_post_arrays_body(text[], text[], text[], text[], timestamptz[],
  text[], text[], bigint[], boolean[], jsonb[], int[], bigint[], int[], numeric[], bigint[],
  bigint[]);
DROP FUNCTION IF EXISTS withdrawal_decimal(numeric, integer);
