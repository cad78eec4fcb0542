-- Withdrawals: a cheaper reserve path (set in the 0007 SQL file)
-- (no statements yet)
SELECT 1;
