-- withdrawal_cases: durable cases about withdrawals (one per hold: a final receipt whose
-- settlement could not be posted). Append-only: a case is open until a row in
-- withdrawal_case_resolutions names it. UPDATE, DELETE and TRUNCATE raise for every role, the
-- owner included. Each new case is also a row of cases (the BEFORE INSERT trigger below).

DROP TRIGGER IF EXISTS withdrawal_cases_append_only ON withdrawal_cases;
CREATE TRIGGER withdrawal_cases_append_only BEFORE UPDATE OR DELETE ON withdrawal_cases
  FOR EACH ROW EXECUTE FUNCTION ledger_refuse_change();
DROP TRIGGER IF EXISTS withdrawal_cases_no_truncate ON withdrawal_cases;
CREATE TRIGGER withdrawal_cases_no_truncate BEFORE TRUNCATE ON withdrawal_cases
  FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_change();

-- A new withdrawal case opens its row in cases (type = kind, subject withdrawal:<id>) and
-- takes that case's id, so one number names it in cases, in withdrawal_cases and in its
-- alert. Should an open case of the same kind and withdrawal exist already, the new row joins
-- it (a re-sighting) under an id of its own from the same sequence.
CREATE OR REPLACE FUNCTION cases_open_withdrawal_case() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  known bigint;
BEGIN
  NEW.id := nextval('cases_id_seq');
  SELECT id INTO known FROM cases
   WHERE type = NEW.kind AND subject = 'withdrawal:' || NEW.withdrawal_id AND status = 'open';
  IF FOUND THEN
    UPDATE cases SET last_seen_at = greatest(last_seen_at, NEW.opened_at),
                     seen_count = seen_count + 1,
                     evidence = NEW.evidence || jsonb_build_object('reason', NEW.reason)
     WHERE id = known;
    NEW.case_id := known;
    RETURN NEW;
  END IF;
  NEW.case_id := NEW.id;
  INSERT INTO cases (id, type, subject, refs, expected, observed, evidence, first_seen_at,
                     last_seen_at, opened_by)
  SELECT NEW.id, NEW.kind, 'withdrawal:' || NEW.withdrawal_id,
         jsonb_build_object('withdrawal_id', NEW.withdrawal_id::text,
                            'withdrawal_case_id', NEW.id::text, 'chain', w.chain),
         NULL, NULL, NEW.evidence || jsonb_build_object('reason', NEW.reason),
         NEW.opened_at, NEW.opened_at, NEW.opened_by
    FROM withdrawals w WHERE w.id = NEW.withdrawal_id;
  RETURN NEW;
END
$$;

DROP TRIGGER IF EXISTS withdrawal_cases_open_case ON withdrawal_cases;
CREATE TRIGGER withdrawal_cases_open_case BEFORE INSERT ON withdrawal_cases
  FOR EACH ROW EXECUTE FUNCTION cases_open_withdrawal_case();
