-- deposit_cases: durable cases about deposits (a credited deposit whose block stopped being
-- canonical). Append-only: a case is open until a row in deposit_case_resolutions names it.
-- Each case writes an alert.<kind> event into outbox_events in the same transaction
-- (evt_case_<id>). Each new case is also a row of cases (the one list of every case), opened by
-- the BEFORE INSERT trigger below, whose id the deposit case takes.

-- Deposit cases (a credited deposit whose block stopped being canonical) -> alert.<kind>.
CREATE OR REPLACE FUNCTION outbox_deposit_case() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  d record;
BEGIN
  SELECT dep.id, dep.user_id, dep.chain, dep.tx_hash, dep.position, dep.asset_code,
         dep.amount_minor, u.client_id, a.scale
    INTO d
    FROM deposits dep LEFT JOIN api_users u ON u.id = dep.user_id
    LEFT JOIN assets a ON a.code = dep.asset_code
   WHERE dep.id = NEW.deposit_id;
  -- Payload version 2: the amount as {"minor", "decimal"} (api/schemas_events.py).
  INSERT INTO outbox_events (event_id, type, client_id, user_id, subject, payload, created_at,
                             version)
  VALUES ('evt_case_' || NEW.id, 'alert.' || NEW.kind, d.client_id, d.user_id,
          'deposit:' || d.id,
          jsonb_build_object(
            'case_id', NEW.id::text, 'kind', NEW.kind, 'deposit_id', d.id::text,
            'user_id', d.user_id, 'chain', d.chain, 'tx_hash', d.tx_hash,
            'position', d.position, 'asset', d.asset_code,
            'amount', outbox_amount(d.amount_minor, d.scale),
            'ledger_transaction_id', NEW.ledger_transaction_id::text,
            'expected', NEW.expected, 'observed', NEW.observed, 'opened_at', NEW.opened_at,
            -- What an operator does next (every alert says it: api.outbox.raise_alert).
            'next', CASE NEW.kind
              WHEN 'unattributed_own_address' THEN
                'two admins resolve it: custody cases resolve ' || NEW.id
                || ' --as capital|return|refund --by NAME --reason TEXT, then custody cases '
                || 'approve ' || NEW.id || ' --by NAME'
              ELSE
                'deposit ' || d.id || ' was credited in a block that is no longer canonical: '
                || 'custody timeline ' || d.chain || ' ' || d.tx_hash || ', then resolve case '
                || NEW.id || ' (reverse the credit if the deposit is gone)'
            END),
          NEW.opened_at, 2);
  RETURN NULL;
END
$$;

DROP TRIGGER IF EXISTS deposit_cases_outbox ON deposit_cases;
CREATE TRIGGER deposit_cases_outbox AFTER INSERT ON deposit_cases
  FOR EACH ROW EXECUTE FUNCTION outbox_deposit_case();

DROP TRIGGER IF EXISTS deposit_cases_append_only ON deposit_cases;
CREATE TRIGGER deposit_cases_append_only BEFORE UPDATE OR DELETE ON deposit_cases
  FOR EACH ROW EXECUTE FUNCTION ledger_refuse_change();

-- A new deposit case opens its row in cases (type = kind, subject deposit:<id>) and takes that
-- case's id, so one number names it in cases, in deposit_cases and in its alert. The same kind
-- and deposit again (the watcher sees the deep reorg again; its insert says ON CONFLICT DO
-- NOTHING) writes no second row: the open case is re-sighted and the insert skipped.
CREATE OR REPLACE FUNCTION cases_open_deposit_case() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  d record;
  known record;
BEGIN
  SELECT c.id, c.case_id INTO known FROM deposit_cases c
   WHERE c.kind = NEW.kind AND c.deposit_id = NEW.deposit_id;
  IF FOUND THEN
    UPDATE cases SET last_seen_at = greatest(last_seen_at, NEW.opened_at),
                     seen_count = seen_count + 1, evidence = jsonb_build_object(
                       'expected', NEW.expected, 'observed', NEW.observed)
     WHERE id = known.case_id AND status = 'open';
    RETURN NULL;
  END IF;
  SELECT dep.chain, dep.tx_hash, dep.position, dep.asset_code, dep.amount_minor INTO d
    FROM deposits dep WHERE dep.id = NEW.deposit_id;
  NEW.id := nextval('cases_id_seq');
  NEW.case_id := NEW.id;
  INSERT INTO cases (id, type, subject, refs, expected, observed, evidence, first_seen_at,
                     last_seen_at, opened_by)
  VALUES (NEW.id, NEW.kind, 'deposit:' || NEW.deposit_id,
          jsonb_strip_nulls(jsonb_build_object(
            'deposit_id', NEW.deposit_id::text, 'deposit_case_id', NEW.id::text,
            'ledger_transaction_id', NEW.ledger_transaction_id::text, 'chain', d.chain,
            'tx_hash', d.tx_hash, 'position', d.position, 'asset', d.asset_code)),
          d.amount_minor::text, NULL,
          jsonb_build_object('expected', NEW.expected, 'observed', NEW.observed),
          NEW.opened_at, NEW.opened_at, 'deposits.watcher');
  RETURN NEW;
END
$$;

DROP TRIGGER IF EXISTS deposit_cases_open_case ON deposit_cases;
CREATE TRIGGER deposit_cases_open_case BEFORE INSERT ON deposit_cases
  FOR EACH ROW EXECUTE FUNCTION cases_open_deposit_case();
DROP TRIGGER IF EXISTS deposit_cases_no_truncate ON deposit_cases;
CREATE TRIGGER deposit_cases_no_truncate BEFORE TRUNCATE ON deposit_cases
  FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_change();
