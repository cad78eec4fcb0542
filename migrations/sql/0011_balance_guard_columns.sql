-- 0011: the guard against changing a balance row's account, asset or flags fires only for an
-- UPDATE that names one of those columns.
--
-- account_balances_immutable (0001) was a BEFORE UPDATE trigger on every column with a WHEN
-- clause comparing the four columns. PostgreSQL reads a trigger's WHEN clause from its stored
-- form, plans and compiles it again for every statement (0001's comment that it "costs
-- nothing" was wrong), so every balance UPDATE paid for it though none names those columns:
-- one per account of the entry in ledger_post_one, one per call in ledger_post_arrays_body,
-- and set_balances (rebuild-balances). 15-30 us of server CPU per single post, 5-10% of
-- ledger_post_one's own time without the commit (bench/RESULTS.md, "Fifth pass").
--
-- Same protection: PostgreSQL checks the column list before the WHEN clause, so UPDATEs that
-- do not name these columns skip the trigger without reading it, and an UPDATE that names one
-- meets the same WHEN clause and the same refusal. A column an UPDATE does not name keeps its
-- old value unless another BEFORE UPDATE trigger assigns it in NEW, which a column-list
-- trigger does not see: there is no other such trigger on this table, and
-- tests/ledger/test_db_guards.py pins the table's triggers so that adding one is a decision.

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
