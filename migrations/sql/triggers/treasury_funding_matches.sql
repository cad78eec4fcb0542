-- treasury_funding_matches: append-only (UPDATE, DELETE and TRUNCATE raise for every role, the owner included), and every match consistent with the funding, the deposit and the posting it names.

DROP TRIGGER IF EXISTS treasury_funding_matches_append_only ON treasury_funding_matches;
CREATE TRIGGER treasury_funding_matches_append_only BEFORE UPDATE OR DELETE ON treasury_funding_matches
  FOR EACH ROW EXECUTE FUNCTION ledger_refuse_change();
DROP TRIGGER IF EXISTS treasury_funding_matches_no_truncate ON treasury_funding_matches;
CREATE TRIGGER treasury_funding_matches_no_truncate BEFORE TRUNCATE ON treasury_funding_matches
  FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_change();

-- A match is consistent with what it matches, for every role (the database refuses what the
-- service refuses, issue 19): the deposit is a transfer to one of our own (hot or cold)
-- addresses of exactly the funding's chain, asset, amount and sender, and the ledger
-- transaction is that deposit's own posting (its key), a treasury_funding naming this funding.
-- A statement of its own making cannot mark a funding as brought, or a deposit as capital,
-- with anything else.
CREATE OR REPLACE FUNCTION treasury_funding_matches_check() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  f treasury_fundings%ROWTYPE;
  d deposits%ROWTYPE;
BEGIN
  SELECT * INTO f FROM treasury_fundings WHERE id = NEW.funding_id;
  SELECT * INTO d FROM deposits WHERE id = NEW.deposit_id;
  IF f.id IS NULL OR d.id IS NULL THEN
    RAISE EXCEPTION 'treasury funding match: funding % or deposit % does not exist',
      NEW.funding_id, NEW.deposit_id USING ERRCODE = 'foreign_key_violation';
  END IF;
  IF d.address_kind NOT IN ('hot', 'cold') OR d.chain <> f.chain
     OR d.asset_code IS DISTINCT FROM f.asset_code
     OR d.amount_minor IS DISTINCT FROM f.amount_minor OR lower(d.from_address) <> f.from_address
  THEN
    RAISE EXCEPTION 'treasury funding match: deposit % is not the transfer funding % declares',
      d.id, f.id USING ERRCODE = 'check_violation';
  END IF;
  IF NOT EXISTS (
    SELECT 1 FROM ledger_transactions t
    WHERE t.id = NEW.ledger_transaction_id AND t.kind = 'treasury_funding'
      AND t.idempotency_key = 'deposit:' || d.chain || ':' || lower(d.tx_hash) || ':' || d.position
      AND t.metadata->>'funding_id' = f.id::text
  ) THEN
    RAISE EXCEPTION 'treasury funding match: ledger transaction % is not the treasury_funding '
      'posting of deposit % for funding %', NEW.ledger_transaction_id, d.id, f.id
      USING ERRCODE = 'check_violation';
  END IF;
  RETURN NEW;
END
$$;

DROP TRIGGER IF EXISTS treasury_funding_matches_check ON treasury_funding_matches;
CREATE TRIGGER treasury_funding_matches_check BEFORE INSERT ON treasury_funding_matches
  FOR EACH ROW EXECUTE FUNCTION treasury_funding_matches_check();
