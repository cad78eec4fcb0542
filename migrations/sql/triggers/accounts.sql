-- accounts: the chart of accounts. Append-only (an account's code, asset, type and flags never
-- change), and every new account gets its balance row in the same statement, so that every
-- account has exactly one balance row from the start (the write functions lock and update it).

CREATE OR REPLACE FUNCTION accounts_open_balance() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO account_balances (account_id, asset_id, debits_must_not_exceed_credits,
                                credits_must_not_exceed_debits)
  VALUES (NEW.id, NEW.asset_id, NEW.debits_must_not_exceed_credits,
          NEW.credits_must_not_exceed_debits);
  RETURN NULL;
END
$$;

DROP TRIGGER IF EXISTS accounts_open_balance ON accounts;
CREATE TRIGGER accounts_open_balance AFTER INSERT ON accounts
  FOR EACH ROW EXECUTE FUNCTION accounts_open_balance();

DROP TRIGGER IF EXISTS accounts_append_only ON accounts;
CREATE TRIGGER accounts_append_only BEFORE UPDATE OR DELETE ON accounts
  FOR EACH ROW EXECUTE FUNCTION ledger_refuse_change();
DROP TRIGGER IF EXISTS accounts_no_truncate ON accounts;
CREATE TRIGGER accounts_no_truncate BEFORE TRUNCATE ON accounts
  FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_change();
