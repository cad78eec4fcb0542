-- Ledger: the fast single write path (set in the 0006 SQL file)
-- (no statements yet)
SELECT 1;
