-- cases: every case of the engine. A case is opened open (seen once, no resolution); after
-- that only two changes are accepted, for every role, the owner included:
--   a re-sighting of an open case: last_seen_at (never backwards), seen_count (+1), observed
--     and evidence change, nothing else;
--   its one-time resolution: status 'resolved' with resolution, resolved_by, resolved_at and
--     optionally the fixing ledger transaction, nothing else.
-- A resolved case never changes again; DELETE and TRUNCATE raise.

CREATE OR REPLACE FUNCTION cases_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    IF NEW.status <> 'open' OR NEW.seen_count <> 1 OR NEW.last_seen_at <> NEW.first_seen_at THEN
      RAISE EXCEPTION 'a case is opened open and seen once (case type %, subject %)',
        NEW.type, NEW.subject USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
  END IF;
  IF TG_OP = 'DELETE' THEN
    RAISE EXCEPTION 'table cases is append-only: DELETE refused'
      USING ERRCODE = 'raise_exception', HINT = 'resolve the case instead';
  END IF;
  IF (NEW.id, NEW.type, NEW.subject, NEW.refs, NEW.expected, NEW.first_seen_at, NEW.opened_by)
     IS DISTINCT FROM
     (OLD.id, OLD.type, OLD.subject, OLD.refs, OLD.expected, OLD.first_seen_at, OLD.opened_by)
  THEN
    RAISE EXCEPTION 'case %: what a case is about never changes', OLD.id
      USING ERRCODE = 'raise_exception';
  END IF;
  IF OLD.status = 'open' AND NEW.status = 'open' THEN
    IF NEW.last_seen_at < OLD.last_seen_at OR NEW.seen_count <> OLD.seen_count + 1 THEN
      RAISE EXCEPTION 'case %: a re-sighting moves last_seen_at forward and counts one more',
        OLD.id USING ERRCODE = 'raise_exception';
    END IF;
    RETURN NEW;
  END IF;
  IF OLD.status = 'open' AND NEW.status = 'resolved' THEN
    IF (NEW.last_seen_at, NEW.seen_count, NEW.observed, NEW.evidence)
       IS DISTINCT FROM (OLD.last_seen_at, OLD.seen_count, OLD.observed, OLD.evidence) THEN
      RAISE EXCEPTION 'case %: a resolution changes only the resolution', OLD.id
        USING ERRCODE = 'raise_exception';
    END IF;
    RETURN NEW;
  END IF;
  RAISE EXCEPTION 'case % is resolved: it never changes again', OLD.id
    USING ERRCODE = 'raise_exception';
END
$$;

DROP TRIGGER IF EXISTS cases_guard ON cases;
CREATE TRIGGER cases_guard BEFORE INSERT OR UPDATE OR DELETE ON cases
  FOR EACH ROW EXECUTE FUNCTION cases_guard();
DROP TRIGGER IF EXISTS cases_no_truncate ON cases;
CREATE TRIGGER cases_no_truncate BEFORE TRUNCATE ON cases
  FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_change();
