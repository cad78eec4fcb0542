-- ledger_array_ok: an array the write functions (ledger_post_arrays, ledger_post_one) may read
-- by position: NULL, empty, or one-dimensional and numbered from 1. A raw caller's
-- '[0:1]={...}' would otherwise make the positional reads and the unnests of ledger_post_arrays
-- disagree about which line is which (a real bug once: a line's account escaped the asset
-- check).

CREATE OR REPLACE FUNCTION ledger_array_ok(a anyarray) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog
AS $$ SELECT a IS NULL OR cardinality(a) = 0 OR (array_ndims(a) = 1 AND array_lower(a, 1) = 1) $$;
