-- The database checks the writer again (issue 14). Revision 0006 let the ledger's write
-- functions run as custody_ledger_writer, a role the postings' guard trigger skips, and dropped
-- the postings' foreign keys: since then nothing but the functions themselves checked that a
-- posting they write is on an existing account of the posting's asset and names an existing
-- ledger transaction. The trigger ledger_postings_account_and_transaction
-- (sql/triggers/ledger_postings.sql) now checks that for every writer, the functions included;
-- it reads accounts as the writing role, so the writer role may read them.
--
-- Unlike a foreign key added now, the trigger does not look at the rows written before it:
-- postings cannot be changed or removed (a correcting transaction cannot take a wrong-asset or
-- orphan posting away), so refusing the upgrade over one would block every later upgrade of
-- that database. `custody verify --full` names each such row (ledger/integrity.py).

GRANT SELECT ON accounts TO custody_ledger_writer;
