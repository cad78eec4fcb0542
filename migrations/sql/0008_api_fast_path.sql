-- API: cheaper authentication and reads for the hot HTTP paths (set in the 0008 SQL file)
-- (no statements yet)
SELECT 1;
