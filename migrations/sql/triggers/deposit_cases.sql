-- deposit_cases: durable cases about deposits (a credited deposit whose block stopped being
-- canonical). Append-only: a case is open until a row in deposit_case_resolutions names it.
-- Each case writes an alert.<kind> event into outbox_events in the same transaction
-- (evt_case_<id>).

-- Deposit cases (a credited deposit whose block stopped being canonical) -> alert.<kind>.
CREATE OR REPLACE FUNCTION outbox_deposit_case() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  d record;
BEGIN
  SELECT dep.id, dep.user_id, dep.chain, dep.tx_hash, dep.position, dep.asset_code,
         dep.amount_minor, u.client_id
    INTO d
    FROM deposits dep LEFT JOIN api_users u ON u.id = dep.user_id
   WHERE dep.id = NEW.deposit_id;
  INSERT INTO outbox_events (event_id, type, client_id, user_id, subject, payload, created_at)
  VALUES ('evt_case_' || NEW.id, 'alert.' || NEW.kind, d.client_id, d.user_id,
          'deposit:' || d.id,
          jsonb_build_object(
            'case_id', NEW.id::text, 'kind', NEW.kind, 'deposit_id', d.id::text,
            'user_id', d.user_id, 'chain', d.chain, 'tx_hash', d.tx_hash,
            'position', d.position, 'asset', d.asset_code,
            'amount_minor', d.amount_minor::text,
            'ledger_transaction_id', NEW.ledger_transaction_id::text,
            'expected', NEW.expected, 'observed', NEW.observed, 'opened_at', NEW.opened_at),
          NEW.opened_at);
  RETURN NULL;
END
$$;

DROP TRIGGER IF EXISTS deposit_cases_outbox ON deposit_cases;
CREATE TRIGGER deposit_cases_outbox AFTER INSERT ON deposit_cases
  FOR EACH ROW EXECUTE FUNCTION outbox_deposit_case();

DROP TRIGGER IF EXISTS deposit_cases_append_only ON deposit_cases;
CREATE TRIGGER deposit_cases_append_only BEFORE UPDATE OR DELETE ON deposit_cases
  FOR EACH ROW EXECUTE FUNCTION ledger_refuse_change();
