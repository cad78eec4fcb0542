-- ledger_periods: closing a period. The insert takes the write gate EXCLUSIVE (it waits for
-- every posting in flight, so that "as known at close" is final), stamps closed_at, and refuses a
-- period that does not end after the last one or that ends in the future. Append-only: a closed
-- period is never reopened.

CREATE OR REPLACE FUNCTION ledger_periods_before_insert() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE latest timestamptz;
BEGIN
  -- Exclusive: wait for every posting in flight, so "as known at close" is final.
  PERFORM pg_advisory_xact_lock(7301, 1);
  NEW.closed_at := clock_timestamp();
  SELECT max(ends_at) INTO latest FROM ledger_periods;
  IF latest IS NOT NULL AND NEW.ends_at <= latest THEN
    RAISE EXCEPTION 'period already closed through %', latest USING ERRCODE = 'check_violation';
  END IF;
  IF NEW.ends_at > NEW.closed_at THEN
    RAISE EXCEPTION 'cannot close a period ending in the future (%)', NEW.ends_at
      USING ERRCODE = 'check_violation';
  END IF;
  RETURN NEW;
END
$$;

DROP TRIGGER IF EXISTS ledger_periods_before_insert ON ledger_periods;
CREATE TRIGGER ledger_periods_before_insert BEFORE INSERT ON ledger_periods
  FOR EACH ROW EXECUTE FUNCTION ledger_periods_before_insert();

DROP TRIGGER IF EXISTS ledger_periods_append_only ON ledger_periods;
CREATE TRIGGER ledger_periods_append_only BEFORE UPDATE OR DELETE ON ledger_periods
  FOR EACH ROW EXECUTE FUNCTION ledger_refuse_change();
DROP TRIGGER IF EXISTS ledger_periods_no_truncate ON ledger_periods;
CREATE TRIGGER ledger_periods_no_truncate BEFORE TRUNCATE ON ledger_periods
  FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_change();
