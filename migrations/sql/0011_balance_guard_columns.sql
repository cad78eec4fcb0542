-- 0011: the guard against changing a balance row's account, asset or flags fires only for an
-- UPDATE that names one of those columns.
--
-- account_balances_immutable (0001) was a BEFORE UPDATE trigger on every column with a WHEN
-- clause comparing the four columns. PostgreSQL reads a trigger's WHEN clause from its stored
-- form, plans and compiles it again for every statement, so every balance UPDATE (two per
-- transfer in ledger_post_one, one per batch in ledger_post_arrays, rebuild-balances) paid for it
-- though it never names those columns: 15-30 us of server CPU per single post, about a tenth
-- of ledger_post_one's own time without the commit (bench/RESULTS.md, "Fifth pass").
--
-- Same protection: a column an UPDATE does not name keeps its old value (no other BEFORE
-- UPDATE trigger on the table could change it), and an UPDATE that names one still meets the
-- same WHEN clause and the same refusal. PostgreSQL checks the column list before the WHEN
-- clause, so the others skip the trigger without reading it.

DROP TRIGGER account_balances_immutable ON account_balances;
CREATE TRIGGER account_balances_immutable
  BEFORE UPDATE OF account_id, asset_id, debits_must_not_exceed_credits,
                   credits_must_not_exceed_debits
  ON account_balances
  FOR EACH ROW
  WHEN (NEW.account_id IS DISTINCT FROM OLD.account_id OR NEW.asset_id IS DISTINCT FROM OLD.asset_id
        OR NEW.debits_must_not_exceed_credits IS DISTINCT FROM OLD.debits_must_not_exceed_credits
        OR NEW.credits_must_not_exceed_debits IS DISTINCT FROM OLD.credits_must_not_exceed_debits)
  EXECUTE FUNCTION account_balances_guard();
