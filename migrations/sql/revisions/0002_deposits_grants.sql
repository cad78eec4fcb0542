-- The application role: SELECT and INSERT on the deposit tables; UPDATE only on the two
-- current-state tables (a deposit's state, a watcher's cursor). The history, the cases and the
-- inbox are append-only for everyone (triggers) and the role may not even try.
REVOKE ALL ON deposit_addresses, deposits, deposit_events, watcher_cursors, deposit_cases,
  deposit_case_resolutions, provider_inbox FROM PUBLIC;
GRANT SELECT, INSERT ON deposit_addresses, deposit_events, deposit_cases,
  deposit_case_resolutions, provider_inbox TO custody_app;
GRANT SELECT, INSERT, UPDATE ON deposits, watcher_cursors TO custody_app;
GRANT USAGE, SELECT ON SEQUENCE deposits_id_seq, deposit_events_id_seq, deposit_cases_id_seq
  TO custody_app;
