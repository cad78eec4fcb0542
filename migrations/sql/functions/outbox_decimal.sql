-- outbox_decimal: the decimal rendering of an amount in minor units, as webhook payloads carry it
-- beside the minor units ("1.5" for 1500000 at scale 6; no trailing zeros, no exponent). Exact:
-- string arithmetic on the digits, no numeric division. NULL in, NULL out. One expression, so
-- that PostgreSQL inlines it into the calling query instead of planning a function call per
-- row. It must render exactly what ledger.model.format_amount renders (tests/api/test_outbox.py).

CREATE OR REPLACE FUNCTION outbox_decimal(minor numeric, scale integer) RETURNS text
  LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE
    WHEN minor IS NULL OR scale IS NULL THEN NULL
    WHEN scale = 0 THEN minor::text
    ELSE (CASE WHEN minor < 0 THEN '-' ELSE '' END)
         || coalesce(nullif(left(abs(minor)::text, -scale), ''), '0')
         || coalesce('.' || nullif(rtrim(right(repeat('0', scale) || abs(minor)::text, scale),
                                         '0'), ''), '')
  END
$$;
