-- deposits: the current state of each deposit (the facts live in deposit_events). Only its
-- current-state columns may change, every change needs a new history row, a deposit's ledger
-- transaction never changes once set and exists, and a deposit is never deleted.

-- Only the current-state columns of a deposit may change; its facts never do.
CREATE OR REPLACE FUNCTION deposits_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF (NEW.id, NEW.chain, NEW.tx_hash, NEW.position, NEW.token, NEW.from_address, NEW.to_address,
      NEW.value, NEW.tx_from, NEW.tx_nonce, NEW.user_id, NEW.asset_code, NEW.amount_minor,
      NEW.booking, NEW.booking_reason, NEW.address_kind, NEW.first_seen_at)
     IS DISTINCT FROM
     (OLD.id, OLD.chain, OLD.tx_hash, OLD.position, OLD.token, OLD.from_address, OLD.to_address,
      OLD.value, OLD.tx_from, OLD.tx_nonce, OLD.user_id, OLD.asset_code, OLD.amount_minor,
      OLD.booking, OLD.booking_reason, OLD.address_kind, OLD.first_seen_at) THEN
    RAISE EXCEPTION 'deposit % : only its current state may change', OLD.id
      USING ERRCODE = 'raise_exception';
  END IF;
  IF OLD.ledger_transaction_id IS NOT NULL
     AND NEW.ledger_transaction_id IS DISTINCT FROM OLD.ledger_transaction_id THEN
    RAISE EXCEPTION 'deposit % : its ledger transaction never changes', OLD.id
      USING ERRCODE = 'raise_exception';
  END IF;
  IF NEW.last_event_id <= OLD.last_event_id THEN
    RAISE EXCEPTION 'deposit % : a state change needs a new history row', OLD.id
      USING ERRCODE = 'raise_exception';
  END IF;
  RETURN NEW;
END
$$;

DROP TRIGGER IF EXISTS deposits_guard ON deposits;
CREATE TRIGGER deposits_guard BEFORE UPDATE ON deposits
  FOR EACH ROW EXECUTE FUNCTION deposits_guard();

DROP TRIGGER IF EXISTS deposits_no_delete ON deposits;
CREATE TRIGGER deposits_no_delete BEFORE DELETE ON deposits
  FOR EACH ROW EXECUTE FUNCTION ledger_refuse_change();
DROP TRIGGER IF EXISTS deposits_no_truncate ON deposits;
CREATE TRIGGER deposits_no_truncate BEFORE TRUNCATE ON deposits
  FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_change();

-- A deposit's ledger transaction exists (checked once per statement, at insert and at update).
-- This was a foreign key (until revision 0034); ledger transactions never change or go, so a
-- lookup is as strong, and it takes no share lock on them. Refusals are SQLSTATE 23503.
CREATE OR REPLACE FUNCTION deposits_refs_check() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  bad record;
BEGIN
  -- A primary-key lookup per row (a scalar subquery: never a scan, whatever plan is cached).
  SELECT n.id, n.ledger_transaction_id INTO bad
    FROM new_rows n
   WHERE n.ledger_transaction_id IS NOT NULL
     AND (SELECT t.id FROM ledger_transactions t WHERE t.id = n.ledger_transaction_id) IS NULL
   LIMIT 1;
  IF FOUND THEN
    RAISE EXCEPTION 'deposit % names ledger transaction %, which does not exist', bad.id,
      bad.ledger_transaction_id USING ERRCODE = 'foreign_key_violation';
  END IF;
  RETURN NULL;
END
$$;

-- Two triggers: a trigger with transition tables serves one event.
DROP TRIGGER IF EXISTS deposits_refs_insert ON deposits;
CREATE TRIGGER deposits_refs_insert AFTER INSERT ON deposits
  REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION deposits_refs_check();
DROP TRIGGER IF EXISTS deposits_refs_update ON deposits;
CREATE TRIGGER deposits_refs_update AFTER UPDATE ON deposits
  REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION deposits_refs_check();
