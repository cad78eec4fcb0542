-- The database checks the writer again (issue 14). Revision 0006 let the ledger's write
-- functions run as custody_ledger_writer, a role the postings' guard trigger skips, and dropped
-- the postings' foreign keys: since then nothing but the functions themselves checked that a
-- posting they write is on an existing account of the posting's asset and names an existing
-- ledger transaction. The trigger ledger_postings_account_and_transaction
-- (sql/triggers/ledger_postings.sql) now checks that for every writer, the functions included;
-- it reads accounts as the writing role, so the writer role may read them.

GRANT SELECT ON accounts TO custody_ledger_writer;

-- Rows written before this check: a foreign key added now would be validated against them.
-- Postings cannot be changed or removed (a correcting transaction cannot take a wrong-asset or
-- orphan posting away), so refusing the upgrade over them would block every later upgrade of
-- that database; instead the upgrade says how many there are, and `custody verify --full`
-- names each of them (ledger/integrity.py).
DO $$
DECLARE
  n_asset bigint;
  n_orphan bigint;
BEGIN
  SELECT count(*) FILTER (WHERE a.id IS NOT NULL AND a.asset_id <> p.asset_id),
         count(*) FILTER (WHERE a.id IS NULL OR t.id IS NULL)
    INTO n_asset, n_orphan
    FROM ledger_postings p
    LEFT JOIN accounts a ON a.id = p.account_id
    LEFT JOIN ledger_transactions t ON t.id = p.transaction_id;
  IF n_asset > 0 OR n_orphan > 0 THEN
    RAISE WARNING 'ledger_postings: % posting(s) in another asset than their account''s, % '
      'naming a missing account or transaction; `custody verify --full` names them',
      n_asset, n_orphan;
  END IF;
END
$$;
