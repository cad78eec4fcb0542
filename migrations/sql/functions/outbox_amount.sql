-- outbox_amount: an amount as webhook payloads (version 2) carry it, the API's shape:
-- {"minor": "<minor units>", "decimal": "<exact decimal>"}, the decimal with exactly `scale`
-- fraction digits ("30.000000" for 30000000 at scale 6), as ledger.model.amount_json renders it
-- (tests/api/test_events.py compares them). Exact: string operations on the digits. NULL when
-- the amount or the scale is unknown. One expression, so that PostgreSQL inlines it.

CREATE OR REPLACE FUNCTION outbox_amount(minor numeric, scale integer) RETURNS jsonb
  LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE
    WHEN minor IS NULL OR scale IS NULL THEN NULL
    WHEN scale = 0 THEN jsonb_build_object('minor', minor::text, 'decimal', minor::text)
    ELSE jsonb_build_object('minor', minor::text, 'decimal',
      (CASE WHEN minor < 0 THEN '-' ELSE '' END)
      || left(right(repeat('0', scale + 1) || abs(minor)::text,
                    greatest(length(abs(minor)::text), scale + 1)), -scale)
      || '.' || right(repeat('0', scale) || abs(minor)::text, scale))
  END
$$;
