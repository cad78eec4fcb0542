-- account_balances: the balance projection (a cache of the postings, updated in the same
-- transaction as the postings by ledger_post_arrays, ledger_post_one and rebuild-balances).
-- A balance row copies its account's flags when it is created, and its account, asset and flags
-- never change afterwards; only balance, version and updated_at do. The funds flags themselves
-- are CHECK constraints of the table (revisions/0001_ledger.sql).
--
-- account_balances_immutable names its columns (BEFORE UPDATE OF ...): PostgreSQL checks the
-- column list before it reads the WHEN clause, so the balance UPDATEs of every post, which never
-- name these columns, skip the trigger without compiling its WHEN clause. A column that an UPDATE
-- does not name keeps its old value unless another BEFORE UPDATE trigger assigns it in NEW, which
-- a column-list trigger would not see: this table has no such trigger, and
-- tests/ledger/test_db_guards.py pins its triggers so that adding one is a decision.

-- The balance row of an account carries its flags; they never change.
CREATE OR REPLACE FUNCTION account_balances_guard() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE a accounts%ROWTYPE;
BEGIN
  IF TG_OP = 'INSERT' THEN
    SELECT * INTO a FROM accounts WHERE id = NEW.account_id;
    NEW.debits_must_not_exceed_credits := a.debits_must_not_exceed_credits;
    NEW.credits_must_not_exceed_debits := a.credits_must_not_exceed_debits;
    RETURN NEW;
  END IF;
  -- UPDATE: only reached when the WHEN clause below saw an immutable column change.
  RAISE EXCEPTION 'account_balances: only balance and version may change';
END
$$;

DROP TRIGGER IF EXISTS account_balances_guard ON account_balances;
CREATE TRIGGER account_balances_guard BEFORE INSERT ON account_balances
  FOR EACH ROW EXECUTE FUNCTION account_balances_guard();

DROP TRIGGER IF EXISTS account_balances_immutable ON account_balances;
CREATE TRIGGER account_balances_immutable
  BEFORE UPDATE OF account_id, asset_id, debits_must_not_exceed_credits,
                   credits_must_not_exceed_debits
  ON account_balances
  FOR EACH ROW
  WHEN (NEW.account_id IS DISTINCT FROM OLD.account_id OR NEW.asset_id IS DISTINCT FROM OLD.asset_id
        OR NEW.debits_must_not_exceed_credits IS DISTINCT FROM OLD.debits_must_not_exceed_credits
        OR NEW.credits_must_not_exceed_debits IS DISTINCT FROM OLD.credits_must_not_exceed_debits)
  EXECUTE FUNCTION account_balances_guard();
